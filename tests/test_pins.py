"""Every dependency pinned: requirements.txt names the course's direct dependencies, constraints.txt (`make lock`)
every package they install, and the venv that runs these tests holds exactly those versions."""

from __future__ import annotations

import importlib.metadata
import sysconfig

from attention_course.tooling.notebooks import COURSE_ROOT
from tests.support.pins import canonical, outside, pins


def test_every_direct_pin_is_the_locked_version():
    direct, locked = pins(COURSE_ROOT / "requirements.txt"), pins(COURSE_ROOT / "constraints.txt")
    unlocked = {name: version for name, version in direct.items() if locked.get(name) != version}
    assert not unlocked, f"requirements.txt pins {unlocked}, which constraints.txt does not hold: run `make lock`"


def test_the_venv_holds_the_locked_versions_of_every_package():
    """`make venv` installs with constraints.txt: each installed distribution (but the course's own, editable)
    at its locked version."""
    # site-packages only: setuptools, once imported, puts the distributions it vendors on sys.path
    folders = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    installed = {canonical(d.metadata["Name"]): d.version for d in importlib.metadata.distributions(path=folders)}
    installed.pop("attention-course")
    differing = outside(pins(COURSE_ROOT / "constraints.txt"), installed)
    assert not differing, f"installed outside the lock (run `make venv`, or `make lock` to update it): {differing}"
