"""The device that the tests which compute on one use: ``$COURSE_TEST_DEVICE``, else the CPU.

``make test-device DEVICE=cuda`` runs those tests on a GPU (the CI machines have none; a GPU machine runs them
by hand, as ``benchmarks.gpu`` does). The CPU stays the default, also where a GPU is present, so that the
figures and tolerances of ``make test`` mean the same on every machine.
"""

from __future__ import annotations

import os

KNOWN = ("cpu", "cuda", "mps")


def test_device() -> str:
    name = os.environ.get("COURSE_TEST_DEVICE", "cpu")
    if name.split(":")[0] not in KNOWN:
        raise ValueError(f"COURSE_TEST_DEVICE must be one of {', '.join(KNOWN)} (optionally cuda:N), got {name!r}")
    return name


# The test files whose tests compute on the device above (``make test-device``).
FILES = (
    "tests/test_training.py",
    "tests/test_train.py",
    "tests/test_generate.py",
    "tests/test_pretrained.py",
    "tests/test_attention_course.py",
    "tests/test_gpu.py",
)
