"""The report of one notebook's grading: per test cell, per student cell, and notes."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

# The kinds of cause of a failed test cell, in the grader's own words (the class report counts them per item):
KNOWN = "known"  # a known mistake of the item explains it: its cause, as the hint names it
UNKNOWN = "unknown"  # a property failed that no known mistake explains: the property, never a guess
PART = "part"  # a question's part answered wrong: the part, and how
UNWRITTEN = "unwritten"  # the item is not written yet (it raises NotImplementedError, as released)
STOPPED = "stopped"  # the student's code ran past a time limit, or its process ended
ERROR = "error"  # the test could not run (what the student's code returned or raised broke it)
NOT_RUN = "not run"  # the notebook was not run (refused once read): no test ran
CAUSE_KINDS = (KNOWN, UNKNOWN, PART, UNWRITTEN, STOPPED, ERROR, NOT_RUN)


@dataclass(frozen=True)
class Cause:
    """Why a test cell failed, in the grader's words alone: never the student's code, text or error, nor a
    hidden input (the class report shows it to the instructor, and, without names, to the class)."""

    kind: str  # one of CAUSE_KINDS
    words: str


@dataclass
class TestResult:
    grade_id: str
    points: float
    passed: bool
    message: str = ""
    seconds: float = 0.0  # the test cell's own time, its diagnosis included
    partial: float = 0.0  # a failed question's points for the parts it got right (autograder.api.items.share)
    unwritten: str = ""  # the graded item not written yet that failed it (CheckFailed.unwritten), or ""
    causes: list[Cause] = field(default_factory=list)  # why it failed: one cause, or one per wrong part

    @property
    def score(self) -> float:
        return self.points if self.passed else self.partial


@dataclass
class Report:
    """What grading one notebook found: per test cell, and per student cell."""

    assignment: str
    notebook: str
    tests: dict[str, TestResult] = field(default_factory=dict)
    cell_errors: dict[int, str] = field(default_factory=dict)  # submission cell index -> error
    cell_names: dict[int, str] = field(default_factory=dict)  # submission cell index -> how a student finds it
    skipped: list[int] = field(default_factory=list)  # submission cells that hung or killed the process
    notes: list[str] = field(default_factory=list)
    cell_notes: dict[str, str] = field(default_factory=dict)  # grade_id -> a note shown under that cell's output
    output: str = ""
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase (autograder.grading.timings)
    key: str = ""
    not_graded: str = ""  # why the grader could not grade it (its failure, not the student's); scores mean nothing

    def cell_name(self, index: int) -> str:
        return self.cell_names.get(index, f"cell {index + 1}")

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests.values())

    @property
    def max_score(self) -> float:
        return sum(t.points for t in self.tests.values())

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Report:
        data = json.loads(text)
        tests = data["tests"].items()
        data["tests"] = {k: TestResult(**{**v, "causes": [Cause(**c) for c in v.get("causes", [])]}) for k, v in tests}
        data["cell_errors"] = {int(k): v for k, v in data["cell_errors"].items()}
        data["cell_names"] = {int(k): v for k, v in data.get("cell_names", {}).items()}
        return cls(**data)
