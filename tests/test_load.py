"""A class of 60 through `make grade`'s pipeline: honest, wrong, blank and dishonest submissions together.

Sixty submissions of ch02_scaled_dot_product are graded two at a time by
:func:`autograder.grade.grade` under a term release in which ch02 is not released:
correct ones, wrong answers of tests/buggy/ch02_scaled_dot_product.py (as many as
the class has room for, spread over every item), blank ones, and every attack and
fault of the attack suite (tests/attacks.py, as tests/test_sandbox_grading.py
plants them). Every honest score must be exactly
right (a correct notebook full marks, a wrong one what it scores graded on its
own), no attack may beat the honest notebook it starts from, the class must be
graded to the end, and nothing of a sandbox may be left on the host.
"""

from __future__ import annotations

import csv
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from autograder.classroom import fill, make_course, submit
from autograder.grading.notebook import grade_notebook
from tests.buggy.ch02_scaled_dot_product import BUGS
from tests.test_sandbox_grading import (
    ATTACKS,
    CONTROL,
    FULL,
    IN_PLACE,
    MAX_FILE_BYTES,
    REVIEW_ATTACKS,
    REVIEW_FAULTS,
    SYMLINKED,
    TERM,
    A,
    blank,
    grade_watched,
    grading_files,
    instructor_texts,
    link_to_solutions,
    zeros,
)

pytestmark = pytest.mark.slow

CLASS_SIZE = 60
MIN_CORRECT = 8
ATTACKERS = {
    **{s: (make, "zeros") for s, make in ATTACKS.items()},
    **{
        s: (make, {"honest_zeros": "zeros", "honest_softmax_in_place": f"buggy_{IN_PLACE.name}"}[baseline])
        for s, (make, baseline) in REVIEW_ATTACKS.items()
    },
}
BLANK = [f"blank_{i}" for i in range(1, 4)]
ZEROS = [f"zeros_{i}" for i in range(1, 3)]


def chosen_bugs(room: int) -> list:
    """At most ``room`` wrong answers, spread evenly over the list (so over every item), always with
    the in-place softmax (the honest notebook that an attack starts from)."""
    others = [bug for bug in BUGS if bug.name != IN_PLACE.name]
    if len(others) < room:
        return [IN_PLACE, *others]
    step = (len(others) - 1) / max(1, room - 2)
    return [IN_PLACE, *(others[round(i * step)] for i in range(room - 1))]


BUGGY = {
    f"buggy_{bug.name}": bug
    for bug in chosen_bugs(
        CLASS_SIZE - MIN_CORRECT - len(ATTACKERS) - len(REVIEW_FAULTS) - len(SYMLINKED) - len(BLANK) - len(ZEROS)
    )
}
CORRECT = [
    f"correct_{i:02d}"
    for i in range(
        1, CLASS_SIZE + 1 - len(BUGGY) - len(ATTACKERS) - len(REVIEW_FAULTS) - len(SYMLINKED) - len(BLANK) - len(ZEROS)
    )
]


@pytest.fixture(scope="module")
def load(tmp_path_factory):
    course = make_course(tmp_path_factory.mktemp("load"))
    for student in CORRECT:
        submit(course, student, A, fill(A))
    for student, bug in BUGGY.items():
        submit(course, student, A, fill(A, {bug.item: bug.code}))
    for student in BLANK:
        submit(course, student, A, blank())
    for student in ZEROS:
        submit(course, student, A, zeros())
    for student, (make, _) in {**ATTACKERS, **REVIEW_FAULTS}.items():
        submit(course, student, A, make())
    link_to_solutions(course)
    students = sorted(p.name for p in (course / "submitted").iterdir())
    assert len(students) == CLASS_SIZE, len(students)

    # What each wrong answer, and the zeros that attacks start from, score graded on their own (two
    # honest notebooks at a time, no attacker beside them).
    alone_notebooks = {"zeros": zeros(), **{s: fill(A, {bug.item: bug.code}) for s, bug in BUGGY.items()}}
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {s: pool.submit(grade_notebook, A, nb, release=TERM) for s, nb in alone_notebooks.items()}
        alone = {s: future.result().score for s, future in futures.items()}
    alone_seconds = time.monotonic() - started

    graded = grade_watched(course, jobs=2)
    graded.alone, graded.alone_seconds, graded.students = alone, alone_seconds, students
    return graded


def test_the_class_is_graded_to_the_end(load):
    course, results, _ = load
    assert sorted(results) == load.students
    assert [s for s, r in results.items() if r.score is None] == []
    with (course / "grades" / f"{A}.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert sorted(row["student"] for row in rows) == load.students
    assert all(row["score"] != "" for row in rows)


def test_correct_notebooks_get_full_marks(load):
    _, results, _ = load
    assert {s: results[s].score for s in CORRECT} == dict.fromkeys(CORRECT, FULL)


def test_blank_notebooks_score_nothing(load):
    _, results, _ = load
    assert {s: results[s].score for s in BLANK} == dict.fromkeys(BLANK, 0)


def test_each_wrong_answer_loses_exactly_what_it_loses_alone(load):
    _, results, _ = load
    got = {s: results[s].score for s in [*BUGGY, *ZEROS]}
    want = {**{s: load.alone[s] for s in BUGGY}, **dict.fromkeys(ZEROS, load.alone["zeros"])}
    assert got == want


def test_no_attack_beats_the_honest_notebook_it_starts_from(load):
    _, results, _ = load
    beaten = {
        s: (results[s].score, load.alone[baseline])
        for s, (_, baseline) in ATTACKERS.items()
        if results[s].score > load.alone[baseline]
    }
    assert beaten == {}


def test_faults_cost_only_their_own_answers(load):
    _, results, _ = load
    assert {s: results[s].score for s in REVIEW_FAULTS} == {s: want for s, (_, want) in REVIEW_FAULTS.items()}
    assert {s: results[s].score for s in SYMLINKED} == dict.fromkeys(SYMLINKED, 0)


def test_nothing_of_a_sandbox_is_left_behind(load):
    assert len(load.watch.started) >= CLASS_SIZE - len(SYMLINKED)
    assert load.leftovers == {"processes": [], "cgroups": [], "temporary folders": [], "sandbox folders": []}


def test_no_grading_file_is_over_5_mb_and_nothing_escapes_to_the_terminal(load):
    course, results, _ = load
    files = grading_files(course)
    assert [(str(p), p.stat().st_size) for p in files if p.stat().st_size > MAX_FILE_BYTES] == []
    texts = instructor_texts(course, results)
    assert {name: CONTROL.findall(text)[:5] for name, text in texts.items() if CONTROL.search(text)} == {}


def test_the_class_is_graded_in_a_few_minutes(load, capsys):
    course, results, seconds = load
    with capsys.disabled():
        print(
            f"\n{len(results)} notebooks graded (jobs=2) in {seconds:.0f} s; "
            f"the {len(load.alone)} notebooks graded alone first took {load.alone_seconds:.0f} s"
        )
    assert seconds < 1800, seconds
