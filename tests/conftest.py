"""The suite's options, and how pytest-xdist's two workers share the tests (``--dist loadgroup``).

Every test belongs to a group that one worker runs whole: its file, whose module fixtures (a built book, a
class graded once) its tests share, except tests/test_catalogue.py, which is a group per assignment (each
grades its catalogue once). Groups start longest first, by the seconds that the last ``make bench-suite``
recorded for them (``benchmarks/figures.json``, block ``suite``; a group it does not know starts first): a long
group started last would keep one worker busy while the other has nothing left.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

RECORD = Path(__file__).resolve().parent.parent / "benchmarks" / "figures.json"
SPLIT_BY_ASSIGNMENT = ("test_catalogue",)


def pytest_addoption(parser):
    parser.addoption(
        "--exhaustive",
        action="store_true",
        help="grade every notebook of the catalogue whole, each in a sandbox of its own (make test-exhaustive)",
    )


@pytest.fixture(scope="session")
def exhaustive(request) -> bool:
    """Whether the catalogue grades every notebook whole, each in a sandbox of its own (``--exhaustive``)."""
    return request.config.getoption("--exhaustive")


@pytest.fixture(scope="session")
def reports(tmp_path_factory):
    """The test run's one store of grading reports (tests/support/reports.py), shared by both workers: they
    are given folders of their own under the run's folder."""
    from tests.support.reports import ReportStore  # torch and the grader, for the tests that grade only

    run = tmp_path_factory.getbasetemp()
    return ReportStore((run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run) / "reports")


def group(item: pytest.Item) -> str:
    """The group that one worker runs whole: the test's file, or its file and assignment."""
    name = item.path.stem
    params = getattr(getattr(item, "callspec", None), "params", {})
    if name in SPLIT_BY_ASSIGNMENT and "assignment" in params:
        return f"{name}-{params['assignment']}"
    return name


def recorded_seconds() -> dict[str, float]:
    """Each group's seconds on its worker in the last ``make bench-suite`` (empty where there is none)."""
    try:
        figures = json.loads(RECORD.read_text())["suite"]["figures"]
        return {name: float(seconds) for name, seconds in figures.get("group_seconds", {}).items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups off the markers
def pytest_collection_modifyitems(config, items):
    seconds = recorded_seconds()
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group(item)))
    first = {}
    for index, item in enumerate(items):
        first.setdefault(group(item), index)
    # unknown groups first, then the longest; a group's tests stay together and in their order
    items.sort(key=lambda item: (group(item) in seconds, -seconds.get(group(item), 0.0), first[group(item)]))
