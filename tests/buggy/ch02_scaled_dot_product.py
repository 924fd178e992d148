"""Wrong answers to ch02_scaled_dot_product that students really write.

Softmax, attention in NumPy and in PyTorch, and the questions on its memory, its scale, its saturation and its
symmetries.
"""

from tests.buggy import mask_bugs, wrong_answers

A = "ch02_scaled_dot_product"

bug = wrong_answers(A)
mask_bug = mask_bugs(A, "test_sdpa_mask")

SOFTMAX_BODY = """shifted = x - np.max(x, axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=axis, keepdims=True)"""
PRODUCT = "batch * heads * len_q * len_k * bytes_per_element"
BEST = "best = scores == scores.max(axis=-1, keepdims=True)"

TESTS = {
    "softmax": ["test_softmax_values", "test_softmax_stable", "test_softmax_axis"],
    "attention_numpy": ["test_attention_numpy_example", "test_attention_numpy_general"],
    "scaled_dot_product_attention": ["test_sdpa_shapes", "test_sdpa_values", "test_sdpa_mask"],
    "score_matrix_bytes": ["test_score_matrix_bytes"],
    "unscaled_score_std": ["test_unscaled_score_std"],
    "saturated_attention": ["test_saturated_attention"],
    "effect_on_attention": ["test_effect_on_attention"],
}

BUGS = [
    # ------------------------------------------------------------------ softmax
    bug(
        "softmax_naive_exp",
        "softmax",
        ("shifted = x - np.max(x, axis=axis, keepdims=True)", "shifted = x"),
        why="overflows to inf/inf = nan for large inputs",
        cause="the exponentials are taken of the raw inputs",
    ),
    bug(
        "softmax_ignores_axis",
        "softmax",
        ("np.max(x, axis=axis", "np.max(x, axis=-1"),
        ("np.sum(exps, axis=axis", "np.sum(exps, axis=-1"),
        why="always normalises the last axis",
        cause="always runs along the last axis",
    ),
    bug(
        "softmax_global_sum",
        "softmax",
        ("np.max(x, axis=axis, keepdims=True)", "np.max(x)"),
        ("np.sum(exps, axis=axis, keepdims=True)", "np.sum(exps)"),
        why="normalises over the whole array",
        cause="the total of the whole array",
    ),
    bug(
        "softmax_in_place",
        "softmax",
        (
            SOFTMAX_BODY,
            """x -= np.max(x, axis=axis, keepdims=True)
    np.exp(x, out=x)
    x /= np.sum(x, axis=axis, keepdims=True)
    return x""",
        ),
        why="overwrites the caller's array",
        cause="instead of writing into the argument in place",
    ),
    bug(
        "softmax_no_keepdims",
        "softmax",
        ("axis=axis, keepdims=True)", "axis=axis)"),
        why="the reductions do not broadcast back",
        cause="keep that axis",
    ),
    bug(
        "softmax_global_max",
        "softmax",
        ("np.max(x, axis=axis, keepdims=True)", "np.max(x)"),
        why="shifts every row by the largest entry of the whole array",
        cause="not by each slice's own maximum",
    ),
    bug(
        "softmax_max_along_last_axis",
        "softmax",
        ("np.max(x, axis=axis", "np.max(x, axis=-1"),
        why="the maximum along the last axis, the sum along `axis`",
        cause="the maximum is taken along another axis than the sum",
    ),
    bug(
        "softmax_float64_result",
        "softmax",
        ("np.exp(shifted)", "np.exp(shifted.astype(np.float64))"),
        why="computes in float64 and returns float64 for a float32 input",
        cause="a float32 input must give a float32 result",
    ),
    bug(
        "softmax_shift_by_mean",
        "softmax",
        ("np.max(x, axis=axis, keepdims=True)", "np.mean(x, axis=axis, keepdims=True)"),
        why="centres each row on its mean, which still overflows",
        cause="shifted by its mean",
    ),
    # ------------------------------------------------------------------ attention_numpy
    bug(
        "attention_numpy_no_scaling",
        "attention_numpy",
        ("Q @ K.T / np.sqrt(d_k)", "Q @ K.T"),
        why="missing 1/sqrt(d_k)",
        cause="not divided by √d_k",
    ),
    bug(
        "attention_numpy_scale_by_dv",
        "attention_numpy",
        ("d_k = K.shape[-1]", "d_k = V.shape[-1]"),
        why="scales by the values' size",
        cause="the values' feature size",
    ),
    bug(
        "attention_numpy_scale_by_dk",
        "attention_numpy",
        ("/ np.sqrt(d_k)", "/ d_k"),
        why="divides by d_k, not its square root",
        cause="by d_k itself, not by its square root",
    ),
    bug(
        "attention_numpy_softmax_over_queries",
        "attention_numpy",
        ("softmax(scores, axis=-1)", "softmax(scores, axis=0)"),
        why="softmax over axis 0",
        cause="the softmax runs over the queries",
    ),
    bug(
        "attention_numpy_scale_by_num_keys",
        "attention_numpy",
        ("d_k = K.shape[-1]", "d_k = K.shape[0]"),
        why="takes d_k from the number of keys",
        cause="the number of keys",
    ),
    bug(
        "attention_numpy_no_transpose",
        "attention_numpy",
        ("Q @ K.T", "Q @ K"),
        why="Q @ K, which only runs when K is square",
        cause="pair each query with each key",
    ),
    bug(
        "attention_numpy_returns_swapped",
        "attention_numpy",
        ("return weights @ V, weights", "return weights, weights @ V"),
        why="returns (weights, output)",
        cause="return the output first, then the weights",
    ),
    bug(
        "attention_numpy_naive_exp",
        "attention_numpy",
        ("softmax(scores, axis=-1)", "np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)"),
        why="its own softmax without the shift overflows",
        cause="use the stable softmax from part 1",
    ),
    bug(
        "attention_numpy_scales_Q_in_place",
        "attention_numpy",
        ("scores = Q @ K.T / np.sqrt(d_k)", "Q /= np.sqrt(d_k)\n    scores = Q @ K.T"),
        why="divides the caller's Q in place",
        cause="instead of writing into an argument in place",
    ),
    # ------------------------------------------------------------------ scaled_dot_product_attention
    bug(
        "sdpa_no_scaling",
        "scaled_dot_product_attention",
        ("q @ k.transpose(-2, -1) / math.sqrt(d_k)", "q @ k.transpose(-2, -1)"),
        why="missing 1/sqrt(d_k)",
        cause="not divided by √d_k",
    ),
    bug(
        "sdpa_scale_by_dv",
        "scaled_dot_product_attention",
        ("d_k = q.size(-1)", "d_k = v.size(-1)"),
        why="scales by the values' size",
        cause="the values' feature size",
    ),
    bug(
        "sdpa_scale_by_num_keys",
        "scaled_dot_product_attention",
        ("d_k = q.size(-1)", "d_k = k.size(-2)"),
        why="takes d_k from the number of keys",
        cause="the number of keys",
    ),
    bug(
        "sdpa_multiplies_by_sqrt",
        "scaled_dot_product_attention",
        ("/ math.sqrt(d_k)", "* math.sqrt(d_k)"),
        why="multiplies by sqrt(d_k)",
        cause="multiplied by √d_k",
    ),
    bug(
        "sdpa_softmax_wrong_dim",
        "scaled_dot_product_attention",
        ("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)"),
        why="softmax over the queries",
        cause="the softmax runs over the queries",
    ),
    bug(
        "sdpa_k_T",
        "scaled_dot_product_attention",
        ("k.transpose(-2, -1)", "k.T"),
        why="k.T reverses every dimension of a batch",
        cause="only the last two dimensions of k",
    ),
    bug(
        "sdpa_transpose_1_2",
        "scaled_dot_product_attention",
        ("k.transpose(-2, -1)", "k.transpose(1, 2)"),
        why="k.transpose(1, 2): right for (B, L, d) only",
        cause="only the last two dimensions of k",
    ),
    mask_bug(
        "sdpa_mask_inverted",
        "scaled_dot_product_attention",
        ("~mask", "mask"),
        why="hides the keys that should be seen",
        cause="the mask is read the wrong way round",
    ),
    mask_bug(
        "sdpa_mask_after_softmax",
        "scaled_dot_product_attention",
        ('scores = scores.masked_fill(~mask, float("-inf"))', "scores = scores"),
        why="zeroes weights without renormalising",
        cause="mask the scores before the softmax",
    ),
    mask_bug(
        "sdpa_mask_with_zero",
        "scaled_dot_product_attention",
        ('float("-inf")', "0.0"),
        ("weights = weights.masked_fill(~mask, 0.0)", "weights = weights"),
        why="a score of 0 still gets weight",
        cause="a masked score set to zero still gets a share",
    ),
    bug(
        "sdpa_float32_softmax",
        "scaled_dot_product_attention",
        ("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-1, dtype=torch.float32)"),
        ("return weights @ v, weights", "return weights.to(v.dtype) @ v, weights"),
        why="hard-codes float32",
        cause="float64 inputs must give float64",
    ),
    bug(
        "sdpa_naive_exp",
        "scaled_dot_product_attention",
        ("torch.softmax(scores, dim=-1)", "torch.exp(scores) / torch.exp(scores).sum(dim=-1, keepdim=True)"),
        why="exp / sum without the shift overflows",
        cause="the exponentials of large scores overflow",
    ),
    bug(
        "sdpa_global_max",
        "scaled_dot_product_attention",
        (
            "torch.softmax(scores, dim=-1)",
            "torch.exp(scores - scores.max()) / torch.exp(scores - scores.max()).sum(dim=-1, keepdim=True)",
        ),
        why="shifts every row by the largest score of all",
        cause="not by each query's own maximum",
    ),
    bug(
        "sdpa_scales_q_in_place",
        "scaled_dot_product_attention",
        (
            "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)",
            "q /= math.sqrt(d_k)\n    scores = q @ k.transpose(-2, -1)",
        ),
        why="divides the caller's q in place",
        cause="instead of writing into an argument in place",
    ),
    # ------------------------------------------------------------------ score_matrix_bytes
    bug(
        "bytes_no_heads",
        "score_matrix_bytes",
        (PRODUCT, "batch * len_q * len_k * bytes_per_element"),
        why="one matrix shared by all heads",
        cause="every head has its own matrix",
    ),
    bug(
        "bytes_square_queries",
        "score_matrix_bytes",
        (PRODUCT, "batch * heads * len_q * len_q * bytes_per_element"),
        why="len_q x len_q, as in self-attention",
        cause="not len_q x len_q",
    ),
    bug(
        "bytes_counts_numbers",
        "score_matrix_bytes",
        (PRODUCT, "batch * heads * len_q * len_k"),
        why="the number of weights, not the bytes",
        cause="bytes_per_element bytes for each",
    ),
    # ------------------------------------------------------------------ unscaled_score_std
    bug(
        "std_is_variance",
        "unscaled_score_std",
        ("math.sqrt(d_k)", "d_k"),
        why="the variance d_k",
        cause="that is the variance",
    ),
    bug(
        "std_after_scaling",
        "unscaled_score_std",
        ("math.sqrt(d_k)", "1.0"),
        why="1, the standard deviation after the scaling",
        cause="after the scaling",
    ),
    bug(
        "std_shrinks",
        "unscaled_score_std",
        ("math.sqrt(d_k)", "1 / math.sqrt(d_k)"),
        why="1 / sqrt(d_k), the scaling factor",
        cause="does not shrink",
    ),
    # ------------------------------------------------------------------ saturated_attention
    bug(
        "saturated_mean",
        "saturated_attention",
        (BEST, "best = np.ones_like(scores, dtype=bool)"),
        why="the mean of the values (the limit of shrinking scores, not growing ones)",
        cause="the limit as the scores shrink to zero",
    ),
    bug(
        "saturated_first_of_ties",
        "saturated_attention",
        (BEST, "best = np.eye(K.shape[0], dtype=bool)[scores.argmax(axis=-1)]"),
        why="argmax: the first of the keys tied for the largest score takes all",
        cause="keys tied for the largest score share the weight equally",
    ),
    bug(
        "saturated_softmax_unchanged",
        "saturated_attention",
        ("output = weights @ V", "output = attention_numpy(Q, K, V)[0]"),
        why="ordinary attention, as if the softmax ignored the scale of its scores",
        cause="does not leave the softmax as it was",
    ),
    bug(
        "saturated_smallest",
        "saturated_attention",
        ("scores.max(axis=-1, keepdims=True)", "scores.min(axis=-1, keepdims=True)"),
        why="the value of the key with the smallest score",
        cause="not to the smallest",
    ),
    bug(
        "saturated_finite_factor",
        "saturated_attention",
        ("output = weights @ V", "output = attention_numpy(1e6 * Q, K, V)[0]"),
        why="Part 2 on queries scaled by a million, taken for the limit: right unless two scores nearly tie",
        cause="a large but finite factor is not the limit",
    ),
    # ------------------------------------------------------------------ effect_on_attention
    bug(
        "effect_key_shift_changes",
        "effect_on_attention",
        ('every key": "unchanged"', 'every key": "changed"'),
        why="a common shift of the keys is said to change the weights",
        cause="a softmax does not change when its whole row moves by one number",
    ),
    bug(
        "effect_query_shift_unchanged",
        "effect_on_attention",
        ('every query": "changed"', 'every query": "unchanged"'),
        why="a common shift of the queries is said to leave the weights alone, as it does for the keys",
        cause="a different number for each key",
    ),
    bug(
        "effect_key_value_permutation_moves_output",
        "effect_on_attention",
        ('permuted together": "unchanged"', 'permuted together": "permuted the same way"'),
        why="the output is said to move with the keys and values",
        cause="reorders the terms of the sum, not its result",
    ),
    bug(
        "effect_query_permutation_invariant",
        "effect_on_attention",
        ('queries are permuted": "permuted the same way"', 'queries are permuted": "unchanged"'),
        why="permuting the queries is said to leave the output unchanged (invariance for equivariance)",
        cause="moves the rows of the output with them",
    ),
    bug(
        "effect_value_shift_changes",
        "effect_on_attention",
        ('every value": "shifted by the same vector"', 'every value": "changed"'),
        why="a common shift of the values is said to change the output in some other way",
        cause="adds exactly c to every output",
    ),
    bug(
        "effect_scale_invariant",
        "effect_on_attention",
        ('multiplied by 2": "changed"', 'multiplied by 2": "unchanged"'),
        why="doubling the keys is said to leave the weights alone, as if the softmax normalised the scale away",
        cause="the softmax is not scale-invariant",
    ),
    bug(
        "effect_own_words",
        "effect_on_attention",
        ('every value": "shifted by the same vector"', 'every value": "shifted"'),
        why="answers in its own words, not one of the options",
        cause="one of the strings of ATTENTION_EFFECTS",
    ),
]
