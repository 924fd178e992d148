"""Requirements files read as pins: ``name==version`` by canonical name (tests/test_pins.py, tests/test_export.py)."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.utils import canonicalize_name as canonical

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)(?:\s*;\s*[^#]+)?$")  # an environment marker may follow


def pins(path: Path) -> dict[str, str]:
    """The ``name==version`` lines of a requirements file (an environment marker allowed after the version), by
    canonical name (comments and options left out)."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-")):
            continue
        match = PIN.match(line)
        assert match, f"{path.name}: {line!r} is not pinned exactly (name==version)"
        found[canonical(match[1])] = match[2]
    return found


def outside(locked: dict[str, str], installed: dict[str, str]) -> dict[str, str]:
    """The installed distributions (by canonical name) not at their locked version, a build's local label
    (torch's +cpu) aside: each with what was found and what is locked."""
    return {
        name: f"{version}, locked {locked.get(name)}"
        for name, version in sorted(installed.items())
        if locked.get(name) != version.split("+")[0]
    }
