"""Correct answers to ch02_scaled_dot_product in other idioms than the reference's."""

from tests.correct import Answer

EFFECTS = """
ATTENTION_EFFECTS = ("unchanged", "permuted the same way", "shifted by the same vector", "changed")
ATTENTION_SITUATIONS = (
    "weights, when the same vector is added to every key",
    "weights, when the same vector is added to every query",
    "output, when the keys and the values are permuted together",
    "output, when the queries are permuted",
    "output, when the same vector is added to every value",
    "weights, when every key is multiplied by 2",
)
"""

ANSWERS: list[Answer] = [
    # ------------------------------------------------------------------ softmax
    Answer(
        "softmax_log_sum_exp",
        "softmax",
        idiom="log-sum-exp in the shifted space, method calls",
        code="""
def softmax(x, axis=-1):
    shifted = x - x.max(axis=axis, keepdims=True)
    return np.exp(shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True)))
""",
    ),
    Answer(
        "softmax_moveaxis",
        "softmax",
        idiom="moves the axis to the end and back, indexing with None",
        code="""
def softmax(x, axis=-1):
    moved = np.moveaxis(x, axis, -1)
    exps = np.exp(moved - moved.max(axis=-1)[..., None])
    return np.moveaxis(exps / exps.sum(axis=-1)[..., None], -1, axis)
""",
    ),
    Answer(
        "softmax_float64_inside",
        "softmax",
        idiom="float64 intermediates, cast back to the input's dtype",
        code="""
def softmax(x, axis=-1):
    wide = np.asarray(x, dtype=np.float64)
    exps = np.exp(wide - np.amax(wide, axis=axis, keepdims=True))
    return (exps / exps.sum(axis=axis, keepdims=True)).astype(x.dtype)
""",
    ),
    Answer(
        "softmax_apply_along_axis",
        "softmax",
        idiom="one slice at a time with np.apply_along_axis",
        code="""
def softmax(x, axis=-1):
    def one(row):
        exps = np.exp(row - row.max())
        return exps / exps.sum()

    return np.apply_along_axis(one, axis, x)
""",
    ),
    Answer(
        "softmax_expand_dims",
        "softmax",
        idiom="reductions without keepdims, put back with np.expand_dims",
        code="""
def softmax(x, axis=-1):
    peak = np.expand_dims(np.max(x, axis=axis), axis)
    exps = np.exp(np.subtract(x, peak))
    return np.divide(exps, np.expand_dims(exps.sum(axis=axis), axis))
""",
    ),
    # ------------------------------------------------------------------ attention_numpy
    Answer(
        "attention_numpy_einsum",
        "attention_numpy",
        idiom="einsum for both products",
        code="""
def attention_numpy(Q, K, V):
    scores = np.einsum("qd,kd->qk", Q, K) / np.sqrt(Q.shape[1])
    weights = softmax(scores)
    return np.einsum("qk,kv->qv", weights, V), weights
""",
    ),
    Answer(
        "attention_numpy_scaled_queries",
        "attention_numpy",
        idiom="scales Q first; np.matmul and np.swapaxes",
        code="""
def attention_numpy(Q, K, V):
    scaled = Q / math.sqrt(K.shape[1])
    weights = softmax(np.matmul(scaled, np.swapaxes(K, 0, 1)), axis=1)
    return np.matmul(weights, V), weights
""",
    ),
    Answer(
        "attention_numpy_loop",
        "attention_numpy",
        idiom="a loop over the queries with its own stable softmax",
        code="""
def attention_numpy(Q, K, V):
    d_k = K.shape[1]
    rows = []
    for query in Q:
        scores = K @ query / d_k ** 0.5
        exps = np.exp(scores - scores.max())
        rows.append(exps / exps.sum())
    weights = np.stack(rows)
    return weights @ V, weights
""",
    ),
    Answer(
        "attention_numpy_dot",
        "attention_numpy",
        idiom="np.dot, transpose(), multiplication by 1/sqrt(d_k)",
        code="""
def attention_numpy(Q, K, V):
    weights = softmax(np.dot(Q, K.transpose()) * (1.0 / np.sqrt(K.shape[-1])), axis=-1)
    return np.dot(weights, V), weights
""",
    ),
    # ------------------------------------------------------------------ scaled_dot_product_attention
    Answer(
        "sdpa_einsum_large_negative",
        "scaled_dot_product_attention",
        idiom="einsum; masked scores set to -1e9",
        code="""
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, -1e9))
    weights = scores.softmax(dim=-1)
    return torch.einsum("...qk,...kv->...qv", weights, v), weights
""",
    ),
    Answer(
        "sdpa_builtin_output",
        "scaled_dot_product_attention",
        idiom="the output from torch.nn.functional.scaled_dot_product_attention, the weights computed beside it",
        code="""
import torch.nn.functional as F


def scaled_dot_product_attention(q, k, v, mask=None):
    output = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = q @ k.mT / q.size(-1) ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    return output, torch.softmax(scores, dim=-1)
""",
    ),
    Answer(
        "sdpa_float64_finfo_min",
        "scaled_dot_product_attention",
        idiom="float64 intermediates, cast back; masked scores set to the dtype's most negative number",
        code="""
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.matmul(q.double(), k.double().transpose(-1, -2)) / math.sqrt(k.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    return (weights @ v.double()).to(v.dtype), weights.to(q.dtype)
""",
    ),
    Answer(
        "sdpa_additive_mask_manual_softmax",
        "scaled_dot_product_attention",
        idiom="q scaled first; an additive -inf mask; its own stable softmax",
        code="""
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = (q * q.size(-1) ** -0.5) @ k.transpose(-1, -2)
    if mask is not None:
        bias = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device).masked_fill(~mask, float("-inf"))
        scores = scores + bias
    scores = scores - scores.amax(dim=-1, keepdim=True)
    exps = scores.exp()
    weights = exps / exps.sum(dim=-1, keepdim=True)
    return weights @ v, weights
""",
    ),
    Answer(
        "sdpa_nan_to_num",
        "scaled_dot_product_attention",
        idiom="the scale as a tensor of the inputs' dtype; torch.nn.functional.softmax; a mask compared with 0; NaN rows cleaned with nan_to_num",
        code="""
def scaled_dot_product_attention(q, k, v, mask=None):
    scale = q.new_tensor(q.size(-1)).sqrt()
    scores = torch.matmul(q, k.mT) / scale
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    weights = torch.nan_to_num(torch.nn.functional.softmax(scores, dim=-1), nan=0.0)
    return torch.matmul(weights, v), weights
""",
    ),
    # ------------------------------------------------------------------ score_matrix_bytes
    Answer(
        "bytes_numpy_prod",
        "score_matrix_bytes",
        idiom="np.prod of the shape",
        code="""
def score_matrix_bytes(batch, heads, len_q, len_k, bytes_per_element):
    return int(np.prod([batch, heads, len_q, len_k])) * bytes_per_element
""",
    ),
    Answer(
        "bytes_meta_tensor",
        "score_matrix_bytes",
        idiom="a meta tensor of the weights' shape: numel times element size",
        code="""
def score_matrix_bytes(batch, heads, len_q, len_k, bytes_per_element):
    weights = torch.empty(batch, heads, len_q, len_k, device="meta")
    return weights.numel() * bytes_per_element
""",
    ),
    Answer(
        "bytes_loop",
        "score_matrix_bytes",
        idiom="a loop over the rows",
        code="""
def score_matrix_bytes(batch, heads, len_q, len_k, bytes_per_element):
    total = 0
    for _ in range(batch * heads * len_q):
        total += len_k * bytes_per_element
    return total
""",
    ),
    Answer(
        "bytes_float",
        "score_matrix_bytes",
        idiom="a float, in another order",
        code="""
def score_matrix_bytes(batch, heads, len_q, len_k, bytes_per_element):
    return float(bytes_per_element) * len_k * len_q * heads * batch
""",
    ),
    # ------------------------------------------------------------------ unscaled_score_std
    Answer(
        "std_power",
        "unscaled_score_std",
        idiom="a power of one half",
        code="""
def unscaled_score_std(d_k):
    return d_k ** 0.5
""",
    ),
    Answer(
        "std_numpy",
        "unscaled_score_std",
        idiom="np.sqrt of the variance, a sum of d_k ones",
        code="""
def unscaled_score_std(d_k):
    variance = np.sum(np.ones(d_k))
    return np.sqrt(variance)
""",
    ),
    Answer(
        "std_torch",
        "unscaled_score_std",
        idiom="a torch tensor",
        code="""
def unscaled_score_std(d_k):
    return torch.tensor(float(d_k), dtype=torch.float64).sqrt()
""",
    ),
    Answer(
        "std_exp_log",
        "unscaled_score_std",
        idiom="exp of half the log",
        code="""
def unscaled_score_std(d_k):
    return math.exp(0.5 * math.log(d_k))
""",
    ),
    # ------------------------------------------------------------------ saturated_attention
    Answer(
        "saturated_measured",
        "saturated_attention",
        idiom="the check itself: Part 2 on queries multiplied by a huge factor",
        code="""
def saturated_attention(Q, K, V):
    Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
    return attention_numpy(1e12 * Q, K, V)[0]
""",
    ),
    Answer(
        "saturated_loop",
        "saturated_attention",
        idiom="a loop over the queries, the mean of the values of the best keys",
        code="""
def saturated_attention(Q, K, V):
    rows = []
    for q in Q:
        scores = K @ q
        rows.append(V[scores == scores.max()].mean(axis=0))
    return np.stack(rows)
""",
    ),
    Answer(
        "saturated_torch",
        "saturated_attention",
        idiom="PyTorch: a mask of the maxima, normalised, in float64",
        code="""
def saturated_attention(Q, K, V):
    scores = torch.as_tensor(Q, dtype=torch.float64) @ torch.as_tensor(K, dtype=torch.float64).T
    best = (scores == scores.amax(dim=-1, keepdim=True)).double()
    return (best / best.sum(-1, keepdim=True) @ torch.as_tensor(V, dtype=torch.float64)).numpy()
""",
    ),
    # ------------------------------------------------------------------ effect_on_attention
    Answer(
        "effect_measured",
        "effect_on_attention",
        idiom="the check itself: Part 2 before and after each change, on random arrays",
        code=EFFECTS
        + """

def effect_on_attention(situation):
    rng = np.random.default_rng(0)
    Q, K, V = rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    c, order = rng.standard_normal(3), rng.permutation(5)
    before = dict(zip(("output", "weights"), attention_numpy(Q, K, V)))
    changed = {
        ATTENTION_SITUATIONS[0]: (Q, K + c, V),
        ATTENTION_SITUATIONS[1]: (Q + c, K, V),
        ATTENTION_SITUATIONS[2]: (Q, K[order], V[order]),
        ATTENTION_SITUATIONS[3]: (Q[[2, 0, 3, 1]], K, V),
        ATTENTION_SITUATIONS[4]: (Q, K, V + c[:2]),
        ATTENTION_SITUATIONS[5]: (Q, 2 * K, V),
    }[situation]
    after = dict(zip(("output", "weights"), attention_numpy(*changed)))
    name = situation.split(",")[0]
    now, then = after[name], before[name]
    if np.allclose(now, then):
        return "unchanged"
    if np.allclose(now, then[[2, 0, 3, 1]]):
        return "permuted the same way"
    if name == "output" and np.allclose(now, then + c[:2]):
        return "shifted by the same vector"
    return "changed"
""",
    ),
    Answer(
        "effect_keywords",
        "effect_on_attention",
        idiom="keywords of the situation, options by index",
        code=EFFECTS
        + """

def effect_on_attention(situation):
    if "key" in situation and "added" in situation:
        return ATTENTION_EFFECTS[0]
    if "permuted together" in situation:
        return ATTENTION_EFFECTS[0]
    if "queries are permuted" in situation:
        return ATTENTION_EFFECTS[1]
    if "value" in situation:
        return ATTENTION_EFFECTS[2]
    return ATTENTION_EFFECTS[3]
""",
    ),
    Answer(
        "saturated_einsum",
        "saturated_attention",
        idiom="np.where for the best keys, np.count_nonzero for the ties, einsum for the average",
        code="""
def saturated_attention(Q, K, V):
    scores = np.einsum("qd,kd->qk", Q, K)
    best = np.where(scores == scores.max(axis=1)[:, None], 1.0, 0.0)
    ties = np.count_nonzero(best, axis=1)
    return np.einsum("qk,kv->qv", best, V) / ties[:, None]
""",
    ),
    Answer(
        "effect_match",
        "effect_on_attention",
        idiom="a match statement over the situations",
        code=EFFECTS
        + """

def effect_on_attention(situation):
    match situation:
        case "weights, when the same vector is added to every key":
            return "unchanged"  # q . c is added to every score of a row
        case "output, when the keys and the values are permuted together":
            return "unchanged"  # a sum over the keys does not depend on their order
        case "output, when the queries are permuted":
            return "permuted the same way"
        case "output, when the same vector is added to every value":
            return "shifted by the same vector"  # the weights sum to 1
        case _:
            return "changed"
""",
    ),
    Answer(
        "effect_indices",
        "effect_on_attention",
        idiom="the index of each situation's effect in ATTENTION_EFFECTS",
        code=EFFECTS
        + """
EFFECT_INDEX = (0, 3, 0, 1, 2, 3)


def effect_on_attention(situation):
    return ATTENTION_EFFECTS[EFFECT_INDEX[ATTENTION_SITUATIONS.index(situation)]]
""",
    ),
]
