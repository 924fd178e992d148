"""The figures that README.md and the book quote come from a command's record, never typed by hand."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks import figures, scrub, suite

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


def test_a_book_builds_times_say_the_load_they_were_measured_at_and_that_a_busier_machine_is_slower():
    loaded = {**ENTRY, "figures": {**ENTRY["figures"], "load_mean": 1.87, "load_peak": 2.14}}
    text = figures.written("<!-- figures: book-build -->\n<!-- /figures -->", {"book-build": loaded})
    assert "The load average over the builds was 1.9 (2.1 at most)." in text
    assert "keeps its 2 cores busier (a load average higher than 1.9), the chapters run slower" in text
    unloaded = figures.written("<!-- figures: book-build -->\n<!-- /figures -->", {"book-build": ENTRY})
    assert "load average over" not in unloaded and "busier (a load average higher)" in unloaded
    recorded = json.loads((figures.ROOT / "benchmarks" / "figures.json").read_text())["book-build"]["figures"]
    assert isinstance(recorded["load_mean"], float)  # the README's build times carry their load


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


TEMPORARY = "/tmp/tmpab12cd34/train"  # a folder that tempfile made on the measuring machine
TRAINER_OUTPUT = (
    "dates on cpu: 100%| 1500/1500 [03:49<00:00, 6.53it/s]\n"
    f'{{"task": "dates", "steps": 1500, "out": "{TEMPORARY}", "log": "/root/runs/x.log"}}'
)


def test_a_recorder_given_a_temporary_folder_records_the_command_and_output_without_it(tmp_path, monkeypatch):
    monkeypatch.setattr(figures, "RECORD", tmp_path / "figures.json")
    figures.record("train", f"python -m attention_course.trainer --out {TEMPORARY}", {"output": TRAINER_OUTPUT})
    text = (tmp_path / "figures.json").read_text()
    kept = json.loads(text)["train"]
    assert kept["command"] == "python -m attention_course.trainer --out OUT"
    assert '"out": "OUT"' in kept["figures"]["output"] and '"log": "~/runs/x.log"' in kept["figures"]["output"]
    assert "1500/1500" in kept["figures"]["output"]  # a fraction is no path
    for machine in ("/tmp", "/root", "tmpab12cd34"):
        assert machine not in text
    assert figures.unscrubbed(json.loads(text)) == {}


def test_an_unscrubbed_record_is_found_by_the_check_and_scrubbed_by_make_figures(tmp_path, monkeypatch):
    """A record written before records were scrubbed (figures.json's train entry held /tmp/t24/train): `--check`
    fails on it, and `python -m benchmarks.figures` scrubs it with the same scrubber as record()."""
    entry = {**ENTRY, "command": f"python -m attention_course.trainer --out {TEMPORARY}",
             "figures": {"output": TRAINER_OUTPUT}}  # fmt: skip
    monkeypatch.setattr(figures, "RECORD", tmp_path / "figures.json")
    monkeypatch.setattr(figures, "PAGES", ())
    (tmp_path / "figures.json").write_text(json.dumps({"train": entry}))
    assert figures.unscrubbed() == {"train": [TEMPORARY, TEMPORARY, "/root/runs/x.log"]}
    assert figures.main(["--check"]) == 1
    assert figures.main([]) == 0
    kept = figures.load()["train"]
    assert kept["command"].endswith("--out OUT") and TEMPORARY not in kept["figures"]["output"]
    assert figures.main(["--check"]) == 0


def test_the_recorded_figures_name_no_machines_paths():
    assert figures.unscrubbed() == {}, "run `python -m benchmarks.figures` (make figures): it scrubs them"


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("/tmp/tmpab12cd34/course/tests/test_x.py", "TMP/course/tests/test_x.py"),
        ("/var/tmp/run", "TMP"),
        ("/root/out/record.json", "~/out/record.json"),
        ("/home/someone/nanoGPT", "~/nanoGPT"),
        ("/work/.mirror/x/gpu.json", "gpu.json"),
        (str(figures.ROOT / "benchmarks" / "figures.py"), "benchmarks/figures.py"),
        ("/usr/lib/python3.11/json", "/usr/lib/python3.11/json"),  # the same on every machine
        ("https://github.com/karpathy/nanoGPT", "https://github.com/karpathy/nanoGPT"),
    ],
)
def test_each_kind_of_machine_path_is_scrubbed(path, shown):
    assert scrub.text(f"at {path}: done") == f"at {shown}: done"


def test_a_command_shows_a_folder_by_its_name_and_a_file_by_its_name_alone():
    side_by_side = "python -m benchmarks.nanogpt --nanogpt /home/me/nanoGPT"
    argv = ["--record", "/root/run/record.json", "--out", "/root/out", "--nanogpt=/home/me/nanoGPT",
            "--step", "n", "/tmp/x/side.log", "c", side_by_side]  # fmt: skip
    assert scrub.shown_command("python -m benchmarks.gpu", argv) == (
        "python -m benchmarks.gpu --record record.json --out OUT --nanogpt=NANOGPT --step n side.log c "
        "'python -m benchmarks.nanogpt --nanogpt NANOGPT'"
    )


def test_a_program_run_and_recorded_keeps_no_machines_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(figures, "RECORD", tmp_path / "figures.json")
    ran = figures.subprocess.CompletedProcess([], 0, TRAINER_OUTPUT)
    monkeypatch.setattr(figures.subprocess, "run", lambda *args, **kwargs: ran)
    assert figures.run_and_record("train", ["--out", TEMPORARY, "--steps", "1500"]) == 0
    kept = figures.load()["train"]
    assert kept["command"] == "python -m attention_course.trainer --out OUT --steps 1500"
    assert kept["figures"]["output"] == scrub.text(TRAINER_OUTPUT, {TEMPORARY: "OUT"})
    assert '"out": "OUT"' in kept["figures"]["output"] and figures.unscrubbed() == {}


def test_the_suite_and_book_figures_say_what_they_include():
    """Whether the venv was created, in a fresh clone or not, the cache cold; a record made before records said so
    gives what its program did then."""
    setting = ["in a fresh clone of HEAD", "the venv already installed"]
    more = {"rebuild_seconds": 46.2, "load_mean": 3.2, "load_peak": 4.1, "setting": setting}
    book = {**ENTRY, "figures": {**ENTRY["figures"], **more}}
    text = figures.render("book-build", {"book-build": book})
    assert "(in a fresh clone of HEAD; the venv already installed)" in text
    assert "nothing changed (every chapter from the cache), took 46 s" in text and "was 3.2 (4.1 at most)" in text
    older = figures.render("book-build", {"book-build": ENTRY})
    assert "fresh clone" in older and "venv already installed" in older and "second build" not in older
    run = {"total_seconds": 1080, "setup_seconds": 90, "pytest_seconds": 990, "tests": 2175, "fast_seconds": 70,
           "fast_tests": 600, "slowest_files": [["tests/test_book.py", 700]], "workers": 2,
           "setting": [*suite.SETTING, "the packages downloaded"]}  # fmt: skip
    text = figures.render("suite", {"suite": {**ENTRY, "command": "make bench-suite", "figures": run}})
    assert "`make test` took 18 min 0 s in all (in a fresh clone of HEAD; its .venv created by make test" in text
    assert "the packages downloaded): 1 min 30 s to create the venv" in text
    assert "2,175 tests on 2 pytest workers" in text


def test_make_figures_writes_a_new_suite_record_into_the_readme():
    """`make bench-suite` records; `make figures` then writes README.md's block from the new record, with no other
    step."""
    records = {**figures.load(), "suite": {**figures.load()["suite"], "commit": "fff0000"}}
    readme = figures.written((figures.ROOT / "README.md").read_text(), records)
    assert "at commit fff0000" in readme.split("<!-- figures: suite -->")[1].split("<!-- /figures -->")[0]


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    """The commands that a benchmark runs besides what it measures: a clone of the repository (its Makefile is all
    that is read of it), git's commit; any other (nvidia-smi, uv) fails."""
    if command[:2] == ["git", "clone"]:
        Path(command[-1]).mkdir(parents=True)
        shutil.copy(figures.ROOT / "Makefile", Path(command[-1]) / "Makefile")
    if command[0] == "git":
        return subprocess.CompletedProcess(command, 0, "abc1234\n", "")
    return subprocess.CompletedProcess(command, 1, "", "")


def test_make_bench_book_records_what_its_time_includes_and_a_second_build(tmp_path, monkeypatch):
    from benchmarks import book

    monkeypatch.setattr(figures, "RECORD", tmp_path / "figures.json")
    monkeypatch.setattr(book, "clone_head", lambda folder: tmp_path)
    monkeypatch.setattr(book, "_shown", lambda *args: (0, "[book] executed ch01_bahdanau in 5.0 s\n"))
    built = subprocess.CompletedProcess([], 0, "build succeeded", "")
    monkeypatch.setattr(book.subprocess, "run", lambda command, **kwargs: built if "build" in command else run(command))
    assert book.main([]) == 0
    kept = figures.load()["book-build"]["figures"]
    assert kept["setting"] == list(book.SETTING) and kept["rebuild_seconds"] >= 0 and kept["load_peak"] >= 0
    assert kept["chapters"] == {"ch01_bahdanau": 5.0}


def test_make_bench_suite_records_what_its_time_includes(tmp_path, monkeypatch):
    monkeypatch.setattr(figures, "RECORD", tmp_path / "figures.json")

    def make(clone, target, junit, log):
        junit.write_text('<testsuites><testsuite><testcase classname="tests.test_a" name="t" time="2"/>'
                         "</testsuite></testsuites>")  # fmt: skip
        return 100.0, "1 passed in 60.0s"

    monkeypatch.setattr(suite.subprocess, "run", run)
    monkeypatch.setattr(suite, "_make", make)
    assert suite.main([]) == 0
    kept = figures.load()["suite"]
    assert kept["commit"] == "abc1234" and kept["figures"]["workers"] >= 1
    assert kept["figures"]["setting"] == [*suite.SETTING, "the packages downloaded, uv's cache empty"]
    text = figures.render("suite", {"suite": kept})
    assert "(in a fresh clone of HEAD; its .venv created by make test and counted; the packages downloaded" in text
    assert "no GPU" in text
