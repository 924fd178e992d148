"""The grader's saved reports, by which ``make grade`` grades again only what changed.

Each notebook that ``make grade`` grades in the sandbox leaves, besides the report it hands nbgrader
(:func:`autograder.grading.handoff.report_path`), a saved record in the grader's own state folder,
``grades/.grader/<assignment>/<student>/<notebook>.json``: the report, the digests of what it was graded from
(:class:`Inputs`) and an HMAC of both under a secret that the grader drew once and keeps beside them
(``grades/.grader/secret``, readable by the instructor's account alone). The next ``make grade`` computes the
inputs again and uses the saved report instead of running the notebook where all of them are the same and the
HMAC holds; it says for each student what it did and why (:class:`Decision`). The records of phases 1, 4 and 5,
by which ``make grade`` skips those too, are signed alike (:meth:`Saved.keep`; :mod:`autograder.grading.kept`).

What the inputs are, computed from what is graded and never from a file's time:

- ``notebook``: the submitted notebook's bytes;
- ``assignment``: the instructor notebook (its setup and test cells, hidden ones too, and the reference) that
  the grader grades against, and the released notebook that a submission is compared with (nothing answered);
- ``grader``: the grader's own code and every instructor notebook (:func:`autograder.grading.source.grader_digest`);
- ``environment``: the pinned packages (``constraints.txt``, ``requirements.txt``), Python's version, the
  sandbox's limits and the term's release.

A student cannot steer it: their notebook is one input, hashed; the sandbox mounts nothing of the course
folder (its home and ``/tmp`` are its own, in memory), so no file a notebook writes there reaches the state
folder; and a record changed by anyone without the secret fails its HMAC and is graded again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.grading.report import Report
from autograder.grading.source import Source, grader_digest
from autograder.release import course
from autograder.sandbox.limits import Limits

STATE = Path("grades") / ".grader"  # under the course folder: the grader's own, never mounted in the sandbox
PHASES = ".phases"  # under STATE: the records of phases 1, 4 and 5 (autograder.grading.kept); no assignment's name
PINS = ("constraints.txt", "requirements.txt")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Inputs:
    """The digests of what a notebook's report was graded from (see the module)."""

    notebook: str
    assignment: str
    grader: str
    environment: str

    def changed(self, before: Inputs) -> list[str]:
        """What differs from ``before``, in words, in the order of the fields."""
        words = {
            "notebook": "the notebook changed",
            "assignment": "the assignment's tests or reference changed",
            "grader": "the grader's code changed",
            "environment": "the pinned environment, limits or release changed",
        }
        return [words[name] for name in words if getattr(self, name) != getattr(before, name)]


class Class:
    """The inputs shared by a class's notebooks of one assignment, computed once per ``make grade``."""

    def __init__(self, assignment: str, root: Path, release: course.Release, limits: Limits | None = None):
        self.assignment, self.root = assignment, Path(root)
        self.grader = grader_digest()
        pins = b"".join(name.encode() + b"\0" + _read(COURSE_ROOT / name) for name in PINS)
        limits = asdict(limits or Limits())
        self.environment = _sha(json.dumps([_sha(pins), sys.version, limits, release.key]).encode())
        self._assignment: dict[str, str] = {}

    def inputs(self, notebook: str, path: Path) -> Inputs:
        """The inputs of grading the submitted notebook ``notebook`` at ``path``."""
        if notebook not in self._assignment:
            released = _read(self.root / "exercises" / self.assignment / f"{notebook}.ipynb")
            graded_against = Source.load(self.assignment, notebook).digest  # what grade_notebook reads
            self._assignment[notebook] = _sha(f"{graded_against}\0{_sha(released)}".encode())
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)  # a link is refused before: never followed here
        with os.fdopen(fd, "rb") as f:
            notebook_digest = hashlib.file_digest(f, "sha256").hexdigest()
        return Inputs(notebook_digest, self._assignment[notebook], self.grader, self.environment)


def _read(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""


@dataclass(frozen=True)
class Decision:
    """What ``make grade`` does with one notebook: ``report`` is the saved one to use, or None to grade it,
    ``why`` says why, for the per-student line."""

    report: Report | None
    why: str


class Saved:
    """The grader's saved records of one course folder (see the module)."""

    def __init__(self, root: Path):
        self.folder = Path(root) / STATE
        self._secret: bytes | None = None
        self._lock = threading.Lock()

    def _key(self) -> bytes:
        """The grader's secret, drawn the first time (written whole before it is found: no reader sees it half
        written, whichever process or thread is first)."""
        with self._lock:
            if self._secret is None:
                self.folder.mkdir(parents=True, exist_ok=True)
                os.chmod(self.folder, 0o700)
                path = self.folder / "secret"
                if not path.is_file():
                    drawn = self.folder / f"secret.{os.getpid()}.{threading.get_ident()}"
                    fd = os.open(drawn, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                    with os.fdopen(fd, "w") as f:
                        f.write(secrets.token_hex(32))
                    try:
                        os.link(drawn, path)  # fails where another drew one first: theirs is the secret
                    except FileExistsError:
                        pass
                    finally:
                        drawn.unlink()
                self._secret = bytes.fromhex(path.read_text().strip())
            return self._secret

    def path(self, assignment: str, student: str, notebook: str) -> Path:
        return self.folder / assignment / student / f"{notebook}.json"

    def _mac(self, assignment: str, student: str, notebook: str, inputs: dict, report: str) -> str:
        message = json.dumps([assignment, student, notebook, inputs, report]).encode()
        return hmac.new(self._key(), message, hashlib.sha256).hexdigest()

    def save(self, assignment: str, student: str, notebook: str, inputs: Inputs, report: Report) -> None:
        """Save ``report`` with its inputs, signed; a report of a notebook not graded is never saved."""
        path = self.path(assignment, student, notebook)
        if report.not_graded:
            path.unlink(missing_ok=True)
            return
        text = report.to_json()
        fields = asdict(inputs)
        record = {"inputs": fields, "report": text, "mac": self._mac(assignment, student, notebook, fields, text)}
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_text(json.dumps(record))
        partial.replace(path)

    def _phase_path(self, kind: str, assignment: str, student: str | None) -> Path:
        where = self.folder / PHASES / assignment
        return where / f"{kind}.json" if student is None else where / student / f"{kind}.json"

    def _phase_mac(self, kind: str, assignment: str, student: str | None, payload: dict) -> str:
        message = json.dumps([kind, assignment, student, payload], sort_keys=True).encode()
        return hmac.new(self._key(), message, hashlib.sha256).hexdigest()

    def keep(self, kind: str, assignment: str, student: str | None, payload: dict) -> None:
        """Keep ``payload`` (plain JSON data: a phase's key and what it left) for ``kind`` of phase, signed;
        ``student`` None: the assignment's own (:mod:`autograder.grading.kept`)."""
        path = self._phase_path(kind, assignment, student)
        record = {"payload": payload, "mac": self._phase_mac(kind, assignment, student, payload)}
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.part")
        partial.write_text(json.dumps(record))
        partial.replace(path)

    def kept(self, kind: str, assignment: str, student: str | None) -> dict | None:
        """What :meth:`keep` kept, where its HMAC holds; else None (none kept, or changed without the secret)."""
        path = self._phase_path(kind, assignment, student)
        try:
            record = json.loads(path.read_text())
            payload = record["payload"]
            good = isinstance(payload, dict) and hmac.compare_digest(
                str(record["mac"]), self._phase_mac(kind, assignment, student, payload)
            )
        except (OSError, ValueError, TypeError, KeyError):
            return None
        return payload if good else None

    def forget(self, kind: str, assignment: str, student: str | None) -> None:
        self._phase_path(kind, assignment, student).unlink(missing_ok=True)

    def decide(self, assignment: str, student: str, notebook: str, inputs: Inputs, again: bool = False) -> Decision:
        """The saved report of ``notebook`` where its inputs are ``inputs`` and its HMAC holds, else why not."""
        if again:
            return Decision(None, "graded: --again")
        path = self.path(assignment, student, notebook)
        if not path.is_file():
            return Decision(None, "graded: no saved report (first grade)")
        try:
            record = json.loads(path.read_text())
            fields, text = record["inputs"], record["report"]
            good = hmac.compare_digest(str(record["mac"]), self._mac(assignment, student, notebook, fields, text))
            before = Inputs(**fields) if good else None
            report = Report.from_json(text) if good else None
        except (OSError, ValueError, TypeError, KeyError):
            good = False
        if not good:
            return Decision(None, "graded: its saved report failed the grader's check (changed since it was saved)")
        changed = inputs.changed(before)
        if changed:
            return Decision(None, f"graded: {', '.join(changed)}")
        return Decision(report, "saved report used: nothing graded changed since its last grade")
