"""The device that the tests which compute on one use: ``$COURSE_TEST_DEVICE``, else the CPU.

``make test-device DEVICE=cuda`` runs those tests (``benchmarks.gpu.DEVICE_TESTS``) on a GPU: the CI machines
have none, and ``benchmarks.gpu`` runs them on a GPU machine. The CPU stays the default, also where a GPU is
present, so that the figures and tolerances of ``make test`` mean the same on every machine.
"""

from __future__ import annotations

import os

KNOWN = ("cpu", "cuda", "mps")


def chosen_device() -> str:
    name = os.environ.get("COURSE_TEST_DEVICE", "cpu")
    if name.split(":")[0] not in KNOWN:
        raise ValueError(f"COURSE_TEST_DEVICE must be one of {', '.join(KNOWN)} (optionally cuda:N), got {name!r}")
    return name
