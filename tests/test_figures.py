"""The figures that README.md and the book quote come from a command's record, never typed by hand."""

from __future__ import annotations

import json

import pytest

from benchmarks import figures, suite

ENTRY = {
    "command": "make bench-book",
    "day": "2026-11-23",
    "commit": "abc1234",
    "machine": "2 cores of a CPU",
    "figures": {"total_seconds": 400.0, "chapters": {"ch01_bahdanau": 90.0, "ch06_transformer": 120.5}},
}


def test_every_page_holds_the_figures_its_record_gives():
    assert figures.stale_pages() == [], "run `python -m benchmarks.figures` (make figures)"


def test_every_block_of_a_page_is_a_known_measurement():
    for page in figures.PAGES:
        for match in figures.BLOCK.finditer((figures.ROOT / page).read_text()):
            assert match["name"] in figures.RENDER, f"{page}: no measurement named {match['name']!r}"


def test_a_block_is_written_from_the_record_with_its_command_machine_and_commit():
    text = "before\n<!-- figures: book-build -->\nold text, typed by hand\n<!-- /figures -->\nafter\n"
    new = figures.written(text, {"book-build": ENTRY})
    assert new.startswith("before\n<!-- figures: book-build -->\n") and new.endswith("<!-- /figures -->\nafter\n")
    assert "typed by hand" not in new
    for fact in ("6 min 40 s", "ch06_transformer 120 s", "`make bench-book`", "abc1234", "2 cores of a CPU"):
        assert fact in new
    assert figures.written(new, {"book-build": ENTRY}) == new  # written once, then current


def test_a_book_build_with_chapters_executed_side_by_side_gives_the_execution_time_and_the_jobs():
    parallel = {**ENTRY, "figures": {**ENTRY["figures"], "jobs": 2, "execute_seconds": 130.0, "total_seconds": 150.0}}
    text = figures.written("<!-- figures: book-build -->\n<!-- /figures -->", {"book-build": parallel})
    for fact in ("took 2 min 30 s", "2 at a time, took 2 min 10 s", "3 min 30 s of the chapters' times added up"):
        assert fact in text
    assert "ch06_transformer 120 s" in text


def test_a_page_without_a_record_says_so_and_an_unknown_name_is_refused(tmp_path, monkeypatch):
    assert "No measurement recorded yet" in figures.written("<!-- figures: suite -->\n<!-- /figures -->", {})
    with pytest.raises(KeyError, match="nowhere"):
        figures.written("<!-- figures: nowhere -->\n<!-- /figures -->", {})
    monkeypatch.setattr(figures, "RECORD", tmp_path / "figures.json")
    with pytest.raises(ValueError, match="no page shows figures named 'nowhere'"):
        figures.record("nowhere", "make nothing", {})


def test_a_record_keeps_the_command_day_commit_and_machine(tmp_path, monkeypatch):
    monkeypatch.setattr(figures, "RECORD", tmp_path / "figures.json")
    figures.record("book-build", "make bench-book", ENTRY["figures"], commit="abc1234")
    kept = json.loads((tmp_path / "figures.json").read_text())["book-build"]
    assert kept["command"] == "make bench-book" and kept["commit"] == "abc1234"
    assert kept["figures"] == ENTRY["figures"] and "cores" in kept["machine"] and kept["day"]


def test_the_suite_times_each_test_file_from_pytests_junit_xml(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_book" name="test_a" time="100.5"/>'
        '<testcase classname="tests.test_book" name="test_b" time="1.5"/>'
        '<testcase classname="tests.test_grading.TestClass" name="test_c" time="7"/>'
        "</testsuite></testsuites>"
    )
    assert suite.file_seconds(junit) == {"tests/test_book.py": 102.0, "tests/test_grading.py": 7.0}
