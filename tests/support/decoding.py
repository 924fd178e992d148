"""Running a decoder-only model over a sequence in pieces, with its key/value cache."""

from __future__ import annotations

import torch


def logits_fed_in_pieces(model, ids, sizes):
    """The logits of ``ids`` computed ``sizes[0]`` positions first, then ``sizes[1]``, ..., with the
    cache, and the last cache."""
    cache, pieces, start = None, [], 0
    for size in sizes:
        logits, cache = model.extend(ids[:, start : start + size], cache)
        pieces.append(logits)
        start += size
    assert start == ids.size(1)
    return torch.cat(pieces, dim=1), cache
