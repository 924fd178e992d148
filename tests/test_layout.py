"""The house rules of the course's packages: small modules, each saying its one job, each in ARCHITECTURE.md."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("attention_course", "autograder", "course_site")
MAX_LINES = 450


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def listed(package: str) -> set[str]:
    """The module names in the first column of ARCHITECTURE.md's table for ``package``."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = re.search(rf"^## `{package}`.*?$(.*?)(?=^## )", text, re.M | re.S)
    assert section, f"ARCHITECTURE.md has no section for {package}"
    names = set()
    for row in re.findall(r"^\| (.+?) \|", section.group(1), re.M):
        names |= set(re.findall(r"`([\w/]+)`", row))
    return names


def named(path: Path, package: str) -> str:
    return path.relative_to(ROOT / package).with_suffix("").as_posix()


def only_imports(path: Path) -> bool:
    """A package's ``__init__`` that holds nothing but its docstring and imports is the package's folder row."""
    body = ast.parse(path.read_text()).body
    return all(isinstance(node, (ast.Expr, ast.Import, ast.ImportFrom, ast.Assign)) for node in body)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_is_small(package):
    sizes = {path.relative_to(ROOT): len(path.read_text().splitlines()) for path in modules(package)}
    long = [f"{path}: {lines} lines" for path, lines in sizes.items() if lines > MAX_LINES]
    assert not long, f"modules over {MAX_LINES} lines, each to split by job:\n" + "\n".join(long)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_says_its_one_job_in_its_first_line(package):
    wrong = []
    for path in modules(package):
        doc = ast.get_docstring(ast.parse(path.read_text()))
        first = (doc or "").split("\n")[0].strip()
        if not first.endswith("."):
            wrong.append(f"{path.relative_to(ROOT)}: {first or 'no docstring'!r}")
    assert not wrong, "modules without a one-sentence docstring of their job:\n" + "\n".join(wrong)


@pytest.mark.parametrize("package", PACKAGES)
def test_architecture_lists_every_module_and_no_other(package):
    names = listed(package)
    paths = [p for p in modules(package) if not (p.name == "__init__.py" and p.parent != ROOT / package)]
    missing = []
    for path in paths:
        name = named(path, package)
        folders = {f"{'/'.join(name.split('/')[:i])}/" for i in range(1, name.count("/") + 1)}
        if name not in names and not folders & names:
            missing.append(name)
    for init in (ROOT / package).rglob("__init__.py"):
        if init.parent == ROOT / package:
            continue
        name = init.parent.relative_to(ROOT / package).as_posix()
        if f"{name}/" not in names and not only_imports(init):
            missing.append(f"{name}/ (its __init__ holds code)")
    existing = {named(p, package) for p in modules(package)} | {
        f"{p.parent.relative_to(ROOT / package).as_posix()}/"
        for p in (ROOT / package).rglob("__init__.py")
        if p.parent != ROOT / package
    }
    stale = sorted(names - existing)
    assert not missing, f"ARCHITECTURE.md's {package} table lacks: {', '.join(missing)}"
    assert not stale, f"ARCHITECTURE.md's {package} table names what does not exist: {', '.join(stale)}"


IMPORT_ALL = """
import importlib, json, os, sys, warnings
import torch

ours = []  # the warnings filters that the course's own modules set (libraries may set theirs)
for name in ("filterwarnings", "simplefilter"):
    def traced(*args, _set=getattr(warnings, name), **kwargs):
        caller = sys._getframe(1).f_code.co_filename
        if any(f"/{package}/" in caller for package in ("attention_course", "autograder", "course_site")):
            ours.append(caller)
        return _set(*args, **kwargs)
    setattr(warnings, name, traced)
before = (dict(os.environ), torch.get_num_threads(), torch.get_default_dtype())
for name in sys.argv[1:]:
    importlib.import_module(name)
after = (dict(os.environ), torch.get_num_threads(), torch.get_default_dtype())
changed = [what for what, a, b in zip(("environment", "threads", "dtype"), before, after) if a != b]
print(json.dumps(changed + [f"warnings filters ({path})" for path in ours]))
"""


def test_importing_a_module_changes_no_setting_of_the_process():
    """No module sets the environment, warnings' filters, torch's threads or default dtype when it is imported."""
    import json
    import subprocess
    import sys

    names = []
    for package in PACKAGES:
        for path in modules(package):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] != "__main__":
                names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, *names], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [], f"importing the packages changed: {done.stdout}"
