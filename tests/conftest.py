"""The suite's options and fixtures, and how pytest-xdist's two workers share the tests.

Every test belongs to a group that one worker runs whole (:func:`group_of`): its file, whose module fixtures
(a built book, a class graded once) its tests share, except tests/test_catalogue.py, which is a group per
assignment (each grades its catalogue once). The scheduler below hands out whole groups (pytest-xdist's own
``--dist loadgroup`` loses its groups under pytest 9: every test went its own way, and the book was built by
both workers). Groups start longest first, by the seconds that the last ``make bench-suite`` recorded for them
(``benchmarks/figures.json``, block ``suite``; a group it does not know starts first): a long group started last
would keep one worker busy while the other has nothing left.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

RECORD = Path(__file__).resolve().parent.parent / "benchmarks" / "figures.json"
SPLIT_BY_ASSIGNMENT = ("test_catalogue",)  # files whose tests are grouped by their first parameter


def pytest_addoption(parser):
    parser.addoption(
        "--exhaustive",
        action="store_true",
        help="grade every notebook of the catalogue whole, each in a sandbox of its own (make test-exhaustive)",
    )


@pytest.fixture(scope="session")
def device() -> str:
    """The device that tests which compute on one use (tests/support/devices.py): the CPU unless
    ``$COURSE_TEST_DEVICE`` names another."""
    from tests.support.devices import chosen_device

    return chosen_device()


@pytest.fixture(scope="session")
def exhaustive(request) -> bool:
    """Whether the catalogue grades every notebook whole, each in a sandbox of its own (``--exhaustive``)."""
    return request.config.getoption("--exhaustive")


@pytest.fixture(scope="session")
def reports(tmp_path_factory):
    """The test run's grader (:class:`autograder.grading.grader.Grader`), with the run's one store of grading
    reports (tests/support/reports.py), shared by both workers: they are given folders of their own under the
    run's folder. ``grade_notebook(assignment, nb, ..., grader=reports)`` grades or reads a report."""
    from autograder.grading.grader import Grader  # the grader, for the tests that grade only
    from tests.support.reports import ReportStore

    run = tmp_path_factory.getbasetemp()
    grader = Grader(store=ReportStore((run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run) / "reports"))
    yield grader
    grader.close()


def group_of(nodeid: str) -> str:
    """The group of the test ``nodeid`` (``tests/test_x.py::test_y[params]``): its file's name, or for
    :data:`SPLIT_BY_ASSIGNMENT`, that and its first parameter (the assignment)."""
    path, _, rest = nodeid.partition("::")
    name = Path(path).stem
    params = rest.partition("[")[2].rstrip("]")
    return f"{name}-{params.split('-')[0]}" if name in SPLIT_BY_ASSIGNMENT and params else name


def recorded_seconds() -> dict[str, float]:
    """Each group's seconds on its worker in the last ``make bench-suite`` (empty where there is none)."""
    try:
        figures = json.loads(RECORD.read_text())["suite"]["figures"]
        return {name: float(seconds) for name, seconds in figures.get("group_seconds", {}).items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def pytest_collection_modifyitems(config, items):
    seconds = recorded_seconds()
    first = {}
    for index, item in enumerate(items):
        first.setdefault(group_of(item.nodeid), index)
        item.user_properties.append(("group", group_of(item.nodeid)))  # in the JUnit XML, for make bench-suite
    # unknown groups first, then the longest; a group's tests stay together and in their order
    key = group_of
    items.sort(
        key=lambda item: (key(item.nodeid) in seconds, -seconds.get(key(item.nodeid), 0.0), first[key(item.nodeid)])
    )


def pytest_xdist_make_scheduler(config, log):
    """Whole groups to each worker, in the order of the collection (longest first, above)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return ByGroup(config, log)
