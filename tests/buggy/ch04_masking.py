"""Wrong answers to ch04_masking that students really write.

Each is the reference answer with one realistic mistake in it (``variant``), so a wrong answer cannot
silently become the right one; ``cause`` is what the hint of a failing test of its item must name.
"""

from tests.buggy import Bug, variant

A = "ch04_masking"

TESTS = {
    "padding_mask": ["test_padding_mask"],
    "causal_mask": ["test_causal_mask"],
    "masked_softmax": ["test_masked_softmax_mask", "test_masked_softmax_general"],
    "teacher_forcing_split": ["test_teacher_forcing_split"],
    "decoder_self_attention_mask": ["test_decoder_mask"],
    "mask_for": ["test_mask_for"],
    "visible_pairs": ["test_visible_pairs"],
    "answer_visible": ["test_answer_visible"],
    "fully_masked_row": ["test_fully_masked_row"],
}

NOT_PAD = "tokens != pad_id"
CAUSAL = "torch.ones(size, size, dtype=torch.bool, device=device).tril()"
MASKING = 'weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=dim)'
ZEROING = "return weights.masked_fill(~mask, 0.0)"
SPLIT = "return tgt[:, :-1], tgt[:, 1:]"
BOTH = "causal[None, None, :, :] & keys[:, None, None, :]"


def padding(why, cause, *replacements, name):
    return Bug(name, "padding_mask", variant(A, "padding_mask", *replacements), why, cause)


def causal(why, cause, *replacements, name):
    return Bug(name, "causal_mask", variant(A, "causal_mask", *replacements), why, cause)


MASK_TEST = "test_masked_softmax_mask"  # the mask bugs of masked_softmax fail its visible checks


def softmax(why, cause, *replacements, name, visible=""):
    return Bug(name, "masked_softmax", variant(A, "masked_softmax", *replacements), why, cause, visible=visible)


def split(why, cause, *replacements, name):
    return Bug(name, "teacher_forcing_split", variant(A, "teacher_forcing_split", *replacements), why, cause)


def decoder(why, cause, *replacements, name):
    return Bug(
        name, "decoder_self_attention_mask", variant(A, "decoder_self_attention_mask", *replacements), why, cause
    )


ENCODER = '"encoder self-attention": "padding of the keys"'
DECODER = '"decoder self-attention": "causal and padding of the keys"'
CROSS = '"cross-attention": "padding of the keys"'
PAIRS = "min(i + 1, num_real)"


BUGS = [
    # ------------------------------------------------------------------ padding_mask
    padding(
        "True at padding (nn.MultiheadAttention's convention)",
        "true at the padding tokens",
        (NOT_PAD, "tokens == pad_id"),
        name="padding_inverted",
    ),
    padding("assumes pad_id is 0", "by the id 0", (NOT_PAD, "tokens != 0"), name="padding_hard_coded_zero"),
    padding(
        "returns a float mask", "numbers (1 and 0)", (NOT_PAD, "(tokens != pad_id).float()"), name="padding_as_float"
    ),
    padding(
        "returns an integer mask", "numbers (1 and 0)", (NOT_PAD, "(tokens != pad_id).long()"), name="padding_as_long"
    ),
    padding(
        "counts the length up to the first pad only",
        "after the first padding token",
        (
            NOT_PAD,
            "torch.arange(tokens.size(1))[None, :] < (tokens != pad_id).long().cumprod(dim=1).sum(dim=1)[:, None]",
        ),
        name="padding_from_first_pad",
    ),
    padding(
        "builds the mask from the lengths, as if padding were always at the end",
        "wherever it is",
        (NOT_PAD, "torch.arange(tokens.size(1))[None, :] < (tokens != pad_id).sum(dim=1)[:, None]"),
        name="padding_from_lengths",
    ),
    padding(
        "assumes the pad id is the smallest id",
        "ids below it are real tokens",
        (NOT_PAD, "tokens > pad_id"),
        name="padding_greater_than_pad",
    ),
    # ------------------------------------------------------------------ causal_mask
    causal(
        "hides the diagonal: a position cannot see itself",
        "the diagonal is hidden",
        (".tril()", ".tril(diagonal=-1)"),
        name="causal_off_by_one",
    ),
    causal(
        "lets queries see the future instead of the past",
        "sees the later positions",
        (".tril()", ".triu()"),
        name="causal_upper_triangle",
    ),
    causal(
        "True above the diagonal (True = ignore)",
        "true where attention is forbidden",
        (".tril()", ".triu(diagonal=1)"),
        name="causal_pytorch_convention",
    ),
    causal(
        "an additive -inf float mask",
        "additive float mask",
        (CAUSAL, 'torch.full((size, size), float("-inf"), device=device).triu(diagonal=1)'),
        name="causal_additive_float",
    ),
    causal("a 0/1 float mask", "numbers (1 and 0)", ("dtype=torch.bool, ", ""), name="causal_float_ones"),
    causal(
        "ignores device: the mask is always made on the CPU",
        "on the device you are given",
        (", device=device", ""),
        name="causal_ignores_device",
    ),
    # ------------------------------------------------------------------ masked_softmax
    softmax(
        "sets masked scores to 0 instead of -inf",
        "a score of zero still gets a share",
        ('float("-inf")', "0.0"),
        (ZEROING, "return weights"),
        name="softmax_mask_with_zero",
        visible=MASK_TEST,
    ),
    softmax(
        "multiplies the weights by the mask after the softmax",
        "applied after the softmax",
        (MASKING, "weights = torch.softmax(scores, dim=dim)"),
        (ZEROING, "return weights * mask"),
        name="softmax_mask_after",
        visible=MASK_TEST,
    ),
    softmax(
        "a fully masked row gives NaN",
        "all masked gives nan",
        (ZEROING, "return weights"),
        name="softmax_nan_full_rows",
        visible=MASK_TEST,
    ),
    softmax(
        "-1e9: uniform weights on fully masked rows, fails in float16",
        "large negative number",
        ('float("-inf")', "-1e9"),
        (ZEROING, "return weights"),
        name="softmax_minus_1e9",
        visible=MASK_TEST,
    ),
    softmax(
        "-1e9 with fully masked rows zeroed: out of float16's range",
        "out of float16's range",
        ('float("-inf")', "-1e9"),
        name="softmax_minus_1e9_zeroed",
    ),
    softmax(
        "-1e4: does not silence masked entries among very negative scores",
        "moderate negative number",
        ('float("-inf")', "-1e4"),
        name="softmax_minus_1e4",
    ),
    softmax(
        "always normalises the last dimension",
        "along the last dimension instead of along dim",
        ("dim=dim", "dim=-1"),
        name="softmax_ignores_dim",
    ),
    softmax(
        "zeroes fully masked rows along the last dimension only",
        "along the last dimension only",
        (ZEROING, "return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)"),
        name="softmax_full_rows_last_dim_only",
    ),
    softmax(
        "masked_fill_ overwrites the caller's scores",
        "unchanged after the call",
        ("scores.masked_fill(~mask", "scores.masked_fill_(~mask"),
        name="softmax_in_place",
    ),
    softmax(
        "masks where the mask is True", "wrong way round", ("~mask", "mask"), name="softmax_inverted", visible=MASK_TEST
    ),
    softmax(
        "subtracts the largest score of the whole tensor",
        "largest score of the whole tensor",
        (
            MASKING,
            'scores = scores.masked_fill(~mask, float("-inf"))\n'
            "    exps = torch.exp(scores - scores.max())\n"
            "    weights = exps / exps.sum(dim=dim, keepdim=True)",
        ),
        name="softmax_global_max",
    ),
    softmax(
        "exponentials of the raw scores",
        "overflow",
        (
            MASKING,
            'exps = torch.exp(scores.masked_fill(~mask, float("-inf")))\n'
            "    weights = exps / exps.sum(dim=dim, keepdim=True)",
        ),
        name="softmax_no_max_subtraction",
    ),
    softmax(
        "boolean indexing: needs a mask of the scores' own shape",
        "the mask broadcasts to the scores",
        (
            MASKING,
            'scores = scores.clone()\n    scores[~mask] = float("-inf")\n    weights = torch.softmax(scores, dim=dim)',
        ),
        name="softmax_mask_not_broadcast",
        visible=MASK_TEST,
    ),
    softmax(
        "computes in float32 and returns float32",
        "must give float64 weights",
        ("scores.masked_fill(~mask", "scores.float().masked_fill(~mask"),
        name="softmax_float32_result",
    ),
    softmax(
        "computes in float32 and casts back: float64 loses its precision",
        "compute in the dtype of the scores",
        ("scores.masked_fill(~mask", "scores.float().masked_fill(~mask"),
        (ZEROING, "return weights.masked_fill(~mask, 0.0).to(scores.dtype)"),
        name="softmax_float32_inside",
    ),
    # ------------------------------------------------------------------ teacher_forcing_split
    split(
        "returns (target, input)",
        "the two are swapped",
        (SPLIT, "return tgt[:, 1:], tgt[:, :-1]"),
        name="split_swapped",
    ),
    split(
        "slices the batch, not the positions",
        "along the batch",
        (SPLIT, "return tgt[:-1], tgt[1:]"),
        name="split_batch_dim",
    ),
    split(
        "the decoder sees the token it must predict",
        "the target is not shifted",
        (SPLIT, "return tgt[:, :-1], tgt[:, :-1]"),
        name="split_no_offset",
    ),
    split(
        "the target is the whole sequence",
        "the target keeps the first token",
        (SPLIT, "return tgt[:, :-1], tgt"),
        name="split_target_keeps_bos",
    ),
    split(
        "the decoder input is the whole sequence",
        "the decoder input keeps the last token",
        (SPLIT, "return tgt, tgt[:, 1:]"),
        name="split_input_keeps_last",
    ),
    split(
        "flattens the target for the loss",
        "the target is flattened",
        (SPLIT, "return tgt[:, :-1], tgt[:, 1:].reshape(-1)"),
        name="split_flat_target",
    ),
    # ------------------------------------------------------------------ decoder_self_attention_mask
    decoder(
        "returns (B, L, L)",
        "the head dimension is missing",
        (BOTH, "causal[None, :, :] & keys[:, None, :]"),
        name="decoder_mask_no_head_dim",
    ),
    decoder(
        "masks padded queries, not padded keys",
        "hides the queries (rows) instead of the keys",
        ("keys[:, None, None, :]", "keys[:, None, :, None]"),
        name="decoder_mask_pads_queries",
    ),
    decoder("combines the masks with | instead of &", "combined with 'or'", (" & ", " | "), name="decoder_mask_or"),
    decoder(
        "forgets the padding",
        "padding is not masked",
        (BOTH, "causal[None, None, :, :].expand(tgt.size(0), 1, -1, -1)"),
        name="decoder_mask_causal_only",
    ),
    decoder(
        "forgets the look-ahead condition",
        "the look-ahead condition is missing",
        (BOTH, "keys[:, None, None, :].expand(-1, 1, tgt.size(1), -1)"),
        name="decoder_mask_padding_only",
    ),
    decoder(
        "hard-codes pad id 0",
        "by the id 0",
        ("padding_mask(tgt, pad_id)", "padding_mask(tgt, 0)"),
        name="decoder_mask_pad_zero",
    ),
    decoder(
        "hides padded queries as well as padded keys",
        "padded queries are hidden too",
        (BOTH, BOTH + " & keys[:, None, :, None]"),
        name="decoder_mask_pads_both",
    ),
    decoder(
        "builds the padding from the lengths, as if padding were always at the end",
        "wherever it is",
        ("padding_mask(tgt, pad_id)", "torch.arange(tgt.size(1))[None, :] < (tgt != pad_id).sum(dim=1)[:, None]"),
        name="decoder_mask_from_lengths",
    ),
    decoder(
        "the look-ahead mask transposed: queries see the future",
        "sees the keys after it",
        (BOTH, "causal.T[None, None, :, :] & keys[:, None, None, :]"),
        name="decoder_mask_transposed",
    ),
    decoder(
        "a 0/1 float mask",
        "numbers (1 and 0)",
        ("return " + BOTH, "return (" + BOTH + ").float()"),
        name="decoder_mask_float",
    ),
    # ------------------------------------------------------------------ mask_for
    Bug(
        "mask_for_decoder_causal_only",
        "mask_for",
        why="the decoder's self-attention gets the causal mask only",
        cause="the target batch is padded too",
        code=variant(A, "mask_for", (DECODER, '"decoder self-attention": "causal"')),
    ),
    Bug(
        "mask_for_cross_causal",
        "mask_for",
        why="cross-attention gets the causal mask too",
        cause="the keys are the encoder's outputs",
        code=variant(A, "mask_for", (CROSS, '"cross-attention": "causal and padding of the keys"')),
    ),
    Bug(
        "mask_for_encoder_unmasked",
        "mask_for",
        why="the encoder gets no mask",
        cause="the source batch is padded",
        code=variant(A, "mask_for", (ENCODER, '"encoder self-attention": "no mask"')),
    ),
    Bug(
        "mask_for_own_words",
        "mask_for",
        why="answers in its own words, not one of the options",
        cause="one of the strings of MASK_OPTIONS",
        code=variant(A, "mask_for", (DECODER, '"decoder self-attention": "causal + padding"')),
    ),
    # ------------------------------------------------------------------ visible_pairs
    Bug(
        "pairs_no_padding",
        "visible_pairs",
        why="counts the causal mask only",
        cause="the padding keys are hidden too",
        code=variant(A, "visible_pairs", (PAIRS, "i + 1")),
    ),
    Bug(
        "pairs_not_causal",
        "visible_pairs",
        why="counts the padding mask only",
        cause="the mask is causal as well",
        code=variant(A, "visible_pairs", (PAIRS, "num_real")),
    ),
    Bug(
        "pairs_padding_queries_blind",
        "visible_pairs",
        why="gives the padding queries no keys",
        cause="not padding queries",
        code=variant(A, "visible_pairs", (PAIRS, "(i + 1 if i < num_real else 0)")),
    ),
    # ------------------------------------------------------------------ answer_visible
    Bug(
        "visible_last_position_too",
        "answer_visible",
        why="counts the last target position, whose answer the split dropped",
        cause="the last token of the target is not in the decoder input",
        code=variant(A, "answer_visible", ("t + 1 < length - 1 and", "t + 1 < length and")),
    ),
    Bug(
        "visible_despite_causal_mask",
        "answer_visible",
        why="predicts a leak under the causal mask too",
        cause="sees the decoder input up to position t only",
        code=variant(A, "answer_visible", (" and not causal]", "]")),
    ),
    Bug(
        "visible_never",
        "answer_visible",
        why="believes the shift of teacher forcing hides the answers by itself",
        cause="does not hide the answers by itself",
        code=variant(A, "answer_visible", ("if t + 1 < length - 1 and not causal]", "if False]")),
    ),
]

# Found by the second review of the grader: a hint that named padding for a diagonal off by one.
BUGS += [
    Bug(
        "decoder_mask_hides_diagonal",
        "decoder_self_attention_mask",
        variant(
            A,
            "decoder_self_attention_mask",
            (
                "causal = causal_mask(tgt.size(1), device=tgt.device)",
                "causal = torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool, device=tgt.device).tril(-1)",
            ),
        ),
        why="its own look-ahead part, off by one: the diagonal hidden",
        cause="the diagonal is hidden",
    ),
    # ------------------------------------------------------------------ fully_masked_row
    Bug(
        "row_infinity_zeros",
        "fully_masked_row",
        why="minus infinity everywhere is said to give zero weights",
        cause="the softmax divides 0 by 0",
        code=variant(
            "ch04_masking",
            "fully_masked_row",
            ("""then torch.softmax': "nan\"""", """then torch.softmax': "zeros\""""),
        ),
    ),
    Bug(
        "row_large_negative_zeros",
        "fully_masked_row",
        why="-1e9 everywhere is said to give zero weights",
        cause="they are all equal and the softmax spreads the weight evenly",
        code=variant(
            "ch04_masking",
            "fully_masked_row",
            ('-1e9), then torch.softmax": "equal weights"', '-1e9), then torch.softmax": "zeros"'),
        ),
    ),
    Bug(
        "row_product_zeros",
        "fully_masked_row",
        why="scores multiplied by the mask are said to give zero weights",
        cause="a score multiplied by False becomes 0, not minus infinity",
        code=variant(
            "ch04_masking",
            "fully_masked_row",
            ('masked), then torch.softmax": "equal weights"', 'masked), then torch.softmax": "zeros"'),
        ),
    ),
    Bug(
        "row_renormalised_zeros",
        "fully_masked_row",
        why="renormalising a row of zeros is said to keep zeros",
        cause="dividing by it gives 0 / 0",
        code=variant("ch04_masking", "fully_masked_row", ("""new sum": "nan\"""", """new sum": "zeros\"""")),
    ),
    Bug(
        "row_own_words",
        "fully_masked_row",
        why="answers in its own words, not one of the options",
        cause="one of the strings of ROW_OPTIONS",
        code=variant(
            "ch04_masking",
            "fully_masked_row",
            ('"masked_softmax of Part 3": "zeros"', '"masked_softmax of Part 3": "0"'),
        ),
    ),
]
