"""The trusted grader: scores a submission without ever running its code in this process.

For a submitted notebook, :func:`grade_notebook`

1. reads the instructor's notebook (``solutions/``) for the setup cells, the test
   cells (with their points) and the names of the graded items;
2. builds the student's program: the submission's code cells in order, with the
   setup cells taken from the instructor's notebook and the test cells left out;
3. runs that program in a :class:`~autograder.sandbox.Sandbox`; a cell that hangs
   or kills the process is skipped and the program is run again without it;
4. runs each test cell *here*, with the graded items bound to :class:`Remote`
   proxies: a check makes its inputs here, the proxy sends them to the sandbox
   as plain data, the student's function runs there, and its return value comes
   back as plain data and is compared here with the reference.

Patching NumPy or builtins, IPython hooks, tensor subclasses, frame inspection
and killing the process all happen inside the sandbox, where nothing is scored.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import keyword
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat
import numpy as np
from nbgrader.preprocessors import ClearHiddenTests
import torch

from autograder import course, notebooks, reference, wire
from autograder.packages import sandbox_packages
from autograder.checks import CheckFailed
from autograder.sandbox import Limits, Sandbox, SandboxError, SandboxTimeout, SandboxUnavailable, clean_text

MAX_RESTARTS = 5
UNGRADED = "ungraded"  # a cell tag: long, optional work (training) that grading does not run
TOTAL_SECONDS = 600.0  # one submission's whole grading, restarts included
MAX_NOTEBOOK_BYTES = 10 * 2**20  # a larger submission is not read
MAX_CODE_CELLS = 500  # a submission with more code cells is not run
MAX_MESSAGE_CHARS = 2000  # of one test's message, one cell's error, one note


@dataclass
class TestResult:
    grade_id: str
    points: float
    passed: bool
    message: str = ""


@dataclass
class Report:
    """What grading one notebook found: per test cell, and per student cell."""

    assignment: str
    notebook: str
    tests: dict[str, TestResult] = field(default_factory=dict)
    cell_errors: dict[int, str] = field(default_factory=dict)  # submission cell index -> error
    skipped: list[int] = field(default_factory=list)  # submission cells that hung or killed the process
    notes: list[str] = field(default_factory=list)
    output: str = ""
    seconds: float = 0.0
    key: str = ""
    not_graded: str = ""  # why the grader could not grade it (its failure, not the student's); scores mean nothing

    @property
    def score(self) -> float:
        return sum(t.points for t in self.tests.values() if t.passed)

    @property
    def max_score(self) -> float:
        return sum(t.points for t in self.tests.values())

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> "Report":
        data = json.loads(text)
        data["tests"] = {k: TestResult(**v) for k, v in data["tests"].items()}
        data["cell_errors"] = {int(k): v for k, v in data["cell_errors"].items()}
        return cls(**data)


@dataclass(frozen=True)
class Source:
    """What the grader takes from the instructor's notebook."""

    assignment: str
    notebook: str
    setup: dict[str, str]  # grade_id -> source
    tests: list[tuple[str, str, float]]  # (grade_id, source, points)
    items: tuple[str, ...]
    digest: str

    @classmethod
    def load(cls, assignment: str, notebook: str | None = None) -> "Source":
        root = reference.solutions_root()
        notebook = notebook or assignment
        path = Path(root) / "solutions" / assignment / f"{notebook}.ipynb"
        if not path.is_file():
            raise reference.ReferenceUnavailable(f"no instructor notebook at {path}")
        nb = notebooks.read(path)
        setup = {notebooks.cell_id(c): c.source for c in nb.cells if notebooks.is_setup(c)}
        tests = [(notebooks.cell_id(c), c.source, float(notebooks.nbgrader_meta(c).get("points", 0)))
                 for c in nb.cells if notebooks.is_test(c)]
        items = tuple(name for c in nb.cells if notebooks.is_solution(c) for name in _defined_names(c.source))
        return cls(assignment, notebook, setup, tests, items, hashlib.sha256(path.read_bytes()).hexdigest())


def _defined_names(source: str) -> list[str]:
    tree = ast.parse(source)
    return [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]


def released_source(code: str) -> str:
    """A test cell as students receive it: the hidden tests removed by nbgrader's own release step."""
    cell = nbformat.v4.new_code_cell(code)
    ClearHiddenTests()._remove_hidden_test_region(cell)
    return cell.source.strip()


def tampered_tests(source: Source, nb) -> list[str]:
    """Notes on test cells a submission deleted or changed (grading uses the instructor's anyway).

    A test cell as released, or as the instructor wrote it (``nbgrader autograde`` puts that
    back before grading), is untouched.
    """
    found = {notebooks.cell_id(c): c.source for c in nb.cells if c.get("cell_type") == "code"}
    notes = []
    for gid, code, _ in source.tests:
        if gid not in found:
            notes.append(f"test cell {gid} was deleted; the original was graded")
        elif found[gid].strip() not in (released_source(code), code.strip()):
            notes.append(f"test cell {gid} was changed; the original was graded")
    return notes


def student_program(source: Source, nb) -> tuple[list[str], list[int]]:
    """The code to run for the student, and each piece's index among the submission's cells.

    Cells tagged ``ungraded`` (optional training runs) are left out; no test may need them.
    """
    program, where = [], []
    seen_setup = set()
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code" or UNGRADED in cell.get("metadata", {}).get("tags", []):
            continue
        gid = notebooks.cell_id(cell)
        if gid in source.setup:
            program.append(source.setup[gid])
            seen_setup.add(gid)
        elif gid not in {t[0] for t in source.tests}:
            program.append(cell.source if isinstance(cell.source, str) else "".join(cell.source))
        else:
            continue
        where.append(index)
    missing = [gid for gid in source.setup if gid not in seen_setup]
    return [source.setup[g] for g in missing] + program, [-1] * len(missing) + where


class _Session:
    """The student's program running in a sandbox, restarted when it hangs or dies."""

    def __init__(self, program: list[str], where: list[int], report: Report, limits: Limits, isolation: str,
                 deadline: float, packages: Path):
        self.program, self.where, self.report = program, where, report
        self.limits, self.isolation, self.deadline = limits, isolation, deadline
        self.packages = packages
        self.skipped: set[int] = set()
        self.sandbox: Sandbox | None = None
        self.restarts = 0
        self.generation = 0  # counts the sandboxes started; objects from an earlier one are gone
        self.stuck: dict[str, str] = {}  # item -> why its calls are refused

    def start(self) -> Sandbox:
        while self.sandbox is None:
            if self.restarts > MAX_RESTARTS or time.monotonic() > self.deadline:
                raise SandboxError("grading stopped: the notebook used up its time and restarts")
            self.restarts += 1
            sandbox = Sandbox(self.limits, self.isolation, self.packages)
            labels = [f"cell {index + 1}" if index >= 0 else "the setup cell" for index in self.where]
            try:
                errors = sandbox.run_cells([None if i in self.skipped else code for i, code in enumerate(self.program)],
                                           labels)
            except SandboxError as exc:
                self._keep_output(sandbox)
                if exc.cell is None:
                    self.report.notes.append(f"the notebook could not start: {exc}")
                    raise
                self.skipped.add(exc.cell)
                if self.where[exc.cell] >= 0:
                    self.report.skipped.append(self.where[exc.cell])
                self._cell_error(exc.cell, f"{exc}; the cell was skipped and the notebook run again without it")
                continue
            except BaseException:
                sandbox.close()
                raise
            for i, error in enumerate(errors):
                if error and i not in self.skipped:
                    self._cell_error(i, error)
            if sandbox.background:
                note = (f"the notebook's cells left {sandbox.background} other process(es) running; "
                        "they were stopped")
                if note not in self.report.notes:
                    self.report.notes.append(note)
            self.sandbox = sandbox
            self.generation += 1
        return self.sandbox

    def _cell_error(self, i: int, message: str) -> None:
        message = clean_text(message, MAX_MESSAGE_CHARS)
        index = self.where[i]
        if index >= 0:
            self.report.cell_errors.setdefault(index, message)
        else:
            self.report.notes.append(f"setup: {message}")

    def _keep_output(self, sandbox: Sandbox) -> None:
        if not self.report.output:
            text = bytes(sandbox.output).decode(errors="replace")
            if sandbox.output_dropped:
                text += f"\n[... {sandbox.output_dropped} more bytes of output dropped]"
                self.report.notes.append(f"output cut to {len(sandbox.output) // 1024} KiB "
                                         f"({sandbox.output_dropped} bytes dropped)")
            self.report.output = text

    def request(self, item: str, label: str, target: str | int, *, attr: str | None = None,
                args=(), kwargs=None, generation: int | None = None, getattr_only: bool = False) -> dict:
        """One request to the student's process; ``item`` is the graded item it belongs to."""
        if item in self.stuck:
            raise SandboxTimeout(self.stuck[item])
        sandbox = self.start()
        if generation is not None and generation != self.generation:
            raise SandboxError(f"{label}: this object was lost when the notebook was restarted after a failure")
        timeout = max(0.1, self.deadline - time.monotonic())
        try:
            if getattr_only:
                return sandbox.getattr(int(target), str(attr), timeout=timeout, label=label)
            return sandbox.call(target, list(args), dict(kwargs or {}), timeout=timeout, attr=attr, label=label)
        except SandboxError as exc:
            self._keep_output(sandbox)
            self.sandbox = None
            note = clean_text(f"{item}: {exc}", MAX_MESSAGE_CHARS)
            if note not in self.report.notes:
                self.report.notes.append(note)
            if isinstance(exc, SandboxTimeout):
                self.stuck[item] = f"an earlier call of {item} did not finish within {self.limits.call_timeout:g} s"
            raise
        except BaseException:
            sandbox.close()
            self.sandbox = None
            raise

    def result(self, reply: dict, item: str, args=(), kwargs=None):
        """The value of a reply, as plain data here; objects that stay in the sandbox become RemoteObjects."""
        if not reply.get("ok"):
            raise _student_exception(str(reply.get("error_type", "Exception")), str(reply.get("error", "")))
        # The arguments as they are after the call: an array argument whose state is missing or does
        # not fit fails the call (the worker always reports it; only tampering with it would not).
        after = list(reply.get("args_after") or [])
        after += [None] * (len(args) - len(after))
        pairs = [*zip(args, after),
                 *(((kwargs or {}).get(key), (reply.get("kwargs_after") or {}).get(key)) for key in (kwargs or {}))]
        for original, state in pairs:
            if isinstance(original, (np.ndarray, torch.Tensor)) and not _copy_back(original, state):
                raise TypeError(f"the state of {item}'s arguments after the call could not be read back")
        generation = self.generation
        try:
            return wire.decode(reply.get("value"),
                               resolve=lambda number, kind: RemoteObject(self, number, kind, item, generation))
        except (wire.WireError, ValueError, KeyError, TypeError) as exc:
            raise TypeError(f"{item} returned something that is not a tensor, array, number or object ({exc})")

    def close(self) -> None:
        if self.sandbox is not None:
            self._keep_output(self.sandbox)
            self.sandbox.close()
            self.sandbox = None


class Remote:
    """Stands in for a student's function or class in the test cells: calls it in the sandbox, by value."""

    def __init__(self, session: _Session, name: str, signature: inspect.Signature | None):
        self._session, self.__name__, self.__qualname__ = session, name, name
        if signature is not None:
            self.__signature__ = signature

    def __call__(self, *args, **kwargs):
        reply = self._session.request(self.__name__, self.__name__, self.__name__, args=args, kwargs=kwargs)
        return self._session.result(reply, self.__name__, args, kwargs)


class RemoteObject:
    """An object that the student's code made and that stays in the sandbox (a module, a method).

    Attribute access and calls go to the sandbox; what comes back is plain data or
    another RemoteObject. Passing it to the student's code passes the object itself.
    """

    def __init__(self, session: _Session, number: int, kind: str, item: str, generation: int):
        self.__dict__.update(_session=session, _number=number, _kind=kind or "object", _item=item,
                             _generation=generation)

    @property
    def __wire_handle__(self) -> int:
        if self._generation != self._session.generation:
            raise SandboxError(f"{self._item}: this object was lost when the notebook was restarted after a failure")
        return self._number

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        reply = self._session.request(self._item, f"{self._item}.{attr}", self._number, attr=attr,
                                      generation=self._generation, getattr_only=True)
        return self._session.result(reply, self._item)

    def __setattr__(self, attr: str, value):
        raise AttributeError(f"cannot set {attr} on an object in the sandbox")

    def __call__(self, *args, **kwargs):
        reply = self._session.request(self._item, f"{self._item} ({self._kind})", self._number, args=args,
                                      kwargs=kwargs, generation=self._generation)
        return self._session.result(reply, self._item, args, kwargs)

    def __repr__(self) -> str:
        return f"<{self._kind} of {self._item}, in the sandbox>"


def _copy_back(original, after) -> bool:
    """Apply the sandbox's in-place changes of an array argument to the grader's copy; False when
    ``after`` is not that argument's state (missing, another kind, another shape)."""
    if after is None:
        return False
    try:
        changed = wire.decode(after)
    except Exception:
        return False
    if isinstance(original, torch.Tensor) and isinstance(changed, torch.Tensor) and changed.shape == original.shape:
        original.copy_(changed.to(original.dtype))
        return True
    if isinstance(original, np.ndarray) and isinstance(changed, np.ndarray) and changed.shape == original.shape:
        original[...] = changed
        return True
    return False


def _student_exception(name: str, message: str) -> Exception:
    import builtins

    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == "builtins":
        try:
            return cls(message)
        except Exception:
            pass
    safe = name if name.isidentifier() and not keyword.iskeyword(name) and len(name) <= 80 else "Exception"
    return type(safe, (Exception,), {})(message)


def program_key(source: Source, program: list[str], limits: Limits, release: course.Release) -> str:
    data = json.dumps([source.digest, program, asdict(limits), release.key]).encode()
    return hashlib.sha256(data).hexdigest()


PROBE = ["import numpy\nimport torch\nimport attention_course\nfrom autograder import *\n",
         "def probe(x):\n    return x * 2\n"]


def preflight(release: course.Release | None = None, isolation: str = "bwrap", limits: Limits = Limits()) -> str | None:
    """Start one sandbox with a program known to be right and call it once: None when that works,
    else what went wrong, written for the instructor (grading must not start then)."""
    release = release or course.release()
    try:
        with Sandbox(limits, isolation, sandbox_packages(release)) as sandbox:
            errors = sandbox.run_cells(PROBE, ["the probe's imports", "the probe's function"])
            if any(errors):
                return ("in the sandbox, the course's packages cannot be imported: "
                        + "; ".join(error for error in errors if error)
                        + ". Check that `make venv` installed them into the environment that grades")
            reply = sandbox.call("probe", [torch.arange(3.0)], {})
            value = wire.decode(reply.get("value")) if reply.get("ok") else None
            if not isinstance(value, torch.Tensor) or not torch.equal(value, torch.arange(3.0) * 2):
                return f"the sandbox's worker answered a call wrongly: {clean_text(reply, 300)}"
    except SandboxUnavailable as exc:
        return (f"{exc}. Check that bubblewrap is installed (`make sandbox`) and may create user namespaces "
                "(sysctl user.max_user_namespaces > 0; on Debian and Ubuntu, kernel.unprivileged_userns_clone=1), "
                "and, in a container, that it allows them")
    except SandboxError as exc:
        return f"the sandbox stopped during a program known to be right: {exc}"
    return None


def _refused(source: Source, report: Report, why: str) -> Report:
    """A submission that is not run: every test fails with ``why`` (the student's doing)."""
    report.notes.append(why)
    for gid, _, points in source.tests:
        report.tests[gid] = TestResult(gid, points, False, f"no test ran: {why}")
    return report


def _read_submission(submission, source: Source, report: Report):
    """The submitted notebook, or None (with the report filled in) for one that is not run."""
    if not isinstance(submission, (str, Path)):
        return submission
    path = Path(submission)
    if path.is_symlink():
        _refused(source, report, "the notebook is a symbolic link, not a file; submit the notebook itself")
        return None
    try:
        size = path.stat().st_size
    except OSError as exc:
        _refused(source, report, clean_text(f"could not read the notebook: {exc}", MAX_MESSAGE_CHARS))
        return None
    if size > MAX_NOTEBOOK_BYTES:
        _refused(source, report, f"the notebook is larger than {MAX_NOTEBOOK_BYTES // 2**20} MiB "
                 f"({size // 2**20} MiB); clear its outputs and submit it again")
        return None
    return nbformat.read(str(path), as_version=4)


def grade_notebook(assignment: str, submission, *, notebook: str | None = None, limits: Limits = Limits(),
                   isolation: str = "bwrap", release: course.Release | None = None, as_submitted=None) -> Report:
    """Grade one submitted notebook (a path or a NotebookNode) against the instructor's tests.

    The student's code can import the course's packages as students get them under ``release``
    (default: the term's settings), so never the solution of a chapter that is not released.
    Where the sandbox cannot be used (:class:`~autograder.sandbox.SandboxUnavailable`), the report's
    ``not_graded`` says why and its scores mean nothing: the failure is the grader's.
    ``as_submitted``: the notebook as the student submitted it, when ``submission`` is a copy whose
    test cells nbgrader has already put back (the notes on changed test cells come from it).
    """
    started = time.monotonic()
    release = release or course.release()
    source = Source.load(assignment, notebook)
    report = Report(assignment, source.notebook)
    try:
        nb = _read_submission(submission, source, report)
        if nb is None:
            return report
        code_cells = sum(1 for cell in nb.cells if cell.get("cell_type") == "code")
        if code_cells > MAX_CODE_CELLS:
            return _refused(source, report, f"the notebook has {code_cells} code cells, more than the "
                            f"{MAX_CODE_CELLS} allowed")
        program, where = student_program(source, nb)
        report.notes += tampered_tests(source, nb if as_submitted is None else as_submitted)
    except Exception as exc:
        return _refused(source, report, clean_text(f"could not read the notebook: {type(exc).__name__}: {exc}", 500))
    report.key = program_key(source, program, limits, release)
    session = _Session(program, where, report, limits, isolation, started + TOTAL_SECONDS,
                       sandbox_packages(release))
    trusted = {"__name__": f"autograder.tests.{assignment}"}
    for code in source.setup.values():
        exec(compile(code, f"<setup of {assignment}>", "exec"), trusted)
    signatures = {}
    for name in source.items:
        try:
            signatures[name] = inspect.signature(reference.get(assignment, name))
        except (reference.ReferenceUnavailable, TypeError, ValueError):
            signatures[name] = None
    try:
        for gid, code, points in source.tests:
            namespace = dict(trusted)
            namespace.update({name: Remote(session, name, signatures[name]) for name in source.items})
            try:
                session.start()
                exec(compile(code, f"<test {gid}>", "exec"), namespace)
                report.tests[gid] = TestResult(gid, points, True)
            except CheckFailed as exc:
                report.tests[gid] = TestResult(gid, points, False, clean_text(exc, MAX_MESSAGE_CHARS))
            except SandboxError as exc:
                report.tests[gid] = TestResult(gid, points, False, clean_text(f"{gid}: {exc}", MAX_MESSAGE_CHARS))
            except SandboxUnavailable:
                raise
            except Exception as exc:  # a test that cannot run scores nothing, and says why
                report.tests[gid] = TestResult(gid, points, False, clean_text(
                    f"{gid}: the test could not run: {type(exc).__name__}: {exc}", MAX_MESSAGE_CHARS))
    except SandboxUnavailable as exc:
        report.not_graded = clean_text(f"the sandbox could not be used: {exc}", MAX_MESSAGE_CHARS)
    finally:
        session.close()
    report.seconds = round(time.monotonic() - started, 3)
    return report
