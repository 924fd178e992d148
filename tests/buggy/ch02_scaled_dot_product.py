"""Wrong answers to ch02_scaled_dot_product that students really write."""

from tests.buggy import Bug

TESTS = {
    "softmax": ["test_softmax_values", "test_softmax_stable", "test_softmax_axis"],
    "attention_numpy": ["test_attention_numpy_example", "test_attention_numpy_general"],
    "scaled_dot_product_attention": ["test_sdpa_shapes", "test_sdpa_values", "test_sdpa_mask"],
}

BUGS = [
    # ------------------------------------------------------------------ softmax
    Bug("softmax_naive_exp", "softmax", why="overflows to inf/inf = nan for large inputs", code='''
def softmax(x, axis=-1):
    exps = np.exp(x)
    return exps / np.sum(exps, axis=axis, keepdims=True)
'''),
    Bug("softmax_ignores_axis", "softmax", why="always normalises the last axis", code='''
def softmax(x, axis=-1):
    shifted = x - np.max(x, axis=-1, keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=-1, keepdims=True)
'''),
    Bug("softmax_global_sum", "softmax", why="normalises over the whole array", code='''
def softmax(x, axis=-1):
    exps = np.exp(x - np.max(x))
    return exps / np.sum(exps)
'''),
    Bug("softmax_in_place", "softmax", why="overwrites the caller's array", code='''
def softmax(x, axis=-1):
    x -= np.max(x, axis=axis, keepdims=True)
    np.exp(x, out=x)
    x /= np.sum(x, axis=axis, keepdims=True)
    return x
'''),
    Bug("softmax_no_keepdims", "softmax", why="the reductions do not broadcast back", code='''
def softmax(x, axis=-1):
    exps = np.exp(x - np.max(x, axis=axis))
    return exps / np.sum(exps, axis=axis)
'''),
    # ------------------------------------------------------------------ attention_numpy
    Bug("attention_numpy_no_scaling", "attention_numpy", why="missing 1/sqrt(d_k)", code='''
def attention_numpy(Q, K, V):
    weights = softmax(Q @ K.T, axis=-1)
    return weights @ V, weights
'''),
    Bug("attention_numpy_scale_by_dv", "attention_numpy", why="scales by the values' size", code='''
def attention_numpy(Q, K, V):
    weights = softmax(Q @ K.T / np.sqrt(V.shape[-1]), axis=-1)
    return weights @ V, weights
'''),
    Bug("attention_numpy_scale_by_dk", "attention_numpy", why="divides by d_k, not its square root", code='''
def attention_numpy(Q, K, V):
    weights = softmax(Q @ K.T / K.shape[-1], axis=-1)
    return weights @ V, weights
'''),
    Bug("attention_numpy_softmax_over_queries", "attention_numpy", why="softmax over axis 0", code='''
def attention_numpy(Q, K, V):
    weights = softmax(Q @ K.T / np.sqrt(K.shape[-1]), axis=0)
    return weights @ V, weights
'''),
    # ------------------------------------------------------------------ scaled_dot_product_attention
    Bug("sdpa_no_scaling", "scaled_dot_product_attention", why="missing 1/sqrt(d_k)", code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
'''),
    Bug("sdpa_scale_by_dv", "scaled_dot_product_attention", why="scales by the values' size", code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
'''),
    Bug("sdpa_softmax_wrong_dim", "scaled_dot_product_attention", why="softmax over the queries", code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2)
    return weights @ v, weights
'''),
    Bug("sdpa_k_T", "scaled_dot_product_attention", why="k.T reverses every dimension of a batch", code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
'''),
    Bug("sdpa_mask_inverted", "scaled_dot_product_attention", why="hides the keys that should be seen", code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
'''),
    Bug("sdpa_mask_after_softmax", "scaled_dot_product_attention", why="zeroes weights without renormalising",
        code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights
'''),
    Bug("sdpa_mask_with_zero", "scaled_dot_product_attention", why="a score of 0 still gets weight", code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
'''),
    Bug("sdpa_float32_softmax", "scaled_dot_product_attention", why="hard-codes float32", code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32)
    return weights.to(v.dtype) @ v, weights
'''),
]
