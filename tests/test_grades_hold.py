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

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
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


# Grades the notebooks named on its command line side by side, a thread each (as make grade does, two at a time), in
# a process of its own: its peak memory, its seconds, and each notebook's report in short.
GRADE_SIDE_BY_SIDE = """
import json, resource, sys, time
from concurrent.futures import ThreadPoolExecutor
from autograder.grading.notebook import grade_notebook

started = time.monotonic()
with ThreadPoolExecutor(max_workers=2) as threads:
    reports = list(threads.map(lambda path: grade_notebook("ch02_scaled_dot_product", path), sys.argv[1:]))
print(json.dumps({
    "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "seconds": time.monotonic() - started,
    "reports": [
        {"score": r.score, "seconds": r.seconds, "phases": r.phases, "notes": r.notes, "not_graded": r.not_graded,
         "failed": {g: t.message for g, t in r.tests.items() if not t.passed}}
        for r in reports
    ],
}))
"""


def graded_side_by_side(*paths) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", GRADE_SIDE_BY_SIDE, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=COURSE_ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_replies_that_cost_much_to_decode_are_refused_at_little_cost_to_the_grader(tmp_path, capsys):
    """Issue 68, finding 4. ch02: the worker's encoder replaced, so that every graded function replies with 7.8 MB of
    JSON, 600,000 empty sets (under the message limit), which the grader once decoded into 0.4 GB of objects, for
    minutes. Graded beside a right notebook, as make grade grades two at a time, each such reply is refused before
    it is decoded, as the student breaking the protocol, and says why; the attacker's graded functions score nothing;
    the grader's peak memory moves by less than a tenth from that of two right notebooks, the pair takes less longer
    than one notebook's time limit, the right one keeps full marks, and the decoding's seconds are in the attacker's
    report."""
    from autograder.grading.notebook import TOTAL_SECONDS
    from autograder.sandbox import wire

    assignment = "ch02_scaled_dot_product"
    right, bloated = tmp_path / "right.ipynb", tmp_path / "bloated.ipynb"
    nbformat.write(fill(assignment), str(right))
    nb = fill(assignment, attacks.BLOATED_REPLIES)
    nb.cells.insert(
        1 + next(i for i, c in enumerate(nb.cells) if notebooks.is_setup(c)), new_code_cell(attacks.BLOATED_ENCODER)
    )
    nbformat.write(nb, str(bloated))
    baseline = graded_side_by_side(right, right)
    attacked = graded_side_by_side(right, bloated)
    with capsys.disabled():
        print(
            f"\ntwo right notebooks: peak {baseline['peak'] / 2**20:.0f} MiB, {baseline['seconds']:.1f} s; "
            f"a right one beside the bloated replies: peak {attacked['peak'] / 2**20:.0f} MiB, "
            f"{attacked['seconds']:.1f} s (the attacker's {attacked['reports'][1]['seconds']:.1f} s, "
            f"{attacked['reports'][1]['phases'].get('decoding', 0):.3f} s of it decoding)"
        )
    neighbour, attacker = attacked["reports"]
    full = max(r["score"] for r in baseline["reports"])
    assert neighbour["score"] == full and not neighbour["failed"], neighbour
    assert not attacker["not_graded"], attacker
    too_many = f"more than {wire.MAX_VALUES:,} values"
    assert any(too_many in note for note in attacker["notes"]), attacker["notes"]
    assert {gid for item in attacks.BLOATED_REPLIES for gid in graded_tests(assignment)[item]} <= set(
        attacker["failed"]
    )
    assert attacked["peak"] < 1.1 * baseline["peak"], (attacked["peak"], baseline["peak"])
    assert attacked["seconds"] - baseline["seconds"] < TOTAL_SECONDS, (attacked["seconds"], baseline["seconds"])
    assert "decoding" in attacker["phases"] and attacker["phases"]["decoding"] < 5, attacker["phases"]


def test_hidden_inputs_written_into_a_shape_or_a_length_come_back_one_number_at_most(monkeypatch):
    """Issue 68, finding 6. ch02: answers that write their first argument's first entries into the dimensions of
    an empty array or tensor (which may have any), or into the length of a list. Every input the grader sends is
    recorded, and what the answers would write of it: no message of the graded notebook quotes more than one of
    those numbers, and each shape's message still says what is wrong (a number of dimensions, or a dimension, and
    the shape expected)."""
    import re

    import numpy as np
    import torch

    from autograder.sandbox import values

    assignment = "ch02_scaled_dot_product"
    written: set[int] = set()
    encode = values.encode

    def recording(value, *args, **kwargs):
        if isinstance(value, (np.ndarray, torch.Tensor)) and value.dtype != torch.bool and value.size != 0:
            written.update(attacks.leaked(value))
        return encode(value, *args, **kwargs)

    monkeypatch.setattr(values, "encode", recording)
    report = grade_notebook(assignment, fill(assignment, attacks.SHAPE_LEAK), release=term_before(assignment))
    assert not report.not_graded, report.not_graded
    failed = {gid: test.message for gid, test in report.tests.items() if not test.passed}
    items = ("softmax", "attention_numpy", "scaled_dot_product_attention")
    assert {gid for item in items for gid in graded_tests(assignment)[item]} <= set(failed), failed
    assert len(written) > 10, written
    for text in [*failed.values(), *report.notes]:
        quoted = {int(n) for n in re.findall(r"(?<![\d.,])\d{3}(?![\d.,])", text)} & written
        assert len(quoted) <= 1, (quoted, text)
    assert re.search(r"result has size 0 in dimension 0; expected \d+: \(", failed["test_softmax_values"]) or (
        "result has 3 dimensions; expected" in failed["test_softmax_values"]
    ), failed["test_softmax_values"]
    assert "it returned a list of " in failed["test_attention_numpy_general"], failed["test_attention_numpy_general"]


def test_a_state_dict_of_many_keys_is_refused_in_bounded_time():
    """ch06: a Transformer whose state_dict() holds 4,000 entries besides its own. Finding its parameters
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
