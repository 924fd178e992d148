"""Every dependency pinned: requirements.txt names the course's direct dependencies, constraints.txt (`make lock`)
every package they install, and the venv that runs these tests holds exactly those versions."""

from __future__ import annotations

import importlib.metadata
import re

from attention_course.notebooks import COURSE_ROOT

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path) -> dict[str, str]:
    """The ``name==version`` lines of a requirements file, by canonical name (comments and options left out)."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-")):
            continue
        match = PIN.match(line)
        assert match, f"{path.name}: {line!r} is not pinned exactly (name==version)"
        found[canonical(match[1])] = match[2]
    return found


def test_every_direct_pin_is_the_locked_version():
    direct, locked = pins(COURSE_ROOT / "requirements.txt"), pins(COURSE_ROOT / "constraints.txt")
    unlocked = {name: version for name, version in direct.items() if locked.get(name) != version}
    assert not unlocked, f"requirements.txt pins {unlocked}, which constraints.txt does not hold: run `make lock`"


def test_the_venv_holds_the_locked_versions_of_every_package():
    """`make venv` installs with constraints.txt: each installed distribution (but the course's own, editable)
    at its locked version, the local label of a build (torch's +cpu) aside."""
    locked = pins(COURSE_ROOT / "constraints.txt")
    installed = {canonical(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()}
    installed.pop("attention-course")
    differing = {
        name: f"{version}, locked {locked.get(name)}"
        for name, version in sorted(installed.items())
        if locked.get(name) != version.split("+")[0]
    }
    assert not differing, f"installed outside the lock (run `make venv`, or `make lock` to update it): {differing}"
