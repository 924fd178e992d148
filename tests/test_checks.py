"""The checks: each passes right work, fails wrong work, and explains the failure without the answer."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import re

import numpy as np
import pytest
import torch

from attention_course.solutions.ch03_multi_head import MultiHeadAttention, merge_heads, split_heads
from attention_course.solutions.ch04_masking import masked_softmax
from autograder import (
    CheckFailed,
    Item,
    Mistake,
    PartlyRight,
    array,
    check_causal,
    check_choices,
    check_dtype_follows_input,
    check_equals,
    check_finite,
    check_ignores_masked,
    check_in_model,
    check_inputs_unchanged,
    check_masked_get_zero_weight,
    check_masking_removes_keys,
    check_matches,
    check_matches_reference,
    check_matches_torch,
    check_output_dtypes,
    check_output_shapes,
    check_raises,
    check_relative_positions,
    check_returns_number,
    check_rows_sum_to_one,
    check_within_memory,
    literal,
    mask,
    mistakes,
    tensor,
    tokens,
)
from autograder.api import derived, items, specs
from autograder.api.options import CompareOptions, compares
from autograder.calls import attribution, diagnosis
from autograder.release import reference

A = "ch02_scaled_dot_product"
SDPA = "torch.nn.functional.scaled_dot_product_attention"


def good_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def good_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1)
    return weights @ v, weights


def unscaled_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1)
    return weights @ v, weights


def softmax_item(fn):
    return Item(A, "softmax", fn)


def sdpa_item(fn):
    return Item(A, "scaled_dot_product_attention", fn, outputs=("output", "weights"))


QKV = [tensor(2, 5, 4), tensor(2, 7, 4), tensor(2, 7, 6)]


def failure(check, *args, **kwargs) -> str:
    with pytest.raises(CheckFailed) as info:
        check(*args, **kwargs)
    return str(info.value)


def assert_well_formed(message: str, item: str, prop: str, shape: str):
    assert message.startswith(f"{item}: {prop} failed"), message
    assert shape in message, message
    assert "\n  hint: " in message, message
    assert "\n  problem: " in message, message


# --------------------------------------------------------------------------- each check, both ways


def test_output_shapes():
    check_output_shapes(sdpa_item(good_attention), QKV, shapes=[(2, 5, 6), (2, 5, 7)])
    msg = failure(
        check_output_shapes,
        sdpa_item(lambda q, k, v, mask=None: good_attention(q, k, v)[0]),
        QKV,
        shapes=[(2, 5, 6), (2, 5, 7)],
    )
    assert_well_formed(msg, "scaled_dot_product_attention", "output shapes", "(2, 5, 4)")
    assert "expected a tuple of 2: (output, weights)" in msg
    msg = failure(
        check_output_shapes,
        sdpa_item(lambda q, k, v: good_attention(q, k, v)[::-1]),
        QKV,
        shapes=[(2, 5, 6), (2, 5, 7)],
    )
    assert "output has size 7 in dimension 2; expected 6: (2, 5, 6)" in msg


HIDDEN_SIZES = (130, 141, 650)  # sizes an answer chose, as if written from a hidden input


def sizes_quoted(message: str) -> set[int]:
    return {int(n) for n in re.findall(r"(?<![\d.,])\d+(?![\d.,])", message.split("problem: ")[1])} & set(HIDDEN_SIZES)


@pytest.mark.parametrize(
    "returned,quoted",
    [
        (lambda: torch.empty(0, *HIDDEN_SIZES), "output has 4 dimensions; expected 3: (2, 5, 6)"),
        (lambda: torch.empty(0, *HIDDEN_SIZES[:2]), "output has size 0 in dimension 0; expected 2: (2, 5, 6)"),
        (lambda: torch.empty(HIDDEN_SIZES[0], 0, HIDDEN_SIZES[2]), "output has size 130 in dimension 0; expected 2"),
        (lambda: torch.empty(10**9, 0, 6), "output has size over 1000 in dimension 0; expected 2: (2, 5, 6)"),
    ],
    ids=["its dimensions", "an empty first dimension", "a first size", "a large size"],
)
def test_a_shape_is_quoted_by_its_number_of_dimensions_or_one_size_never_whole(returned, quoted):
    """Issue 68, finding 6: an empty tensor may have any shape, and an answer could write a hidden input into its
    dimensions. A failed check quotes the number of dimensions or the first size that differs, bounded, never the
    whole shape; in every check that quotes a shape, and in the grader's hidden tests as in a notebook's."""
    item = sdpa_item(lambda q, k, v, mask=None: (returned(), torch.empty(0)))
    for hidden in (False, True):
        with items.hidden_tests() if hidden else contextlib.nullcontext():
            messages = [
                failure(check_output_shapes, item, QKV, shapes=[(2, 5, 6), (2, 5, 7)]),
                failure(check_matches_reference, item, QKV),
                failure(check_equals, item, QKV, np.zeros((2, 5, 6)).tolist()),
                failure(check_matches, item, SDPA, QKV),
            ]
        for message in messages:
            assert quoted.split(":")[0].split(";")[0] in message, message
            assert len(sizes_quoted(message)) <= 1, message
        assert quoted in messages[0], messages[0]


def test_a_length_and_a_type_are_quoted_bounded():
    """Issue 68, finding 6: a returned list's length is quoted up to a bound, a type's name cut; the message still
    says what is wrong."""
    message = failure(check_output_shapes, sdpa_item(lambda q, k, v: [None] * 141), QKV, shapes=[(2, 5, 6)] * 2)
    assert "it returned a list of 141 values; expected a tuple of 2: (output, weights)" in message
    message = failure(check_output_shapes, sdpa_item(lambda q, k, v: [None] * 130_141_650), QKV, shapes=[(2,)] * 2)
    assert "it returned a list of over 1000 values; expected a tuple of 2" in message
    assert not sizes_quoted(message) and "130141650" not in message.replace(",", "")
    named = type("A" * 200, (), {})
    message = failure(
        check_returns_number, Item(A, "score_matrix_bytes", lambda *a: named()), [1, 2, 3, 4, 4], kind="int"
    )
    assert f"it returned a {'A' * 40}..., not an int" in message and "A" * 41 not in message


def test_a_wrong_shape_names_the_dimension_and_the_expected_shape_in_every_check_that_quotes_one():
    """Right work passes each check; a mask that does not broadcast, a missing dimension and a shape that changes
    with the input are named without the sizes returned."""
    check_masked_get_zero_weight(sdpa_item(good_attention), [*QKV, mask(2, 5, 7)], mask=3)
    wide = sdpa_item(lambda q, k, v, mask=None: (torch.zeros(2, 5, 6), torch.full((2, 5, 141), 1 / 141)))
    message = failure(check_masked_get_zero_weight, wide, [*QKV, mask(2, 5, 7)], mask=3)
    assert "weights has size 141 in dimension -1, which the mask (2, 5, 7) does not broadcast to" in message
    flat = sdpa_item(lambda q, k, v, mask=None: (torch.zeros(2, 5, 6), torch.tensor(1.0)))
    message = failure(check_rows_sum_to_one, flat, QKV, output="weights")
    assert "weights has 0 dimensions, so no dimension -1" in message
    written = Item(A, "softmax", lambda x: torch.zeros(2, 100 + int(abs(x).sum() * 1000) % 900))
    message = failure(check_causal, written, [tensor(2, 5, 4)], change=0)
    assert "result changes shape when the input changes: its dimension 1 is another" in message
    assert not re.search(r"\b[1-9]\d\d\b", message.split("problem: ")[1]), message


def test_matches_reference():
    check_matches_reference(sdpa_item(good_attention), QKV, seed=3)
    msg = failure(check_matches_reference, sdpa_item(unscaled_attention), QKV, seed=3, hint="divide by sqrt(d_k)")
    assert_well_formed(
        msg, "scaled_dot_product_attention", "agreement with the reference solution", "k=torch float32 (2, 7, 4)"
    )
    assert "output differs from the reference solution" in msg and "hint: divide by sqrt(d_k)" in msg


def test_a_near_miss_at_the_default_tolerances_gets_no_hint_of_a_mistake_it_does_not_show():
    """exp(s - logsumexp(s)) in float32 on rows near 1e4 is off by rounding (2.3e-5 against 1e-5): at the default
    tolerances its failure says what differs, not the check's hint (each row normalised on its own, which it is);
    a wrong formula, or a check that sets its own tolerances (it compares precision), keeps the check's hint."""

    def minus_log_sum_exp(scores, mask=None, dim=-1):
        scores = scores.masked_fill(~mask, float("-inf"))
        return torch.nan_to_num(torch.exp(scores - torch.logsumexp(scores, dim=dim, keepdim=True)), nan=0.0)

    def global_max(scores, mask=None, dim=-1):
        exps = torch.exp(scores.masked_fill(~mask, float("-inf")) - scores.max())
        return torch.nan_to_num(exps / exps.sum(dim=dim, keepdim=True), nan=0.0)

    rows = [tensor(4, 6, spread=1e4), mask(4, 6)]
    hint = "each row is normalised on its own, after subtracting its own largest score"
    item = Item("ch04_masking", "masked_softmax", minus_log_sum_exp)
    msg = failure(check_matches_reference, item, rows, seed=8, hint=hint)
    assert "the largest difference is 2.28e-05" in msg and hint not in msg, msg
    assert "within ten times the allowed difference" in msg and "rounding" in msg, msg
    check_matches_reference(item, rows, seed=8, rtol=1e-3)  # the notebook's tolerance there: float32's resolution
    msg = failure(check_matches_reference, item, rows, seed=8, rtol=1e-6, hint=hint)
    assert hint in msg, msg
    msg = failure(check_matches_reference, Item("ch04_masking", "masked_softmax", global_max), rows, seed=8, hint=hint)
    assert hint in msg, msg


def test_matches_builtin_with_renamed_keyword():
    check_matches(
        sdpa_item(good_attention),
        SDPA,
        QKV[:2] + [tensor(2, 7, 4)],
        {"mask": mask(2, 5, 7)},
        rename={"mask": "attn_mask"},
        output="output",
    )
    inverted = lambda q, k, v, mask=None: good_attention(q, k, v, ~mask)  # noqa: E731
    msg = failure(
        check_matches,
        sdpa_item(inverted),
        SDPA,
        QKV[:2] + [tensor(2, 7, 4)],
        {"mask": mask(2, 5, 7)},
        rename={"mask": "attn_mask"},
        output="output",
    )
    assert f"differs from {SDPA}" in msg


def test_equals_shows_a_visible_known_answer_and_the_value_returned_but_never_a_hidden_one():
    """A visible test's known answer is public (its cell prints it): in a notebook's kernel, where only visible
    tests run, and in the grader's run of a cell's visible lines, a failure shows it beside the value returned. In
    a hidden region (the grader's), no failure shows a known answer, nor the value returned beside it."""
    expected = [0.09003057317038046, 0.24472847105479767, 0.6652409557748219]
    check_equals(softmax_item(good_softmax), [literal([1.0, 2.0, 3.0])], expected=expected)
    wrong = softmax_item(lambda x, axis=-1: np.exp(x) / 3)
    visible = failure(check_equals, wrong, [literal([1.0, 2.0, 3.0])], expected=expected)
    assert_well_formed(visible, "softmax", "a known answer", "(3,)")
    assert "\n    returned: [0.9061, 2.463, 6.695]\n    the known answer: [0.09003, 0.2447, 0.6652]\n" in visible
    with items.hidden_tests():
        hidden = failure(check_equals, wrong, [literal([1.0, 2.0, 3.0])], expected=expected)
    assert_well_formed(hidden, "softmax", "a known answer", "(3,)")
    assert "\n    returned:" not in hidden and "\n    the known answer:" not in hidden
    for value in expected:
        assert f"{value:.3f}"[:5] not in hidden
    assert items.known_answers_shown()  # left as it was


def test_a_large_known_answer_is_shown_in_short_with_its_first_difference():
    expected = np.eye(5, dtype=bool)
    wrong = Item("ch04_masking", "causal_mask", lambda n: torch.ones(n, n, dtype=torch.bool).tril())
    message = failure(check_equals, wrong, [5], expected=expected.tolist())
    assert "differs from the known answer: 10 entries are True where they should be False" in message
    assert "returned: shape (5, 5), first entries (flattened) [True, False, False, False, False, True, ...]" in message
    assert (
        "the known answer: shape (5, 5), first entries (flattened) [True, False, False, False, False, False, ...]"
        in message
    )
    assert "first difference at index (1, 0): returned True, the known answer False" in message


OPTIONS = ("no mask", "causal", "padding of the keys")
ANSWERS = {"encoder": "padding of the keys", "decoder": "causal", "cross": "padding of the keys"}


def choice_item(answers: dict):
    """A multiple-choice answer as the question's test cell gives it: a one-hot vector over OPTIONS."""
    return Item(A, "mask_for", lambda situation: torch.tensor([answers[situation] == o for o in OPTIONS]))


def test_choices_earn_a_share_per_right_part_and_name_each_wrong_one():
    check_choices(choice_item(ANSWERS), "situation", ANSWERS, OPTIONS, ANSWERS, hint="h", form_hint="f")
    wrong = {**ANSWERS, "decoder": "no mask", "cross": "Padding of the keys"}
    with pytest.raises(PartlyRight) as raised:  # the visible tests (no answers): the form alone
        check_choices(choice_item(wrong), "situation", ANSWERS, OPTIONS, hint="h", form_hint="f")
    assert (raised.value.right, raised.value.total) == (2, 3) and "hint: f" in str(raised.value)
    with pytest.raises(PartlyRight) as raised:
        check_choices(choice_item(wrong), "situation", ANSWERS, OPTIONS, ANSWERS, hint="h", form_hint="f")
    assert (raised.value.right, raised.value.total) == (1, 3)
    message = str(raised.value)
    assert message.startswith("mask_for: 2 of 3 situations wrong, 1 right")
    assert "inputs: situation='decoder'\n    problem: the answer is another option\n    hint: h" in message
    assert "inputs: situation='cross'\n    problem: the answer is none of the options, as written there" in message
    assert "encoder" not in message and "causal" not in message  # neither the right parts nor an answer
    assert items.share(2.0, 1, 3) == 0.67 and items.share(2.0, 4, 6) == 1.33
    with pytest.raises(ValueError, match="answers must give one of the options"):
        check_choices(choice_item(ANSWERS), "situation", ["encoder"], OPTIONS, ANSWERS, hint="h", form_hint="f")


def test_rows_sum_to_one():
    check_rows_sum_to_one(softmax_item(good_softmax), [array(4, 6)], {"axis": 0}, dim=0)
    msg = failure(check_rows_sum_to_one, softmax_item(lambda x, axis=-1: np.exp(x)), [array(4, 6)])
    assert_well_formed(msg, "softmax", "result sum to one along dim -1", "x=numpy float64 (4, 6)")


def test_masked_keys_get_zero_weight():
    check_masked_get_zero_weight(sdpa_item(good_attention), QKV + [mask(2, 5, 7)], mask=3)
    zero_fill = lambda q, k, v, mask: good_attention(q, k, v)  # noqa: E731  (ignores the mask)
    msg = failure(check_masked_get_zero_weight, sdpa_item(zero_fill), QKV + [mask(2, 5, 7)], mask=3)
    assert_well_formed(msg, "scaled_dot_product_attention", "masked keys get zero weight", "mask=torch bool (2, 5, 7)")

    def after_softmax(q, k, v, mask):
        out, w = good_attention(q, k, v)
        w = w * mask
        return w @ v, w

    msg = failure(check_masked_get_zero_weight, sdpa_item(after_softmax), QKV + [mask(2, 5, 7)], mask=3)
    assert "sum to values between" in msg


def test_finite():
    check_finite(softmax_item(good_softmax), [literal([1000.0, 1001.0])])
    with np.errstate(over="ignore", invalid="ignore"):
        msg = failure(
            check_finite, softmax_item(lambda x, axis=-1: np.exp(x) / np.exp(x).sum()), [literal([1000.0, 1001.0])]
        )
    assert "contains NaN or inf" in msg


def test_inputs_unchanged():
    check_inputs_unchanged(softmax_item(good_softmax), [array(3, 4)])

    def in_place(x, axis=-1):
        x -= x.max(axis=axis, keepdims=True)
        return good_softmax(x, axis)

    msg = failure(check_inputs_unchanged, softmax_item(in_place), [array(3, 4)])
    assert "argument x was modified" in msg


def test_dtype_follows_input():
    f64 = [tensor(2, 3, 4, dtype="float64")] * 3
    check_dtype_follows_input(sdpa_item(good_attention), f64)
    msg = failure(
        check_dtype_follows_input, sdpa_item(lambda q, k, v: tuple(t.float() for t in good_attention(q, k, v))), f64
    )
    assert "has dtype torch.float32; the inputs have dtype torch.float64" in msg
    # outputs= checks those named alone (chapter 11: the output in the inputs' dtype, lse in float32)
    float_weights = sdpa_item(lambda q, k, v: (good_attention(q, k, v)[0], good_attention(q, k, v)[1].float()))
    check_dtype_follows_input(float_weights, f64, outputs=("output",))
    assert "has dtype torch.float32" in failure(check_dtype_follows_input, float_weights, f64)
    assert "has dtype torch.float32" in failure(check_dtype_follows_input, float_weights, f64, outputs=("weights",))


def test_output_dtypes_holds_each_named_output_to_the_dtype_the_contract_names():
    """Chapter 11's lse is float32 whatever the inputs' dtype: one allocated with q's dtype (float16, values within
    float16's tolerance) fails, named by the output and the two dtypes; bad arguments are refused by name."""
    half = [tensor(2, 3, 4, dtype="float16")] * 3

    def attention(q, k, v, lse_dtype=torch.float32):
        output, weights = good_attention(q.float(), k.float(), v.float())
        return output.to(q.dtype), weights.to(lse_dtype)

    check_output_dtypes(sdpa_item(attention), half, dtypes={"output": "float16", "weights": "float32"})
    msg = failure(
        check_output_dtypes,
        sdpa_item(lambda q, k, v: attention(q, k, v, lse_dtype=q.dtype)),
        half,
        dtypes={"weights": "float32"},
        hint="lse is float32",
    )
    assert_well_formed(msg, "scaled_dot_product_attention", "output dtypes", "q=torch float16 (2, 3, 4)")
    assert "weights has dtype float16; the assignment says float32" in msg and "hint: lse is float32" in msg
    for bad, error in [
        ({}, "dtypes must map"),
        ({"weights": "float"}, "not the name of a dtype"),
        ({"lse": "float32"}, "not one of the outputs"),
    ]:
        with pytest.raises(ValueError, match=error):
            check_output_dtypes(sdpa_item(attention), half, dtypes=bad)


def test_returns_number_takes_the_kinds_a_contract_names_and_names_the_type_returned():
    def count(n, per=4):
        return n * per

    sizes = {"n": 1000, "per": 4}
    counter = Item("ch08_training_fast", "flops_per_token", count)
    check_returns_number(counter, [], sizes, kind="int")
    check_returns_number(
        Item("ch08_training_fast", "flops_per_token", lambda n, per: np.int64(n * per)), [], sizes, kind="int"
    )
    check_returns_number(counter, [], sizes, kind="float")  # an int is a real number too
    check_returns_number(Item("ch08_training_fast", "mfu", lambda n, per: n / per), [], sizes, kind="float")
    for wrong, returned in [
        (lambda n, per: n * per / 1, "float"),  # right value, wrong type
        (lambda n, per: float(n * per), "float"),
        (lambda n, per: np.float64(n * per), "float64"),
        (lambda n, per: torch.tensor(n * per), "Tensor"),
        (lambda n, per: True, "bool"),
    ]:
        msg = failure(check_returns_number, Item("ch08_training_fast", "flops_per_token", wrong), [], sizes, kind="int")
        assert_well_formed(msg, "flops_per_token", "the result is an int", "")
        assert f"it returned a {returned}, not an int" in msg
        assert "4000" not in msg  # the type returned, never the value
    msg = failure(
        check_returns_number, Item("ch08_training_fast", "mfu", lambda n, per: "0.25"), [], sizes, kind="float"
    )
    assert "it returned a str, not a float" in msg
    with pytest.raises(ValueError, match="kind must be one of"):
        check_returns_number(counter, [], sizes, kind="integer")


def test_raises():
    def strict(x, n):
        if n <= 0:
            raise ValueError(f"n must be positive, got {n}")
        return x

    check_raises(Item(A, "strict", strict), [array(2), -1], mentions=("n",))
    msg = failure(check_raises, Item(A, "strict", lambda x, n: x), [array(2), -1])
    assert "it raised no error; expected ValueError" in msg
    msg = failure(check_raises, Item(A, "strict", strict), [array(2), -1], mentions=("num_heads",))
    assert "does not mention num_heads" in msg


# --------------------------------------------------------------------------- failures of the student's code


def test_not_implemented_and_exceptions_become_messages():
    def todo(x, axis=-1):
        raise NotImplementedError()

    msg = failure(check_rows_sum_to_one, softmax_item(todo), [array(3)])
    assert "it raised NotImplementedError" in msg and "write your implementation of softmax" in msg
    msg = failure(check_rows_sum_to_one, softmax_item(lambda x, axis=-1: x.nope), [array(3)])
    assert "it raised AttributeError" in msg


def test_a_students_error_is_quoted_to_the_first_line_of_its_message():
    """The student's error text is theirs to choose (code that records its arguments would print the hidden
    checks' inputs): a failed check quotes its type and the first line of its message, at most 200 characters,
    and says where it cut more; a real error's one line is quoted whole."""
    seen = []

    def recorder(x, axis=-1):
        seen.append(np.asarray(x).tolist())
        raise ValueError("inputs so far:\n" + "\n".join(map(repr, seen)))

    msg = failure(check_rows_sum_to_one, softmax_item(recorder), [array(3)])
    assert "it raised ValueError: inputs so far: [the rest of its message is not shown]" in msg
    assert repr(seen[0]) not in msg

    def wide(x, axis=-1):
        raise RuntimeError("x" * 1000)

    msg = failure(check_rows_sum_to_one, softmax_item(wide), [array(3)])
    assert (
        f"it raised RuntimeError: {'x' * (200 - len('RuntimeError: '))} [the rest of its message is not shown]" in msg
    )
    msg = failure(check_rows_sum_to_one, softmax_item(lambda x, axis=-1: x @ np.ones((4, 2))), [array(3)])
    assert "it raised ValueError: matmul: Input operand 1 has a mismatch in its core dimension 0" in msg
    assert "[the rest" not in msg

    class Unreadable(Exception):
        def __str__(self):
            raise RuntimeError("no")

    def unreadable(x, axis=-1):
        raise Unreadable()

    msg = failure(check_rows_sum_to_one, softmax_item(unreadable), [array(3)])
    assert "it raised Unreadable: (its message could not be read)" in msg


def test_an_error_on_an_input_of_fewer_dimensions_names_that_input_and_its_shape():
    """F.scaled_dot_product_attention raises IndexError on a mask of shape (Lk,), which the contract allows: the
    failure names that input and its shape (the check's own), and says to broadcast it; where every input has as
    many dimensions, the error alone."""

    def sdpa(q, k, v, mask=None):
        output = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return output, output

    heads = [tensor(2, 3, 5, 4), tensor(2, 3, 7, 4), tensor(2, 3, 7, 6)]
    msg = failure(check_matches_reference, sdpa_item(sdpa), [*heads, mask(7)], outputs=("output",))
    assert "it raised IndexError: Dimension out of range" in msg, msg
    assert "with mask of shape (7,), fewer dimensions than the other inputs" in msg and "broadcast" in msg, msg
    msg = failure(check_matches_reference, sdpa_item(lambda q, k, v, mask=None: q.nope), QKV)
    assert "it raised AttributeError" in msg and "fewer dimensions" not in msg, msg


def test_wrong_library_is_named():
    msg = failure(
        check_rows_sum_to_one, softmax_item(lambda x, axis=-1: torch.softmax(torch.from_numpy(x), -1)), [array(3)]
    )
    assert "is a torch tensor; this function works in NumPy" in msg
    msg = failure(check_rows_sum_to_one, softmax_item(lambda x, axis=-1: [0.5, 0.5]), [array(2)])
    assert "is a list, not a NumPy array" in msg


def test_not_callable():
    msg = failure(check_rows_sum_to_one, softmax_item(42), [array(3)])
    assert "softmax is int, not a function or class" in msg


# --------------------------------------------------------------------------- specs and the reference


def test_specs_are_plain_data_and_deterministic():
    import dataclasses
    import json

    spec = tensor(2, 3, scale=2.0)
    json.dumps(dataclasses.asdict(spec))
    (a,), _ = specs.materialize([spec], {}, seed=7)
    (b,), _ = specs.materialize([spec], {}, seed=7)
    (c,), _ = specs.materialize([spec], {}, seed=8)
    assert torch.equal(a, b) and not torch.equal(a, c) and a.dtype == torch.float32


@pytest.mark.parametrize("shape", [(3, 1), (2, 4, 5), (1, 1, 7)])
def test_random_mask_keeps_a_key_per_row_and_masks_something(shape):
    for seed in range(20):
        (m,), _ = specs.materialize([mask(*shape, keep=0.1)], {}, seed)
        assert m.dtype == torch.bool and m.any(-1).all()
        assert (~m).any() or shape[-1] == 1


def test_loud_query_is_the_literal_of_its_seeds_normals_with_the_last_query_louder():
    """Chapter 2's test cells give queries whose last one is 2000 times larger: the numbers that the helper
    they defined before made, whatever seed the check gets."""
    import autograder

    spec = specs.loud_query(2, 3, 5, 4, dtype="float64", seed=46)
    expected = np.random.default_rng(46).standard_normal((2, 3, 5, 4))
    expected[1, 2, 4] *= 2000.0  # the last query of the last head of the last batch entry
    assert spec == literal(expected.tolist(), dtype="float64", library="torch")
    (a,), _ = specs.materialize([spec], {}, seed=0)
    (b,), _ = specs.materialize([spec], {}, seed=1)
    assert torch.equal(a, b) and a.dtype == torch.float64
    norms = a.norm(dim=-1).flatten()
    assert norms[-1] > 200 * norms[:-1].max()
    assert specs.loud_query(3, 4, seed=5, loudness=10.0).make(None).dtype == torch.float32
    assert autograder.loud_query is specs.loud_query and "loud_query" in autograder.__all__


@pytest.mark.parametrize("causal", [False, True])
def test_attention_saved_gives_a_backward_pass_the_output_and_lse_of_its_own_inputs(causal):
    """Chapter 11's backward tests hand the kernels what the forward pass saved: the output and log-sum-exp of those
    very queries, keys and values (a random output would make Δ = rowsum(dO ∘ O) differ from its other correct
    forms), the same whatever the check's seed, and different for another seed of the spec."""
    import autograder

    spec = derived.attention_saved(2, 3, 20, 16, n_keys=24, causal=causal, seed=7)
    (q, k, v, output, lse, grad_output), _ = specs.materialize(spec, {}, seed=0)
    assert [tuple(t.shape) for t in (q, k, v, output, lse, grad_output)] == [
        (2, 3, 20, 16),
        (2, 3, 24, 16),
        (2, 3, 24, 16),
        (2, 3, 20, 16),
        (2, 3, 20),
        (2, 3, 20, 16),
    ]
    assert all(t.dtype == torch.float32 for t in (q, k, v, output, lse, grad_output))
    scores = q.double() @ k.double().transpose(-2, -1) / 4
    if causal:  # aligned bottom-right, as chapter 11's kernels: query i sees keys j <= i + 24 - 20
        scores = scores.masked_fill(~torch.ones(20, 24, dtype=torch.bool).tril(diagonal=4), float("-inf"))
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1).float())
    torch.testing.assert_close(output, (torch.softmax(scores, -1) @ v.double()).float())
    (again, *_), _ = specs.materialize(spec, {}, seed=1)
    assert torch.equal(again, q)
    other = derived.attention_saved(2, 3, 20, 16, n_keys=24, causal=causal, seed=8)
    assert not torch.equal(specs.materialize(other, {}, seed=0)[0][0], q)
    assert autograder.attention_saved is derived.attention_saved and "attention_saved" in autograder.__all__
    with pytest.raises(ValueError, match="shape"):
        derived.attention_saved(16, seed=0)
    half = derived.attention_saved(2, 20, 16, n_keys=24, causal=causal, seed=7, dtype="float16")
    (q, k, v, output, lse, grad_output), _ = specs.materialize(half, {}, seed=0)
    dtypes = [t.dtype for t in (q, k, v, output, lse, grad_output)]
    assert dtypes == [torch.float16] * 4 + [torch.float32, torch.float16]
    with pytest.raises(ValueError, match="bfloat16"):
        derived.attention_saved(2, 20, 16, seed=0, dtype="bfloat16")


def test_made_gives_back_the_spec_of_a_tensor_with_its_dtype_and_library():
    floats = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))
    keep = floats > 0
    assert specs.made(floats) == literal(floats.tolist(), dtype="float32", library="torch")
    assert specs.made(keep) == literal(keep.tolist(), dtype="bool", library="torch")
    assert torch.equal(specs.made(keep).make(None), keep)
    assert specs.made(np.arange(3)) == literal([0, 1, 2], dtype="int64")


def test_is_shape_is_true_of_tuples_of_python_ints_only():
    assert items.is_shape((2, 3, 4)) and items.is_shape(())
    assert not items.is_shape([2, 3]) and not items.is_shape((2, 3.0)) and not items.is_shape((np.int64(2),))
    assert not items.is_shape((torch.tensor(2), 3)) and not items.is_shape(None)


@pytest.mark.parametrize(
    "bad, error",
    [
        (lambda: tensor(2, -1), "non-negative ints"),
        (lambda: specs.Random((2,), library="jax"), "library must be one of"),
        (lambda: mask(), "last dimension of at least 1"),
        (lambda: specs.as_spec(object()), "must be specs"),
    ],
)
def test_bad_specs_are_refused_clearly(bad, error):
    with pytest.raises((ValueError, TypeError), match=error):
        bad()


def test_bad_check_options_are_refused():
    with pytest.raises(ValueError, match="output must be one of"):
        check_rows_sum_to_one(sdpa_item(good_attention), QKV, output="scores")
    with pytest.raises(ValueError, match="shapes lists 1 shapes for 2 outputs"):
        check_output_shapes(sdpa_item(good_attention), QKV, shapes=[(2, 5, 6)])


def test_reference_comes_from_the_solution_notebook():
    module = reference.load(A)
    for name in ("softmax", "attention_numpy", "scaled_dot_product_attention"):
        assert callable(getattr(module, name))
    with pytest.raises(reference.ReferenceUnavailable, match="defines no 'nothing'"):
        reference.get(A, "nothing")
    with pytest.raises(reference.ReferenceUnavailable, match="not available here"):
        reference.load("ch99_missing")


def test_reference_agrees_with_torch_and_the_worked_example():
    ref = reference.load(A)
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 9, 8), torch.randn(2, 3, 9, 4)
    m = torch.rand(2, 1, 5, 9) < 0.7
    m[..., 0] = True
    out, w = ref.scaled_dot_product_attention(q, k, v, m)
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m))
    assert torch.all(w.masked_select(~m.expand_as(w)) == 0)
    from attention_course import four_word_example

    words, wq, wk, wv = four_word_example()
    output, _ = ref.attention_numpy(words @ wq, words @ wk, words @ wv)
    printed = (
        "[[0.98522025 1.74174051 0.75652026]\n [0.90965265 1.40965265 0.5       ]\n"
        " [0.99851226 1.75849334 0.75998108]\n [0.99560386 1.90407309 0.90846923]]"
    )
    assert str(output) == printed


def test_reference_gives_zeros_for_a_fully_masked_row():
    ref = reference.load(A).scaled_dot_product_attention
    m = torch.ones(1, 3, 4, dtype=torch.bool)
    m[0, 1] = False
    out, w = ref(torch.randn(1, 3, 8), torch.randn(1, 4, 8), torch.randn(1, 4, 2), m)
    assert torch.isfinite(out).all() and torch.all(w[0, 1] == 0) and torch.all(out[0, 1] == 0)


def test_messages_name_parameters_from_the_signature():
    msg = failure(check_matches_reference, sdpa_item(unscaled_attention), QKV + [mask(2, 5, 7)])
    assert re.search(r"inputs: q=torch float32 \(2, 5, 4\), k=.*, v=.*, mask=torch bool \(2, 5, 7\)", msg)


# --------------------------------------------------------------------------- class items (modules)


class GoodAttention(torch.nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = torch.nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = torch.nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = torch.nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, query, keys, values, mask=None):
        scores = self.v(torch.tanh(self.W_q(query).unsqueeze(1) + self.W_k(keys))).squeeze(-1)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        return (weights.unsqueeze(1) @ values).squeeze(1), weights


class MisnamedAttention(GoodAttention):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__(query_dim, key_dim, hidden_dim)
        self.w = self.v
        del self.v

    def forward(self, query, keys, values, mask=None):
        self.v = self.w
        return super().forward(query, keys, values, mask)


def attention_item(cls):
    return Item("ch01_bahdanau", "AdditiveAttention", cls, outputs=("context", "weights"))


QKV_MODULE = [tensor(2, 8), tensor(2, 7, 6), tensor(2, 7, 5)]


def test_module_checks_build_load_reference_weights_and_call():
    check_matches_reference(attention_item(GoodAttention), QKV_MODULE, init=(8, 6, 4), seed=1)
    check_output_shapes(attention_item(GoodAttention), QKV_MODULE, init=(8, 6, 4), shapes=[(2, 5), (2, 7)])
    msg = failure(check_matches_reference, attention_item(MisnamedAttention), QKV_MODULE, init=(8, 6, 4))
    assert msg.startswith("AdditiveAttention(8, 6, 4): agreement with the reference solution failed")
    # The message names the contract's parameters that the module lacks, not the module's own extras.
    assert "it has no parameter v.weight" in msg and "give the submodules the names the assignment says" in msg
    assert "query=torch float32 (2, 8)" in msg


def test_module_checks_report_a_missing_method_and_a_failing_constructor():
    msg = failure(
        check_output_shapes,
        attention_item(GoodAttention),
        QKV_MODULE,
        init=(8, 6, 4),
        method="step",
        shapes=[(2, 5), (2, 7)],
    )
    assert "AdditiveAttention has no method step" in msg
    msg = failure(check_output_shapes, attention_item(GoodAttention), QKV_MODULE, init=(8, 6), shapes=[(2, 5), (2, 7)])
    assert "AdditiveAttention(8, 6) raised TypeError" in msg


# --------------------------------------------------------------------------- masks and torch.nn built-ins


def mha_item(cls):
    return Item("ch03_multi_head", "MultiHeadAttention", cls, outputs=("output", "weights"))


class UnscaledHeads(MultiHeadAttention):
    """Scores divided by sqrt(d_model) instead of sqrt(d_head)."""

    def forward(self, query, key, value, mask=None):
        q, k, v = (
            split_heads(w(x), self.num_heads) for w, x in ((self.W_q, query), (self.W_k, key), (self.W_v, value))
        )
        weights = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(query.size(-1)), mask)
        return self.W_o(merge_heads(weights @ v)), weights


def test_matches_torch_needs_no_reference_and_names_the_builtin(monkeypatch):
    def unavailable(assignment):  # as on a student's machine, where no chapter is released
        raise reference.ReferenceUnavailable(f"the reference solution of {assignment!r} is not available here")

    monkeypatch.setattr(reference, "load", unavailable)
    qkv = [tensor(2, 5, 16), tensor(2, 7, 16), tensor(2, 7, 16), mask(2, 1, 1, 7)]
    check_matches_torch(mha_item(MultiHeadAttention), "multihead_attention", qkv, init=(16, 4))
    check_matches_torch(mha_item(MultiHeadAttention), "multihead_attention", qkv[:3], init=(16, 4, False), seed=2)
    msg = failure(
        check_matches_torch,
        mha_item(UnscaledHeads),
        "multihead_attention",
        qkv,
        init=(16, 4),
        hint="scale by sqrt(d_head)",
    )
    assert_well_formed(
        msg, "MultiHeadAttention(16, 4)", "agreement with torch.nn.MultiheadAttention", "mask=torch bool (2, 1, 1, 7)"
    )
    assert "output differs from torch.nn.MultiheadAttention" in msg


def test_boolean_results_must_be_boolean_and_equal():
    item = Item("ch04_masking", "causal_mask", None)
    expected = [[True, False], [True, True]]
    check_equals(
        Item("ch04_masking", "causal_mask", lambda n: torch.ones(n, n, dtype=torch.bool).tril()), [2], expected
    )
    msg = failure(check_equals, Item("ch04_masking", "causal_mask", lambda n: torch.ones(n, n).tril()), [2], expected)
    assert "a numeric dtype; expected a boolean mask" in msg
    msg = failure(
        check_equals,
        Item("ch04_masking", "causal_mask", lambda n: torch.ones(n, n, dtype=torch.bool).triu()),
        [2],
        expected,
    )
    assert "1 entries are True where they should be False and 1 are False where they should be True, of 4" in msg
    assert item.name in msg


def test_padded_tokens_are_padded_at_the_end_with_the_pad_id():
    made = specs.padded_tokens(6, 9, high=12, pad_id=3).make(np.random.default_rng(0))
    real = made != 3
    assert made.dtype == torch.int64 and made.shape == (6, 9)
    assert real[:, 0].all() and not real.all()
    lengths = real.sum(1)
    assert torch.equal(real, torch.arange(9)[None, :] < lengths[:, None])  # no pad before a real token
    assert specs.padded_tokens(6, 9, high=12, pad_id=3).describe() == "torch int64 (6, 9) padded with 3"
    with pytest.raises(ValueError, match="at least two token ids"):
        specs.padded_tokens(2, 3, high=1)


# --------------------------------------------------------------------------- causality, padding, fixtures


class TinyTranslator(torch.nn.Module):
    """A model of the ch06 interface whose decode is causal (or not) and whose encoder masks padding (or not)."""

    def __init__(self, causal=True, masks_padding=True):
        super().__init__()
        torch.manual_seed(0)
        self.causal, self.masks_padding = causal, masks_padding
        self.embed = torch.nn.Embedding(20, 8)

    def forward(self, src, tgt_in, src_mask=None, tgt_mask=None):
        keep = src_mask if (self.masks_padding and src_mask is not None) else torch.ones_like(src, dtype=torch.bool)
        context = (self.embed(src) * keep[..., None]).sum(1, keepdim=True)  # (B, 1, 8)
        target = self.embed(tgt_in)
        mixed = target.cumsum(1) if self.causal else target.sum(1, keepdim=True).expand_as(target)
        return mixed + context


def translator_item(**options):
    return Item("ch06_transformer", "Transformer", lambda *a, **k: TinyTranslator(**options)(*a, **k))


TRANSLATOR_INPUTS = [tokens(2, 6, high=20), tokens(2, 5, high=20), mask(2, 6)]


def test_causal_passes_causal_models_and_names_the_leak():
    check_causal(translator_item(), TRANSLATOR_INPUTS, change=1)
    msg = failure(check_causal, translator_item(causal=False), TRANSLATOR_INPUTS, change=1, hint="use the mask")
    assert_well_formed(msg, "Transformer", "causality", "torch int64 (2, 5)")
    assert "(later positions) changed result[:, :1] (earlier positions)" in msg
    ignores = Item("ch06_transformer", "Transformer", lambda src, tgt_in, src_mask=None: torch.zeros(2, 5, 8))
    msg = failure(check_causal, ignores, TRANSLATOR_INPUTS, change=1)
    assert "does not change at all" in msg


def test_ignores_masked_passes_masking_models_and_fails_the_others():
    check_ignores_masked(translator_item(), TRANSLATOR_INPUTS, change=0, mask=2)
    msg = failure(check_ignores_masked, translator_item(masks_padding=False), TRANSLATOR_INPUTS, change=0, mask=2)
    assert_well_formed(msg, "Transformer", "masked positions have no influence", "torch bool (2, 6)")
    assert "where argument 3 is False changed result" in msg


def test_fixtures_cross_the_wire_as_name_and_arguments():
    from autograder.api import scripted
    from autograder.sandbox import values

    model = specs.fixture("ScriptedTranslator", 16, 1, 2).make(np.random.default_rng(0))
    sent = values.encode(model)
    assert sent == {
        "fixture": {"name": "ScriptedTranslator", "args": {"list": [{"int": "16"}, {"int": "1"}, {"int": "2"}]}}
    }
    rebuilt = values.decode(sent)
    assert isinstance(rebuilt, scripted.ScriptedTranslator) and rebuilt is not model
    with pytest.raises(ValueError, match="unknown fixture"):
        values.decode({"fixture": {"name": "os.system", "args": {"list": []}}})
    with pytest.raises(ValueError, match="unknown fixture"):
        specs.fixture("Nothing")


def test_in_a_check_the_grader_builds_only_the_fixtures_it_sent():
    """A fixture coming back from the sandbox is built in the grader only where the check being run sent it: one
    named with other arguments (a model of sizes the student chose) is refused before anything is built."""
    from autograder.api import scripted
    from autograder.sandbox import values

    huge = {"fixture": {"name": "AttentionOnly", "args": values.encode([50_000, 50_000, 4096, 64, 48, 0])}}
    with scripted.holding():
        sent = values.encode(specs.fixture("ScriptedTranslator", 16, 1, 2).make(np.random.default_rng(0)))
        assert isinstance(values.decode(sent), scripted.ScriptedTranslator)
        with pytest.raises(ValueError, match="did not hand over"):
            values.decode(huge)
        other = {"fixture": {"name": "ScriptedTranslator", "args": values.encode([17, 1, 2])}}
        with pytest.raises(ValueError, match="did not hand over"):
            values.decode(other)


def test_a_message_larger_than_a_pipe_arrives_whole_from_an_unbuffered_stream():
    """An unbuffered pipe hands over at most 64 KiB per read: the worker must keep reading."""
    import io

    from autograder.sandbox import wire

    class Trickle(io.RawIOBase):
        def __init__(self, data: bytes):
            self.data = data

        def read(self, size=-1):
            chunk, self.data = self.data[: min(size, 65536)], self.data[min(size, 65536) :]
            return chunk

    sent = io.BytesIO()
    message = {"call": "f", "args": [list(range(100_000))]}
    wire.send(sent, message)
    assert wire.receive(Trickle(sent.getvalue())) == message
    assert wire.receive(Trickle(sent.getvalue()[:-1])) is None  # a stream that ends early


def test_a_check_beside_the_students_own_helpers_says_what_it_cannot_tell():
    """Outside the grader (a notebook, make validate) no stand-in takes the helpers' place: the hint of a failing
    check of an item that uses them says that it ran with the student's own."""
    wrong = reference.variant("ch03_multi_head", "MultiHeadAttention", (("q.size(-1))", "query.size(-1))"),))
    uses = ("split_heads", "merge_heads")
    item = Item("ch03_multi_head", "MultiHeadAttention", wrong, outputs=("output", "weights"), uses=uses)
    msg = failure(check_matches_torch, item, "multihead_attention", [tensor(2, 5, 16)] * 3, init=(16, 4))
    assert "hint: MultiHeadAttention ran here with your own split_heads, merge_heads: if a test of those fails" in msg
    assert "If they all pass: " in msg, msg
    # its first line says what the number compares: graded, the same check runs with correct helpers
    assert msg.startswith(
        "MultiHeadAttention(16, 4) (run with your own split_heads, merge_heads): agreement with torch.nn"
    ), msg
    right = Item("ch03_multi_head", "MultiHeadAttention", MultiHeadAttention, outputs=("output", "weights"), uses=uses)
    check_matches_torch(right, "multihead_attention", [tensor(2, 5, 16)] * 3, init=(16, 4))


def test_a_failure_in_the_grader_says_it_ran_with_correct_helpers_and_an_item_without_helpers_says_nothing():
    """In the sandbox (an object the grader's session proxies), the stand-ins answer for the helpers: a failure's
    first line says so, once however many checks raise it; an item that uses no helper is not labelled."""

    class Proxied:
        __remote__ = True

    uses = ("split_heads", "merge_heads")
    graded = Item("ch03_multi_head", "MultiHeadAttention", Proxied(), uses=uses)
    failed = CheckFailed("MultiHeadAttention(16, 4)", "agreement", "query=...", "output differs", "a hint")
    once = attribution.labelled(failed, graded)
    assert str(once).startswith("MultiHeadAttention(16, 4) (graded with correct split_heads, merge_heads): agreement")
    assert str(attribution.labelled(once, graded)) == str(once)
    alone = Item("ch03_multi_head", "split_heads", Proxied())
    assert attribution.labelled(failed, alone) is failed


MHA_MASKED = [tensor(2, 3, 8), tensor(2, 4, 8), tensor(2, 4, 8)]  # with a mask of two queries that see no key
NO_KEY = literal(
    [
        [[[True, False, True, False], [False, False, False, False], [True, True, True, True]]],
        [[[False, False, False, False], [True, False, False, False], [False, True, False, True]]],
    ],
    library="torch",
)


def _mha(*replacements) -> Item:
    """MultiHeadAttention, the reference's, or with each (old, new) piece of its code replaced (its variant)."""
    cls = reference.variant("ch03_multi_head", "MultiHeadAttention", replacements) if replacements else None
    return Item("ch03_multi_head", "MultiHeadAttention", cls or MultiHeadAttention, outputs=("output", "weights"))


@pytest.mark.parametrize(
    "replacements",
    [(), (("math.sqrt(q.size(-1))", "math.sqrt(query.size(-1))"),), (("self.W_k(key)", "self.W_q(key)"),)],
    ids=["right", "scaled by sqrt(d_model)", "keys projected with W_q"],
)
def test_masking_as_removal_holds_for_a_module_whose_only_mistakes_mask_nothing(replacements):
    """The module compared with itself: a right one passes, and so does one whose scaling or projections are wrong
    (test_mha_matches_torch's mistakes), so that a mask's test cell does not cost them points again."""
    item = _mha(*replacements)
    check_masking_removes_keys(item, [*MHA_MASKED, NO_KEY], init=(8, 2), mask=3, seed=6)
    causal = literal(torch.ones(6, 6, dtype=torch.bool).tril().tolist(), library="torch")
    check_masking_removes_keys(item, [tensor(3, 6, 8)] * 3, {"mask": causal}, init=(8, 2), seed=4)
    padding = [tensor(2, 4, 12), tensor(2, 6, 12), tensor(2, 6, 12), mask(6)]
    check_masking_removes_keys(item, padding, init=(12, 2), mask=3)


@pytest.mark.parametrize(
    "replacements,problem",
    [
        ((("~mask", "mask"),), "a masked key gets weight up to"),
        (
            (('float("-inf")', "-1e9"), ("weights = weights.masked_fill(~mask, 0.0)", "weights = weights")),
            "a masked key gets weight up to",
        ),
        (
            (("weights = weights.masked_fill(~mask, 0.0)", "weights = weights"),),
            "with the mask applied, the outputs contain NaN or inf",
        ),
    ],
    ids=["mask read the wrong way round", "-1e9 alone", "NaN on a full mask"],
)
def test_masking_as_removal_fails_a_wrong_mask(replacements, problem):
    msg = failure(check_masking_removes_keys, _mha(*replacements), [*MHA_MASKED, NO_KEY], init=(8, 2), mask=3, seed=6)
    assert f"problem: {problem}" in msg, msg


def test_masking_as_removal_fails_weights_zeroed_after_the_softmax_and_refuses_a_mask_per_head():
    after = (('scores = scores.masked_fill(~mask, float("-inf"))', "scores = scores"),)  # zeroed after the softmax
    msg = failure(check_masking_removes_keys, _mha(*after), [*MHA_MASKED, mask(2, 1, 1, 4)], init=(8, 2), mask=3)
    assert "problem: output differs from those queries (of batch element" in msg, msg
    with pytest.raises(ValueError, match="a mask that is the same for every head"):
        check_masking_removes_keys(_mha(), [*MHA_MASKED, mask(2, 2, 3, 4)], init=(8, 2), mask=3)


def test_a_visible_check_names_a_mistake_only_where_the_term_releases_the_chapter(monkeypatch):
    """Outside the grader, a known mistake is named only where the chapter is released: the students' copies
    of an unreleased chapter hold no reference to recognise it with, and the instructor's checkout must say
    what they say."""
    scale = Mistake("the scores are divided by the square root of d_model", ("q.size(-1))", "query.size(-1))"))
    wrong = reference.variant("ch03_multi_head", "MultiHeadAttention", scale.replacements)
    item = Item("ch03_multi_head", "MultiHeadAttention", wrong, outputs=("output", "weights"), known=(scale,))
    inputs = [tensor(2, 5, 16)] * 3
    monkeypatch.setenv("RELEASED", "ch03_multi_head")
    assert scale.cause in failure(check_matches_torch, item, "multihead_attention", inputs, init=(16, 4))
    monkeypatch.setenv("RELEASED", "ch01_bahdanau ch02_scaled_dot_product")
    msg = failure(check_matches_torch, item, "multihead_attention", inputs, init=(16, 4))
    assert scale.cause not in msg and "name the submodules" in msg, msg


def test_known_mistakes_come_as_data_a_notebooks_record_holds(monkeypatch):
    """An item's first test cell declares its known mistakes (``mistakes``) into the record of the notebook
    being run; its later cells, which build the Item again, find them there, and a check names the one that
    explains a failure. The record is data: each notebook graded, or test, has its own."""
    monkeypatch.setenv("RELEASED", "ch03_multi_head")
    scale = Mistake("the scores are divided by the square root of d_model", ("q.size(-1))", "query.size(-1))"))
    wrong = reference.variant("ch03_multi_head", "MultiHeadAttention", scale.replacements)

    def item():
        return Item("ch03_multi_head", "MultiHeadAttention", wrong, outputs=("output", "weights"))

    inputs = [tensor(2, 5, 16)] * 3
    with items.known_mistakes(items.KnownMistakes()) as record:
        assert mistakes(item(), scale).known == (scale,)
        assert record.of(item()) == (scale,)
        assert scale.cause in failure(check_matches_torch, item(), "multihead_attention", inputs, init=(16, 4))
        with items.known_mistakes() as other:  # another notebook's record knows none of them
            assert other.of(item()) == ()
            assert scale.cause not in failure(check_matches_torch, item(), "multihead_attention", inputs, init=(16, 4))
    assert items.current_record().of(item()) == ()  # nothing left behind for other tests
    arguments = {"args": inputs, "init": (16, 4), "seed": 0}
    assert diagnosis.cause(item(), arguments, (scale,)) == scale.cause
    assert diagnosis.cause(item(), arguments, ()) is None
    right = Item("ch03_multi_head", "MultiHeadAttention", MultiHeadAttention, outputs=("output", "weights"))
    assert diagnosis.cause(right, arguments, (scale,)) is None  # it explains no failure of a right answer


UNSCALED = Mistake("the scores are not divided by the square root of d_k", ("/ math.sqrt(d_k)", ""))
BROKEN = Mistake("a mistake whose code the reference no longer holds", ("/ math.sqrt(q.size(-1))", ""))
RIGHT_HINT = "compare your steps with the formula in the assignment"  # check_matches_reference's own


def test_a_known_mistake_that_cannot_be_built_raises_in_a_test_and_costs_nothing_graded(monkeypatch):
    """A known mistake whose variant cannot be built is the course's to mend: in a notebook's kernel or a test
    (a strict record) it raises, naming the mistake, where it is declared and where a failure is diagnosed;
    graded, it is left out: a failure it cannot explain keeps the check's own hint, a right answer passes, and
    the mistakes that can be built are named still. A student's code that cannot be replayed explains nothing."""
    monkeypatch.setenv("RELEASED", A)
    with pytest.raises(items.BrokenMistake, match="'a mistake whose code the reference no longer holds' cannot be"):
        mistakes(sdpa_item(unscaled_attention), UNSCALED, BROKEN)
    unscaled = Item(A, "scaled_dot_product_attention", unscaled_attention, outputs=("output", "weights"))
    known = dataclasses.replace(unscaled, known=(BROKEN, UNSCALED))
    with pytest.raises(items.BrokenMistake, match="cannot be built: ValueError: .* is not in the reference"):
        check_matches_reference(known, QKV)

    def raising(q, k, v, mask=None):
        raise RuntimeError("not written yet")

    assert "RuntimeError" in failure(check_matches_reference, dataclasses.replace(known, obj=raising), QKV)
    with items.known_mistakes() as record:  # the grader's
        item = mistakes(sdpa_item(unscaled_attention), BROKEN, UNSCALED)
        assert item.known == (UNSCALED,) and [str(b) for b in record.broken] == [
            f"{A}/scaled_dot_product_attention: the known mistake {BROKEN.cause!r} cannot be built: ValueError: "
            f"{A}/scaled_dot_product_attention: {BROKEN.replacements[0][0]!r} is not in the reference solution"
        ]
        assert UNSCALED.cause in failure(check_matches_reference, item, QKV)
        assert f"hint: {RIGHT_HINT}" in failure(
            check_matches_reference, dataclasses.replace(known, known=(BROKEN,)), QKV
        )
        assert UNSCALED.cause in failure(check_matches_reference, known, QKV)
        check_matches_reference(mistakes(sdpa_item(good_attention), BROKEN), QKV)
        assert len(record.broken) == 1  # each broken mistake once


def test_mistakes_also_makes_one_replacement_after_each_mistakes_own():
    """``mistakes(..., also=(old, new))``: every mistake's variant makes it too, after its own (the answer put in
    the form the checks compare); the causes are the mistakes' own."""
    wrapped = ("return weights @ v, weights", "return (weights @ v).double(), weights.double()")
    item = mistakes(sdpa_item(unscaled_attention), UNSCALED, also=wrapped)
    assert [(m.cause, m.replacements) for m in item.known] == [(UNSCALED.cause, (*UNSCALED.replacements, wrapped))]
    output, weights = items.variant(item, item.known[0])(*specs.materialize([*QKV], {}, 0)[0])
    assert output.dtype == weights.dtype == torch.float64
    assert mistakes(sdpa_item(unscaled_attention), UNSCALED).known[0] is UNSCALED


def test_checks_take_the_comparison_options_declared_once():
    """Each check lists the comparison options it takes in its signature, with its own defaults (else
    CompareOptions'), and the diagnosis of its failure reads the same ones."""
    reference_options = inspect.signature(check_matches_reference).parameters
    assert [reference_options[name].default for name in ("outputs", "rtol", "atol")] == [None, 1e-5, 1e-6]
    assert reference_options["hint"].default == RIGHT_HINT
    assert inspect.signature(check_equals).parameters["atol"].default == 1e-8
    assert inspect.signature(check_masked_get_zero_weight).parameters["output"].default == "weights"
    assert "rtol" not in inspect.signature(check_causal).parameters
    assert CompareOptions.of({"atol": 1e-3, "seed": 1, "args": []}) == CompareOptions(atol=1e-3)
    with pytest.raises(ValueError, match="no comparison options"):
        compares("rtl", hint="")


def test_a_failed_check_shows_its_whole_message_in_lines_a_hubs_validate_does_not_cut():
    """Jupyter shows a CheckFailed as its message alone (IPython's _render_traceback_), wrapped so that
    `nbgrader validate`, which cuts lines at 87 characters, keeps every word of the hint."""
    hint = "keys where the mask is False must get exactly zero weight and the visible keys all of it " * 3
    failed = CheckFailed("scaled_dot_product_attention", "masked keys get zero weight", "q=(2, 5, 8), " * 12, "x", hint)
    shown = failed._render_traceback_()
    assert shown[0] == "CheckFailed: scaled_dot_product_attention: masked keys get zero weight failed"
    assert all(len(line) <= 80 for line in shown), shown
    assert " ".join(" ".join(shown).split()) == " ".join(f"CheckFailed: {failed}".split())
    assert any(line.startswith("  hint: keys where") for line in shown)


# --------------------------------------------------------------------------- rotary attention with a cache

ROTARY = "RotaryGroupedQueryAttention"
ROTATE_K = "k = apply_rotary(split_heads(self.W_k(x), self.num_kv_heads), positions, self.base)"
KEYS_NOT_ROTATED = ((ROTATE_K, "k = split_heads(self.W_k(x), self.num_kv_heads)"),)
FROM_ZERO = (("past = 0 if cache is None else cache[0].size(2)", "past = 0"),)


def rotary_item(obj) -> Item:
    return Item("ch07_efficient_attention", ROTARY, obj, outputs=("output", "cache"))


def test_check_relative_positions_passes_rotary_attention_and_fails_what_misses_the_distances():
    right = reference.get("ch07_efficient_attention", ROTARY)
    check_relative_positions(rotary_item(right), tensor(2, 6, 16), init=(16, 4, 2), offset=5)
    wrong = reference.variant("ch07_efficient_attention", ROTARY, KEYS_NOT_ROTATED)
    message = failure(check_relative_positions, rotary_item(wrong), tensor(2, 6, 16), init=(16, 4, 2), offset=5)
    assert_well_formed(message, f"{ROTARY}(16, 4, 2)", "attention by the distance between positions", "(2, 6, 16)")
    assert "5 places further on" in message
    # Grouped-query attention without positions passes the first half (it sees no position at all), not the second.
    blind = reference.get("ch07_efficient_attention", "GroupedQueryAttention")
    message = failure(check_relative_positions, rotary_item(blind), tensor(2, 6, 16), init=(16, 4, 2))
    assert "does not see where its positions are" in message


def test_check_in_model_compares_a_llama_family_models_logits_step_by_step():
    right = reference.get("ch07_efficient_attention", ROTARY)
    check_in_model(rotary_item(right), tensor(2, 5, 32), init=(32, 4, 2), layers=2, new_tokens=4)
    wrong = reference.variant("ch07_efficient_attention", ROTARY, FROM_ZERO)
    message = failure(check_in_model, rotary_item(wrong), tensor(2, 5, 32), init=(32, 4, 2), layers=2, new_tokens=4)
    # Numbering from 0 is right for the prompt, which has no cache: the first generated token shows it.
    assert "the logits of generated token 1 (with the cache) differs from the original model" in message


def test_check_in_model_refuses_what_comes_back_in_the_wrong_shape_before_using_it():
    right = reference.get("ch07_efficient_attention", ROTARY)

    class Repeated(right):  # the cache holds the repeated heads: 4 of them, not 2
        def forward(self, x, mask=None, cache=None):
            output, (k, v) = super().forward(x, mask, None if cache is None else (cache[0][:, ::2], cache[1][:, ::2]))
            return output, (k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1))

    message = failure(check_in_model, rotary_item(Repeated), tensor(1, 3, 16), init=(16, 4, 2), new_tokens=2)
    assert "in layer 0, after 0 cached positions, the keys tensor it returned has size 4 in dimension 1" in message
    assert "expected a float tensor with 2: (1, 2, 3, 4)" in message


def test_sets_cross_the_wire_as_sets():
    """An answer given as a set of pairs (the prompts ask for a list) reaches the checks as a set."""
    from autograder.sandbox import values
    from autograder.sandbox.wire import WireError

    for value in ({(0, 1), (2, 3)}, frozenset({1, 2}), set(), {"a": {1.5}}):
        back = values.decode(values.encode(value))
        assert back == value and type(back) is type(value)
    with pytest.raises(WireError, match="hashed"):
        values.decode({"set": [{"list": []}]})


SECRET = "h" * 300  # what a forged value says where a message could quote it


@pytest.mark.parametrize(
    "data,error",
    [
        ({"list": [{"set": []}] * 70_000}, "more than 65,536 values"),
        ({"tensor": {"dtype": "float32", "shape": [0, 10**12], "data": ""}}, "other dimensions describe more than"),
        ({"tensor": {"dtype": "float32", "shape": [0, 2**31, 2**31], "data": ""}}, "other dimensions describe more"),
        ({"ndarray": {"dtype": "float64", "shape": [2**31, 2**31], "data": ""}}, "does not hold what its shape"),
        ({"tensor": {"dtype": "float32", "shape": [10**400], "data": ""}}, "at most 32 sizes"),
        ({"tensor": {"dtype": "float32", "shape": [1] * 33, "data": "AAAAAA=="}}, "at most 32 sizes"),
        ({"tensor": {"dtype": "float32", "shape": [-1], "data": ""}}, "at most 32 sizes"),
        ({"tensor": {"dtype": "float32", "shape": ["2"], "data": "AAAAAAAAAAA="}}, "at most 32 sizes"),
        ({"tensor": {"dtype": "float32", "shape": [2], "data": "AAAAAAAAAAAAAAAA"}}, "does not hold what its shape"),
        ({"tensor": {"dtype": "float32", "shape": [2], "data": "AAAAAAAAAA!="}}, "not base64"),
        ({"tensor": {"dtype": "float32", "shape": [2**62, 2**62], "device": "meta", "data": ""}}, "too many elements"),
        ({"tensor": {"dtype": SECRET, "shape": [2], "data": ""}}, "malformed tensor"),
        ({SECRET: 1}, "an unknown kind of value"),
        ({"device": SECRET}, "an unknown device"),
        ({"dtype": SECRET}, "an unknown dtype"),
        ({"int": SECRET}, "malformed int"),
        ({"float": {"a": 1}}, "malformed float"),
        ({"list": {"a": 1}}, "malformed list"),
        ({"dict": [1, 2]}, "malformed dict"),
    ],
)
def test_decoding_makes_no_more_than_its_data_holds_and_quotes_nothing_of_it(data, error):
    """Issue 68: a value decoded makes at most 65,536 values, and an array only of the bytes its data holds; an
    empty one (which holds none) describes at most 8 MiB with its other dimensions, so that a tiny message cannot
    make an operation over its empty dimension allocate a huge array. What is refused says why, in words of the
    grader's, never quoting what it was given."""
    from autograder.sandbox import values
    from autograder.sandbox.wire import WireError

    with pytest.raises(WireError, match=error) as refused:
        values.decode(data)
    assert SECRET[:20] not in str(refused.value) and len(str(refused.value)) < 120


def test_arrays_cross_the_wire_whole_and_empty_ones_within_their_bound():
    """What the encoder makes is decoded to what it was: arrays and tensors of every dtype, scalars, empty ones,
    meta tensors of any shape; an empty array whose other dimensions describe up to 8 MiB still crosses."""
    from autograder.sandbox import values

    for value in (
        torch.arange(12, dtype=torch.float32).reshape(3, 4),
        torch.ones(2, 3, dtype=torch.bfloat16),
        torch.tensor(7),
        torch.zeros(0, 1024, 2048),  # 8 MiB described, none held
        torch.empty(2**40, 2**20, device="meta"),
        np.arange(6, dtype=np.int16).reshape(2, 3),
        np.float32(2.5),
        np.zeros((4, 0), dtype=bool),
    ):
        back = values.decode(values.encode(value))
        assert type(back) is type(value), (type(back), type(value))
        assert back.shape == value.shape and back.dtype == value.dtype
        if isinstance(value, torch.Tensor) and not value.is_meta:
            assert torch.equal(back, value)
        elif isinstance(value, (np.ndarray, np.generic)):
            assert np.array_equal(back, value)


def test_a_value_failure_within_memory_is_diagnosed_on_the_queries_compared(monkeypatch):
    """check_within_memory compares a long call's values at a sample of its queries: a failure there is
    diagnosed by replaying the call on that sample (the whole call made again for each known mistake would
    cost minutes), and still names the mistake; a call that fails outright is not diagnosed at all."""
    monkeypatch.setenv("RELEASED", "ch07_efficient_attention")
    assignment, name = "ch07_efficient_attention", "online_softmax_attention"
    unscaled = Mistake(
        "the scores are not divided by the square root of dk", ("q = q * (1.0 / math.sqrt(q.size(-1)))", "q = q * 1.0")
    )
    wrong = reference.variant(assignment, name, unscaled.replacements)
    lengths = []

    def watched(q, k, v, block_size, mask=None):
        lengths.append(q.shape[-2])
        return wrong(q, k, v, block_size, mask)

    item = Item(assignment, name, watched, known=(unscaled,))
    inputs = [tensor(2, 512, 4), tensor(2, 300, 4), tensor(2, 300, 3), 64]
    msg = failure(check_within_memory, item, inputs, budget_mb=64, rows=16, seed=1, rtol=1e-4, atol=1e-5)
    assert unscaled.cause in msg, msg
    assert lengths[0] == 512 and lengths[1:] == [16], lengths  # the call, then its replay on the 16 queries
    right = Item(assignment, name, reference.get(assignment, name), known=(unscaled,))
    check_within_memory(right, inputs, budget_mb=64, rows=16, seed=1, rtol=1e-4, atol=1e-5)

    def failing(q, k, v, block_size, mask=None):
        lengths.append(q.shape[-2])
        raise MemoryError("out of memory")

    lengths.clear()
    msg = failure(check_within_memory, Item(assignment, name, failing, known=(unscaled,)), inputs, budget_mb=64)
    assert "with 64 MiB of memory to spare" in msg and unscaled.cause not in msg, msg
    assert lengths == [512], lengths  # never made again


def test_a_mistakes_values_are_computed_once_a_process_and_a_notebooks_diagnosis_has_a_budget(monkeypatch):
    """What a known mistake gives on a check's inputs is the same for every notebook of a class: it is computed
    once and kept, so a class of answers wrong in the same checks pays for it once. A notebook that has spent its
    budget of naming causes keeps the checks' own hints; a call whose inputs differ in their data is kept apart."""
    monkeypatch.setenv("RELEASED", A)
    runs = []
    real = reference.variant

    def counted(*args, **kwargs):
        made = real(*args, **kwargs)

        def variant(*inputs, **keywords):
            runs.append(1)
            return made(*inputs, **keywords)

        return variant

    monkeypatch.setattr(reference, "variant", counted)
    monkeypatch.setattr(diagnosis, "_VALUES", type(diagnosis._VALUES)())
    item = sdpa_item(unscaled_attention)
    arguments = {"args": QKV, "seed": 0}
    with items.known_mistakes():
        assert diagnosis.cause(item, arguments, (UNSCALED,)) == UNSCALED.cause
    with items.known_mistakes():  # another notebook: the mistake's values are kept, not computed again
        assert diagnosis.cause(item, arguments, (UNSCALED,)) == UNSCALED.cause
    assert len(runs) == 1
    with items.known_mistakes():  # other data under the same spec: computed, not read from another's
        other = {"args": [specs.made(torch.randn(2, 5, 4)), *QKV[1:]], "seed": 0}
        diagnosis.cause(item, other, (UNSCALED,))
        diagnosis.cause(item, {"args": [specs.made(torch.randn(2, 5, 4)), *QKV[1:]], "seed": 0}, (UNSCALED,))
    assert len(runs) == 3
    with items.known_mistakes() as spent:
        spent.seconds = diagnosis.SECONDS_PER_NOTEBOOK + 1
        assert diagnosis.cause(item, {"args": QKV, "seed": 1}, (UNSCALED,)) is None
    assert len(runs) == 3


def test_a_mistakes_values_computing_in_one_thread_are_waited_for_by_another_and_a_failure_is_kept_too(monkeypatch):
    """Notebooks graded side by side fail the same checks at the same time: a value that one thread is computing is
    waited for by the other, not computed twice; a computation that raised raises again without running again (the
    same code on the same inputs), and a key of None is computed every time."""
    import threading

    monkeypatch.setattr(diagnosis, "_VALUES", type(diagnosis._VALUES)())
    runs, started, release = [], threading.Event(), threading.Event()

    def slow():
        runs.append("slow")
        started.set()
        release.wait(5)
        return {"output": torch.ones(2)}

    got = []
    first = threading.Thread(target=lambda: got.append(diagnosis._kept(("key", "mistake"), slow)))
    first.start()
    assert started.wait(5)
    second = threading.Thread(target=lambda: got.append(diagnosis._kept(("key", "mistake"), slow)))
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waiting for the first, not computing
    release.set()
    first.join(5)
    second.join(5)
    assert runs == ["slow"] and len(got) == 2 and all(torch.equal(x["output"], torch.ones(2)) for x in got)

    def failing():
        runs.append("failing")
        raise RuntimeError("two dtypes")

    for _ in range(2):
        with pytest.raises(Exception, match="two dtypes"):
            diagnosis._kept(("key", "broken mistake"), failing)
    assert runs == ["slow", "failing"]
    diagnosis._kept((None, "mistake"), lambda: runs.append("unkeyed"))
    diagnosis._kept((None, "mistake"), lambda: runs.append("unkeyed"))
    assert runs.count("unkeyed") == 2


def test_checks_of_one_notebook_share_a_call_on_the_same_inputs_and_each_judges_its_own_output():
    from autograder.calls.shared import shared_calls

    calls = []

    def counted(q, k, v, mask=None):
        calls.append(q.shape)
        output, weights = good_attention(q, k, v, mask)
        return output, weights * 2  # right output, wrong weights

    item = sdpa_item(counted)
    other = "torch.nn.functional.scaled_dot_product_attention"
    with shared_calls():
        check_matches(item, other, QKV, output="output", seed=3)
        check_finite(item, QKV, seed=3)
        assert "weights" in failure(check_matches_reference, item, QKV, outputs=("weights",), seed=3)
        assert len(calls) == 1  # one call read by three checks: the one that reads the wrong output fails
        check_matches(item, other, QKV, output="output", seed=4)  # another seed, another call
        check_matches(item, other, [tensor(2, 5, 4), tensor(2, 6, 4), tensor(2, 6, 6)], output="output", seed=3)
        assert len(calls) == 3
        check_matches(sdpa_item(counted), other, QKV, output="output", seed=3)  # the same function, built again
        assert len(calls) == 3
        check_matches(sdpa_item(lambda *a, **k: counted(*a, **k)), other, QKV, output="output", seed=3)  # another
        assert len(calls) == 4
    check_matches(item, other, QKV, output="output", seed=3)  # outside a notebook's grading, every check calls
    check_matches(item, other, QKV, output="output", seed=3)
    assert len(calls) == 6


def test_a_shared_call_is_copied_for_each_check_and_one_that_raised_is_made_again():
    from autograder.calls.shared import shared_calls

    calls = []

    def flaky(x, axis=-1):
        calls.append(x.shape)
        if len(calls) == 1:
            raise RuntimeError("first call fails")
        return good_softmax(x, axis)

    def scribbles(x, axis=-1):
        return good_softmax(x, axis)

    with shared_calls():
        assert "first call fails" in failure(check_finite, softmax_item(flaky), [array(3, 4)])
        check_finite(softmax_item(flaky), [array(3, 4)])
        check_matches_reference(softmax_item(flaky), [array(3, 4)])
        assert len(calls) == 2  # the failed call was made again, the right one shared
        item = softmax_item(scribbles)
        check_matches_reference(item, [array(3, 4)])
        from autograder.calls.call import Call

        first = Call(item, "a call", [array(3, 4)], None, 0, "").run_shared()
        first[...] = np.nan  # what one check does to its copy no other check sees
        check_matches_reference(item, [array(3, 4)])
