"""How long the test suite takes from a fresh clone, as CI runs it.

    python -m benchmarks.suite           # make bench-suite: clone HEAD, run make test and make test-fast there

Clones the repository's HEAD into a temporary folder that an unprivileged grader can reach (mode
0755), runs ``make test`` there (creating its ``.venv`` as a fresh machine would), then ``make
test-fast`` in the same clone, and prints the seconds of each, of pytest's part, of every test file and
every group of tests that one worker runs whole (tests/conftest.py) and of the slowest tests (from
pytest's JUnit XML: set-up, call and tear-down of each test), with the machine's load average over the run
(sampled every 10 s). The figures are recorded for the pages (:mod:`benchmarks.figures`, block ``suite``;
tests/conftest.py starts the longest groups first by them), with what they include (:data:`SETTING`: the clone,
the venv created, whether its packages came from uv's cache); a red run records nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

from benchmarks import figures

ROOT = figures.ROOT
SUMMARY = re.compile(r"(?P<passed>\d+) passed.* in (?P<seconds>[0-9.]+)s")
WORKERS = re.compile(r"^PYTEST :=.* -n (?P<workers>\d+)\b", re.M)  # the Makefile's pytest workers
# What the recorded times include, in the words the pages give them (benchmarks.figures); "packages" is
# settled as the run starts (package_source).
SETTING = ("in a fresh clone of HEAD", "its .venv created by make test and counted")


def package_source() -> str:
    """Where the fresh venv's packages come from: uv's cache on this machine (no download), or the index."""
    uv = Path(sys.executable).with_name("uv")
    found = subprocess.run([str(uv), "cache", "dir"], capture_output=True, text=True) if uv.exists() else None
    cache = Path(found.stdout.strip()) if found and found.returncode == 0 and found.stdout.strip() else None
    if cache and cache.is_dir() and any(cache.iterdir()):
        return "the packages from uv's cache on this machine, none downloaded"
    return "the packages downloaded, uv's cache empty"


def _make(clone: Path, target: str, junit: Path, log: Path) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "EDITION", "RELEASED")}
    env["PYTEST_ARGS"] = f"--junitxml={junit}"
    started = time.perf_counter()
    with log.open("w") as out:
        run = subprocess.run(["make", target], cwd=clone, stdout=out, stderr=subprocess.STDOUT, env=env)
    seconds = time.perf_counter() - started
    text = log.read_text()
    if run.returncode != 0:
        raise SystemExit(f"make {target} failed in the fresh clone (exit {run.returncode}):\n{text[-4000:]}")
    return seconds, text


def _cases(junit: Path) -> list[tuple[str, str, float, str]]:
    """(file, test name, seconds, group) of every test in pytest's JUnit XML; its group (the tests that one worker
    runs whole) is the property tests/conftest.py gives it, else its file."""
    found = []
    for case in ElementTree.parse(junit).iter("testcase"):
        module = case.get("classname", "").split(".")
        name = "/".join(module[: next((i for i, part in enumerate(module) if part.startswith("test_")), 0) + 1])
        group = next((p.get("value") for p in case.iter("property") if p.get("name") == "group"), name)
        found.append((f"{name}.py", case.get("name", ""), float(case.get("time", 0)), group))
    return found


def file_seconds(junit: Path) -> dict[str, float]:
    """Seconds per test file, from pytest's JUnit XML."""
    totals: dict[str, float] = defaultdict(float)
    for file, _, seconds, _ in _cases(junit):
        totals[file] += seconds
    return dict(totals)


def group_seconds(junit: Path) -> dict[str, float]:
    """Seconds per group of tests that one worker runs whole (tests/conftest.py names the groups)."""
    totals: dict[str, float] = defaultdict(float)
    for _, _, seconds, group in _cases(junit):
        totals[group] += seconds
    return dict(totals)


def slowest_tests(junit: Path, count: int) -> list[list]:
    cases = sorted(_cases(junit), key=lambda case: -case[2])[:count]
    return [[f"{file}::{name}", round(seconds, 1)] for file, name, seconds, _ in cases]


class LoadAverage:
    """The one-minute load average, sampled every ``every`` seconds while the block runs: its mean and peak."""

    def __init__(self, every: float = 10.0):
        self.every, self.samples = every, []
        self._stop = threading.Event()

    def __enter__(self) -> LoadAverage:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.every):
                return

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mean(self) -> float:
        return sum(self.samples) / len(self.samples)

    @property
    def peak(self) -> float:
        return max(self.samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-record", action="store_true", help="print the figures without recording them")
    args = parser.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    setting = [*SETTING, package_source()]
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        clone = Path(tmp) / "course"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        with LoadAverage() as load:
            total, text = _make(clone, "test", Path(tmp) / "junit.xml", Path(tmp) / "test.log")
        found = SUMMARY.search(text)
        per_file = sorted(file_seconds(Path(tmp) / "junit.xml").items(), key=lambda item: -item[1])
        per_group = sorted(group_seconds(Path(tmp) / "junit.xml").items(), key=lambda item: -item[1])
        tests = slowest_tests(Path(tmp) / "junit.xml", 15)
        fast, fast_text = _make(clone, "test-fast", Path(tmp) / "junit-fast.xml", Path(tmp) / "fast.log")
        fast_found = SUMMARY.search(fast_text)
        found_workers = WORKERS.search((clone / "Makefile").read_text())
    if not found or not fast_found:
        raise SystemExit("pytest's summary line was not found in the output of make test or make test-fast")
    result = {
        "total_seconds": round(total, 1),
        "pytest_seconds": float(found["seconds"]),
        "setup_seconds": round(total - float(found["seconds"]), 1),
        "tests": int(found["passed"]),
        "fast_seconds": round(fast, 1),
        "fast_tests": int(fast_found["passed"]),
        **({"workers": int(found_workers["workers"])} if found_workers else {}),
        "load_mean": round(load.mean, 2),
        "load_peak": round(load.peak, 2),
        "slowest_files": [[name, round(seconds, 1)] for name, seconds in per_file[:8]],
        "file_seconds": {name: round(seconds, 1) for name, seconds in per_file},
        "group_seconds": {name: round(seconds, 1) for name, seconds in per_group},
        "slowest_tests": tests,
        "setting": setting,
    }
    print(f"make test: {total:.0f} s ({result['tests']} tests, pytest {result['pytest_seconds']:.0f} s)")
    print(f"make test-fast: {fast:.0f} s ({result['fast_tests']} tests)")
    print(f"load average over make test: {load.mean:.2f} on average, {load.peak:.2f} at most")
    print("seconds per test file, on its worker:")
    for name, seconds in per_file:
        print(f"  {name:<40} {seconds:8.1f} s")
    print("seconds per group (what one worker runs whole):")
    for name, seconds in per_group:
        print(f"  {name:<40} {seconds:8.1f} s")
    print("the slowest tests:")
    for name, seconds in tests:
        print(f"  {seconds:8.1f} s  {name}")
    if not args.no_record:
        figures.record("suite", "make bench-suite", result, commit=commit.stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
