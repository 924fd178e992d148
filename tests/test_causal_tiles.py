"""Chapter 11's two-stage causal loop counted in Triton's interpreter (attention_course/kernels/tiles.py): both loops
compute the tiles that hold a visible (query, key) pair, and the two stages mask exactly the tiles the diagonal cuts,
counted here from the mask itself."""

from __future__ import annotations

import pytest

from attention_course.kernels.costs import causal_mask
from attention_course.kernels.tiles import causal_tile_counts


def _from_the_mask(lq: int, lk: int, bq: int, bk: int) -> tuple[int, int]:
    """(tiles that hold a visible pair, tiles that also hold a hidden one), each block of queries cut at Lq, from the
    mask aligned bottom-right; a tile reaching past Lk counts as cut (its keys past the end are masked too)."""
    seen = causal_mask(lq, lk, "bottom-right")
    tiles = cut = 0
    for i in range(0, lq, bq):
        rows = seen[i : i + bq]
        for j in range(0, lk, bk):
            tile = rows[:, j : j + bk]
            if tile.any():
                tiles += 1
                cut += int(not tile.all() or j + bk > lk)
    return tiles, cut


@pytest.mark.parametrize(
    "lq,lk,bq,bk", [(64, 64, 16, 16), (128, 128, 32, 16), (96, 96, 16, 32), (40, 56, 16, 16), (48, 32, 16, 16)]
)
def test_the_two_stages_mask_only_the_tiles_the_diagonal_cuts(lq, lk, bq, bk):
    counts = causal_tile_counts(lq, lk, bq, bk)
    tiles, cut = _from_the_mask(lq, lk, bq, bk)
    assert counts["one_loop"] == {"tiles": tiles, "masked": tiles}
    assert counts["two_stages"] == {"tiles": tiles, "masked": cut}


def test_at_a_long_sequence_the_two_stages_mask_one_tile_in_sixteen():
    counts = causal_tile_counts(4096, block_q=128, block_k=64)
    assert counts["two_stages"]["tiles"] == counts["one_loop"]["tiles"] == 32 * 33
    assert counts["two_stages"]["masked"] == 64  # two tiles of 64 keys on the diagonal of each block of 128 queries


@pytest.mark.parametrize("name,value", [("n_queries", 0), ("block_k", 1.5), ("block_q", True)])
def test_bad_sizes_are_refused_by_name(name, value):
    sizes = {"n_queries": 64, "n_keys": 64, "block_q": 16, "block_k": 16, name: value}
    with pytest.raises(ValueError, match=name):
        causal_tile_counts(**sizes)
