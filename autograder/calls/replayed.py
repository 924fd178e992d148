"""What a student's kernels did when the grader ran them again: what they wrote, and which blocks they visited.

:func:`judge` compares what the replayed kernels stored (:mod:`autograder.calls.launches` laid the replay out,
:mod:`autograder.sandbox.replay` ran it, from the grader's own inputs) with the grader's own reference
(:func:`references`: :mod:`attention_course.kernels.plain`, in float64): each output must be held, to the check's
tolerance, by a tensor of the kernels (reshaped, its dimensions permuted, cast, or in the first rows of a padded
buffer), in elements that a replayed kernel stored (or zeros the grader gave where the reference is 0); and no
program made a tensor as large as the whole ``Lq × Lk`` matrix of scores of a head and larger than a tiled kernel
holds (:func:`tile`: a block of scores times the head size, a broadcast product before its sum). What the student's
function returned, and what its code saw of the record, decide nothing: they only word a message.
:func:`hidden_blocks` reads which rows of the queries and keys each replayed program touched: with a causal mask,
aligned bottom-right (query i sees the keys j <= i + Lk - Lq), a program that holds a block of queries may touch no
more than one block of keys past the last key the block's last row sees, and one that holds a block of keys no more
than one block of queries before the first query that sees the block's first key. :func:`copied` and
:func:`repeated` read how the launches were handed the inputs: a strided input (a ``(B, H, L, d)`` view of a
``(B, L, H, d)`` tensor) read in place, not copied into another layout first; and grouped-query keys and values not
repeated for each query head in memory. Problems are returned as sentences for a check's failure.
"""

from __future__ import annotations

import math

import torch

from attention_course.kernels import plain
from autograder.calls.launches import Plan, View, kernel_name
from autograder.sandbox.layouts import agrees, canonical, matching

FORWARD = ("output", "lse")
BACKWARD = ("grad_q", "grad_k", "grad_v")


def references(inputs: dict[str, torch.Tensor], names, causal: bool) -> dict[str, torch.Tensor]:
    """The right value of each output of ``names`` (among :data:`FORWARD` and :data:`BACKWARD`), computed by the
    grader from the check's inputs (by role) in float64, canonical."""
    unknown = sorted(set(names) - {*FORWARD, *BACKWARD})
    if unknown:
        raise ValueError(f"outputs must be among {FORWARD + BACKWARD}, got {unknown}")
    q, k, v = (inputs[role].detach().double() for role in ("q", "k", "v"))
    values = {}
    if set(names) & set(FORWARD):
        values.update(zip(FORWARD, plain.attention(q, k, v, causal)))
    if set(names) & set(BACKWARD):
        if "grad_output" not in inputs:
            raise ValueError(f"roles must name grad_output for the outputs {sorted(set(names) & set(BACKWARD))}")
        grads = plain.attention_gradients(q, k, v, inputs["grad_output"].detach().double(), causal)
        values.update(zip(BACKWARD, grads))
    return {name: canonical(values[name].double()) for name in names}


def _final(plan: Plan, result: dict, view: View, key: str = "storages") -> torch.Tensor | None:
    storages = result.get(key)
    numbering = {number: i for i, number in enumerate(sorted({v.storage for v in plan.views}))}
    if not isinstance(storages, list) or len(storages) != len(numbering):
        return None
    storage = storages[numbering[view.storage]]
    if not isinstance(storage, torch.Tensor) or storage.numel() < view.end:
        return None
    return torch.as_strided(storage, view.shape, view.stride, view.offset)


def _written(plan: Plan, result: dict, view: View) -> torch.Tensor | None:
    """What the replayed kernels left in ``view``, in float64: NaN where no kernel stored (but a zero the grader
    gave)."""
    final, stored = _final(plan, result, view), _final(plan, result, view, "stored")
    if final is None or stored is None or stored.dtype != torch.bool or not stored.any():
        return None
    values = final.detach().double().clone()
    values[~stored & (values != 0)] = float("nan")
    return values


def tile(block_q: int, block_k: int, head: int) -> int:
    """The most numbers a program of a tiled kernel holds at once: a ``block_q × block_k`` tile of scores times the
    head size (the broadcast product ``q[:, None, :] * k[None, :, :]`` before its sum over the features, or
    ``p[:, :, None] * v[None, :, :]``), each rounded up to a power of two as Triton's blocks are."""
    if min(block_q, block_k, head) < 1:
        raise ValueError(f"block_q, block_k and head must be positive, got {block_q}, {block_k}, {head}")
    return math.prod(1 << (n - 1).bit_length() for n in (block_q, block_k, head))


def judge(
    plan: Plan,
    result: dict,
    expected: dict[str, torch.Tensor],
    returned: dict[str, torch.Tensor],
    rtol: float,
    atol: float,
    blocks: tuple[int, int, int] | None = None,
) -> list[str]:
    """The problems with a replay: the kernels stopped, made a tensor as large as the whole matrix of scores of a
    head (``Lq × Lk`` numbers) and larger than a tiled kernel's (:func:`tile` of ``blocks``: the call's block_q,
    block_k and head size; None: no tile allowed beyond the whole matrix's bound), or stored no tensor that holds an
    output's right value (``expected``: output name -> reference, canonical). ``returned`` (what the student's
    function returned) words the message only."""
    problems = []
    if result.get("error"):
        where = result.get("launch")
        kernel = kernel_name(plan.record, where) if isinstance(where, int) else "a kernel"
        return [f"run again by the grader on the same arguments, {kernel} stopped: {str(result['error'])[:200]}"]
    sizes = plan.sizes
    bound = max(sizes.queries * sizes.keys, tile(*blocks) + 1 if blocks else 0)
    if int(result.get("largest", 0)) >= bound:
        tiled = f"{blocks[0]} x {blocks[1]} scores times the head size, {blocks[2]}," if blocks else ""
        problems.append(
            f"a program holds a tensor of {bound} numbers or more at once (made by tl.dot, a broadcast product or "
            f"any other operation): as many as the whole {sizes.queries} x {sizes.keys} matrix of scores of a head"
            + (f", and more than a tile of {tiled} holds" if blocks else "")
            + ": walk through the keys block_k at a time"
        )
    written = [_written(plan, result, view) for view in plan.views]
    for name, reference in expected.items():
        if any(agrees(values, reference, rtol, atol) for values in written if values is not None):
            continue
        value = returned.get(name)
        if isinstance(value, torch.Tensor) and any(_holds(values, canonical(value)) for values in written):
            problems.append(
                f"{name} is what its kernels wrote, run again by the grader on the same arguments, but not its right "
                "value: the value tests of this item say where it differs"
            )
        else:
            problems.append(
                f"{name} is not what its kernels wrote: run again by the grader on the same arguments, no tensor its "
                f"kernels stored holds the right {name}; return the tensors the kernels write (reshaped or cast), "
                "computed in the kernels from q, k and v"
            )
    poisoned = {(launch, storage) for launch, storage in result.get("poison_read", [])}
    if problems and poisoned:
        names = sorted(
            {
                f"{kernel_name(plan.record, launch)}'s {plan.record.names.word(view.name)}"
                for launch, storage in poisoned
                for view in plan.views
                if view.launch == launch and _storage_index(plan, view) == storage
            }
        )
        problems.append(
            f"{', '.join(names[:3])}: read before any kernel wrote it, what the launcher computed in PyTorch or "
            "left as torch.empty made it; the grader gives the kernels only q, k and v (reshaped, scaled or cast), "
            "zeros, Δ (which it computes itself from the backward's output and grad_output), and what other "
            "kernels wrote"
        )
    return problems


def _storage_index(plan: Plan, view: View) -> int:
    return sorted({v.storage for v in plan.views}).index(view.storage)


def _holds(candidate: torch.Tensor | None, target: torch.Tensor) -> bool:
    """Whether ``candidate`` (what the kernels stored in a view) holds ``target`` (a returned output, canonical),
    laid out any way, non-finite numbers and all: for a message's words only."""
    return agrees(candidate, target.detach().double(), 1e-3, 1e-3, equal_nan=True)


def hidden_blocks(plan: Plan, result: dict, block_q: int, block_k: int) -> list[str]:
    """With a causal mask aligned bottom-right: the programs that touched more than one block of keys past the last
    key their last query sees, or of queries before the first query that sees their first key (the blocks that the
    mask hides entirely)."""
    sizes = plan.sizes
    shift = sizes.keys - sizes.queries  # query i sees the keys j <= i + shift
    late = early = None  # the first program that visits a block of keys, or of queries, that the mask hides
    for entry in _programs(result.get("programs")):
        # which program is left out: the kernel's own choice could carry data
        where = f"a program of {kernel_name(plan.record, entry['launch'])}"
        queries = _by_head(entry["query_loaded"], sizes.queries)
        keys = _by_head(entry["key_loaded"], sizes.keys)
        tried_keys = _by_head(entry["key_tried"], sizes.keys)
        tried_queries = _by_head(entry["query_tried"], sizes.queries)
        # a program's block of queries (keys) is the whole block that holds its last query (first key): the last
        # block of a sequence, cut short by its end, still stops where its full block would
        if late is None and any(
            sum(key > (max(rows) // block_q + 1) * block_q - 1 + shift for key in tried_keys.get(head, ())) >= block_k
            for head, rows in queries.items()
        ):
            late = (
                f"{where} visits keys that none of its queries sees: with causal=True, stop at the block of keys that "
                "holds the last key its last query sees"
            )
        if early is None and any(
            sum(query < min(rows) // block_k * block_k - shift for query in tried_queries.get(head, ())) >= block_q
            for head, rows in keys.items()
        ):
            early = (
                f"{where} visits queries that see none of its keys: with causal=True, start at the block of queries "
                "that holds the first query that sees its first key"
            )
    return [problem for problem in (late, early) if problem]


def _programs(table) -> list[dict]:
    """The replay's table of programs (:func:`autograder.sandbox.replay.replay`), one dict per program."""
    names = ("query_tried", "query_loaded", "key_tried", "key_loaded")
    if not isinstance(table, dict) or not isinstance(table.get("where"), torch.Tensor):
        return []
    where = table["where"].tolist()
    parts = {}
    for name in names:
        rows, ends = table.get(name), table.get(f"{name}_ends")
        if not isinstance(rows, torch.Tensor) or not isinstance(ends, torch.Tensor) or len(ends) != len(where):
            return []
        ends = ends.tolist()
        parts[name] = [rows[start:end].tolist() for start, end in zip([0, *ends[:-1]], ends)]
    return [{"launch": row[0], **{name: parts[name][i] for name in names}} for i, row in enumerate(where)]


def _by_head(rows, length: int) -> dict[int, list[int]]:
    heads: dict[int, list[int]] = {}
    for row in rows:
        heads.setdefault(int(row) // length, []).append(int(row) % length)
    return heads


def _canonical_offsets(shape, stride, offset: int, permutation: tuple, canon_shape) -> torch.Tensor:
    """The storage offset of each element of a canonical ``(N, L, d)`` tensor, for a view (``shape``, ``stride``,
    ``offset``) that holds it with its dimensions permuted by ``permutation`` (:func:`layouts.matching`)."""
    end = offset + sum((n - 1) * s for n, s in zip(shape, stride)) + 1
    where = torch.as_strided(torch.arange(end), tuple(shape), tuple(stride), offset).reshape(-1)
    permuted = where.reshape([canon_shape[p] for p in permutation])
    return permuted.permute([permutation.index(i) for i in range(len(permutation))])


def copied(plan: Plan, inputs: dict[str, torch.Tensor], roles=("q", "k", "v", "grad_output")) -> list[str]:
    """The inputs among ``roles`` that the caller handed over strided (not contiguous) and that no launch reads where
    they lie: every tensor of the launches that holds one lays it out otherwise, a copy the launcher made (the
    ``.contiguous()`` of a view). An input no launch holds at all is left to the other checks."""
    copies = []
    for role in roles:
        given = inputs.get(role)
        if not isinstance(given, torch.Tensor) or given.dim() < 3 or given.is_contiguous():
            continue
        canon = canonical(given)
        mine = torch.as_strided(
            torch.arange(given.storage_offset() + sum((n - 1) * s for n, s in zip(given.shape, given.stride())) + 1),
            given.shape,
            given.stride(),
            given.storage_offset(),
        ).reshape(canon.shape)
        mine = mine - mine.min()
        held = False
        for view in plan.views:
            found = matching(view.data, canon) if view.data is not None else None
            if found is None:
                continue
            held = True
            theirs = _canonical_offsets(view.shape, view.stride, view.offset, found[0], canon.shape)
            if torch.equal(theirs - theirs.min(), mine):
                break
        else:
            if held:
                copies.append(role)
    if not copies:
        return []
    names = ", ".join(copies[:-1]) + (" and " if len(copies) > 1 else "") + copies[-1]
    return [
        f"the kernels read a copy of {names}, laid out otherwise than the caller's tensors: strided views (a "
        "(B, H, L, d) view of a (B, L, H, d) tensor) copied before the launch (.contiguous(), or an operation that "
        "makes a new tensor)"
    ]


def repeated(plan: Plan, inputs: dict[str, torch.Tensor]) -> list[str]:
    """Where the keys or values have fewer heads than the queries (grouped-query heads): the launches that were
    handed them repeated for each query head, a copy in memory (``repeat_interleave``, ``expand(...).contiguous()``)
    rather than the key/value head found in the kernel."""
    q = inputs.get("q")
    problems = []
    for role in ("k", "v"):
        given = inputs.get(role)
        if not isinstance(q, torch.Tensor) or not isinstance(given, torch.Tensor) or q.dim() < 3:
            continue
        if given.dim() != q.dim() or given.shape[-3] == q.shape[-3]:
            continue
        try:
            canon = canonical(plain.grouped(q.detach(), given.detach()))
        except ValueError:
            continue
        if any(view.data is not None and matching(view.data, canon) is not None for view in plan.views):
            problems.append(
                f"{role} has {given.shape[-3]} heads for the queries' {q.shape[-3]}, and the kernels were handed it "
                "repeated for each query head, a copy in memory (repeat_interleave, expand(...).contiguous()): "
                "grouped-query heads share their key/value head, which the kernel finds itself, query head h "
                "reading key/value head h // (H_q // H_kv)"
            )
    return problems
