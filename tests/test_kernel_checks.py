"""Chapter 11's checks of how the passes compute (autograder/checks/kernels.py): the launches a call records, read as
Triton code alone and run again by the grader (autograder/calls/kernel_source.py, launches.py,
autograder/sandbox/launch_log.py, replay.py).

Each check must pass the reference and the course's other idioms, and fail what it exists to catch: no kernel, a
kernel that copies what PyTorch computed, a tile of the whole matrix of scores, a causal kernel that visits the
blocks the mask hides. The replay must refuse code that is not Triton code alone, and stop any access outside the
tensors it was given, before it happens."""

from __future__ import annotations

import linecache
import math

import pytest
import torch
import torch.nn.functional as F

from attention_course.kernels import interpreter, plain
from autograder.api.derived import attention_saved
from autograder.api.items import CheckFailed, Item
from autograder.api.specs import tensor
from autograder.calls import kernel_source, launches
from autograder.checks.kernels import (
    check_accesses_in_bounds,
    check_heads_not_repeated,
    check_kernels_compute,
    check_reads_inputs_in_place,
    check_skips_hidden_blocks,
)
from autograder.checks.values import check_matches
from tests import attacks

A = "ch11_flash_attention"
FORWARD = ("q", "k", "v")
BACKWARD = ("q", "k", "v", "output", "lse", "grad_output")


@pytest.fixture(scope="module")
def reference():
    interpreter.load_triton(interpret=True)
    from attention_course.solutions import ch11_flash_attention

    return ch11_flash_attention


def defined(name: str, code: str) -> dict:
    """The names ``code`` defines, run as a notebook cell would be (its source where Triton reads a kernel's)."""
    triton, tl = interpreter.load_triton(interpret=True)
    filename = f"<cell {name}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    namespace = {"triton": triton, "tl": tl, "torch": torch, "math": math, "F": F, "attention": plain.attention}
    namespace["__name__"] = "__main__"
    exec(compile(code, filename, "exec"), namespace)  # noqa: S102 (the tests' own code)
    return namespace


def forward(function) -> Item:
    return Item(A, "flash_attention_forward", function, outputs=("output", "lse"))


def backward(function) -> Item:
    return Item(A, "flash_attention_backward", function, outputs=("grad_q", "grad_k", "grad_v"))


def qkv(lq=64, lk=64, d=16):
    return [tensor(2, lq, d), tensor(2, lk, d), tensor(2, lk, d)]


def computes(item: Item, args, blocks: dict, roles=FORWARD):
    check_kernels_compute(item, args, blocks, roles=roles)


def skips(item: Item, args, bq: int, bk: int, roles=FORWARD):
    check_skips_hidden_blocks(
        item, args, {"causal": True, "block_q": bq, "block_k": bk}, roles=roles, block_q=bq, block_k=bk
    )


def problem(check, *args, **kwargs) -> str:
    with pytest.raises(CheckFailed) as failed:
        check(*args, **kwargs)
    return failed.value.problem


def source_of(reference, name: str) -> str:
    """The reference answer's code (the kernels and the launcher of one pass)."""
    from autograder.grading.classroom import solution_bodies

    return solution_bodies(A)[name]


def catalogued(name: str) -> str:
    """The code of the catalogue's wrong answer ``name`` (tests/buggy/ch11_flash_attention.py)."""
    from tests.buggy.ch11_flash_attention import BUGS

    return next(bug.code for bug in BUGS if bug.name == name)


def reference_with(*changes: tuple[str, str]) -> str:
    """The reference's forward pass with each ``(old, new)`` change made."""
    from tests.catalogue import variant

    return variant(A, "flash_attention_forward", *changes)


@pytest.mark.parametrize("blocks", [(16, 32), (32, 16)])
def test_the_reference_passes_computes_in_kernels_and_skips_the_hidden_blocks(reference, blocks):
    bq, bk = blocks
    computes(forward(reference.flash_attention_forward), qkv(), {"block_q": bq, "block_k": bk})
    skips(forward(reference.flash_attention_forward), qkv(), bq, bk)
    skips(forward(reference.flash_attention_forward), qkv(48, 96), bq, bk)  # Lq < Lk: decoding's shape
    item = backward(reference.flash_attention_backward)
    computes(item, attention_saved(2, 64, 16, seed=1), {"block_q": bq, "block_k": bk}, BACKWARD)
    skips(item, attention_saved(2, 64, 16, causal=True, seed=1), bq, bk, BACKWARD)


def test_the_kernel_checks_of_one_notebook_share_a_call_and_its_replay_and_each_judges_it(reference, monkeypatch):
    from autograder.calls.shared import shared_calls

    replays = []
    replay = launches.Trace.replay
    monkeypatch.setattr(launches.Trace, "replay", lambda trace, *args: replays.append(1) or replay(trace, *args))
    causal = {"causal": True, "block_q": 16, "block_k": 16}
    with shared_calls():
        computes(forward(reference.flash_attention_forward), qkv(), causal)
        skips(forward(reference.flash_attention_forward), qkv(), 16, 16)  # the same call: its replay read again
        assert len(replays) == 1
        skips(forward(reference.flash_attention_forward), qkv(48, 96), 16, 16)
        assert len(replays) == 2
        # the same call of a kernel that visits the hidden blocks: the kernels compute, the skips fail
        visits = forward(defined("forward", catalogued("forward_causal_skips_nothing"))["flash_attention_forward"])
        computes(visits, qkv(), causal)
        assert "visits keys that none of its queries sees" in problem(skips, visits, qkv(), 16, 16)
        assert len(replays) == 3


def test_attention_without_a_kernel_fails_both_checks():
    def sdpa(q, k, v, causal=False, block_q=16, block_k=16):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal), plain.attention(q, k, v, causal)[1]

    assert "launched no Triton kernel" in problem(computes, forward(sdpa), qkv(), {"block_k": 32})
    assert "launched no Triton kernel" in problem(skips, forward(sdpa), qkv(), 16, 16)

    def autograd(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
        return plain.attention_gradients(q, k, v, grad_output, causal)

    saved = attention_saved(2, 64, 16, seed=0)
    assert "launched no Triton kernel" in problem(computes, backward(autograd), saved, {}, BACKWARD)


def test_a_kernel_that_copies_what_pytorch_computed_fails_and_names_what_it_read():
    name = "forward_kernel_copies_pytorchs_result"
    said = problem(computes, forward(defined(name, catalogued(name))["flash_attention_forward"]), qkv(), {})
    assert "output is not what its kernels wrote" in said
    assert "copy_kernel's src: read before any kernel wrote it" in said


def test_a_kernel_whose_program_holds_the_whole_matrix_fails():
    name = "forward_one_tile_per_head"
    item = forward(defined(name, catalogued(name))["flash_attention_forward"])
    said = problem(computes, item, qkv(80, 64), {})  # 80 x 64 scores: more than 16 x 16 x d (16), the defaults
    assert "a tensor of 5120 numbers or more" in said and "the whole 80 x 64 matrix of scores" in said


def catalogued_correct(name: str) -> str:
    """The code of the catalogue's correct answer ``name`` (tests/correct/ch11_flash_attention.py)."""
    from tests.correct.ch11_flash_attention import ANSWERS

    return next(answer.code for answer in ANSWERS if answer.name == name)


def test_the_tile_bound_is_a_block_of_products_and_the_whole_matrix_is_refused_above_it():
    """A program may hold a block_q x block_k tile of scores times the head size (a broadcast product before its
    sum), each rounded up to a power of two; a tensor as large as the whole matrix of scores and larger than that is
    refused, and without known blocks any tensor as large as the whole matrix."""
    from types import SimpleNamespace

    from autograder.calls import replayed

    assert replayed.tile(16, 16, 16) == 4096 and replayed.tile(16, 32, 24) == 16384
    plan = SimpleNamespace(sizes=launches.Sizes(1, 80, 64), views=[], record=None)

    def refused(largest: int, blocks) -> list[str]:
        return replayed.judge(plan, {"largest": largest}, {}, {}, 1e-4, 1e-4, blocks)

    assert not refused(5119, (16, 16, 16)) and refused(5120, (16, 16, 16))  # the whole 80 x 64 matrix: refused
    assert not refused(8192, (16, 32, 16)) and refused(8193, (16, 32, 16))  # a tile of products: allowed
    assert "a tensor of 8193 numbers or more" in refused(8193, (16, 32, 16))[0]
    assert not refused(5119, None) and refused(5120, None)
    with pytest.raises(ValueError, match="must be positive"):
        replayed.tile(0, 16, 16)


def test_blocks_of_broadcast_products_pass_and_the_whole_matrix_however_made_fails(reference):
    """Issue 83, case 3 and its false positive: a tiled kernel whose scores and sums are broadcast products and
    tl.sum (a block_q x block_k x d tensor, larger than Lq x Lk at small shapes) passes both replay checks; one
    program per head that holds the whole matrix fails them, made of broadcast products (Lq x Lk x d numbers) or
    column by column (Lq x Lk numbers: caught on a call with more scores than a tile of products holds, as each
    graded cell has one)."""
    tiled = forward(defined("tiled", catalogued_correct("forward_strides"))["flash_attention_forward"])
    computes(tiled, qkv(), {"block_q": 16, "block_k": 32})
    computes(tiled, qkv(80, 64), {"block_q": 16, "block_k": 16})
    skips(tiled, qkv(48, 96), 16, 16)
    tiled_backward = defined("tiled_backward", catalogued_correct("backward_broadcast_products"))
    gradients = backward(tiled_backward["flash_attention_backward"])
    causal = {"causal": True, "block_q": 16, "block_k": 16}
    saved = attention_saved(1, 56, 16, n_keys=88, causal=True, seed=2)
    computes(gradients, attention_saved(2, 64, 16, seed=0), {"block_q": 16, "block_k": 32}, BACKWARD)
    computes(gradients, saved, causal, BACKWARD)
    skips(gradients, saved, 16, 16, BACKWARD)

    broadcast = forward(defined("broadcast", attacks.SCORES_BY_BROADCAST)["flash_attention_forward"])
    said = problem(computes, broadcast, qkv(), {"block_q": 16, "block_k": 32})
    assert "a tensor of 8193 numbers or more" in said and "whole 64 x 64 matrix of scores" in said
    columns = forward(defined("columns", attacks.SCORES_BY_COLUMNS)["flash_attention_forward"])
    values_kept(columns, qkv(80, 64), {"block_q": 16, "block_k": 16})
    computes(columns, qkv(), {"block_q": 16, "block_k": 32})  # 64 x 64 scores: no more than a tile of products
    said = problem(computes, columns, qkv(80, 64), {"block_q": 16, "block_k": 16})
    assert "a tensor of 5120 numbers or more" in said and "whole 80 x 64 matrix of scores" in said
    assert "whole 48 x 96 matrix of scores" in problem(skips, columns, qkv(48, 96), 16, 16)
    whole = backward(defined("whole_backward", attacks.GRADIENTS_BY_COLUMNS)["flash_attention_backward"])
    computes(whole, attention_saved(2, 64, 16, seed=0), {"block_q": 16, "block_k": 32}, BACKWARD)
    assert "whole 56 x 88 matrix of scores" in problem(computes, whole, saved, causal, BACKWARD)
    assert "whole 56 x 88 matrix of scores" in problem(skips, whole, saved, 16, 16, BACKWARD)


def test_a_launcher_that_hands_the_kernel_the_scores_fails():
    namespace = defined(
        "scores",
        """
@triton.jit
def noop(scores_ptr, out_ptr):
    tl.store(out_ptr, tl.load(scores_ptr))


def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):
    scores = q @ k.transpose(-2, -1)
    noop[(1,)](scores, torch.empty(1))
    return plain.attention(q, k, v, causal)
""",
    )
    namespace["plain"] = plain
    said = problem(computes, forward(namespace["flash_attention_forward"]), qkv(), {})
    assert "as large as the whole matrix of scores" in said


@pytest.mark.parametrize("name", ["forward_causal_skips_nothing", "forward_causal_masks_the_loads"])
def test_a_causal_forward_kernel_that_visits_the_hidden_blocks_fails_the_skip_check_only(reference, name):
    item = forward(defined(name, catalogued(name))["flash_attention_forward"])
    computes(item, qkv(), {"causal": True, "block_k": 32})
    said = problem(skips, item, qkv(), 16, 16)
    assert "a program of flash_forward_kernel visits keys that none of its queries sees" in said


def test_the_skip_rule_is_shifted_by_the_bottom_right_alignment(reference):
    """With Lq != Lk the hidden blocks move by Lk - Lq: a loop that ends where a mask aligned top-left would (j <= i),
    its mask aligned bottom-right, visits keys that no query sees when Lq > Lk (its values right: the skip check
    alone fails there); when Lq < Lk it stops too early, and its values are wrong: the kernels wrote what it
    returned, and the kernel check says that the values differ, never that the kernels did not write them."""
    # the loop over the keys ends where a mask aligned top-left would, the mask itself aligned bottom-right
    loop = reference_with(("(block + 1) * BLOCK_Q + shift)", "(block + 1) * BLOCK_Q)"))
    item = forward(defined("top-left", loop)["flash_attention_forward"])
    computes(item, qkv(80, 48), {"causal": True})
    assert "visits keys that none of its queries sees" in problem(skips, item, qkv(80, 48), 16, 16)
    said = problem(computes, item, qkv(48, 96), {"causal": True})
    assert "output is what its kernels wrote" in said and "but not its right value" in said
    assert "not what its kernels wrote" not in said


def test_a_causal_call_with_rows_that_see_no_key_passes_the_replay_checks(reference):
    """Lq > Lk with causal=True: the first rows see no key (output 0, lse -inf); the reference's kernels store
    exactly that, and both replay checks pass. The catalogue's wrong shift (aligned top-left) wrote what it returned:
    the checks say that its values differ, naming the outputs, not that its kernels did not write them."""
    item = forward(reference.flash_attention_forward)
    computes(item, qkv(80, 48), {"causal": True, "block_q": 16, "block_k": 16})
    skips(item, qkv(80, 48), 16, 16)
    gradients = backward(reference.flash_attention_backward)
    computes(gradients, attention_saved(2, 40, 16, n_keys=24, causal=True, seed=2), {"causal": True}, BACKWARD)
    top_left = forward(defined("top-left", catalogued("forward_causal_aligned_top_left"))["flash_attention_forward"])
    said = problem(computes, top_left, qkv(80, 48), {"causal": True})
    assert "is what its kernels wrote" in said and "not what its kernels wrote" not in said


@pytest.mark.parametrize(
    "name,said",
    [
        ("backward_keys_kernel_skips_nothing", "visits queries that see none of its keys"),
        ("backward_queries_kernel_skips_nothing", "visits keys that none of its queries sees"),
    ],
)
def test_a_causal_backward_kernel_that_visits_the_hidden_blocks_fails_the_skip_check(reference, name, said):
    item = backward(defined(name, catalogued(name))["flash_attention_backward"])
    computes(item, attention_saved(2, 64, 16, seed=0), {}, BACKWARD)
    assert said in problem(skips, item, attention_saved(2, 64, 16, causal=True, seed=0), 16, 16, BACKWARD)


def test_loads_without_masks_past_the_end_fail_the_bounds_check_and_say_so(reference):
    """The catalogue's unmasked tail: its values read whatever memory follows the tensors (wrong, or by chance right),
    but the replay stops at the first load past the end, and the check's hint says the loads are not masked. The
    reference, and an item with no kernel at all (the value checks' and check_kernels_compute's business), pass."""
    tails = [tensor(2, 37, 16), tensor(2, 37, 16), tensor(2, 37, 16)]
    blocks = {"block_q": 16, "block_k": 32}
    check_accesses_in_bounds(forward(reference.flash_attention_forward), tails, blocks, roles=FORWARD)
    check_accesses_in_bounds(forward(lambda q, k, v, **_: plain.attention(q, k, v)), tails, blocks, roles=FORWARD)
    name = "forward_tail_loads_unmasked"
    item = forward(defined(name, catalogued(name))["flash_attention_forward"])
    with pytest.raises(CheckFailed) as failed:
        check_accesses_in_bounds(item, tails, blocks, roles=FORWARD)
    assert "a load outside the tensors the kernel was given, where no mask kept it inside" in failed.value.problem
    assert "the loads past the end of the last block are not masked" in failed.value.hint
    check_accesses_in_bounds(item, qkv(), blocks, roles=FORWARD)  # lengths that are multiples of the blocks: inside


# ---------------------------------------------------------------------------- kernel points, not earned (issue 83)


def values_kept(item: Item, args, kwargs: dict) -> None:
    """The value checks of both outputs pass: what the value tests see, nothing recording."""
    for name in ("output", "lse"):
        check_matches(item, f"attention_course.kernels.signatures.{name}_of", args, kwargs, output=name, rtol=1e-4)


@pytest.mark.parametrize(
    "attack,said",
    [
        (attacks.KERNELS_WHEN_WATCHED, "output is not what its kernels wrote"),
        (attacks.LSE_FROM_PYTORCH, "weighted_sum_kernel's lse_ptr: read before any kernel wrote it"),
        (attacks.SCORES_BY_BROADCAST, "a program holds a tensor of 4097 numbers or more"),
    ],
    ids=["kernels-only-when-watched", "lse-from-pytorch", "scores-by-broadcast"],
)
def test_right_values_from_kernels_that_do_not_compute_them_lose_the_kernel_and_skip_checks(reference, attack, said):
    """Issue 83, cases 1 to 3: a launcher that computes in PyTorch unless the record is on (then a kernel that
    computes nothing), one that hands its kernel the log-sum-exp of the whole matrix, and one program per head that
    holds the whole matrix of scores made by broadcast products: the values are right, the kernel checks fail."""
    item = forward(defined("attack", attack)["flash_attention_forward"])
    causal = {"causal": True, "block_q": 16, "block_k": 16}
    values_kept(item, qkv(), causal)
    assert said in problem(computes, item, qkv(), causal)
    assert said in problem(skips, item, qkv(), 16, 16)


def scratch_forward() -> str:
    """Case 4's forward: the catalogue's kernel that skips nothing, reading copies of q, k and v that a kernel made
    in flat scratch buffers (:data:`tests.attacks.SCRATCH`)."""
    from autograder.release.reference import replaced

    copied = "    q4, k4, v4 = (scratch(t)[: t.numel()].as_strided(t.shape, t.stride()) for t in (q4, k4, v4))\n"
    forward_code = replaced(
        catalogued("forward_causal_skips_nothing"),
        [("    flash_forward_kernel[grid](", copied + "    flash_forward_kernel[grid](")],
        "scratch",
    )
    return attacks.SCRATCH + forward_code


def test_kernels_that_read_scratch_copies_of_the_inputs_are_seen_to_visit_the_hidden_blocks(reference):
    """Issue 83, case 4: kernels that skip nothing, reading copies of q, k and v that a kernel made in flat scratch
    buffers: the copy is labelled as the input it holds, and both skip checks fail (the kernels compute)."""
    from autograder.release.reference import replaced

    item = forward(defined("scratch", scratch_forward())["flash_attention_forward"])
    computes(item, qkv(), {"causal": True})
    assert "visits keys that none of its queries sees" in problem(skips, item, qkv(), 16, 16)
    copied = "    q4, k4, v4, grad_out4 = (scratch(t)[: t.numel()].view(t.shape) for t in (q4, k4, v4, grad_out4))\n"
    forward_cell = source_of(reference, "flash_attention_forward")
    views_of = forward_cell[forward_cell.index("def heads_of") :].split("\n\n\n")[0] + "\n\n\n"  # the launcher's helper
    backward_code = replaced(
        catalogued("backward_keys_kernel_skips_nothing"),
        [("    flash_backward_kv_kernel[", copied + "    flash_backward_kv_kernel[")],
        "scratch",
    )
    gradients = backward(defined("scratch", attacks.SCRATCH + views_of + backward_code)["flash_attention_backward"])
    saved = attention_saved(2, 64, 16, causal=True, seed=0)
    assert "visits queries that see none of its keys" in problem(skips, gradients, saved, 16, 16, BACKWARD)


# ---------------------------------------------------------------------------- what a kernel may be

KERNEL = """@triton.jit
def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + at, mask=at < n, other=0.0)
{line}
    tl.store(out_ptr + at, x, mask=at < n)
"""


@pytest.mark.parametrize(
    "line",
    [
        "    x = tl.exp2(x * LOG2E) + tl.math.rsqrt(x * x + 1.0)",
        "    x = helper(x).to(tl.float32)",
        "    for i in tl.range(0, 2, num_stages=1):\n        x = x * 1.0",
        "    tl.device_print(f'block {BLOCK}', x)",
        "    if BLOCK > 16:\n        x = tl.where(at < n, x, float('-inf'))",
        "    x = x * (1 / math.sqrt(16)) + triton.cdiv(n, BLOCK) * 0",
    ],
)
def test_triton_code_alone_is_read(line):
    helper = "@triton.jit\ndef helper(y):\n    return y * 2\n"
    program = kernel_source.program(
        {"kernel": KERNEL.format(line=line), "helper": helper}, {"LOG2E": 1.4426950408889634}, ["kernel"]
    )
    assert "def kernel(" in program and "@triton.jit" not in program


@pytest.mark.parametrize(
    "line,said",
    [
        ("    x = np.exp(x)", "uses np"),
        ("    __import__('os').system('true')", "uses __import__"),
        ("    x = x.__class__", "reads the attribute __class__"),
        ("    x = getattr(x, 'handle')", "uses getattr"),
        ("    x = x.handle.data", "uses the attribute handle"),
        ("    f = lambda y: y", "Lambda"),
        ("    x = [y for y in range(2)]", "ListComp"),
        ("    tl.dot = tl.sum", "assigns to an attribute"),
        ("    import os", "Import"),
        ("    x = interpreter_builder", "uses interpreter_builder"),
        ("    x = tl.core.tensor", "uses tl.core"),
        ("    x = tl.extra.cuda.libdevice.exp(x)", "uses tl.extra"),
        ("    tl = 1", "names a variable tl"),
        ("    global n", "Global"),
        ("    x = (y := x)", "NamedExpr"),
        ("    x = x + " + repr("a" * 300), "constant of the kind str"),
    ],
)
def test_code_beyond_triton_is_refused_with_what_it_uses(line, said):
    with pytest.raises(kernel_source.KernelRefused, match="kernel") as refused:
        kernel_source.program({"kernel": KERNEL.format(line=line)}, {}, ["kernel"])
    assert said in str(refused.value)


def test_a_kernel_missing_or_not_one_function_is_refused():
    with pytest.raises(kernel_source.KernelRefused, match="could not be read"):
        kernel_source.program({"kernel": None}, {}, ["kernel"])
    with pytest.raises(kernel_source.KernelRefused, match="not one function"):
        kernel_source.program({"kernel": "x = 1\n"}, {}, ["kernel"])
    with pytest.raises(kernel_source.KernelRefused, match="could not be read"):
        kernel_source.program({}, {}, ["kernel"])


# ---------------------------------------------------------------------------- the replay itself


def out_of_bounds(kind: str) -> str:
    access = {
        "load": "    x = tl.load(x_ptr + at + 4096)\n    tl.store(out_ptr + at, x, mask=at < n)",
        "store": "    tl.store(out_ptr + at + 4096, tl.load(x_ptr + at, mask=at < n), mask=at < n)",
        "atomic": "    tl.atomic_add(out_ptr + at + 4096, tl.load(x_ptr + at, mask=at < n), mask=at < n)",
    }[kind]
    return (
        "@triton.jit\ndef kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
        "    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n" + access + "\n"
    )


@pytest.mark.parametrize("kind", ["load", "store", "atomic"])
def test_an_access_outside_the_tensors_stops_the_replay_before_it_happens(kind):
    from autograder.sandbox import replay

    interpreter.load_triton(interpret=True)
    program = kernel_source.program({"kernel": out_of_bounds(kind)}, {}, ["kernel"])
    x = torch.arange(16, dtype=torch.float32)
    view = {"storage": 0, "offset": 0, "shape": [16], "stride": [1]}
    request = {
        "storages": [{"dtype": "float32", "size": 16}, {"dtype": "float32", "size": 16}],
        "launches": [
            {
                "kernel": "kernel",
                "grid": [1],
                "args": {
                    "x_ptr": {"view": {**view, "fill": x, "logged": None}},
                    "out_ptr": {"view": {**view, "storage": 1, "fill": torch.zeros(16), "logged": None}},
                    "n": {"value": 16},
                    "BLOCK": {"value": 16},
                },
            }
        ],
        "rows": [],
    }
    result = replay.replay(program, request)
    assert result["error"] == f"a {kind} outside the tensors the kernel was given, where no mask kept it inside"
    assert result["launch"] == 0
    assert torch.equal(result["storages"][0], x)  # nothing was written anywhere


def sizes():
    return launches.Sizes(2, 64, 64)


def launch(**overrides) -> dict:
    entry = {"kernel": "kernel", "grid": [1], "args": [{"name": "n", "value": 3}]}
    return {**entry, **overrides}


@pytest.mark.parametrize(
    "record,said",
    [
        ({"launches": [launch()] * 17, "dropped": 0, "functions": {}, "constants": {}}, "more than 16 kernels"),
        ({"launches": [launch()], "dropped": 3, "functions": {}, "constants": {}}, "more than 16 kernels"),
        (
            {
                "launches": [launch(args=[{"name": f"n{i}", "value": i} for i in range(25)])],
                "functions": {},
                "constants": {},
            },
            "more than 24 numbers",
        ),
        (
            {
                "launches": [
                    launch(
                        args=[
                            {
                                "name": "s",
                                "tensor": {
                                    "storage": 0,
                                    "offset": 0,
                                    "shape": [2, 64, 64],
                                    "stride": [4096, 64, 1],
                                    "dtype": "float32",
                                    "data": None,
                                },
                            }
                        ]
                    )
                ],
                "functions": {},
                "constants": {},
            },
            "as large as the whole matrix of scores",
        ),
        ({"launches": [launch(args=[{"name": "x", "value": object()}])], "functions": {}, "constants": {}}, "read"),
        ({"launches": [launch(grid=[-1])], "functions": {}, "constants": {}}, "read"),
        ("not a record", "read"),
    ],
    ids=["launches", "dropped", "numbers", "scores", "object", "grid", "garbage"],
)
def test_a_record_is_bounded_before_anything_is_computed_on_it(record, said):
    with pytest.raises(launches.Refused, match=said):
        launches.read(record, sizes())


# ---------------------------------------------------------------------------- what the grader reads of a record

PADDING = "    x = x + 1\n" * 75_000 + "    import os\n"  # about 1 MiB of statements, then what no kernel may hold


def recorded(function, args, kwargs=None) -> dict:
    """The record of the launches of one call, made as the sandbox makes it."""
    with launches.traced(function) as trace:
        function(*args, **(kwargs or {}))
    return trace.data


def graders_reading(data: dict, source: str | None) -> tuple[int, int, str | None]:
    """What the kernel checks' reading of the record ``data`` costs the grader's process (autograder/checks/kernels.py:
    launches.read, then kernel_source.program): the peak of its Python memory, the characters it parses, and its
    refusal (None where it reads the record)."""
    import tracemalloc

    from attention_course.tooling import syntax

    parsed = []
    parse = syntax.parse

    def counted(text, *args):
        parsed.append(len(text))
        return parse(text, *args)

    syntax.parse, said = counted, None
    tracemalloc.start()
    try:
        record = launches.read(data, sizes(), source)
        launched = [launch.kernel for launch in record.launches]
        kernel_source.program(record.functions, record.constants, launched, record.names)
    except (launches.Refused, kernel_source.KernelRefused) as exc:
        said = str(exc)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        syntax.parse = parse
    return peak, sum(parsed), said


def test_a_record_that_carries_a_mebibyte_of_source_is_refused_before_it_is_parsed(reference):
    """Issue 83, case 5. The student's process writes the record: here it carries 1 MiB of kernel source (each
    kernel's source padded with statements), which parsed in the grader's process once raised its peak memory from
    481 to 1,507 MiB and its CPU from 8 to 29 s. It is refused before any parse, saying why; reading it costs the
    grader no more memory, and no more parsing, than an honest record (within a tenth)."""
    args = [torch.randn(2, 64, 16) for _ in range(3)]
    honest = recorded(reference.flash_attention_forward, args)
    forged = {**honest, "functions": {name: code + PADDING for name, code in honest["functions"].items()}}
    assert sum(len(code) for code in forged["functions"].values()) > 2**20
    source = source_of(reference, "flash_attention_forward")
    honest_peak, honest_parsed, said = graders_reading(honest, source)
    assert said is None and honest_parsed > 0
    peak, parsed, said = graders_reading(forged, source)
    assert said == kernel_source.TOO_LONG, said
    assert "longer than the grader reads (20,000 characters of one kernel, 40,000 in all)" in said
    assert parsed == 0
    assert peak <= 1.1 * honest_peak, (peak, honest_peak)
    # within the bounds in all, each source within its own: a record of 45 kernels of 1,000 characters is refused too
    many = {f"k{i}": f"def k{i}(x):\n" + "    x = x + 1\n" * 70 for i in range(45)}
    assert graders_reading({**honest, "functions": many}, source)[1:] == (
        0,
        "the record of your kernels' source could not be read",
    )


def test_the_sandbox_sends_no_source_longer_than_the_grader_reads():
    """The record made in the student's process (autograder/sandbox/launch_log.py) leaves out a source past the
    grader's bounds and says so (too_long), rather than sending what the grader would refuse unread."""
    from autograder.sandbox import launch_log

    code = "@triton.jit\ndef long_kernel(x):\n" + "    x = x + 1\n" * 2_000
    log = launch_log.Log()
    log.kernels["long_kernel"] = defined("long", code)["long_kernel"].fn
    data = log.as_data()
    assert data["functions"] == {"long_kernel": None} and data["too_long"]
    assert launch_log.MAX_SOURCE == kernel_source.MAX_SOURCE and launch_log.MAX_SOURCES == kernel_source.MAX_SOURCES
    with pytest.raises(launches.Refused, match="longer than the grader reads"):
        launches.read(data, sizes())


LEAKED = ("0.1234", "0.5678", "1234", "5678")  # what the student's process wrote of an input into the record


def refusal(data: dict, source: str) -> str:
    with pytest.raises((launches.Refused, kernel_source.KernelRefused)) as refused:
        record = launches.read(data, sizes(), source)
        kernel_source.program(record.functions, record.constants, [x.kernel for x in record.launches], record.names)
    return str(refused.value)


@pytest.mark.parametrize(
    "launched,said",
    [
        (
            launch(kernel="k_0_1234_0_5678", args=[{"name": f"n{i}", "value": i} for i in range(33)]),
            "the kernel of launch 1 takes more than 32",
        ),
        (launch(kernel="k 0.1234 0.5678"), "could not be read"),
        (launch(args=[{"name": "x", "unsupported": "float32 0.1234 0.5678"}]), "x, neither a tensor nor a number"),
        (
            launch(
                args=[
                    {
                        "name": "x",
                        "tensor": {
                            "storage": 0,
                            "offset": 0,
                            "shape": [4],
                            "stride": [1],
                            "dtype": "float32 0.1234 0.5678",
                        },
                    }
                ]
            ),
            "kernel's x is a tensor of a dtype the grader does not replay",
        ),
        (
            launch(
                args=[
                    {
                        "name": "s_0_1234_0_5678",
                        "tensor": {
                            "storage": 0,
                            "offset": 0,
                            "shape": [2, 64, 64],
                            "stride": [4096, 64, 1],
                            "dtype": "float32",
                        },
                    }
                ]
            ),
            "a tensor (kernel's [a name not in your notebook]) as large as the whole matrix of scores",
        ),
        (launch(grid=[1234, 5678]), "kernel is launched on more than 4096 programs"),
        (launch(kernel="k_0_1234_0_5678"), "the source of the kernel of launch 1 could not be read"),
    ],
    ids=["name", "spaced-name", "type", "dtype", "argument", "grid", "source"],
)
def test_a_refusal_quotes_nothing_the_student_process_wrote_into_the_record(launched, said):
    """Issue 83, case 6. The record is written by the student's process with the check's inputs at hand: a kernel's
    name, a dtype, a type's name, an argument's name or a grid that carries an input's digits is never quoted. A
    kernel is named where the submission's source defines a function of that name (here ``kernel``), otherwise by
    its launch."""
    source = "@triton.jit\ndef kernel(x, n):\n    pass\n"
    data = {"launches": [launched], "dropped": 0, "functions": {"kernel": source}, "constants": {}}
    message = refusal(data, source)
    assert said in message, message
    assert not any(leaked in message for leaked in LEAKED), message


@pytest.mark.parametrize(
    "line,said",
    [
        ("    x = q_0_1234 + 1", "uses [a name not in your notebook], which is neither"),
        ("    x = x.a_0_5678", "uses the attribute [a name not in your notebook]"),
        ("    x = tl.k_0_1234", "uses tl.[a name not in your notebook]"),
        ("    import os", "the kernel of launch 1 holds a statement of the kind Import"),
    ],
)
def test_a_kernel_refused_is_named_by_what_the_submission_defines(line, said):
    """The kernels' source in the record is the student's process's to write too: a kernel named at run time (here
    ``k_0_1234_0_5678``, a function the submission does not define) is named by its launch, and a name its source
    uses that the submission's source does not hold is not quoted."""
    source = "@triton.jit\ndef kernel(x):\n    x = x + 1\n"
    code = f"def k_0_1234_0_5678(x):\n{line}\n"
    functions = {"k_0_1234_0_5678": code}
    names = kernel_source.Names.of(source)
    with pytest.raises(kernel_source.KernelRefused) as refused:
        kernel_source.program(functions, {}, ["k_0_1234_0_5678"], names)
    assert said in str(refused.value) and not any(leaked in str(refused.value) for leaked in LEAKED), refused.value
    # the same kernel, defined in the submission: named
    with pytest.raises(kernel_source.KernelRefused, match="the kernel k_0_1234_0_5678 "):
        kernel_source.program(functions, {}, ["k_0_1234_0_5678"], kernel_source.Names.of(source + code))


def test_the_replays_judgement_names_a_kernel_by_what_the_submission_defines():
    """replayed.judge and hidden_blocks name the kernel of a launch through launches.kernel_name: its name where the
    submission defines it, its launch otherwise."""
    from autograder.calls import replayed

    data = {"launches": [launch(kernel="k_0_1234_0_5678"), launch()], "dropped": 0, "functions": {}, "constants": {}}
    record = launches.read(data, sizes(), "def kernel(n):\n    pass\n")
    assert [launches.kernel_name(record, i) for i in range(3)] == ["the kernel of launch 1", "kernel", "a kernel"]
    plan = launches.Plan({}, record, sizes())
    stopped = replayed.judge(plan, {"error": "a load outside the tensors", "launch": 0}, {}, {}, 1e-4, 1e-4)
    assert stopped == [
        "run again by the grader on the same arguments, the kernel of launch 1 stopped: a load outside the tensors"
    ]
    rows = {
        name: torch.tensor([0] if name == "query_loaded" else list(range(16, 32)) if name == "key_tried" else [0])
        for name in ("query_tried", "query_loaded", "key_tried", "key_loaded")
    }
    table = {"where": torch.tensor([[0]]), **rows, **{f"{name}_ends": torch.tensor([len(rows[name])]) for name in rows}}
    visits = replayed.hidden_blocks(plan, {"programs": table}, 16, 16)
    assert visits and visits[0].startswith("a program of the kernel of launch 1 visits keys"), visits


def test_the_replay_trusts_the_inputs_zeros_and_the_graders_own_delta_only():
    """The grader fills a launch's tensors with its own: an input (here transposed and scaled), zeros, and Δ where
    the backward's output and grad_output are inputs, recognised by value; anything else the launcher computed (a
    Δ that is not the right one, an lse of the forward) is NaN in the replay, however small."""
    q, output, grad_output = torch.randn(2, 64, 16), torch.randn(2, 64, 16), torch.randn(2, 64, 16)
    delta = (output * grad_output).sum(-1)
    views = [
        launches.View(0, "q", 0, 0, (2, 16, 64), (1024, 1, 16), "float32", q.transpose(1, 2) * 0.25),
        launches.View(0, "zeros", 1, 0, (2, 64), (64, 1), "float32", torch.zeros(2, 64)),
        launches.View(0, "delta", 2, 0, (2, 64), (64, 1), "float32", delta),
        launches.View(0, "forged", 3, 0, (2, 64), (64, 1), "float32", torch.randn(2, 64)),
        launches.View(0, "big", 4, 0, (2, 64, 16), (1024, 16, 1), "float32", torch.randn(2, 64, 16)),
    ]
    record = launches.Record([launches.Launch("kernel", (1,), {}, views)], {}, {})
    inputs = {"q": q, "output": output, "grad_output": grad_output}
    plan = launches.plan(record, inputs, sizes())
    fills = {name: spec["view"]["fill"] for name, spec in plan.request["launches"][0]["args"].items()}
    torch.testing.assert_close(fills["q"], q.transpose(1, 2) * 0.25)  # the grader's own q, transposed and scaled
    assert not fills["zeros"].any()
    torch.testing.assert_close(fills["delta"], delta)
    assert fills["forged"] is None and fills["big"] is None  # NaN in the replay
    assert {entry["side"] for entry in plan.request["rows"]} == {"query"}
    assert launches.plan(record, {"q": q}, sizes()).request["launches"][0]["args"]["delta"]["view"]["fill"] is None


# ---------------------------------------------------------------------------- graded in the sandbox


def graded(code: str, limits=None, item: str = "flash_attention_forward"):
    """A notebook whose forward pass (or ``item``) is ``code``, graded on that item in the sandbox as in a term."""
    from autograder.grading.classroom import fill
    from autograder.grading.notebook import grade_notebook
    from autograder.release import course
    from autograder.sandbox.limits import Limits

    release = course.Release("term", set(course.assignments()[: course.assignments().index(A)]))
    nb = fill(A, {item: code})
    return grade_notebook(A, nb, release=release, only={item}, limits=limits or Limits())


HOW = {"test_forward_kernel", "test_forward_skips"}


@pytest.mark.slow
def test_graded_the_kernels_run_again_in_a_sandbox_of_the_graders_and_only_the_how_is_lost(reference):
    right = graded(source_of(reference, "flash_attention_forward"))
    assert right.score == right.max_score, {gid: t.message for gid, t in right.tests.items() if not t.passed}
    # the course's attention in PyTorch (SDPA's is_causal aligns top-left, the exercise bottom-right): right values
    plain = graded(
        "def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):\n"
        "    for name, size in (('block_q', block_q), ('block_k', block_k), ('q', q.shape[-1])):\n"
        "        if size < 16 or size & (size - 1):\n"
        "            raise ValueError(f'{name}: must be a power of two of at least 16, got {size}')\n"
        "    return attention(q, k, v, causal)\n"
    )
    failed = {gid: test.message for gid, test in plain.tests.items() if not test.passed}
    assert set(failed) == HOW, failed
    assert all("launched no Triton kernel" in message for message in failed.values())


@pytest.mark.slow
@pytest.mark.parametrize(
    "attack,lost,said",
    [
        (attacks.KERNELS_WHEN_WATCHED, HOW, "output is not what its kernels wrote"),
        (attacks.LSE_FROM_PYTORCH, HOW, "weighted_sum_kernel's lse_ptr: read before any kernel wrote it"),
        (attacks.SCORES_BY_BROADCAST, HOW, "as many as the whole 64 x 64 matrix of scores of a head"),
        (attacks.SCORES_BY_COLUMNS, HOW, "as many as the whole"),
        (None, {"test_forward_skips"}, "visits keys that none of its queries sees"),
    ],
    ids=["kernels-only-when-watched", "lse-from-pytorch", "scores-by-broadcast", "scores-by-columns", "scratch-copies"],
)
def test_graded_kernels_that_do_not_compute_lose_exactly_the_kernel_and_skip_points(reference, attack, lost, said):
    """Issue 83, cases 1 to 4, graded in the sandbox as in a term (where the student's code sees the record's patch
    of its interpreter): each keeps every value test of the forward pass and loses the kernel and skip tests
    (the scratch copies' kernels compute: the skip test alone), each for what it does."""
    report = graded(attack or scratch_forward())
    failed = {gid: test.message for gid, test in report.tests.items() if not test.passed}
    assert set(failed) == lost, failed
    assert all(said in message for message in failed.values()), failed


@pytest.mark.slow
def test_graded_backward_kernels_that_hold_the_whole_matrix_lose_exactly_the_kernel_and_skip_points(reference):
    """Issue 83, case 3 in the backward pass: P and dP of a whole head built column by column (no tensor larger than
    the matrix itself) keep every value test and lose the kernel and skip tests, on the call that both cells share,
    whose scores outnumber a tile of products; the tiled kernels of broadcast products keep full marks."""
    report = graded(attacks.GRADIENTS_BY_COLUMNS, item="flash_attention_backward")
    failed = {gid: test.message for gid, test in report.tests.items() if not test.passed}
    assert set(failed) == {"test_backward_kernel", "test_backward_skips"}, failed
    assert all("as many as the whole 56 x 88 matrix of scores" in message for message in failed.values()), failed
    tiled = graded(catalogued_correct("backward_broadcast_products"), item="flash_attention_backward")
    assert tiled.score == tiled.max_score, {gid: t.message for gid, t in tiled.tests.items() if not t.passed}


@pytest.mark.slow
def test_a_kernel_forged_into_the_record_that_never_ends_stops_at_the_time_limit(reference):
    """The student's process makes the record: here it gives the grader a kernel of its own that never ends. The
    replay stops at its time limit, in the grader's sandbox, and costs the kernel tests only (a kernel that is not
    Triton code alone is refused unread, by the same code as in a notebook: test_code_beyond_triton_is_refused...)."""
    from autograder.sandbox.limits import Limits

    forge = (
        "import autograder.sandbox.launch_log as record\n\n"
        "def forged(kernels):\n"
        "    functions, constants = record.program_of.__wrapped__(kernels)\n"
        "    functions['flash_forward_kernel'] = SOURCE\n"
        "    return functions, constants\n\n"
        "forged.__wrapped__ = record.program_of\n"
        "record.program_of = forged\n"
    )
    kernel = source_of(reference, "flash_attention_forward")
    endless = "def flash_forward_kernel(q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_queries, n_keys, scale, HEAD_DIM: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr):\n    while True:\n        pass\n"  # noqa: E501
    report = graded(f"SOURCE = {endless!r}\n" + forge + "\n\n" + kernel, Limits(call_timeout=4.0))
    failed = {gid: test.message for gid, test in report.tests.items() if not test.passed}
    assert set(failed) == HOW, failed
    assert all("the kernels' replay stopped" in message for message in failed.values()), failed


def reading_costs(monkeypatch) -> dict:
    """What the kernel checks' reading of each record costs the grader's process from now on (launches.read, then
    kernel_source.program, each measured): the largest peak of its Python memory, and the characters it parses."""
    import tracemalloc

    costs = {"peak": 0, "parsed": 0}

    def measured(function):
        def reading(*args, **kwargs):
            tracemalloc.start()
            try:
                return function(*args, **kwargs)
            finally:
                costs["peak"] = max(costs["peak"], tracemalloc.get_traced_memory()[1])
                tracemalloc.stop()

        return reading

    def parsed(name, source, *rest):
        costs["parsed"] += len(source)
        return function(name, source, *rest)

    function = kernel_source._function
    monkeypatch.setattr(launches, "read", measured(launches.read))
    monkeypatch.setattr(kernel_source, "program", measured(kernel_source.program))
    monkeypatch.setattr(kernel_source, "_function", parsed)
    return costs


@pytest.mark.slow
def test_graded_a_record_of_a_mebibyte_of_source_costs_the_grader_what_an_honest_one_does(reference, monkeypatch):
    """Issue 83, case 5, graded as in a term: the worker's record carries 1 MiB of source for each kernel
    (tests/attacks.py, RECORD_SOURCE_BLOAT). The kernel tests fail, saying why, the value tests keep their points,
    and the grader's reading of the records parses nothing and peaks within a tenth of an honest notebook's."""
    from tests import attacks

    costs = reading_costs(monkeypatch)
    code = source_of(reference, "flash_attention_forward")
    right = graded(code)
    assert right.score == right.max_score, {gid: t.message for gid, t in right.tests.items() if not t.passed}
    honest = dict(costs)
    costs.update(peak=0, parsed=0)
    report = graded(code + "\n\n" + attacks.RECORD_SOURCE_BLOAT)
    failed = {gid: test.message for gid, test in report.tests.items() if not test.passed}
    assert costs["parsed"] == 0 < honest["parsed"], (costs, honest)
    assert costs["peak"] <= 1.1 * honest["peak"], (costs, honest)
    assert set(failed) == HOW, failed
    assert all("longer than the grader reads" in message for message in failed.values()), failed


@pytest.mark.slow
def test_graded_no_message_quotes_the_inputs_that_the_student_wrote_into_the_record(reference, monkeypatch):
    """Issue 83, case 6, graded as in a term: the launcher writes q's first values into the record, as its kernel's
    name (the kernel test) and as its first tensor's dtype (the causal skip test; tests/attacks.py,
    RECORD_LEAKS_INPUTS). Every input the grader sends is noted, and what the attack would write of it: the kernel
    tests fail, and no message of the graded notebook holds any of it."""
    from autograder.sandbox import values
    from tests import attacks

    written: set[str] = set()
    encode = values.encode

    def noting(value, *args, **kwargs):
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
            written.update(attacks.written(value))
        return encode(value, *args, **kwargs)

    monkeypatch.setattr(values, "encode", noting)
    report = graded(source_of(reference, "flash_attention_forward") + "\n\n" + attacks.RECORD_LEAKS_INPUTS)
    failed = {gid: test.message for gid, test in report.tests.items() if not test.passed}
    assert len(written) > 10, written
    for text in [*failed.values(), *report.notes, *report.cell_errors.values()]:
        assert not any(value in text for value in written), text
    assert set(failed) == HOW, failed
    assert "the record of its launches could not be read" in failed["test_forward_kernel"], failed
    assert "a dtype the grader does not replay" in failed["test_forward_skips"], failed


def test_a_message_quotes_no_name_that_only_the_record_holds():
    """The record is written by the student's process, which holds the hidden inputs when it writes it: a name
    found in it but not in the submission's own source (a kernel named at run time) is not quoted."""
    record = {
        "launches": [{"kernel": "k_0_523_1_889", "args": [{"name": "x", "tensor": {"dtype": "f_47"}}]}],
        "functions": {"k_0_523_1_889": "def k_0_523_1_889(x):\n    pass\n", "mine": "def mine(x):\n    pass\n"},
    }
    trace = launches.Trace(record, None, "@triton.jit\ndef mine(x):\n    pass\n")
    said = launches.scrubbed("the kernel k_0_523_1_889 stopped; mine's x, a f_47", trace)
    assert said == "the kernel [a name not in your notebook] stopped; mine's x, a [a name not in your notebook]"
    assert launches.scrubbed("k_0_523_1_889", launches.Trace(record, None, None)) == "k_0_523_1_889"


# ---------------------------------------------------------------------------- strided inputs, grouped-query heads
STRIDED = (0, 2, 1, 3)  # a (B, H, L, d) view of a (B, L, H, d) tensor


def views(heads=2, kv_heads=2, lq=32, lk=48):
    return [
        tensor(1, heads, lq, 16, memory=STRIDED),
        tensor(1, kv_heads, lk, 16, memory=STRIDED),
        tensor(1, kv_heads, lk, 16, memory=STRIDED),
    ]


def test_the_reference_reads_strided_views_in_place_and_each_key_value_head_once(reference):
    item = forward(reference.flash_attention_forward)
    check_reads_inputs_in_place(item, views(), {"causal": True}, roles=FORWARD)
    check_heads_not_repeated(item, views(4, 2), {"causal": True}, roles=FORWARD)
    computes(item, views(4, 1), {"block_q": 16, "block_k": 16})
    back = backward(reference.flash_attention_backward)
    check_reads_inputs_in_place(back, attention_saved(1, 2, 32, 16, memory=STRIDED, seed=1), roles=BACKWARD)
    saved = attention_saved(1, 4, 32, 16, kv_heads=2, causal=True, seed=2)
    check_heads_not_repeated(back, saved, {"causal": True}, roles=BACKWARD)


def test_a_launcher_that_copies_strided_views_fails_the_in_place_check_and_says_which():
    item = forward(defined("copied", catalogued("forward_strided_views_copied"))["flash_attention_forward"])
    computes(item, views(), {"block_q": 16, "block_k": 16})  # its values are right, from its kernel
    said = problem(check_reads_inputs_in_place, item, views(), roles=FORWARD)
    assert "the kernels read a copy of q, k and v" in said
    # contiguous inputs cannot tell a copy from the caller's tensor: nothing is said of them
    check_reads_inputs_in_place(item, qkv(), roles=FORWARD)


def test_a_launcher_that_repeats_key_value_heads_computes_right_and_fails_the_heads_check():
    item = forward(defined("repeated", catalogued("forward_kv_expanded_per_query_head"))["flash_attention_forward"])
    # the replay runs the repeated copy as the kernel read it: the kernel computes, and the copy is named
    computes(item, views(4, 2), {"block_q": 16, "block_k": 16})
    said = problem(check_heads_not_repeated, item, views(4, 2), roles=FORWARD)
    assert "k has 2 heads for the queries' 4" in said and "repeated for each query head" in said
    check_heads_not_repeated(item, views(2, 2), roles=FORWARD)  # no grouped heads, nothing repeated


def test_strided_tensors_cross_the_sandbox_laid_out_as_they_are_and_a_bad_order_is_refused():
    import numpy as np

    from autograder.sandbox import values
    from autograder.sandbox.wire import WireError

    made = tensor(2, 3, 5, 16, memory=STRIDED).make(np.random.default_rng(0))
    assert not made.is_contiguous() and made.transpose(1, 2).is_contiguous()
    back = values.decode(values.encode(made))
    assert back.stride() == made.stride() and torch.equal(back, made)
    sliced = torch.randn(4, 6)[:, ::2]  # not a permutation of a contiguous tensor: it crosses contiguous
    assert values.decode(values.encode(sliced)).is_contiguous()
    body = values.encode(made)
    body["tensor"]["memory"] = [0, 0, 1, 3]
    with pytest.raises(WireError, match="memory order"):
        values.decode(body)
    with pytest.raises(ValueError, match="memory"):
        tensor(2, 3, memory=(0, 2))
