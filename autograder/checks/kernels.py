"""The checks of how an item computes: in Triton kernels it launches, skipping the blocks a causal mask hides.

Each runs the item once, recording the kernels it launches, then has the grader run those launches again where
the student's code cannot reach, on the grader's own inputs, and reads what they stored and touched
(:mod:`autograder.calls.launches`, :mod:`autograder.calls.replayed`): the outputs the replayed kernels stored must
be the grader's own reference, so an item that returns the right values without its kernels computing them fails,
whatever its code saw of the record; so does a kernel whose values are wrong (the value checks say where).
"""

from __future__ import annotations

import inspect

from autograder.api.items import CheckFailed, Item
from autograder.api.options import CompareOptions, compares
from autograder.calls import kernel_source, launches, replayed
from autograder.calls.call import Call, CallOptions, takes_options
from autograder.calls.isolation import isolated
from autograder.calls.shared import copy_of, shared

ROLES = ("q", "k", "v", "output", "lse", "grad_output")


def _replayed(call: Call, roles: tuple[str, ...], names: tuple[str, ...]):
    """Run the item, recording its launches; run them again: ``(plan, result, returned, trace, expected)``,
    ``expected`` the reference of each output (``names``, or all the item's). The check fails where
    the launches cannot be replayed (none, too many, a kernel that is not Triton code alone, a tensor as large as
    the whole matrix of scores, a source longer than the grader reads). A message names a kernel by what the
    submission's source defines, and nothing else that the record holds (:func:`launches.kernel_name`,
    :func:`launches.scrubbed`).
    The kernel checks of one notebook share a call and its replay (:func:`autograder.calls.shared.shared`): those on the
    same inputs read the same launches, run again once."""
    unknown = set(roles) - set(ROLES)
    if unknown:
        raise ValueError(f"roles must name inputs among {ROLES}, got {sorted(unknown)}")
    plan, result, returned, trace = shared(
        call.shared_key("replayed", roles),
        lambda: _replay(call, roles),
        lambda found: (*found[:2], copy_of(found[2]), found[3]),
    )
    names = names or tuple(returned)
    inputs = dict(zip(roles, call.inputs))
    expected = replayed.references(inputs, names, bool(call.keywords.get("causal", False)))
    return plan, result, {name: returned[name] for name in names}, trace, expected


def _blocks(call: Call, roles: tuple[str, ...]) -> tuple[int, int, int] | None:
    """The tile a program of a tiled kernel may hold on this call (:func:`replayed.judge`): the block_q and block_k
    that the call asks for (or the item's defaults) and the head size, q's last dimension. None where the item takes
    no such blocks: then a tensor as large as the whole matrix of scores is refused whatever its shape."""
    try:
        bound = inspect.signature(call.item.obj).bind_partial(*call.inputs, **call.keywords)
        bound.apply_defaults()
        arguments = bound.arguments
    except (TypeError, ValueError):
        arguments = call.keywords
    blocks = [arguments.get(name) for name in ("block_q", "block_k")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in blocks):
        return None
    return blocks[0], blocks[1], int(call.inputs[roles.index("q")].shape[-1])


def _replay(call: Call, roles: tuple[str, ...]):
    inputs = dict(zip(roles, call.inputs))
    q, k = inputs["q"], inputs["k"]
    sizes = launches.Sizes(q.numel() // (q.shape[-2] * q.shape[-1]), q.shape[-2], k.shape[-2])
    with launches.traced(call.item.obj) as trace:
        returned = call.outputs(call.run())
    try:
        record = launches.read(trace.data, sizes, trace.source)
        launched = [x.kernel for x in record.launches]
        program = kernel_source.program(record.functions, record.constants, launched, record.names)
        plan = launches.plan(record, inputs, sizes)
    except (launches.Refused, kernel_source.KernelRefused) as exc:
        call.fail(launches.scrubbed(str(exc), trace))
    result = trace.replay(program, plan.request)
    if not isinstance(result, dict):
        call.fail("the grader could not run its kernels again")
    return plan, result, returned, trace


def _judged(call: Call, roles, compared: CompareOptions, outputs: tuple[str, ...], then=None) -> None:
    """Fail ``call`` unless its launches, run again (:func:`_replayed`), store the grader's right values of
    ``outputs`` within one tile a program (:func:`replayed.judge`) and, those right, ``then(plan, result)`` (a
    check's own property) finds no problem."""
    plan, result, returned, trace, expected = _replayed(call, tuple(roles), outputs)
    blocks = _blocks(call, tuple(roles))
    problems = replayed.judge(plan, result, expected, returned, compared.rtol, compared.atol, blocks)
    problems = problems or (then(plan, result) if then else [])
    if problems:
        call.fail(launches.scrubbed("; ".join(problems), trace))


@isolated(diagnose=False)
@takes_options("seed")
@compares(
    "outputs",
    "rtol",
    "atol",
    hint="launch Triton kernels that compute the outputs from q, k and v one block at a time, and return what they "
    "write: the right values (the value tests say where they differ)",
    rtol=1e-4,
    atol=1e-4,
)
def check_kernels_compute(
    item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions, roles: tuple[str, ...]
):
    """The item's outputs (or those named in ``outputs``: ``output``, ``lse``, ``grad_q``, ``grad_k``, ``grad_v``)
    are computed by Triton kernels it launches: run again by the grader (:mod:`autograder.calls.launches`) on the
    grader's own inputs, the kernels store each output's right value (the grader's reference, to ``rtol`` and
    ``atol``; reshaped or cast as the student likes), and no program holds a tensor of ``Lq × Lk`` numbers (the
    whole matrix of scores of a head) that is larger than a tiled kernel's, a ``block_q × block_k`` tile of scores
    times the head size (a broadcast product before its sum; the blocks the call asks for, or the item's defaults).
    ``roles`` names the positional inputs, in order, by what they are (:data:`ROLES`: ``"q"``, ``"k"``, ``"v"``,
    ``"output"``, ``"lse"``, ``"grad_output"``)."""
    call = options.call(item, "computed by its Triton kernels", args, kwargs, compared.hint)
    _judged(call, roles, compared, tuple(compared.outputs or ()))


@isolated(diagnose=False)
@takes_options("seed")
@compares(
    "rtol",
    "atol",
    hint="with causal=True (query i sees the keys j <= i + Lk - Lq), stop each program's loop over the keys at the "
    "block that holds the last key its last query sees, and start its loop over the queries at the block that holds "
    "the first query that sees its first key",
    rtol=1e-4,
    atol=1e-4,
)
def check_skips_hidden_blocks(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    compared: CompareOptions,
    roles: tuple[str, ...],
    block_q: int,
    block_k: int,
):
    """With a causal mask (the call's ``kwargs``), no program of the item's kernels touches more than one block of
    keys (``block_k``) past the last query it holds, nor more than one block of queries (``block_q``) before the
    first key it holds: the blocks that the mask hides entirely are skipped, not loaded and masked. The kernels must
    compute the outputs (:func:`check_kernels_compute`'s property, to ``rtol`` and ``atol``) for this to be read;
    the rows a program touches are those of the inputs it reads, or of a copy of them that kernels wrote."""
    call = options.call(item, "skips the blocks that the causal mask hides", args, kwargs, compared.hint)
    _judged(call, roles, compared, (), lambda plan, result: replayed.hidden_blocks(plan, result, block_q, block_k))


OUTSIDE = "outside the tensors"  # what the replay says of an access that leaves them (autograder.sandbox.replay)


@isolated(diagnose=False)
@takes_options("seed")
@compares(
    hint="the loads past the end of the last block are not masked: give every tl.load and tl.store of a block that "
    "can run past Lq or Lk a mask (rows < Lq, keys < Lk), and the loads an `other`",
)
def check_accesses_in_bounds(
    item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions, roles: tuple[str, ...]
):
    """No program of the item's kernels loads or stores outside the tensors it was given, where no mask keeps it
    inside: the grader runs the launches again (:func:`check_kernels_compute`'s replay, shared with it) and its
    interpreter stops at such an access. An unmasked load past the end reads, in the student's own process, whatever
    memory follows the tensor: values that are wrong, or by chance right, and differ from run to run; the replay
    names the cause. An item whose launches cannot be replayed, or whose kernels compute wrong values, passes here:
    :func:`check_kernels_compute` and the value checks grade those."""
    call = options.call(item, "keeps its loads and stores inside the tensors", args, kwargs, compared.hint)
    try:
        _plan, result, _returned, trace, _expected = _replayed(call, tuple(roles), ())
    except CheckFailed:  # no replay (no kernel, a record refused): other checks' business
        return
    error = str(result.get("error") or "")
    if OUTSIDE in error:
        call.fail(launches.scrubbed(f"run again by the grader on the same arguments, a kernel stopped: {error}", trace))


@isolated(diagnose=False)
@takes_options("seed")
@compares(
    "rtol",
    "atol",
    hint="hand the kernel q, k and v as they come, a strided view too (a (B, H, L, d) view of a (B, L, H, d) "
    "tensor), and read them through their strides: x.stride(...) passed to the kernel, the offset of an element "
    "batch * stride_b + head * stride_h + row * stride_l + feature; no .contiguous() copy before the launch",
    rtol=1e-4,
    atol=1e-4,
)
def check_reads_inputs_in_place(
    item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions, roles: tuple[str, ...]
):
    """The item's kernels read each strided input (``q``, ``k``, ``v``, ``grad_output`` among ``roles``, handed
    over as a view that is not contiguous) where it lies: no tensor of the launches holds it copied into another
    layout (:func:`replayed.copied`). The kernels must compute the outputs (:func:`check_kernels_compute`'s
    property) for this to be read: a record that claims the caller's layout is replayed in it."""
    call = options.call(item, "reads strided inputs in place", args, kwargs, compared.hint)
    _judged(call, roles, compared, (), lambda plan, _result: replayed.copied(plan, dict(zip(roles, call.inputs))))


@isolated(diagnose=False)
@takes_options("seed")
@compares(
    "rtol",
    "atol",
    hint="grouped-query heads: do not repeat k and v for each query head before the launch (repeat_interleave, "
    "expand(...).contiguous()); launch one program per query head and let it find its key/value head, "
    "head // (H_q // H_kv), reading k and v of that head through their strides",
    rtol=1e-4,
    atol=1e-4,
)
def check_heads_not_repeated(
    item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions, roles: tuple[str, ...]
):
    """With grouped-query heads (``k`` and ``v`` with fewer heads than ``q``, the third dimension from the end), the
    item's kernels are handed each key/value head once: no tensor of the launches holds k or v repeated for each
    query head (:func:`replayed.repeated`). The kernels must compute the outputs for this to be read."""
    call = options.call(item, "keeps one copy of each key/value head", args, kwargs, compared.hint)
    _judged(call, roles, compared, (), lambda plan, _result: replayed.repeated(plan, dict(zip(roles, call.inputs))))
