"""Grades that hold: each item is graded on its own code, whatever the student's other code does.

While an item that uses other graded items is graded, the grader's stand-ins take their place
(:mod:`autograder.calls.standins`), so nothing the student's helpers do, or did before, changes the
item's verdict, and nothing is computed in the grader on sizes the student chose. Each test here is
an attack on the mechanism that this replaced (the grader re-ran the reference on the student's own
helpers and excused the item when that failed too), or on the stand-ins themselves.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from attention_course.notebooks import COURSE_ROOT
from autograder.grading.classroom import fill, solution_bodies
from autograder.grading.notebook import grade_notebook
from autograder.release import course
from tests import attacks

pytestmark = pytest.mark.slow


def term_before(assignment: str) -> course.Release:
    """A term in which the chapters before ``assignment`` are released, and it is not."""
    names = course.assignments()
    return course.Release("term", set(names[: names.index(assignment)]))


def graded_tests(assignment: str) -> dict[str, list[str]]:
    return __import__(f"tests.buggy.{assignment}", fromlist=["TESTS"]).TESTS


def at_the_end(nb, code: str):
    nb.cells.append(new_code_cell(code))
    return nb


# What each ARMED item must lose: every test of its values (a shape or an argument error it gets right aside).
ARMED_LOSES = {
    "ch02_scaled_dot_product": {"test_attention_numpy_example", "test_attention_numpy_general"},
    "ch03_multi_head": {"test_mha_shapes", "test_mha_matches_torch", "test_mha_mask"},
    "ch04_masking": {"test_decoder_mask"},
    "ch05_positional_encoding": {"test_positional_encoding", "test_positional_encoding_error"},
    "ch06_transformer": {"test_encoder_layer"},
    "ch07_efficient_attention": {"test_gqa_matches_torch", "test_gqa_cache", "test_gqa_mask"},
}


@pytest.mark.parametrize("assignment", list(attacks.ARMED))
def test_an_item_that_computes_nothing_scores_nothing_whatever_its_helpers_do(assignment):
    """The item arms a flag and raises (or returns what an armed helper would make the reference give); its
    helper misbehaves when armed. The item loses every test of its values; the helper, right on its own
    calls, keeps its points, and so does every other item."""
    nb = at_the_end(fill(assignment, attacks.ARMED[assignment]), attacks.DISARM)
    report = grade_notebook(assignment, nb, release=term_before(assignment))
    assert not report.not_graded, report.not_graded
    lost = {gid for gid, test in report.tests.items() if not test.passed}
    assert lost == ARMED_LOSES[assignment], {gid: report.tests[gid].message[:300] for gid in lost}
    assert lost <= set(graded_tests(assignment)[attacks.ARMED_ITEM[assignment]])


def test_helpers_that_return_huge_masks_cost_the_grader_nothing(tmp_path):
    """ch04: helpers that return a (40000, 1) and a (1, 40000) mask once the item has raised. The grader,
    in a process of its own, grades the notebook to the end within a fraction of the 1.6 GB that combining
    them would take, and the item scores nothing."""
    assignment = "ch04_masking"
    path = tmp_path / "huge.ipynb"
    nbformat.write(at_the_end(fill(assignment, attacks.HUGE_HELPERS), attacks.DISARM), str(path))
    program = (
        "import json, resource, sys\n"
        "from autograder.release import course\n"
        "from autograder.grading.notebook import grade_notebook\n"
        f"release = course.Release('term', {sorted(term_before(assignment).released)!r})\n"
        f"report = grade_notebook({assignment!r}, sys.argv[1], release=release)\n"
        "lost = sorted(g for g, t in report.tests.items() if not t.passed)\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
        "print(json.dumps({'lost': lost, 'peak': peak, 'not_graded': report.not_graded}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, str(path)], capture_output=True, text=True, timeout=600, cwd=COURSE_ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert not found["not_graded"], found
    assert found["lost"] == ["test_decoder_mask"], found
    # About 1.2 GB without the mask: torch, the references, and triton (80 MB), which torch._dynamo imports wherever
    # it is installed; combined, the mask alone would add 1.6 GB.
    assert found["peak"] < 1.4e9, f"the grader's process peaked at {found['peak'] / 1e9:.2f} GB"


def test_a_state_dict_of_many_keys_is_refused_in_bounded_time():
    """ch06: a Transformer whose state_dict() holds 20,000 entries besides its own. Finding its parameters
    is linear and refused past a few times the reference's count: its tests fail with a message that says
    why, the notebook is graded in bounded time, and the other items keep their points."""
    assignment = "ch06_transformer"
    code = solution_bodies(assignment)["Transformer"] + attacks.MANY_KEYS_TRANSFORMER
    started = time.monotonic()
    report = grade_notebook(assignment, fill(assignment, {"Transformer": code}), release=term_before(assignment))
    seconds = time.monotonic() - started
    lost = {gid for gid, test in report.tests.items() if not test.passed}
    assert lost and lost <= set(graded_tests(assignment)["Transformer"]), lost
    assert any("the grader reads at most" in report.tests[gid].message for gid in lost), report.tests
    assert seconds < 180, seconds


def test_a_stand_in_refuses_a_call_larger_than_the_solution_makes():
    """ch03: MultiHeadAttention that asks the stand-in for split_heads to split a (1, 30000, 16) tensor,
    far more than the assignment's solution passes on these inputs: the grader refuses before computing,
    the student's code gets an error that says so, and only that item loses points."""
    assignment = "ch03_multi_head"
    code = solution_bodies(assignment)["MultiHeadAttention"] + attacks.HUGE_STAND_IN_CALL
    report = grade_notebook(assignment, fill(assignment, {"MultiHeadAttention": code}), release=term_before(assignment))
    lost = {gid for gid, test in report.tests.items() if not test.passed}
    assert lost == set(graded_tests(assignment)["MultiHeadAttention"]) - {"test_mha_error"}, lost
    message = report.tests["test_mha_matches_torch"].message
    assert "stands in for yours" in message and "more than the" in message, message


def test_a_forged_stand_in_call_breaks_only_its_own_students_grading():
    """ch03: a thread that writes a stand-in's call into every pipe while the grader is not calling. The
    conversation with that sandbox ends as the student's failure; the grading goes on to the end."""
    assignment = "ch03_multi_head"
    nb = fill(assignment)
    nb.cells.insert(2, new_code_cell(attacks.FORGED_CALLBACK))
    report = grade_notebook(assignment, nb, release=term_before(assignment))
    assert not report.not_graded, report.not_graded
    assert any("protocol" in note or "malformed" in note for note in report.notes), report.notes
