"""Wrong answers to ch03_multi_head that students really write.

Splitting and merging heads, multi-head attention, and the questions on its parameters, its cost and its heads.
"""

from tests.buggy import mask_bugs, wrong_answers

A = "ch03_multi_head"

bug = wrong_answers(A)
mask_bug = mask_bugs(A, "test_mha_mask")

SPLIT_VIEW = "x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)"
SPLIT_CHECK = """    if d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} does not divide the feature size {d_model} of x")
"""
MHA_CHECK = """        if d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
"""

TESTS = {
    "split_heads": ["test_split_heads_shapes", "test_split_heads_values", "test_split_heads_error"],
    "merge_heads": ["test_merge_heads"],
    "MultiHeadAttention": ["test_mha_shapes", "test_mha_matches_torch", "test_mha_mask", "test_mha_error"],
    "multi_head_parameters": ["test_multi_head_parameters"],
    "score_multiplications": ["test_score_multiplications"],
    "right_slices": ["test_right_slices"],
    "reweighted_heads": ["test_reweighted_heads"],
}

BUGS = [
    # ------------------------------------------------------------------ split_heads
    bug(
        "split_without_transpose",
        "split_heads",
        (SPLIT_VIEW, "x.reshape(batch, num_heads, length, d_model // num_heads)"),
        why="a single view to (B, H, L, dh) mixes positions and heads",
        cause="mixes positions and heads",
    ),
    bug(
        "split_strided_features",
        "split_heads",
        (SPLIT_VIEW, "x.view(batch, length, d_model // num_heads, num_heads).permute(0, 3, 1, 2)"),
        why="head h gets every H-th feature instead of a slice",
        cause="gets every H-th feature",
    ),
    bug(
        "split_forgets_to_transpose",
        "split_heads",
        (".transpose(1, 2)", ""),
        why="returns (B, L, H, dh)",
        cause="the heads must come before the positions",
    ),
    bug(
        "split_no_value_error",
        "split_heads",
        (SPLIT_CHECK, ""),
        why="lets view raise a RuntimeError",
        cause="raise a ValueError",
    ),
    bug(
        "split_error_without_name",
        "split_heads",
        (
            'f"num_heads={num_heads} does not divide the feature size {d_model} of x"',
            '"the feature size is not a multiple of the number of heads"',
        ),
        why="a ValueError that does not say which argument",
        cause="whose message names num_heads",
    ),
    bug(
        "split_num_heads_as_head_size",
        "split_heads",
        (
            "x.view(batch, length, num_heads, d_model // num_heads)",
            "x.view(batch, length, d_model // num_heads, num_heads)",
        ),
        why="reads num_heads as the size of one head",
        cause="not the size of one head",
    ),
    bug(
        "split_assert",
        "split_heads",
        (SPLIT_CHECK, '    assert d_model % num_heads == 0, f"num_heads={num_heads} must divide {d_model}"\n'),
        why="an assert, which raises AssertionError (and disappears under python -O)",
        cause="raise a ValueError",
    ),
    # ------------------------------------------------------------------ merge_heads
    bug(
        "merge_without_transpose",
        "merge_heads",
        ("x.transpose(1, 2).reshape", "x.reshape"),
        why="reshapes (B, H, L, dh) straight to (B, L, D)",
        cause="mixes positions and heads",
    ),
    bug(
        "merge_view_after_transpose",
        "merge_heads",
        (".reshape(", ".view("),
        why="view on a non-contiguous tensor raises",
        cause="no longer laid out in order in memory",
    ),
    bug(
        "merge_wrong_permute",
        "merge_heads",
        ("x.transpose(1, 2)", "x.permute(0, 2, 3, 1)"),
        why="puts dh before H: interleaves the heads' features",
        cause="the heads' features are interleaved",
    ),
    bug(
        "merge_transposes_wrong_pair",
        "merge_heads",
        ("x.transpose(1, 2)", "x.transpose(2, 3)"),
        why="swaps positions and features instead of heads and positions",
        cause="the wrong pair of dimensions is swapped",
    ),
    # ------------------------------------------------------------------ MultiHeadAttention
    # A mistake that masks nothing (scaling, projections, biases) costs test_mha_matches_torch alone: the mask's cell
    # compares the module with itself (check_masking_removes_keys), so that one mistake costs its item once.
    bug(
        "mha_scale_by_d_model",
        "MultiHeadAttention",
        ("math.sqrt(q.size(-1))", "math.sqrt(query.size(-1))"),
        why="divides by sqrt(d_model), not sqrt(d_head)",
        cause="the square root of d_model",
        only="test_mha_matches_torch",
    ),
    bug(
        "mha_scale_by_num_heads",
        "MultiHeadAttention",
        ("math.sqrt(q.size(-1))", "math.sqrt(self.num_heads)"),
        why="divides by sqrt(num_heads)",
        cause="the square root of the number of heads",
        only="test_mha_matches_torch",
    ),
    bug(
        "mha_no_scaling",
        "MultiHeadAttention",
        (" / math.sqrt(q.size(-1))", ""),
        why="forgets the 1/sqrt(d_head)",
        cause="not divided by √d_h",
        only="test_mha_matches_torch",
    ),
    bug(
        "mha_no_output_projection",
        "MultiHeadAttention",
        ("self.W_o(merge_heads(weights @ v))", "merge_heads(weights @ v)"),
        why="forgets W_o",
        cause="through the output projection W_o",
        only="test_mha_matches_torch",
    ),
    bug(
        "mha_heads_without_transpose",
        "MultiHeadAttention",
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
        why="splits heads with one view",
        cause="mixes positions and heads",
    ),
    bug(
        "mha_keys_projected_with_W_q",
        "MultiHeadAttention",
        ("self.W_k(key)", "self.W_q(key)"),
        why="copy-paste: W_q for the keys",
        cause="projected with W_k, not with W_q",
        only="test_mha_matches_torch",
    ),
    bug(
        "mha_values_from_key",
        "MultiHeadAttention",
        ("self.W_v(value)", "self.W_v(key)"),
        why="copy-paste: W_v applied to key",
        cause="projected from value, not from key",
        only="test_mha_matches_torch",
    ),
    mask_bug(
        "mha_mask_inverted",
        "MultiHeadAttention",
        ("~mask", "mask"),
        why="uses nn.MultiheadAttention's True = ignore",
        cause="the mask is read the wrong way round",
    ),
    bug(
        "mha_weights_averaged",
        "MultiHeadAttention",
        ("return output, weights", "return output, weights.mean(dim=1)"),
        why="returns weights averaged over the heads",
        cause="not their average over the heads",
    ),
    bug(
        "mha_softmax_over_queries",
        "MultiHeadAttention",
        ("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)"),
        why="softmax along dim -2",
        cause="a softmax over the keys, not over the queries",
    ),
    mask_bug(
        "mha_nan_on_full_mask",
        "MultiHeadAttention",
        ("weights = weights.masked_fill(~mask, 0.0)", "weights = weights"),
        why="a query with no visible key gets NaN",
        cause="a query with no visible key gets NaN",
    ),
    bug(
        "mha_large_negative_no_zeroing",
        "MultiHeadAttention",
        ('float("-inf")', "-1e9"),
        ("weights = weights.masked_fill(~mask, 0.0)", "weights = weights"),
        why="-1e9 alone: a fully masked query gets even weights",
        cause="a large negative fill alone spreads its weight",
        only="test_mha_mask",
    ),
    mask_bug(
        "mha_mask_with_zero",
        "MultiHeadAttention",
        ('float("-inf")', "0.0"),
        why="a masked score of 0 still gets weight",
        cause="a masked score set to zero still gets a share",
    ),
    mask_bug(
        "mha_mask_after_softmax",
        "MultiHeadAttention",
        ('scores = scores.masked_fill(~mask, float("-inf"))', "scores = scores"),
        why="zeroes weights without renormalising",
        cause="mask the scores before the softmax",
    ),
    bug(
        "mha_always_bias",
        "MultiHeadAttention",
        ("bias=bias", "bias=True"),
        why="ignores bias=False",
        cause="none of the four projections may have a bias",
        only="test_mha_matches_torch",
    ),
    bug(
        "mha_output_bias_always",
        "MultiHeadAttention",
        ("self.W_o = nn.Linear(d_model, d_model, bias=bias)", "self.W_o = nn.Linear(d_model, d_model)"),
        why="ignores bias=False for W_o",
        cause="none of the four projections may have a bias",
        only="test_mha_matches_torch",
    ),
    bug(
        "mha_no_value_error",
        "MultiHeadAttention",
        (MHA_CHECK, ""),
        why="accepts d_model that num_heads does not divide",
        cause="building the module must raise a ValueError",
        only="test_mha_error",
    ),
    bug(
        "mha_error_without_name",
        "MultiHeadAttention",
        ('f"num_heads={num_heads} must divide d_model={d_model}"', '"d_model is not divisible"'),
        why="a ValueError that does not say which argument",
        cause="whose message names num_heads",
        only="test_mha_error",
    ),
    bug(
        "mha_sdpa_mask_not_broadcast",
        "MultiHeadAttention",
        (
            "output = self.W_o(merge_heads(weights @ v))",
            "heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).nan_to_num(0.0)\n"
            "        output = self.W_o(merge_heads(heads))",
        ),
        why="the heads' outputs from F.scaled_dot_product_attention, given the mask as it comes: it refuses a mask of "
        "shape (Lk,) (IndexError), which the assignment allows",
        cause="a mask of shape (Lk,)",
        only="test_mha_mask",
    ),
    # ------------------------------------------------------------------ multi_head_parameters
    bug(
        "mh_parameters_per_head",
        "multi_head_parameters",
        ("count = 4 * per_layer", "count = 4 * per_layer * num_heads"),
        why="four d_model x d_model projections for every head",
        cause="the heads share the four projections",
    ),
    bug(
        "mh_parameters_no_output",
        "multi_head_parameters",
        ("count = 4 * per_layer", "count = 3 * per_layer"),
        why="counts W_q, W_k and W_v only",
        cause="the output projection W_o",
    ),
    bug(
        "mh_parameters_no_biases",
        "multi_head_parameters",
        ("(d_model if bias else 0)", "0"),
        why="ignores the bias flag: never counts the biases",
        cause="each of the four layers has a bias vector",
    ),
    bug(
        "mh_parameters_scalar_bias",
        "multi_head_parameters",
        ("(d_model if bias else 0)", "(1 if bias else 0)"),
        why="one bias number per layer",
        cause="one number per output feature",
    ),
    # ------------------------------------------------------------------ score_multiplications
    bug(
        "multiplications_full_width",
        "score_multiplications",
        ("(d_model // num_heads)", "d_model"),
        why="each head's dot products over all d_model features",
        cause="its own d_model // num_heads features",
    ),
    bug(
        "multiplications_one_head",
        "score_multiplications",
        ("num_heads * ", ""),
        why="the scores of one head only",
        cause="every head computes its own scores",
    ),
    bug(
        "multiplications_one_sequence",
        "score_multiplications",
        ("batch * ", ""),
        why="one sequence only",
        cause="every sequence of the batch",
    ),
    # ------------------------------------------------------------------ right_slices
    bug(
        "slices_diagonal",
        "right_slices",
        ("if h * (length - 1) == row * (num_heads - 1)]", "if h == row]"),
        why="the diagonal h == l, as when there are as many positions as heads",
        cause="on the diagonal h == l only when there are as many positions as heads",
    ),
    bug(
        "slices_swapped",
        "right_slices",
        ("if h * (length - 1) == row * (num_heads - 1)]", "if h * (num_heads - 1) == row * (length - 1)]"),
        why="length and num_heads swapped in the condition",
        cause="length and num_heads have changed places",
    ),
    bug(
        "slices_first_only",
        "right_slices",
        ("if h * (length - 1) == row * (num_heads - 1)]", "if h == 0 and row == 0]"),
        why="only the first row of the first head",
        cause="the last row of the last head is right too",
    ),
    # ------------------------------------------------------------------ reweighted_heads
    bug(
        "reweighted_interleaved",
        "reweighted_heads",
        ("heads = [index // head_size]", "heads = [index % num_heads]"),
        why="heads taken to own every num_heads-th feature",
        cause="the heads are not interleaved",
    ),
    bug(
        "reweighted_values_too",
        "reweighted_heads",
        (
            'part in ("a row of W_q.weight", "a row of W_k.weight")',
            'part in ("a row of W_q.weight", "a row of W_k.weight", "a row of W_v.weight")',
        ),
        why="a row of W_v is said to change its head's weights",
        cause="the values do not enter the scores",
    ),
    bug(
        "reweighted_column_one_head",
        "reweighted_heads",
        ("heads = list(range(num_heads))", "heads = [index // head_size]"),
        why="a column of W_q is said to change one head, as a row does",
        cause="every head's queries change",
    ),
    bug(
        "reweighted_divided_by_heads",
        "reweighted_heads",
        ("head_size = d_model // num_heads", "head_size = num_heads"),
        why="the index divided by the number of heads, not by a head's size",
        cause="divide the index by the size of a head",
    ),
]
