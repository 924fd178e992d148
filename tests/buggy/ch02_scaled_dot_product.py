"""Wrong answers to ch02_scaled_dot_product that students really write.

Each is the reference answer with one realistic mistake in it (:func:`tests.buggy.variant`).
"""

from functools import partial

from tests.buggy import Bug, variant

TESTS = {
    "softmax": ["test_softmax_values", "test_softmax_stable", "test_softmax_axis"],
    "attention_numpy": ["test_attention_numpy_example", "test_attention_numpy_general"],
    "scaled_dot_product_attention": ["test_sdpa_shapes", "test_sdpa_values", "test_sdpa_mask"],
    "score_matrix_bytes": ["test_score_matrix_bytes"],
    "unscaled_score_std": ["test_unscaled_score_std"],
    "saturated_attention": ["test_saturated_attention"],
    "effect_on_attention": ["test_effect_on_attention"],
}

softmax = partial(variant, "ch02_scaled_dot_product", "softmax")
attention_numpy = partial(variant, "ch02_scaled_dot_product", "attention_numpy")
sdpa = partial(variant, "ch02_scaled_dot_product", "scaled_dot_product_attention")

SOFTMAX_BODY = """shifted = x - np.max(x, axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=axis, keepdims=True)"""

score_bytes = partial(variant, "ch02_scaled_dot_product", "score_matrix_bytes")
score_std = partial(variant, "ch02_scaled_dot_product", "unscaled_score_std")
PRODUCT = "batch * heads * len_q * len_k * bytes_per_element"
saturated = partial(variant, "ch02_scaled_dot_product", "saturated_attention")
effect = partial(variant, "ch02_scaled_dot_product", "effect_on_attention")
BEST = "best = scores == scores.max(axis=-1, keepdims=True)"


BUGS = [
    # ------------------------------------------------------------------ softmax
    Bug(
        "softmax_naive_exp",
        "softmax",
        why="overflows to inf/inf = nan for large inputs",
        cause="the exponentials are taken of the raw inputs",
        code=softmax(("shifted = x - np.max(x, axis=axis, keepdims=True)", "shifted = x")),
    ),
    Bug(
        "softmax_ignores_axis",
        "softmax",
        why="always normalises the last axis",
        cause="always runs along the last axis",
        code=softmax(("np.max(x, axis=axis", "np.max(x, axis=-1"), ("np.sum(exps, axis=axis", "np.sum(exps, axis=-1")),
    ),
    Bug(
        "softmax_global_sum",
        "softmax",
        why="normalises over the whole array",
        cause="the total of the whole array",
        code=softmax(
            ("np.max(x, axis=axis, keepdims=True)", "np.max(x)"),
            ("np.sum(exps, axis=axis, keepdims=True)", "np.sum(exps)"),
        ),
    ),
    Bug(
        "softmax_in_place",
        "softmax",
        why="overwrites the caller's array",
        cause="instead of writing into the argument in place",
        code=softmax(
            (
                SOFTMAX_BODY,
                """x -= np.max(x, axis=axis, keepdims=True)
    np.exp(x, out=x)
    x /= np.sum(x, axis=axis, keepdims=True)
    return x""",
            )
        ),
    ),
    Bug(
        "softmax_no_keepdims",
        "softmax",
        why="the reductions do not broadcast back",
        cause="keep that axis",
        code=softmax(("axis=axis, keepdims=True)", "axis=axis)")),
    ),
    Bug(
        "softmax_global_max",
        "softmax",
        why="shifts every row by the largest entry of the whole array",
        cause="not by each slice's own maximum",
        code=softmax(("np.max(x, axis=axis, keepdims=True)", "np.max(x)")),
    ),
    Bug(
        "softmax_max_along_last_axis",
        "softmax",
        why="the maximum along the last axis, the sum along `axis`",
        cause="the maximum is taken along another axis than the sum",
        code=softmax(("np.max(x, axis=axis", "np.max(x, axis=-1")),
    ),
    Bug(
        "softmax_float64_result",
        "softmax",
        why="computes in float64 and returns float64 for a float32 input",
        cause="a float32 input must give a float32 result",
        code=softmax(("np.exp(shifted)", "np.exp(shifted.astype(np.float64))")),
    ),
    Bug(
        "softmax_shift_by_mean",
        "softmax",
        why="centres each row on its mean, which still overflows",
        cause="shifted by its mean",
        code=softmax(("np.max(x, axis=axis, keepdims=True)", "np.mean(x, axis=axis, keepdims=True)")),
    ),
    # ------------------------------------------------------------------ attention_numpy
    Bug(
        "attention_numpy_no_scaling",
        "attention_numpy",
        why="missing 1/sqrt(d_k)",
        cause="not divided by √d_k",
        code=attention_numpy(("Q @ K.T / np.sqrt(d_k)", "Q @ K.T")),
    ),
    Bug(
        "attention_numpy_scale_by_dv",
        "attention_numpy",
        why="scales by the values' size",
        cause="the values' feature size",
        code=attention_numpy(("d_k = K.shape[-1]", "d_k = V.shape[-1]")),
    ),
    Bug(
        "attention_numpy_scale_by_dk",
        "attention_numpy",
        why="divides by d_k, not its square root",
        cause="by d_k itself, not by its square root",
        code=attention_numpy(("/ np.sqrt(d_k)", "/ d_k")),
    ),
    Bug(
        "attention_numpy_softmax_over_queries",
        "attention_numpy",
        why="softmax over axis 0",
        cause="the softmax runs over the queries",
        code=attention_numpy(("softmax(scores, axis=-1)", "softmax(scores, axis=0)")),
    ),
    Bug(
        "attention_numpy_scale_by_num_keys",
        "attention_numpy",
        why="takes d_k from the number of keys",
        cause="the number of keys",
        code=attention_numpy(("d_k = K.shape[-1]", "d_k = K.shape[0]")),
    ),
    Bug(
        "attention_numpy_no_transpose",
        "attention_numpy",
        why="Q @ K, which only runs when K is square",
        cause="pair each query with each key",
        code=attention_numpy(("Q @ K.T", "Q @ K")),
    ),
    Bug(
        "attention_numpy_returns_swapped",
        "attention_numpy",
        why="returns (weights, output)",
        cause="return the output first, then the weights",
        code=attention_numpy(("return weights @ V, weights", "return weights, weights @ V")),
    ),
    Bug(
        "attention_numpy_naive_exp",
        "attention_numpy",
        why="its own softmax without the shift overflows",
        cause="use the stable softmax from part 1",
        code=attention_numpy(
            ("softmax(scores, axis=-1)", "np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)")
        ),
    ),
    Bug(
        "attention_numpy_scales_Q_in_place",
        "attention_numpy",
        why="divides the caller's Q in place",
        cause="instead of writing into an argument in place",
        code=attention_numpy(("scores = Q @ K.T / np.sqrt(d_k)", "Q /= np.sqrt(d_k)\n    scores = Q @ K.T")),
    ),
    # ------------------------------------------------------------------ scaled_dot_product_attention
    Bug(
        "sdpa_no_scaling",
        "scaled_dot_product_attention",
        why="missing 1/sqrt(d_k)",
        cause="not divided by √d_k",
        code=sdpa(("q @ k.transpose(-2, -1) / math.sqrt(d_k)", "q @ k.transpose(-2, -1)")),
    ),
    Bug(
        "sdpa_scale_by_dv",
        "scaled_dot_product_attention",
        why="scales by the values' size",
        cause="the values' feature size",
        code=sdpa(("d_k = q.size(-1)", "d_k = v.size(-1)")),
    ),
    Bug(
        "sdpa_scale_by_num_keys",
        "scaled_dot_product_attention",
        why="takes d_k from the number of keys",
        cause="the number of keys",
        code=sdpa(("d_k = q.size(-1)", "d_k = k.size(-2)")),
    ),
    Bug(
        "sdpa_multiplies_by_sqrt",
        "scaled_dot_product_attention",
        why="multiplies by sqrt(d_k)",
        cause="multiplied by √d_k",
        code=sdpa(("/ math.sqrt(d_k)", "* math.sqrt(d_k)")),
    ),
    Bug(
        "sdpa_softmax_wrong_dim",
        "scaled_dot_product_attention",
        why="softmax over the queries",
        cause="the softmax runs over the queries",
        code=sdpa(("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)")),
    ),
    Bug(
        "sdpa_k_T",
        "scaled_dot_product_attention",
        why="k.T reverses every dimension of a batch",
        cause="only the last two dimensions of k",
        code=sdpa(("k.transpose(-2, -1)", "k.T")),
    ),
    Bug(
        "sdpa_transpose_1_2",
        "scaled_dot_product_attention",
        why="k.transpose(1, 2): right for (B, L, d) only",
        cause="only the last two dimensions of k",
        code=sdpa(("k.transpose(-2, -1)", "k.transpose(1, 2)")),
    ),
    Bug(
        "sdpa_mask_inverted",
        "scaled_dot_product_attention",
        why="hides the keys that should be seen",
        cause="the mask is read the wrong way round",
        code=sdpa(("~mask", "mask")),
        only="test_sdpa_mask",
        visible="test_sdpa_mask",
    ),
    Bug(
        "sdpa_mask_after_softmax",
        "scaled_dot_product_attention",
        why="zeroes weights without renormalising",
        cause="mask the scores before the softmax",
        code=sdpa(('scores = scores.masked_fill(~mask, float("-inf"))', "scores = scores")),
        only="test_sdpa_mask",
        visible="test_sdpa_mask",
    ),
    Bug(
        "sdpa_mask_with_zero",
        "scaled_dot_product_attention",
        why="a score of 0 still gets weight",
        cause="a masked score set to zero still gets a share",
        code=sdpa(('float("-inf")', "0.0"), ("weights = weights.masked_fill(~mask, 0.0)", "weights = weights")),
        only="test_sdpa_mask",
        visible="test_sdpa_mask",
    ),
    Bug(
        "sdpa_float32_softmax",
        "scaled_dot_product_attention",
        why="hard-codes float32",
        cause="float64 inputs must give float64",
        code=sdpa(
            ("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-1, dtype=torch.float32)"),
            ("return weights @ v, weights", "return weights.to(v.dtype) @ v, weights"),
        ),
    ),
    Bug(
        "sdpa_naive_exp",
        "scaled_dot_product_attention",
        why="exp / sum without the shift overflows",
        cause="the exponentials of large scores overflow",
        code=sdpa(("torch.softmax(scores, dim=-1)", "torch.exp(scores) / torch.exp(scores).sum(dim=-1, keepdim=True)")),
    ),
    Bug(
        "sdpa_global_max",
        "scaled_dot_product_attention",
        why="shifts every row by the largest score of all",
        cause="not by each query's own maximum",
        code=sdpa(
            (
                "torch.softmax(scores, dim=-1)",
                "torch.exp(scores - scores.max()) / torch.exp(scores - scores.max()).sum(dim=-1, keepdim=True)",
            )
        ),
    ),
    Bug(
        "sdpa_scales_q_in_place",
        "scaled_dot_product_attention",
        why="divides the caller's q in place",
        cause="instead of writing into an argument in place",
        code=sdpa(
            (
                "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)",
                "q /= math.sqrt(d_k)\n    scores = q @ k.transpose(-2, -1)",
            )
        ),
    ),
    # ------------------------------------------------------------------ score_matrix_bytes
    Bug(
        "bytes_no_heads",
        "score_matrix_bytes",
        why="one matrix shared by all heads",
        cause="every head has its own matrix",
        code=score_bytes((PRODUCT, "batch * len_q * len_k * bytes_per_element")),
    ),
    Bug(
        "bytes_square_queries",
        "score_matrix_bytes",
        why="len_q x len_q, as in self-attention",
        cause="not len_q x len_q",
        code=score_bytes((PRODUCT, "batch * heads * len_q * len_q * bytes_per_element")),
    ),
    Bug(
        "bytes_counts_numbers",
        "score_matrix_bytes",
        why="the number of weights, not the bytes",
        cause="bytes_per_element bytes for each",
        code=score_bytes((PRODUCT, "batch * heads * len_q * len_k")),
    ),
    # ------------------------------------------------------------------ unscaled_score_std
    Bug(
        "std_is_variance",
        "unscaled_score_std",
        why="the variance d_k",
        cause="that is the variance",
        code=score_std(("math.sqrt(d_k)", "d_k")),
    ),
    Bug(
        "std_after_scaling",
        "unscaled_score_std",
        why="1, the standard deviation after the scaling",
        cause="after the scaling",
        code=score_std(("math.sqrt(d_k)", "1.0")),
    ),
    Bug(
        "std_shrinks",
        "unscaled_score_std",
        why="1 / sqrt(d_k), the scaling factor",
        cause="does not shrink",
        code=score_std(("math.sqrt(d_k)", "1 / math.sqrt(d_k)")),
    ),
    # ------------------------------------------------------------------ saturated_attention
    Bug(
        "saturated_mean",
        "saturated_attention",
        why="the mean of the values (the limit of shrinking scores, not growing ones)",
        cause="the limit as the scores shrink to zero",
        code=saturated((BEST, "best = np.ones_like(scores, dtype=bool)")),
    ),
    Bug(
        "saturated_first_of_ties",
        "saturated_attention",
        why="argmax: the first of the keys tied for the largest score takes all",
        cause="keys tied for the largest score share the weight equally",
        code=saturated((BEST, "best = np.eye(K.shape[0], dtype=bool)[scores.argmax(axis=-1)]")),
    ),
    Bug(
        "saturated_softmax_unchanged",
        "saturated_attention",
        why="ordinary attention, as if the softmax ignored the scale of its scores",
        cause="does not leave the softmax as it was",
        code=saturated(("output = weights @ V", "output = attention_numpy(Q, K, V)[0]")),
    ),
    Bug(
        "saturated_smallest",
        "saturated_attention",
        why="the value of the key with the smallest score",
        cause="not to the smallest",
        code=saturated(("scores.max(axis=-1, keepdims=True)", "scores.min(axis=-1, keepdims=True)")),
    ),
    Bug(
        "saturated_finite_factor",
        "saturated_attention",
        why="Part 2 on queries scaled by a million, taken for the limit: right unless two scores nearly tie",
        cause="a large but finite factor is not the limit",
        code=saturated(("output = weights @ V", "output = attention_numpy(1e6 * Q, K, V)[0]")),
    ),
    # ------------------------------------------------------------------ effect_on_attention
    Bug(
        "effect_key_shift_changes",
        "effect_on_attention",
        why="a common shift of the keys is said to change the weights",
        cause="a softmax does not change when its whole row moves by one number",
        code=effect(('every key": "unchanged"', 'every key": "changed"')),
    ),
    Bug(
        "effect_query_shift_unchanged",
        "effect_on_attention",
        why="a common shift of the queries is said to leave the weights alone, as it does for the keys",
        cause="a different number for each key",
        code=effect(('every query": "changed"', 'every query": "unchanged"')),
    ),
    Bug(
        "effect_key_value_permutation_moves_output",
        "effect_on_attention",
        why="the output is said to move with the keys and values",
        cause="reorders the terms of the sum, not its result",
        code=effect(('permuted together": "unchanged"', 'permuted together": "permuted the same way"')),
    ),
    Bug(
        "effect_query_permutation_invariant",
        "effect_on_attention",
        why="permuting the queries is said to leave the output unchanged (invariance for equivariance)",
        cause="moves the rows of the output with them",
        code=effect(('queries are permuted": "permuted the same way"', 'queries are permuted": "unchanged"')),
    ),
    Bug(
        "effect_value_shift_changes",
        "effect_on_attention",
        why="a common shift of the values is said to change the output in some other way",
        cause="adds exactly c to every output",
        code=effect(('every value": "shifted by the same vector"', 'every value": "changed"')),
    ),
    Bug(
        "effect_scale_invariant",
        "effect_on_attention",
        why="doubling the keys is said to leave the weights alone, as if the softmax normalised the scale away",
        cause="the softmax is not scale-invariant",
        code=effect(('multiplied by 2": "changed"', 'multiplied by 2": "unchanged"')),
    ),
    Bug(
        "effect_own_words",
        "effect_on_attention",
        why="answers in its own words, not one of the options",
        cause="one of the strings of ATTENTION_EFFECTS",
        code=effect(('every value": "shifted by the same vector"', 'every value": "shifted"')),
    ),
]
