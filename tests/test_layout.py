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


# What each package's root may hold beside its folders: the autograder's only its __init__, the test cells'
# namespace; attention_course's what every chapter imports (the names, devices and seeds, figures, the records of
# what was measured).
ROOT_MODULES = {
    "autograder": {"__init__.py"},
    "attention_course": {"__init__.py", "devices.py", "plotting.py", "records.py"},
}


@pytest.mark.parametrize("package", sorted(ROOT_MODULES))
def test_a_packages_root_holds_folders_and_what_every_part_shares(package):
    """Every other module of ``autograder`` and ``attention_course`` is in a folder named for whom it serves, each
    folder in ARCHITECTURE.md."""
    loose = sorted(p.name for p in (ROOT / package).glob("*.py"))
    assert set(loose) == ROOT_MODULES[package], (
        f"modules loose in {package}/, each to go into the folder of whom it serves: {loose}"
    )
    folders = sorted(p.name for p in (ROOT / package).iterdir() if (p / "__init__.py").is_file())
    text = (ROOT / "ARCHITECTURE.md").read_text()
    assert all(f"`{folder}/" in text for folder in folders), folders


def test_the_import_graph_has_no_circle():
    """No module imports, directly or through others, a module that imports it. Import-linter's contract compares
    the siblings of a folder, never a folder's ``__init__`` with its own modules: a module of ``exchange/`` that
    imports ``autograder.exchange``, whose ``__init__`` imports it back, passes the contract and fails here."""
    from benchmarks import import_graph

    for package in PACKAGES:
        assert import_graph.summary(package)["circles"] == [], package


OLD_IMPORTS = """
from autograder import *
from autograder import checks as _checks, reference as _reference
from autograder import items, scripted, specs
import autograder
assert _reference is autograder.release.reference and callable(_reference.get)
assert specs.tensor is tensor and items.Item is Item and scripted.__name__ == "autograder.api.scripted"
assert "reference" not in autograder.__all__ and "reference" in dir(autograder)
print("ok")
"""


def test_the_imports_of_earlier_terms_notebooks_still_work():
    """What test cells of earlier terms import (``from autograder import checks as _checks, reference as
    _reference``, found in the notebooks' history) still imports, though the modules moved into folders."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", OLD_IMPORTS], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


@pytest.mark.parametrize("package", ["autograder", "attention_course"])
def test_the_architectures_picture_of_a_packages_layers_is_the_contracts(package):
    """ARCHITECTURE.md draws the folders of ``autograder`` and of ``attention_course`` in the order that import-linter's
    layers contract holds them to (pyproject.toml): the same layers, top to bottom, and every folder and root module of
    the package in one of them."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c.get("containers") == [package]]
    section = re.search(rf"^## `{package}`.*?```text\n(.*?)```", (ROOT / "ARCHITECTURE.md").read_text(), re.M | re.S)
    assert section, f"ARCHITECTURE.md's {package} section has no picture of its layers"
    drawn = [re.split(r"\s{2,}", line.strip())[0] for line in section.group(1).splitlines() if line.strip()]
    assert drawn == layers, f"the picture's layers {drawn} are not the contract's {layers}"
    children = {p.name for p in (ROOT / package).iterdir() if (p / "__init__.py").is_file()}
    children |= {p.stem for p in (ROOT / package).glob("*.py") if p.name != "__init__.py"}
    assert children == {part.strip() for layer in layers for part in re.split(r"[|:]", layer)}


def earlier_names() -> set[str]:
    """The modules' earlier names, each a module of ``attention_course/moved/``."""
    return {p.stem for p in (ROOT / "attention_course" / "moved").glob("*.py")} - {"__init__"}


def test_no_file_of_the_course_names_a_module_by_its_earlier_name():
    """The earlier names are for earlier terms' notebooks and commands only: no module, page, notebook, Makefile or
    test of this course imports, runs or names in a string a module by one (``moved/`` and the lines that speak of
    it aside, and README's records of a command as it was run)."""
    names = "|".join(sorted(earlier_names(), key=len, reverse=True))
    pattern = re.compile(  # an import, a module run, a dotted name in a string: not prose about the earlier names
        rf"\b(from|import) attention_course\.({names})\b|\bfrom attention_course import [\w, ]*\b({names})\b"
        rf"|-m\W+attention_course\.({names})\b|[\"']attention_course\.({names})\.\w+"
    )
    kept = (ROOT / "attention_course" / "moved", ROOT / "tests" / "test_layout.py", ROOT / "tests" / "test_moved.py")
    paths = [*ROOT.glob("*.md"), ROOT / "Makefile", ROOT / "pyproject.toml", ROOT / "requirements.txt"]
    for folder in ("attention_course", "autograder", "course_site", "benchmarks", "tests", "book", "solutions"):
        paths += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md", ".ipynb", ".txt", ".toml")]
    found = []
    for path in paths:
        if any(path == k or k in path.parents for k in kept):
            continue
        for line in path.read_text().splitlines():
            if "moved/" not in line and "measured by" not in line.lower():
                found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in pattern.finditer(line)]
    assert not found, "earlier module names, each to be written as the module's new one:\n" + "\n".join(found)
