"""What a student's kernels did when the grader ran them again: what they wrote, and which blocks they visited.

:func:`judge` compares what the student's function returned with what the replayed kernels wrote
(:mod:`autograder.calls.launches` laid the replay out, :mod:`autograder.sandbox.replay` ran it): each output must be
one of the kernels' tensors (reshaped, cast or scaled), or the kernels did not compute it; and no program held a
tile of ``Lq × Lk`` scores. :func:`hidden_blocks` reads which rows of the queries and keys each replayed program
touched: with a causal mask, aligned bottom-right (query i sees the keys j <= i + Lk - Lq), a program that holds a
block of queries may touch no more than one block of keys past the last key the block's last row sees, and one that
holds a block of keys no more than one block of queries before the first query that sees the block's first key.
Problems are returned as sentences for a check's failure.
"""

from __future__ import annotations

import torch

from autograder.calls.launches import Plan, Sizes, View, canonical, kernel_name, matching


def _final(plan: Plan, result: dict, view: View) -> torch.Tensor | None:
    storages = result.get("storages")
    numbering = {number: i for i, number in enumerate(sorted({v.storage for v in plan.views}))}
    if not isinstance(storages, list):
        return None
    storage = storages[numbering[view.storage]]
    if not isinstance(storage, torch.Tensor) or storage.numel() < view.end:
        return None
    return torch.as_strided(storage, view.shape, view.stride, view.offset)


def judge(plan: Plan, result: dict, returned: dict[str, torch.Tensor]) -> list[str]:
    """The problems with a replay: the kernels stopped, held a tile of ``Lq × Lk`` scores, or did not write what the
    student's function returned (``returned``: output name -> tensor)."""
    problems = []
    if result.get("error"):
        where = result.get("launch")
        kernel = kernel_name(plan.record, where) if isinstance(where, int) else "a kernel"
        return [f"run again by the grader on the same arguments, {kernel} stopped: {str(result['error'])[:200]}"]
    sizes = plan.sizes
    if int(result.get("largest_dot", 0)) >= sizes.queries * sizes.keys:
        problems.append(
            f"a program holds a tile of {sizes.queries} x {sizes.keys} scores or more at once, the whole matrix of a "
            "head: walk through the keys block_k at a time"
        )
    poisoned = {(launch, storage) for launch, storage in result.get("poison_read", [])}
    for name, value in returned.items():
        if not isinstance(value, torch.Tensor):
            continue
        target = canonical(value)
        if not any(_holds(_final(plan, result, view), target, sizes) for view in plan.views):
            problems.append(
                f"{name} is not what its kernels wrote: return the tensors the kernels write (reshaped "
                "or cast), computed in the kernels from q, k and v"
            )
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
            "zeros, a few numbers per query, and what other kernels wrote"
        )
    return problems


def _storage_index(plan: Plan, view: View) -> int:
    return sorted({v.storage for v in plan.views}).index(view.storage)


def _holds(candidate: torch.Tensor | None, target: torch.Tensor, sizes: Sizes) -> bool:
    """Whether ``candidate`` (what a kernel left in a view) holds ``target`` (a returned output, canonical), up to a
    permutation of its dimensions, a scale and a cast, or in its first rows (a padded buffer)."""
    if candidate is None or not torch.isfinite(target).all():
        return False
    if matching(candidate, target, loose=target.dtype in (torch.float16, torch.bfloat16)) is not None:
        return True
    flat = canonical(candidate) if candidate.dim() >= 2 else None
    if flat is None or flat.shape[0] != target.shape[0] or flat.dim() != target.dim():
        return False
    if flat.shape[1] > target.shape[1] and flat.shape[2:] == target.shape[2:]:
        return matching(flat[:, : target.shape[1]].contiguous(), target) is not None
    return False


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
