"""The course's autograder, whose own namespace is the API of the notebooks' test cells.

Its names are the checks, the input specs, :class:`Item` and :class:`Mistake` (the rest of the grader lives in its
subpackages: ``grading``, ``sandbox``, ``cli``; see ARCHITECTURE.md).

Test cells in the notebooks read ``from autograder import *`` and then one line
per property::

    item = Item("ch02_scaled_dot_product", "softmax", softmax)
    check_rows_sum_to_one(item, [array(4, 7)])
    check_matches_reference(item, [array(2, 3, 5)], {"axis": 1})
"""

from attention_course import lazy

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
        ("check_causal", "check_ignores_masked", "check_masked_get_zero_weight", "check_rows_sum_to_one"),
        "autograder.checks.attention",
    ),
    **dict.fromkeys(
        (
            "check_buffer",
            "check_dtype_follows_input",
            "check_finite",
            "check_inputs_unchanged",
            "check_output_device",
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
    **dict.fromkeys(("CheckFailed", "Item", "Mistake", "PartlyRight", "mistakes"), "autograder.items"),
    **dict.fromkeys(
        (
            "array",
            "distributions",
            "fixture",
            "group",
            "literal",
            "mask",
            "padded_tokens",
            "pattern",
            "repeated_tokens",
            "tensor",
            "tokens",
            "uniforms",
        ),
        "autograder.specs",
    ),
}


__getattr__, __dir__ = lazy.exports(__name__, _HOMES)
__all__ = sorted(_HOMES)
