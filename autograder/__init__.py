"""The course's autograder, whose own namespace is the API of the notebooks' test cells.

Its names are the checks (``checks/``), the input specs, :class:`Item` and :class:`Mistake` (``api/``): what a test
cell may name. The rest of the grader lives in folders named for whom they serve (ARCHITECTURE.md): ``calls/``, the
grader's side of a graded call; ``grading/``, ``sandbox/``, ``exchange/`` and ``nbgrader/``, grading a notebook
and a class; ``release/``, what students get; ``similarity/``; ``text/``; ``cli/``, the commands.

Test cells in the notebooks read ``from autograder import *`` and then one line
per property::

    item = Item("ch02_scaled_dot_product", "softmax", softmax)
    check_rows_sum_to_one(item, [array(4, 7)])
    check_matches_reference(item, [array(2, 3, 5)], {"axis": 1})
"""

from attention_course.tooling import lazy

_HOMES = {  # name -> the module that defines it; imported on first use, so that what needs none of
    # them (nbgrader's plugins, the command-line tools) does not import torch for nothing
    **dict.fromkeys(
        (
            "check_equals",
            "check_matches",
            "check_matches_reference",
            "check_matches_torch",
            "check_within_memory",
        ),
        "autograder.checks.values",
    ),
    **dict.fromkeys(
        (
            "check_causal",
            "check_ignores_masked",
            "check_masked_get_zero_weight",
            "check_masking_removes_keys",
            "check_rows_sum_to_one",
        ),
        "autograder.checks.attention",
    ),
    **dict.fromkeys(
        (
            "check_buffer",
            "check_dtype_follows_input",
            "check_finite",
            "check_inputs_unchanged",
            "check_output_device",
            "check_output_dtypes",
            "check_output_shapes",
            "check_raises",
            "check_returns_number",
        ),
        "autograder.checks.form",
    ),
    **dict.fromkeys(
        ("check_in_model", "check_incremental", "check_relative_positions"), "autograder.checks.generation"
    ),
    **dict.fromkeys(("check_choices",), "autograder.checks.questions"),
    **dict.fromkeys(
        (
            "check_accesses_in_bounds",
            "check_heads_not_repeated",
            "check_kernels_compute",
            "check_reads_inputs_in_place",
            "check_skips_hidden_blocks",
        ),
        "autograder.checks.kernels",
    ),
    **dict.fromkeys(("CheckFailed", "Item", "Mistake", "PartlyRight", "is_shape", "mistakes"), "autograder.api.items"),
    **dict.fromkeys(("attention_saved",), "autograder.api.derived"),
    **dict.fromkeys(
        (
            "array",
            "distributions",
            "fixture",
            "group",
            "literal",
            "loud_query",
            "made",
            "mask",
            "padded_tokens",
            "pattern",
            "repeated_tokens",
            "tensor",
            "tokens",
            "uniforms",
        ),
        "autograder.api.specs",
    ),
}


# Modules that test cells of earlier terms import by their old names (`from autograder import reference`): a
# released notebook of an earlier term still runs. `from autograder import *` gives none of them.
_MOVED = {name: f"autograder.api.{name}" for name in ("items", "specs", "scripted")} | {
    "reference": "autograder.release.reference"
}

__getattr__, __dir__ = lazy.exports(__name__, _HOMES, _MOVED)
__all__ = sorted(_HOMES)
