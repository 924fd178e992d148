"""A worker forked from a warm sandbox grades a notebook of the course's own exactly as a sandbox of its own does.

tests/test_catalogue.py grades the catalogue in workers forked from warm sandboxes
(:class:`autograder.sandbox.pool.WarmPool`), as `make grading-accuracy` does; students' submissions are never
graded so. Here a sample is graded both ways and every report must be the same but for its seconds: right,
wrong and other idioms' answers, a cell that raises, one that hangs past its time limit, one that kills its
process, a call that kills it, output on the terminal, and notebooks that change what the next notebook would
find. Closing the pool leaves nothing behind.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import asdict

import pytest

from autograder.grading.classroom import fill
from autograder.grading.grader import Grader
from autograder.grading.notebook import grade_notebook
from autograder.release import course
from autograder.sandbox.bwrap import bwrap_available
from autograder.sandbox.limits import Limits
from autograder.sandbox.pool import WarmPool
from tests.correct import notebooks as correct_notebooks
from tests.support import host

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")]

A = "ch02_scaled_dot_product"
TERM = course.Release("term", frozenset({"ch01_bahdanau"}))
LIMITS = Limits(cell_timeout=4.0, call_timeout=4.0)  # short, for the cell and the call that hang
BUGS = importlib.import_module(f"tests.buggy.{A}").BUGS
CORRECT = correct_notebooks(importlib.import_module(f"tests.correct.{A}").ANSWERS)[0]

SOFTMAX = "def softmax(x, axis=-1):\n    shifted = x - np.max(x, axis=axis, keepdims=True)\n    e = np.exp(shifted)\n"
RETURN = "    return e / e.sum(axis=axis, keepdims=True)\n"
SAMPLE = {
    "reference": {},
    "wrong": {BUGS[0].item: BUGS[0].code},
    "other idioms": {item: answer.code for item, answer in CORRECT.items()},
    "raises": {"softmax": "raise RuntimeError('not yet')"},
    "hangs": {"softmax": "import time\ntime.sleep(60)"},
    "kills its process": {"softmax": "import os\nos.kill(os.getpid(), 9)"},
    "a call kills it": {"softmax": SOFTMAX + "    import os\n    os._exit(3)\n"},
    "prints": {"softmax": "print('hello from the cells')\n" + SOFTMAX + RETURN},
    # What a notebook changes in its process, the next one must not find: a global, a module, a random state.
    "changes its process": {
        "softmax": "import numpy, torch\nnumpy.exp = numpy.log\ntorch.manual_seed(99)\nLEFT_BEHIND = 1\n"
        + SOFTMAX
        + RETURN
    },
    "finds nothing left": {
        "softmax": "import numpy, torch\nassert numpy.exp(0.0) == 1.0 and 'LEFT_BEHIND' not in globals()\n"
        "assert torch.initial_seed() == 0\n" + SOFTMAX + RETURN
    },
}


def without_seconds(report) -> dict:
    found = asdict(report)
    found.pop("seconds"), found.pop("phases")
    for test in found["tests"].values():
        test.pop("seconds")
    return found


@pytest.fixture(scope="module")
def both_ways():
    """{name: (report in a sandbox of its own, report in a forked worker, report in a sandbox of its own whose
    worker the zygote forked)} of every notebook of the sample; what they left behind; the workers spawned."""
    graded = {}
    with host.Watch() as watch:
        fresh = {
            name: grade_notebook(A, fill(A, answers), release=TERM, limits=LIMITS) for name, answers in SAMPLE.items()
        }
        with WarmPool(1, LIMITS, release=TERM) as pool:
            for name, answers in SAMPLE.items():
                forked = grade_notebook(A, fill(A, answers), release=TERM, limits=LIMITS, pool=pool)
                graded[name] = (fresh[name], forked)
        spawning = Grader(spawn=True)  # as make grade's: as root, each sandbox's worker comes from the zygote
        try:
            for name, answers in SAMPLE.items():
                spawned = grade_notebook(A, fill(A, answers), release=TERM, limits=LIMITS, grader=spawning)
                graded[name] += (spawned,)
            zygote = spawning.zygote(LIMITS, spawning.packages(TERM)) if os.geteuid() == 0 else None
            spawned_workers = zygote.spawned if zygote is not None else 0
        finally:
            spawning.close()
        leftovers = watch.leftovers()
    return graded, leftovers, spawned_workers


@pytest.mark.parametrize("name", SAMPLE)
def test_a_forked_worker_grades_as_a_sandbox_of_its_own(both_ways, name):
    fresh, forked, _ = both_ways[0][name]
    assert not fresh.not_graded and not forked.not_graded, (fresh.not_graded, forked.not_graded)
    assert without_seconds(forked) == without_seconds(fresh)


@pytest.mark.skipif(
    os.geteuid() != 0, reason="a zygote is a root grader's (an unprivileged one starts fresh sandboxes)"
)
@pytest.mark.parametrize("name", SAMPLE)
def test_a_worker_spawned_into_a_sandbox_of_its_own_grades_as_a_fresh_one(both_ways, name):
    """make grade's way as root (autograder.sandbox.spawn): the same report as a fresh sandbox's."""
    fresh, _, spawned = both_ways[0][name]
    assert not spawned.not_graded, spawned.not_graded
    assert without_seconds(spawned) == without_seconds(fresh)
    assert both_ways[2] >= len(SAMPLE)  # every notebook's worker (and each restart's) came from the zygote


def test_the_sample_covers_what_it_says(both_ways):
    """The sample is not all the same report: each case does what its name says, in both ways."""
    reports = {name: ways[1] for name, ways in both_ways[0].items()}
    full = reports["reference"].max_score
    assert reports["reference"].score == reports["other idioms"].score == full
    assert reports["wrong"].score < full and reports["raises"].score < full
    assert any("time limit" in error for error in reports["hangs"].cell_errors.values()), reports["hangs"]
    assert any("signal 9" in error for error in reports["kills its process"].cell_errors.values())
    assert any("exited with status 3" in note for note in reports["a call kills it"].notes), reports["a call kills it"]
    assert "hello from the cells" in reports["prints"].output
    assert reports["changes its process"].score < full and reports["finds nothing left"].score == full


def test_a_closed_pool_leaves_nothing_behind(both_ways):
    assert both_ways[1] == {"processes": [], "cgroups": [], "temporary folders": [], "sandbox folders": []}


def test_a_pool_is_refused_for_another_release_or_limits():
    with WarmPool(1, LIMITS, release=TERM) as pool:
        with pytest.raises(ValueError, match="pool"):
            grade_notebook(A, fill(A), release=course.Release("open"), limits=LIMITS, pool=pool)
        with pytest.raises(ValueError, match="pool"):
            grade_notebook(A, fill(A), release=TERM, pool=pool)
