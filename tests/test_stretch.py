"""The stretch problems' self-checks pass a right answer and fail wrong ones, in the notebook as students run it."""

from __future__ import annotations

import contextlib
import io

import pytest

from attention_course.tooling import notebooks
from autograder.release import course
from tests.stretch import STRETCHES

pytestmark = pytest.mark.slow  # each test runs a notebook's cells

UNGRADED = "ungraded"


def _namespace(assignment: str) -> dict:
    """What a student's kernel holds when the stretch problems start: every cell above them run, but the tests and
    the ungraded training (the reference solutions standing in for the student's answers)."""
    nb = notebooks.read(course.notebook_path(assignment, "solutions"))
    namespace: dict = {}
    for cell in nb.cells:
        if cell.get("id", "").startswith("stretch"):
            break
        if cell.cell_type != "code" or notebooks.is_test(cell) or UNGRADED in cell.metadata.get("tags", []):
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(cell.source, f"<{assignment} cell {cell.get('id')}>", "exec"), namespace)
    return namespace


def _cell(assignment: str, cell_id: str) -> str:
    nb = notebooks.read(course.notebook_path(assignment, "solutions"))
    (cell,) = [c for c in nb.cells if c.get("id") == cell_id]
    assert UNGRADED in cell.metadata.get("tags", []), f"{cell_id} must be tagged {UNGRADED}: grading skips it"
    return cell.source


def _check(stretch, code: str) -> str:
    namespace = _namespace(stretch.assignment)
    exec(code, namespace)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(_cell(stretch.assignment, f"{stretch.cell}-check"), namespace)
    return out.getvalue()


@pytest.mark.parametrize("stretch", STRETCHES, ids=lambda s: s.cell)
def test_the_self_check_passes_a_right_answer(stretch):
    assert "the self-check" in _check(stretch, stretch.right)  # "... pass(es) the self-check"


@pytest.mark.parametrize("stretch", STRETCHES, ids=lambda s: s.cell)
def test_the_self_check_says_an_unwritten_answer_is_optional(stretch):
    assert "not written yet" in _check(stretch, _cell(stretch.assignment, stretch.cell))


@pytest.mark.parametrize(
    "stretch,wrong", [(s, w) for s in STRETCHES for w in s.wrong], ids=lambda v: getattr(v, "cell", v)
)
def test_the_self_check_fails_a_wrong_answer(stretch, wrong):
    # an assertion of the self-check, or an error of the wrong code itself (a shape that does not fit)
    with pytest.raises((AssertionError, RuntimeError)):
        _check(stretch, stretch.wrong[wrong])


RENAMED_TRANSFORMER = """
class Renamed(Transformer):  # the contract names the decoder layers' submodules, not the model's list of them
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.decoder = self.decoder_layers
        del self.decoder_layers

    def decode(self, tgt_in, memory, tgt_mask=None, memory_mask=None):
        memory_mask = None if memory_mask is None else memory_mask[:, None, None, :]
        x = self.positions(self.tgt_embedding(tgt_in) * self.scale)
        for layer in self.decoder:
            x = layer(x, memory, tgt_mask, memory_mask)
        return self.generator(x)


Transformer = Renamed
"""


def test_the_encoder_decoder_cache_check_reads_only_the_names_the_contract_fixes():
    (stretch,) = [s for s in STRETCHES if s.cell == "stretch-kv-cache"]
    answer = RENAMED_TRANSFORMER + stretch.right.replace("model.decoder_layers", "model.decoder")
    assert "passes the self-check" in _check(stretch, answer)
