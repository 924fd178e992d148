"""The report of one notebook's grading: per test cell, per student cell, and notes."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field


@dataclass
class TestResult:
    grade_id: str
    points: float
    passed: bool
    message: str = ""
    seconds: float = 0.0  # the test cell's own time, its diagnosis included
    partial: float = 0.0  # a failed question's points for the parts it got right (autograder.api.items.share)
    unwritten: str = ""  # the graded item not written yet that failed it (CheckFailed.unwritten), or ""

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
        data["tests"] = {k: TestResult(**v) for k, v in data["tests"].items()}
        data["cell_errors"] = {int(k): v for k, v in data["cell_errors"].items()}
        data["cell_names"] = {int(k): v for k, v in data.get("cell_names", {}).items()}
        return cls(**data)
