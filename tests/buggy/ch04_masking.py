"""Wrong answers to ch04_masking that students really write.

Padding and look-ahead masks, the masked softmax, teacher forcing, the decoder's mask, and the questions on which
mask goes where and what it hides.
"""

from tests.buggy import wrong_answers

A = "ch04_masking"

bug = wrong_answers(A)
mask_bug = wrong_answers(A, visible="test_masked_softmax_mask")  # masked_softmax's mask bugs fail its visible checks

NOT_PAD = "tokens != pad_id"
CAUSAL = "torch.ones(size, size, dtype=torch.bool, device=device).tril()"
MASKING = 'weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=dim)'
ZEROING = "return weights.masked_fill(~mask, 0.0)"
SPLIT = "return tgt[:, :-1], tgt[:, 1:]"
BOTH = "causal[None, None, :, :] & keys[:, None, None, :]"
ENCODER = '"encoder self-attention": "padding of the keys"'
DECODER = '"decoder self-attention": "causal and padding of the keys"'
CROSS = '"cross-attention": "padding of the keys"'
PAIRS = "min(i + 1, num_real)"

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

BUGS = [
    # ------------------------------------------------------------------ padding_mask
    bug(
        "padding_inverted",
        "padding_mask",
        (NOT_PAD, "tokens == pad_id"),
        why="True at padding (nn.MultiheadAttention's convention)",
        cause="true at the padding tokens",
    ),
    bug(
        "padding_hard_coded_zero",
        "padding_mask",
        (NOT_PAD, "tokens != 0"),
        why="assumes pad_id is 0",
        cause="by the id 0",
    ),
    bug(
        "padding_as_float",
        "padding_mask",
        (NOT_PAD, "(tokens != pad_id).float()"),
        why="returns a float mask",
        cause="numbers (1 and 0)",
    ),
    bug(
        "padding_as_long",
        "padding_mask",
        (NOT_PAD, "(tokens != pad_id).long()"),
        why="returns an integer mask",
        cause="numbers (1 and 0)",
    ),
    bug(
        "padding_from_first_pad",
        "padding_mask",
        (
            NOT_PAD,
            "torch.arange(tokens.size(1))[None, :] < (tokens != pad_id).long().cumprod(dim=1).sum(dim=1)[:, None]",
        ),
        why="counts the length up to the first pad only",
        cause="after the first padding token",
    ),
    bug(
        "padding_from_lengths",
        "padding_mask",
        (NOT_PAD, "torch.arange(tokens.size(1))[None, :] < (tokens != pad_id).sum(dim=1)[:, None]"),
        why="builds the mask from the lengths, as if padding were always at the end",
        cause="wherever it is",
    ),
    bug(
        "padding_greater_than_pad",
        "padding_mask",
        (NOT_PAD, "tokens > pad_id"),
        why="assumes the pad id is the smallest id",
        cause="ids below it are real tokens",
    ),
    # ------------------------------------------------------------------ causal_mask
    bug(
        "causal_off_by_one",
        "causal_mask",
        (".tril()", ".tril(diagonal=-1)"),
        why="hides the diagonal: a position cannot see itself",
        cause="the diagonal is hidden",
    ),
    bug(
        "causal_upper_triangle",
        "causal_mask",
        (".tril()", ".triu()"),
        why="lets queries see the future instead of the past",
        cause="sees the later positions",
    ),
    bug(
        "causal_pytorch_convention",
        "causal_mask",
        (".tril()", ".triu(diagonal=1)"),
        why="True above the diagonal (True = ignore)",
        cause="true where attention is forbidden",
    ),
    bug(
        "causal_additive_float",
        "causal_mask",
        (CAUSAL, 'torch.full((size, size), float("-inf"), device=device).triu(diagonal=1)'),
        why="an additive -inf float mask",
        cause="additive float mask",
    ),
    bug(
        "causal_float_ones",
        "causal_mask",
        ("dtype=torch.bool, ", ""),
        why="a 0/1 float mask",
        cause="numbers (1 and 0)",
    ),
    bug(
        "causal_ignores_device",
        "causal_mask",
        (", device=device", ""),
        why="ignores device: the mask is always made on the CPU",
        cause="on the device you are given",
    ),
    # ------------------------------------------------------------------ masked_softmax
    mask_bug(
        "softmax_mask_with_zero",
        "masked_softmax",
        ('float("-inf")', "0.0"),
        (ZEROING, "return weights"),
        why="sets masked scores to 0 instead of -inf",
        cause="a score of zero still gets a share",
    ),
    mask_bug(
        "softmax_mask_after",
        "masked_softmax",
        (MASKING, "weights = torch.softmax(scores, dim=dim)"),
        (ZEROING, "return weights * mask"),
        why="multiplies the weights by the mask after the softmax",
        cause="applied after the softmax",
    ),
    mask_bug(
        "softmax_nan_full_rows",
        "masked_softmax",
        (ZEROING, "return weights"),
        why="a fully masked row gives NaN",
        cause="all masked gives nan",
    ),
    mask_bug(
        "softmax_minus_1e9",
        "masked_softmax",
        ('float("-inf")', "-1e9"),
        (ZEROING, "return weights"),
        why="-1e9: uniform weights on fully masked rows, fails in float16",
        cause="large negative number",
    ),
    bug(
        "softmax_minus_1e9_zeroed",
        "masked_softmax",
        ('float("-inf")', "-1e9"),
        why="-1e9 with fully masked rows zeroed: out of float16's range",
        cause="out of float16's range",
    ),
    bug(
        "softmax_minus_1e4",
        "masked_softmax",
        ('float("-inf")', "-1e4"),
        why="-1e4: does not silence masked entries among very negative scores",
        cause="moderate negative number",
    ),
    bug(
        "softmax_ignores_dim",
        "masked_softmax",
        ("dim=dim", "dim=-1"),
        why="always normalises the last dimension",
        cause="along the last dimension instead of along dim",
    ),
    bug(
        "softmax_full_rows_last_dim_only",
        "masked_softmax",
        (ZEROING, "return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)"),
        why="zeroes fully masked rows along the last dimension only",
        cause="along the last dimension only",
    ),
    bug(
        "softmax_in_place",
        "masked_softmax",
        ("scores.masked_fill(~mask", "scores.masked_fill_(~mask"),
        why="masked_fill_ overwrites the caller's scores",
        cause="unchanged after the call",
    ),
    mask_bug(
        "softmax_inverted",
        "masked_softmax",
        ("~mask", "mask"),
        why="masks where the mask is True",
        cause="wrong way round",
    ),
    bug(
        "softmax_global_max",
        "masked_softmax",
        (
            MASKING,
            'scores = scores.masked_fill(~mask, float("-inf"))\n'
            "    exps = torch.exp(scores - scores.max())\n"
            "    weights = exps / exps.sum(dim=dim, keepdim=True)",
        ),
        why="subtracts the largest score of the whole tensor",
        cause="largest score of the whole tensor",
    ),
    bug(
        "softmax_no_max_subtraction",
        "masked_softmax",
        (
            MASKING,
            'exps = torch.exp(scores.masked_fill(~mask, float("-inf")))\n'
            "    weights = exps / exps.sum(dim=dim, keepdim=True)",
        ),
        why="exponentials of the raw scores",
        cause="overflow",
    ),
    mask_bug(
        "softmax_mask_not_broadcast",
        "masked_softmax",
        (
            MASKING,
            'scores = scores.clone()\n    scores[~mask] = float("-inf")\n    weights = torch.softmax(scores, dim=dim)',
        ),
        why="boolean indexing: needs a mask of the scores' own shape",
        cause="the mask broadcasts to the scores",
    ),
    bug(
        "softmax_float32_result",
        "masked_softmax",
        ("scores.masked_fill(~mask", "scores.float().masked_fill(~mask"),
        why="computes in float32 and returns float32",
        cause="must give float64 weights",
    ),
    bug(
        "softmax_float32_inside",
        "masked_softmax",
        ("scores.masked_fill(~mask", "scores.float().masked_fill(~mask"),
        (ZEROING, "return weights.masked_fill(~mask, 0.0).to(scores.dtype)"),
        why="computes in float32 and casts back: float64 loses its precision",
        cause="compute in the dtype of the scores",
    ),
    # ------------------------------------------------------------------ teacher_forcing_split
    bug(
        "split_swapped",
        "teacher_forcing_split",
        (SPLIT, "return tgt[:, 1:], tgt[:, :-1]"),
        why="returns (target, input)",
        cause="the two are swapped",
    ),
    bug(
        "split_batch_dim",
        "teacher_forcing_split",
        (SPLIT, "return tgt[:-1], tgt[1:]"),
        why="slices the batch, not the positions",
        cause="along the batch",
    ),
    bug(
        "split_no_offset",
        "teacher_forcing_split",
        (SPLIT, "return tgt[:, :-1], tgt[:, :-1]"),
        why="the decoder sees the token it must predict",
        cause="the target is not shifted",
    ),
    bug(
        "split_target_keeps_bos",
        "teacher_forcing_split",
        (SPLIT, "return tgt[:, :-1], tgt"),
        why="the target is the whole sequence",
        cause="the target keeps the first token",
    ),
    bug(
        "split_input_keeps_last",
        "teacher_forcing_split",
        (SPLIT, "return tgt, tgt[:, 1:]"),
        why="the decoder input is the whole sequence",
        cause="the decoder input keeps the last token",
    ),
    bug(
        "split_flat_target",
        "teacher_forcing_split",
        (SPLIT, "return tgt[:, :-1], tgt[:, 1:].reshape(-1)"),
        why="flattens the target for the loss",
        cause="the target is flattened",
    ),
    # ------------------------------------------------------------------ decoder_self_attention_mask
    bug(
        "decoder_mask_no_head_dim",
        "decoder_self_attention_mask",
        (BOTH, "causal[None, :, :] & keys[:, None, :]"),
        why="returns (B, L, L)",
        cause="the head dimension is missing",
    ),
    bug(
        "decoder_mask_pads_queries",
        "decoder_self_attention_mask",
        ("keys[:, None, None, :]", "keys[:, None, :, None]"),
        why="masks padded queries, not padded keys",
        cause="hides the queries (rows) instead of the keys",
    ),
    bug(
        "decoder_mask_or",
        "decoder_self_attention_mask",
        (" & ", " | "),
        why="combines the masks with | instead of &",
        cause="combined with 'or'",
    ),
    bug(
        "decoder_mask_causal_only",
        "decoder_self_attention_mask",
        (BOTH, "causal[None, None, :, :].expand(tgt.size(0), 1, -1, -1)"),
        why="forgets the padding",
        cause="padding is not masked",
    ),
    bug(
        "decoder_mask_padding_only",
        "decoder_self_attention_mask",
        (BOTH, "keys[:, None, None, :].expand(-1, 1, tgt.size(1), -1)"),
        why="forgets the look-ahead condition",
        cause="the look-ahead condition is missing",
    ),
    bug(
        "decoder_mask_pad_zero",
        "decoder_self_attention_mask",
        ("padding_mask(tgt, pad_id)", "padding_mask(tgt, 0)"),
        why="hard-codes pad id 0",
        cause="by the id 0",
    ),
    bug(
        "decoder_mask_pads_both",
        "decoder_self_attention_mask",
        (BOTH, BOTH + " & keys[:, None, :, None]"),
        why="hides padded queries as well as padded keys",
        cause="padded queries are hidden too",
    ),
    bug(
        "decoder_mask_from_lengths",
        "decoder_self_attention_mask",
        ("padding_mask(tgt, pad_id)", "torch.arange(tgt.size(1))[None, :] < (tgt != pad_id).sum(dim=1)[:, None]"),
        why="builds the padding from the lengths, as if padding were always at the end",
        cause="wherever it is",
    ),
    bug(
        "decoder_mask_transposed",
        "decoder_self_attention_mask",
        (BOTH, "causal.T[None, None, :, :] & keys[:, None, None, :]"),
        why="the look-ahead mask transposed: queries see the future",
        cause="sees the keys after it",
    ),
    bug(
        "decoder_mask_float",
        "decoder_self_attention_mask",
        ("return " + BOTH, "return (" + BOTH + ").float()"),
        why="a 0/1 float mask",
        cause="numbers (1 and 0)",
    ),
    # ------------------------------------------------------------------ mask_for
    bug(
        "mask_for_decoder_causal_only",
        "mask_for",
        (DECODER, '"decoder self-attention": "causal"'),
        why="the decoder's self-attention gets the causal mask only",
        cause="the target batch is padded too",
    ),
    bug(
        "mask_for_cross_causal",
        "mask_for",
        (CROSS, '"cross-attention": "causal and padding of the keys"'),
        why="cross-attention gets the causal mask too",
        cause="the keys are the encoder's outputs",
    ),
    bug(
        "mask_for_encoder_unmasked",
        "mask_for",
        (ENCODER, '"encoder self-attention": "no mask"'),
        why="the encoder gets no mask",
        cause="the source batch is padded",
    ),
    bug(
        "mask_for_own_words",
        "mask_for",
        (DECODER, '"decoder self-attention": "causal + padding"'),
        why="answers in its own words, not one of the options",
        cause="one of the strings of MASK_OPTIONS",
    ),
    # ------------------------------------------------------------------ visible_pairs
    bug(
        "pairs_no_padding",
        "visible_pairs",
        (PAIRS, "i + 1"),
        why="counts the causal mask only",
        cause="the padding keys are hidden too",
    ),
    bug(
        "pairs_not_causal",
        "visible_pairs",
        (PAIRS, "num_real"),
        why="counts the padding mask only",
        cause="the mask is causal as well",
    ),
    bug(
        "pairs_padding_queries_blind",
        "visible_pairs",
        (PAIRS, "(i + 1 if i < num_real else 0)"),
        why="gives the padding queries no keys",
        cause="not padding queries",
    ),
    # ------------------------------------------------------------------ answer_visible
    bug(
        "visible_last_position_too",
        "answer_visible",
        ("t + 1 < length - 1 and", "t + 1 < length and"),
        why="counts the last target position, whose answer the split dropped",
        cause="the last token of the target is not in the decoder input",
    ),
    bug(
        "visible_despite_causal_mask",
        "answer_visible",
        (" and not causal]", "]"),
        why="predicts a leak under the causal mask too",
        cause="sees the decoder input up to position t only",
    ),
    bug(
        "visible_never",
        "answer_visible",
        ("if t + 1 < length - 1 and not causal]", "if False]"),
        why="believes the shift of teacher forcing hides the answers by itself",
        cause="does not hide the answers by itself",
    ),
]

# Found by the second review of the grader: a hint that named padding for a diagonal off by one.
BUGS += [
    bug(
        "decoder_mask_hides_diagonal",
        "decoder_self_attention_mask",
        (
            "causal = causal_mask(tgt.size(1), device=tgt.device)",
            "causal = torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool, device=tgt.device).tril(-1)",
        ),
        why="its own look-ahead part, off by one: the diagonal hidden",
        cause="the diagonal is hidden",
    ),
    # ------------------------------------------------------------------ fully_masked_row
    bug(
        "row_infinity_zeros",
        "fully_masked_row",
        ("""then torch.softmax': "nan\"""", """then torch.softmax': "zeros\""""),
        why="minus infinity everywhere is said to give zero weights",
        cause="the softmax divides 0 by 0",
    ),
    bug(
        "row_large_negative_zeros",
        "fully_masked_row",
        ('-1e9), then torch.softmax": "equal weights"', '-1e9), then torch.softmax": "zeros"'),
        why="-1e9 everywhere is said to give zero weights",
        cause="they are all equal and the softmax spreads the weight evenly",
    ),
    bug(
        "row_product_zeros",
        "fully_masked_row",
        ('masked), then torch.softmax": "equal weights"', 'masked), then torch.softmax": "zeros"'),
        why="scores multiplied by the mask are said to give zero weights",
        cause="a score multiplied by False becomes 0, not minus infinity",
    ),
    bug(
        "row_renormalised_zeros",
        "fully_masked_row",
        ("""new sum": "nan\"""", """new sum": "zeros\""""),
        why="renormalising a row of zeros is said to keep zeros",
        cause="dividing by it gives 0 / 0",
    ),
    bug(
        "row_own_words",
        "fully_masked_row",
        ('"masked_softmax of Part 3": "zeros"', '"masked_softmax of Part 3": "0"'),
        why="answers in its own words, not one of the options",
        cause="one of the strings of ROW_OPTIONS",
    ),
]
