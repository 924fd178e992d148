"""A class to grade made of the catalogue's right and wrong answers, and the example class report the instructor guide
shows (``make class-report-example``).

    python -m tests.example_class                        # grades it, writes book/_examples/class-report/
    python -m tests.example_class --out DIR --jobs 2

Each student of :func:`make_class` is known to do one thing: a wrong answer of ``tests/buggy/<assignment>.py`` (at
most :data:`PER_ITEM` of each item), a notebook of correct answers in other idioms of ``tests/correct/``, the
reference, the released notebook as it is, a wrong answer that no known mistake describes, code that raises an error,
a written answer left blank. ``tests/test_class_report.py`` grades such a class and checks the report's counts
against what each student is known to do; this script writes its report for the guide.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from attention_course.tooling import notebooks
from autograder.grading.classroom import fill, make_course, submit
from autograder.release import course
from tests.test_catalogue import BUG_MODULES, CORRECT

ASSIGNMENT = "ch02_scaled_dot_product"
PER_ITEM = 2  # wrong answers of each item in the class
OUT = Path("book") / "_examples" / "class-report"  # course_site.sphinx_ext.EXAMPLES

# A softmax that is wrong in a way no known mistake of it describes: each row sums to 1 / 3 of the size.
UNKNOWN_SOFTMAX = """def softmax(x, axis=-1):
    return np.ones_like(x) / 3
"""
# Code that raises, with a message of the student's own: no report may quote it.
RAISING_SOFTMAX = """def softmax(x, axis=-1):
    raise ValueError("{marker}")
"""


@dataclass(frozen=True)
class Student:
    """What a student of the example class is known to do: ``kind`` is ``bug`` (``what`` the Bug), ``correct``
    (``what`` the notebook's answers, item -> Answer), ``reference``, ``blank``, ``unknown`` or ``raises`` (a wrong
    answer of ``item`` that no known mistake describes, and one that raises), ``not graded``."""

    name: str
    kind: str
    what: object = None
    item: str = ""


def make_class(folder: Path, marker: str = "a student's own words", assignment: str = ASSIGNMENT) -> list[Student]:
    """A course folder at ``folder`` with the class's submissions of ``assignment``; ``marker``: words a student
    wrote (in a written answer, a comment and an error message), which the report must not hold."""
    make_course(folder)
    students: list[Student] = []

    def add(kind: str, nb, what=None, item: str = "") -> None:
        student = Student(f"student-{len(students) + 1:02d}", kind, what, item)
        submit(folder, student.name, assignment, nb)
        students.append(student)

    def written(nb, text: str):
        for cell in nb.cells:
            if notebooks.is_written(cell):
                cell.source = text
        return nb

    add("reference", fill(assignment))
    add("blank", fill(assignment, blank=True))
    taken: dict[str, int] = {}
    for bug in BUG_MODULES[assignment].BUGS:
        if taken.get(bug.item, 0) < PER_ITEM:
            taken[bug.item] = taken.get(bug.item, 0) + 1
            add("bug", fill(assignment, {bug.item: bug.code}), bug, bug.item)
    for answers in CORRECT[assignment]:
        add("correct", fill(assignment, {item: a.code for item, a in answers.items()}), answers)
    if assignment == ASSIGNMENT:
        unknown = fill(assignment, {"softmax": f"# {marker}\n{UNKNOWN_SOFTMAX}"})
        add("unknown", written(unknown, f"{marker}: my written answer."), item="softmax")
        add("raises", fill(assignment, {"softmax": RAISING_SOFTMAX.format(marker=marker)}), item="softmax")
    return students


def term_before(assignment: str) -> course.Release:
    """As in a term: the chapters before ``assignment`` released, it not."""
    names = course.assignments()
    return course.Release("term", set(names[: names.index(assignment)]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the report's pages go (default: {OUT})")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks graded at once")
    args = parser.parse_args(argv)
    from autograder.grading.phases import grade

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "course"
        students = make_class(folder)
        grade(ASSIGNMENT, root=folder, quiet=True, jobs=args.jobs, settings=term_before(ASSIGNMENT))
        args.out.mkdir(parents=True, exist_ok=True)
        for old in args.out.glob("*"):
            old.unlink()
        for name in (f"{ASSIGNMENT}-report.html", f"{ASSIGNMENT}-report-anonymous.html", f"{ASSIGNMENT}-report.json"):
            shutil.copy(folder / "grades" / name, args.out / name)
    kinds = ", ".join(sorted({s.kind for s in students}))
    print(f"graded {len(students)} students ({kinds}); wrote {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
