"""Correct answers to ch04_masking in other idioms than the reference's."""

from tests.correct import Answer

MASKING_METHODS = """
ROW_OPTIONS = ("nan", "equal weights", "zeros")
MASKING_METHODS = (
    'masked_fill(~mask, float("-inf")), then torch.softmax',
    "masked_fill(~mask, -1e9), then torch.softmax",
    "scores * mask (zero where masked), then torch.softmax",
    "torch.softmax, then multiplied by the mask",
    "torch.softmax, then multiplied by the mask and divided by the row's new sum",
    "masked_softmax of Part 3",
)
"""

ANSWERS: list[Answer] = [
    # ------------------------------------------------------------------ padding_mask
    Answer(
        "padding_ne",
        "padding_mask",
        """
def padding_mask(tokens, pad_id):
    return torch.ne(tokens, pad_id)
""",
        "torch.ne",
    ),
    Answer(
        "padding_not_equal",
        "padding_mask",
        """
def padding_mask(tokens, pad_id):
    return ~(tokens == pad_id)
""",
        "the negation of the padding positions",
    ),
    Answer(
        "padding_loop",
        "padding_mask",
        """
def padding_mask(tokens, pad_id):
    rows = []
    for sequence in tokens:
        rows.append(torch.tensor([int(t) != pad_id for t in sequence], dtype=torch.bool, device=tokens.device))
    return torch.stack(rows)
""",
        "a loop over the sequences and their tokens",
    ),
    Answer(
        "padding_where",
        "padding_mask",
        """
def padding_mask(tokens, pad_id):
    is_pad = torch.eq(tokens, torch.full_like(tokens, pad_id))
    return torch.where(is_pad, torch.zeros_like(is_pad), torch.ones_like(is_pad))
""",
        "torch.where between two boolean tensors",
    ),
    Answer(
        "padding_difference",
        "padding_mask",
        """
def padding_mask(tokens, pad_id):
    return (tokens.long() - pad_id).abs().clamp(max=1).bool()
""",
        "arithmetic on the ids, converted to bool at the end",
    ),
    # ------------------------------------------------------------------ causal_mask
    Answer(
        "causal_arange",
        "causal_mask",
        """
def causal_mask(size, device=None):
    positions = torch.arange(size, device=device)
    return positions[None, :] <= positions[:, None]
""",
        "a comparison of aranges",
    ),
    Answer(
        "causal_float_tril",
        "causal_mask",
        """
def causal_mask(size, device=None):
    return torch.tril(torch.ones(size, size, device=device)).bool()
""",
        "a float lower triangle converted to bool",
    ),
    Answer(
        "causal_not_triu",
        "causal_mask",
        """
def causal_mask(size, device=None):
    future = torch.triu(torch.ones(size, size, dtype=torch.bool, device=device), diagonal=1)
    return ~future
""",
        "the negation of the strict upper triangle",
    ),
    Answer(
        "causal_loop",
        "causal_mask",
        """
def causal_mask(size, device=None):
    mask = torch.zeros(size, size, dtype=torch.bool, device=device)
    for i in range(size):
        mask[i, : i + 1] = True
    return mask
""",
        "a loop over the query rows",
    ),
    Answer(
        "causal_triu_zero",
        "causal_mask",
        """
def causal_mask(size, device=None):
    upper = torch.ones(size, size, device=device).triu(1)
    return upper == 0
""",
        "where the strict upper triangle is zero",
    ),
    # ------------------------------------------------------------------ masked_softmax
    Answer(
        "softmax_minus_1e9_promoted",
        "masked_softmax",
        """
def masked_softmax(scores, mask=None, dim=-1):
    if mask is None:
        return F.softmax(scores, dim=dim)
    work = scores.to(torch.promote_types(scores.dtype, torch.float32))
    weights = F.softmax(work.masked_fill(~mask, -1e9), dim=dim)
    return weights.masked_fill(~mask, 0.0).to(scores.dtype)
""",
        "-1e9 in float32 or wider, masked entries zeroed after",
    ),
    Answer(
        "softmax_finfo_min",
        "masked_softmax",
        """
def masked_softmax(scores, mask=None, dim=-1):
    if mask is None:
        return torch.softmax(scores, dim=dim)
    lowest = torch.finfo(scores.dtype).min
    weights = torch.softmax(scores.masked_fill(mask.logical_not(), lowest), dim=dim)
    return torch.where(mask, weights, torch.zeros_like(weights))
""",
        "torch.finfo(dtype).min, and torch.where to zero the masked entries",
    ),
    Answer(
        "softmax_by_hand",
        "masked_softmax",
        """
def masked_softmax(scores, mask=None, dim=-1):
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    minus_inf = torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device)
    masked = torch.where(mask, scores, minus_inf)
    top = masked.amax(dim=dim, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    exps = torch.exp(masked - top)
    total = exps.sum(dim=dim, keepdim=True)
    return torch.where(total > 0, exps / total.clamp_min(torch.finfo(scores.dtype).tiny), torch.zeros_like(exps))
""",
        "the softmax written out: each row's maximum, exponentials, division",
    ),
    Answer(
        "softmax_additive_mask",
        "masked_softmax",
        """
def masked_softmax(scores, mask=None, dim=-1):
    if mask is None:
        return scores.softmax(dim)
    additive = torch.zeros_like(scores).masked_fill(~mask, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores + additive, dim=dim), nan=0.0)
""",
        "an additive -inf mask, NaN of fully masked rows replaced by zeros",
    ),
    Answer(
        "softmax_float64_inside",
        "masked_softmax",
        """
def masked_softmax(scores, mask=None, dim=-1):
    wide = scores.double()
    if mask is not None:
        wide = wide.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(wide, dim=dim)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return weights.to(scores.dtype)
""",
        "float64 intermediates",
    ),
    Answer(
        "softmax_log_of_mask_minus_log_sum_exp",
        "masked_softmax",
        """
def masked_softmax(scores, mask=None, dim=-1):
    if mask is not None:
        scores = scores + torch.log(mask.to(scores.dtype))
    weights = torch.exp(scores - torch.logsumexp(scores, dim=dim, keepdim=True))
    return torch.nan_to_num(weights, nan=0.0)
""",
        "the log of the mask (0 or -inf) added to the scores; exp(scores - logsumexp(scores)) in the scores' dtype, "
        "NaN of fully masked rows replaced by zeros",
    ),
    # ------------------------------------------------------------------ teacher_forcing_split
    Answer(
        "split_narrow",
        "teacher_forcing_split",
        """
def teacher_forcing_split(tgt):
    n = tgt.size(1) - 1
    return tgt.narrow(1, 0, n), tgt.narrow(1, 1, n)
""",
        "narrow",
    ),
    Answer(
        "split_index_select",
        "teacher_forcing_split",
        """
def teacher_forcing_split(tgt):
    steps = torch.arange(tgt.shape[1] - 1, device=tgt.device)
    return tgt.index_select(1, steps), tgt.index_select(1, steps + 1)
""",
        "index_select with aranges",
    ),
    Answer(
        "split_explicit_ends",
        "teacher_forcing_split",
        """
def teacher_forcing_split(tgt):
    length = tgt.shape[-1]
    decoder_input = tgt[..., : length - 1].clone()
    target = tgt[..., 1:length].clone()
    return decoder_input, target
""",
        "explicit ends on the last axis, copies",
    ),
    Answer(
        "split_torch_split",
        "teacher_forcing_split",
        """
def teacher_forcing_split(tgt):
    length = tgt.size(1)
    decoder_input, _ = torch.split(tgt, [length - 1, 1], dim=1)
    _, target = torch.split(tgt, [1, length - 1], dim=1)
    return decoder_input, target
""",
        "torch.split",
    ),
    # ------------------------------------------------------------------ decoder_self_attention_mask
    Answer(
        "decoder_aranges",
        "decoder_self_attention_mask",
        """
def decoder_self_attention_mask(tgt, pad_id):
    length = tgt.size(1)
    position = torch.arange(length, device=tgt.device)
    causal = position[None, :] <= position[:, None]
    return (causal[None] & (tgt != pad_id)[:, None, :]).unsqueeze(1)
""",
        "its own comparisons, without the helpers, head dimension added last",
    ),
    Answer(
        "decoder_views",
        "decoder_self_attention_mask",
        """
def decoder_self_attention_mask(tgt, pad_id):
    batch, length = tgt.shape
    keys = padding_mask(tgt, pad_id).view(batch, 1, 1, length)
    return torch.logical_and(causal_mask(length, tgt.device).view(1, 1, length, length), keys)
""",
        "view and logical_and",
    ),
    Answer(
        "decoder_loop",
        "decoder_self_attention_mask",
        """
def decoder_self_attention_mask(tgt, pad_id):
    length = tgt.size(1)
    causal = causal_mask(length, device=tgt.device)
    masks = [causal & (sequence != pad_id)[None, :] for sequence in tgt]
    return torch.stack(masks).unsqueeze(1)
""",
        "a loop over the sequences",
    ),
    Answer(
        "decoder_float_product",
        "decoder_self_attention_mask",
        """
def decoder_self_attention_mask(tgt, pad_id):
    length = tgt.size(1)
    causal = torch.tril(torch.ones(length, length, device=tgt.device))
    keys = (tgt != pad_id).float()
    return (causal[None, None] * keys[:, None, None, :]) > 0.5
""",
        "a product of float masks, compared at the end",
    ),
    Answer(
        "decoder_expand",
        "decoder_self_attention_mask",
        """
def decoder_self_attention_mask(tgt, pad_id):
    batch, length = tgt.shape
    causal = causal_mask(length, tgt.device).expand(batch, 1, length, length)
    keys = padding_mask(tgt, pad_id)[:, None, None, :].expand(batch, 1, length, length)
    return causal & keys
""",
        "both masks expanded to the full shape",
    ),
    # ------------------------------------------------------------------ mask_for
    Answer(
        "mask_for_conditions",
        "mask_for",
        idiom="if/else on the situation, answers taken from MASK_OPTIONS",
        code="""
MASK_OPTIONS = ("no mask", "padding of the keys", "padding of the queries", "causal", "causal and padding of the keys")


def mask_for(situation):
    if situation == "decoder self-attention":
        return MASK_OPTIONS[4]
    return MASK_OPTIONS[1]
""",
    ),
    Answer(
        "mask_for_match",
        "mask_for",
        idiom="a match statement",
        code="""
MASK_OPTIONS = ("no mask", "padding of the keys", "padding of the queries", "causal", "causal and padding of the keys")


def mask_for(situation):
    match situation:
        case "encoder self-attention" | "cross-attention":
            return "padding of the keys"
        case "decoder self-attention":
            return "causal and padding of the keys"
""",
    ),
    Answer(
        "mask_for_rules",
        "mask_for",
        idiom="built from two rules: keys that can be padding, and whether the future is among the keys",
        code="""
MASK_OPTIONS = ("no mask", "padding of the keys", "padding of the queries", "causal", "causal and padding of the keys")


def mask_for(situation):
    sees_own_future = situation.startswith("decoder")
    return "causal and padding of the keys" if sees_own_future else "padding of the keys"
""",
    ),
    Answer(
        "mask_for_table",
        "mask_for",
        idiom="a list of pairs searched in a loop",
        code="""
MASK_OPTIONS = ("no mask", "padding of the keys", "padding of the queries", "causal", "causal and padding of the keys")
TABLE = [
    ("cross-attention", "padding of the keys"),
    ("decoder self-attention", "causal and padding of the keys"),
    ("encoder self-attention", "padding of the keys"),
]


def mask_for(situation):
    for name, answer in TABLE:
        if name == situation:
            return answer
    raise ValueError(situation)
""",
    ),
    # ------------------------------------------------------------------ visible_pairs
    Answer(
        "pairs_closed_form",
        "visible_pairs",
        idiom="a closed formula",
        code="""
def visible_pairs(length, num_real):
    return num_real * (num_real + 1) // 2 + (length - num_real) * num_real
""",
    ),
    Answer(
        "pairs_from_the_mask",
        "visible_pairs",
        idiom="builds the mask of Part 5 and counts its True entries",
        code="""
def visible_pairs(length, num_real):
    tgt = torch.zeros(1, length, dtype=torch.long)
    tgt[0, :num_real] = 1
    return int(decoder_self_attention_mask(tgt, 0).sum())
""",
    ),
    Answer(
        "pairs_double_loop",
        "visible_pairs",
        idiom="a loop over all pairs",
        code="""
def visible_pairs(length, num_real):
    count = 0
    for i in range(length):
        for j in range(length):
            if j <= i and j < num_real:
                count += 1
    return count
""",
    ),
    Answer(
        "pairs_torch_tril",
        "visible_pairs",
        idiom="a lower triangle and the real-key columns, with torch",
        code="""
def visible_pairs(length, num_real):
    lower = torch.ones(length, length).tril()
    return lower[:, :num_real].sum().item()
""",
    ),
    # ------------------------------------------------------------------ answer_visible
    Answer(
        "visible_range",
        "answer_visible",
        idiom="the range of positions, or nothing",
        code="""
def answer_visible(length, causal):
    return [] if causal else list(range(length - 2))
""",
    ),
    Answer(
        "visible_checked_with_parts_2_and_4",
        "answer_visible",
        idiom="the check itself: Parts 2 and 4 on a target of distinct tokens",
        code="""
def answer_visible(length, causal):
    decoder_input, target = teacher_forcing_split(torch.arange(length)[None])
    steps = length - 1
    allowed = causal_mask(steps) if causal else torch.ones(steps, steps, dtype=torch.bool)
    seen = allowed & (decoder_input[0][None, :] == target[0][:, None])  # (target position, input position)
    return seen.any(dim=1).nonzero().flatten().tolist()
""",
    ),
    Answer(
        "visible_numpy",
        "answer_visible",
        idiom="a NumPy array, empty under the mask",
        code="""
import numpy as np


def answer_visible(length, causal):
    if causal:
        return np.array([], dtype=np.int64)
    return np.arange(length - 2)
""",
    ),
    Answer(
        "visible_set_loop",
        "answer_visible",
        idiom="a loop over query and key positions into a set, returned as a sorted tuple",
        code="""
def answer_visible(length, causal):
    found = set()
    for query in range(length - 1):  # target position t predicts token t + 1
        for key in range(length - 1):  # decoder input position j holds token j
            if key == query + 1 and (key <= query or not causal):
                found.add(query)
    return tuple(sorted(found))
""",
    ),
    # ------------------------------------------------------------------ fully_masked_row
    Answer(
        "row_measured",
        "fully_masked_row",
        MASKING_METHODS
        + """


def fully_masked_row(method):
    scores, mask = torch.randn(5), torch.zeros(5, dtype=torch.bool)
    row = {
        MASKING_METHODS[0]: lambda: torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1),
        MASKING_METHODS[1]: lambda: torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1),
        MASKING_METHODS[2]: lambda: torch.softmax(scores * mask, dim=-1),
        MASKING_METHODS[3]: lambda: torch.softmax(scores, dim=-1) * mask,
        MASKING_METHODS[4]: lambda: (lambda w: w / w.sum())(torch.softmax(scores, dim=-1) * mask),
        MASKING_METHODS[5]: lambda: masked_softmax(scores, mask),
    }[method]()
    if row.isnan().any():
        return "nan"
    if (row == 0).all():
        return "zeros"
    return "equal weights" if torch.allclose(row, torch.full_like(row, 0.2)) else "something else"
""",
        "the check itself: each method run on a random row with a mask that is False everywhere",
    ),
    Answer(
        "row_keywords",
        "fully_masked_row",
        MASKING_METHODS
        + """


def fully_masked_row(method):
    if "Part 3" in method or method.endswith("by the mask"):
        return ROW_OPTIONS[2]
    if "inf" in method or "new sum" in method:
        return ROW_OPTIONS[0]
    return ROW_OPTIONS[1]
""",
        "keywords of the method, options by index",
    ),
    Answer(
        "row_match",
        "fully_masked_row",
        idiom="a match statement over the position of the method in MASKING_METHODS",
        code=MASKING_METHODS
        + """

def fully_masked_row(method):
    match MASKING_METHODS.index(method):
        case 0 | 4:
            return "nan"  # exp(-inf - (-inf)), or 0 / 0
        case 1 | 2:
            return "equal weights"  # every score of the row is the same
        case _:
            return "zeros"
""",
    ),
    Answer(
        "row_numpy",
        "fully_masked_row",
        idiom="the check in NumPy (and Part 3 in PyTorch), the result compared with each option",
        code=MASKING_METHODS
        + """
import numpy as np


def softmax(scores):
    shifted = np.exp(scores - scores.max())
    return shifted / shifted.sum()


def fully_masked_row(method):
    scores, mask = np.random.default_rng(0).standard_normal(5).astype(np.float32), np.zeros(5, dtype=bool)
    with np.errstate(invalid="ignore"):
        if method == MASKING_METHODS[5]:
            row = masked_softmax(torch.from_numpy(scores), torch.from_numpy(mask)).numpy()
        elif method == MASKING_METHODS[0]:
            row = softmax(np.where(mask, scores, -np.inf))
        elif method == MASKING_METHODS[1]:
            row = softmax(np.where(mask, scores, np.float32(-1e9)))
        elif method == MASKING_METHODS[2]:
            row = softmax(scores * mask)
        else:
            row = softmax(scores) * mask
            if "new sum" in method:
                row = row / row.sum()
    options = {"nan": np.isnan(row).all(), "equal weights": np.allclose(row, 0.2), "zeros": not row.any()}
    return next(option for option, holds in options.items() if holds)
""",
    ),
]
