"""Wrong answers to ch03_multi_head that students really write.

Each is the reference answer with one realistic mistake in it (:func:`tests.buggy.variant`).
"""

from functools import partial

from tests.buggy import Bug, variant

TESTS = {
    "split_heads": ["test_split_heads_shapes", "test_split_heads_values", "test_split_heads_error"],
    "merge_heads": ["test_merge_heads"],
    "MultiHeadAttention": ["test_mha_shapes", "test_mha_matches_torch", "test_mha_mask", "test_mha_error"],
    "multi_head_parameters": ["test_multi_head_parameters"],
    "score_multiplications": ["test_score_multiplications"],
    "right_slices": ["test_right_slices"],
    "reweighted_heads": ["test_reweighted_heads"],
}

split = partial(variant, "ch03_multi_head", "split_heads")
merge = partial(variant, "ch03_multi_head", "merge_heads")
mha = partial(variant, "ch03_multi_head", "MultiHeadAttention")

SPLIT_VIEW = "x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)"
SPLIT_CHECK = """    if d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} does not divide the feature size {d_model} of x")
"""
MHA_CHECK = """        if d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
"""

mh_parameters = partial(variant, "ch03_multi_head", "multi_head_parameters")
multiplications = partial(variant, "ch03_multi_head", "score_multiplications")


BUGS = [
    # ------------------------------------------------------------------ split_heads
    Bug(
        "split_without_transpose",
        "split_heads",
        why="a single view to (B, H, L, dh) mixes positions and heads",
        cause="mixes positions and heads",
        code=split((SPLIT_VIEW, "x.reshape(batch, num_heads, length, d_model // num_heads)")),
    ),
    Bug(
        "split_strided_features",
        "split_heads",
        why="head h gets every H-th feature instead of a slice",
        cause="gets every H-th feature",
        code=split((SPLIT_VIEW, "x.view(batch, length, d_model // num_heads, num_heads).permute(0, 3, 1, 2)")),
    ),
    Bug(
        "split_forgets_to_transpose",
        "split_heads",
        why="returns (B, L, H, dh)",
        cause="the heads must come before the positions",
        code=split((".transpose(1, 2)", "")),
    ),
    Bug(
        "split_no_value_error",
        "split_heads",
        why="lets view raise a RuntimeError",
        cause="raise a ValueError",
        code=split((SPLIT_CHECK, "")),
    ),
    Bug(
        "split_error_without_name",
        "split_heads",
        why="a ValueError that does not say which argument",
        cause="whose message names num_heads",
        code=split(
            (
                'f"num_heads={num_heads} does not divide the feature size {d_model} of x"',
                '"the feature size is not a multiple of the number of heads"',
            )
        ),
    ),
    Bug(
        "split_num_heads_as_head_size",
        "split_heads",
        why="reads num_heads as the size of one head",
        cause="not the size of one head",
        code=split(
            (
                "x.view(batch, length, num_heads, d_model // num_heads)",
                "x.view(batch, length, d_model // num_heads, num_heads)",
            )
        ),
    ),
    Bug(
        "split_assert",
        "split_heads",
        why="an assert, which raises AssertionError (and disappears under python -O)",
        cause="raise a ValueError",
        code=split(
            (SPLIT_CHECK, '    assert d_model % num_heads == 0, f"num_heads={num_heads} must divide {d_model}"\n')
        ),
    ),
    # ------------------------------------------------------------------ merge_heads
    Bug(
        "merge_without_transpose",
        "merge_heads",
        why="reshapes (B, H, L, dh) straight to (B, L, D)",
        cause="mixes positions and heads",
        code=merge(("x.transpose(1, 2).reshape", "x.reshape")),
    ),
    Bug(
        "merge_view_after_transpose",
        "merge_heads",
        why="view on a non-contiguous tensor raises",
        cause="no longer laid out in order in memory",
        code=merge((".reshape(", ".view(")),
    ),
    Bug(
        "merge_wrong_permute",
        "merge_heads",
        why="puts dh before H: interleaves the heads' features",
        cause="the heads' features are interleaved",
        code=merge(("x.transpose(1, 2)", "x.permute(0, 2, 3, 1)")),
    ),
    Bug(
        "merge_transposes_wrong_pair",
        "merge_heads",
        why="swaps positions and features instead of heads and positions",
        cause="the wrong pair of dimensions is swapped",
        code=merge(("x.transpose(1, 2)", "x.transpose(2, 3)")),
    ),
    # ------------------------------------------------------------------ MultiHeadAttention
    Bug(
        "mha_scale_by_d_model",
        "MultiHeadAttention",
        why="divides by sqrt(d_model), not sqrt(d_head)",
        cause="the square root of d_model",
        code=mha(("math.sqrt(q.size(-1))", "math.sqrt(query.size(-1))")),
    ),
    Bug(
        "mha_scale_by_num_heads",
        "MultiHeadAttention",
        why="divides by sqrt(num_heads)",
        cause="the square root of the number of heads",
        code=mha(("math.sqrt(q.size(-1))", "math.sqrt(self.num_heads)")),
    ),
    Bug(
        "mha_no_scaling",
        "MultiHeadAttention",
        why="forgets the 1/sqrt(d_head)",
        cause="not divided by √d_h",
        code=mha((" / math.sqrt(q.size(-1))", "")),
    ),
    Bug(
        "mha_no_output_projection",
        "MultiHeadAttention",
        why="forgets W_o",
        cause="through the output projection W_o",
        code=mha(("self.W_o(merge_heads(weights @ v))", "merge_heads(weights @ v)")),
    ),
    Bug(
        "mha_heads_without_transpose",
        "MultiHeadAttention",
        why="splits heads with one view",
        cause="mixes positions and heads",
        code=mha(
            (
                "split_heads(self.W_q(query), self.num_heads)",
                "self.W_q(query).view(query.size(0), self.num_heads, query.size(1), -1)",
            ),
            (
                "split_heads(self.W_k(key), self.num_heads)",
                "self.W_k(key).view(key.size(0), self.num_heads, key.size(1), -1)",
            ),
            (
                "split_heads(self.W_v(value), self.num_heads)",
                "self.W_v(value).view(value.size(0), self.num_heads, value.size(1), -1)",
            ),
            ("merge_heads(weights @ v)", "(weights @ v).reshape(query.size(0), query.size(1), -1)"),
        ),
    ),
    Bug(
        "mha_keys_projected_with_W_q",
        "MultiHeadAttention",
        why="copy-paste: W_q for the keys",
        cause="projected with W_k, not with W_q",
        code=mha(("self.W_k(key)", "self.W_q(key)")),
    ),
    Bug(
        "mha_values_from_key",
        "MultiHeadAttention",
        why="copy-paste: W_v applied to key",
        cause="projected from value, not from key",
        code=mha(("self.W_v(value)", "self.W_v(key)")),
    ),
    Bug(
        "mha_mask_inverted",
        "MultiHeadAttention",
        why="uses nn.MultiheadAttention's True = ignore",
        cause="the mask is read the wrong way round",
        code=mha(("~mask", "mask")),
        only="test_mha_mask",
        visible="test_mha_mask",
    ),
    Bug(
        "mha_weights_averaged",
        "MultiHeadAttention",
        why="returns weights averaged over the heads",
        cause="not their average over the heads",
        code=mha(("return output, weights", "return output, weights.mean(dim=1)")),
    ),
    Bug(
        "mha_softmax_over_queries",
        "MultiHeadAttention",
        why="softmax along dim -2",
        cause="a softmax over the keys, not over the queries",
        code=mha(("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)")),
    ),
    Bug(
        "mha_nan_on_full_mask",
        "MultiHeadAttention",
        why="a query with no visible key gets NaN",
        cause="a query with no visible key gets NaN",
        code=mha(("weights = weights.masked_fill(~mask, 0.0)", "weights = weights")),
        only="test_mha_mask",
        visible="test_mha_mask",
    ),
    Bug(
        "mha_large_negative_no_zeroing",
        "MultiHeadAttention",
        why="-1e9 alone: a fully masked query gets even weights",
        cause="a large negative fill alone spreads its weight",
        code=mha(('float("-inf")', "-1e9"), ("weights = weights.masked_fill(~mask, 0.0)", "weights = weights")),
        only="test_mha_mask",
    ),
    Bug(
        "mha_mask_with_zero",
        "MultiHeadAttention",
        why="a masked score of 0 still gets weight",
        cause="a masked score set to zero still gets a share",
        code=mha(('float("-inf")', "0.0")),
        only="test_mha_mask",
        visible="test_mha_mask",
    ),
    Bug(
        "mha_mask_after_softmax",
        "MultiHeadAttention",
        why="zeroes weights without renormalising",
        cause="mask the scores before the softmax",
        code=mha(('scores = scores.masked_fill(~mask, float("-inf"))', "scores = scores")),
        only="test_mha_mask",
        visible="test_mha_mask",
    ),
    Bug(
        "mha_always_bias",
        "MultiHeadAttention",
        why="ignores bias=False",
        cause="none of the four projections may have a bias",
        code=mha(("bias=bias", "bias=True")),
    ),
    Bug(
        "mha_output_bias_always",
        "MultiHeadAttention",
        why="ignores bias=False for W_o",
        cause="none of the four projections may have a bias",
        code=mha(("self.W_o = nn.Linear(d_model, d_model, bias=bias)", "self.W_o = nn.Linear(d_model, d_model)")),
    ),
    Bug(
        "mha_no_value_error",
        "MultiHeadAttention",
        why="accepts d_model that num_heads does not divide",
        cause="building the module must raise a ValueError",
        code=mha((MHA_CHECK, "")),
    ),
    Bug(
        "mha_error_without_name",
        "MultiHeadAttention",
        why="a ValueError that does not say which argument",
        cause="whose message names num_heads",
        code=mha(('f"num_heads={num_heads} must divide d_model={d_model}"', '"d_model is not divisible"')),
    ),
    # ------------------------------------------------------------------ multi_head_parameters
    Bug(
        "mh_parameters_per_head",
        "multi_head_parameters",
        why="four d_model x d_model projections for every head",
        cause="the heads share the four projections",
        code=mh_parameters(("count = 4 * per_layer", "count = 4 * per_layer * num_heads")),
    ),
    Bug(
        "mh_parameters_no_output",
        "multi_head_parameters",
        why="counts W_q, W_k and W_v only",
        cause="the output projection W_o",
        code=mh_parameters(("count = 4 * per_layer", "count = 3 * per_layer")),
    ),
    Bug(
        "mh_parameters_no_biases",
        "multi_head_parameters",
        why="ignores the bias flag: never counts the biases",
        cause="each of the four layers has a bias vector",
        code=mh_parameters(("(d_model if bias else 0)", "0")),
    ),
    Bug(
        "mh_parameters_scalar_bias",
        "multi_head_parameters",
        why="one bias number per layer",
        cause="one number per output feature",
        code=mh_parameters(("(d_model if bias else 0)", "(1 if bias else 0)")),
    ),
    # ------------------------------------------------------------------ score_multiplications
    Bug(
        "multiplications_full_width",
        "score_multiplications",
        why="each head's dot products over all d_model features",
        cause="its own d_model // num_heads features",
        code=multiplications(("(d_model // num_heads)", "d_model")),
    ),
    Bug(
        "multiplications_one_head",
        "score_multiplications",
        why="the scores of one head only",
        cause="every head computes its own scores",
        code=multiplications(("num_heads * ", "")),
    ),
    Bug(
        "multiplications_one_sequence",
        "score_multiplications",
        why="one sequence only",
        cause="every sequence of the batch",
        code=multiplications(("batch * ", "")),
    ),
    # ------------------------------------------------------------------ right_slices
    Bug(
        "slices_diagonal",
        "right_slices",
        why="the diagonal h == l, as when there are as many positions as heads",
        cause="on the diagonal h == l only when there are as many positions as heads",
        code=variant(
            "ch03_multi_head", "right_slices", ("if h * (length - 1) == row * (num_heads - 1)]", "if h == row]")
        ),
    ),
    Bug(
        "slices_swapped",
        "right_slices",
        why="length and num_heads swapped in the condition",
        cause="length and num_heads have changed places",
        code=variant(
            "ch03_multi_head",
            "right_slices",
            ("if h * (length - 1) == row * (num_heads - 1)]", "if h * (num_heads - 1) == row * (length - 1)]"),
        ),
    ),
    Bug(
        "slices_first_only",
        "right_slices",
        why="only the first row of the first head",
        cause="the last row of the last head is right too",
        code=variant(
            "ch03_multi_head",
            "right_slices",
            ("if h * (length - 1) == row * (num_heads - 1)]", "if h == 0 and row == 0]"),
        ),
    ),
    # ------------------------------------------------------------------ reweighted_heads
    Bug(
        "reweighted_interleaved",
        "reweighted_heads",
        why="heads taken to own every num_heads-th feature",
        cause="the heads are not interleaved",
        code=variant(
            "ch03_multi_head", "reweighted_heads", ("heads = [index // head_size]", "heads = [index % num_heads]")
        ),
    ),
    Bug(
        "reweighted_values_too",
        "reweighted_heads",
        why="a row of W_v is said to change its head's weights",
        cause="the values do not enter the scores",
        code=variant(
            "ch03_multi_head",
            "reweighted_heads",
            (
                'part in ("a row of W_q.weight", "a row of W_k.weight")',
                'part in ("a row of W_q.weight", "a row of W_k.weight", "a row of W_v.weight")',
            ),
        ),
    ),
    Bug(
        "reweighted_column_one_head",
        "reweighted_heads",
        why="a column of W_q is said to change one head, as a row does",
        cause="every head's queries change",
        code=variant(
            "ch03_multi_head", "reweighted_heads", ("heads = list(range(num_heads))", "heads = [index // head_size]")
        ),
    ),
    Bug(
        "reweighted_divided_by_heads",
        "reweighted_heads",
        why="the index divided by the number of heads, not by a head's size",
        cause="divide the index by the size of a head",
        code=variant(
            "ch03_multi_head", "reweighted_heads", ("head_size = d_model // num_heads", "head_size = num_heads")
        ),
    ),
]
