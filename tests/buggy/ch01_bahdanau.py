"""Wrong answers to ch01_bahdanau that students really write.

Additive attention, the decoder's step, and the questions on its parameters, the scores it computes, its
gradients and the weights a mask changes.
"""

from functools import partial

from tests.buggy import wrong_answers
from tests.catalogue import variant

A = "ch01_bahdanau"

bug = wrong_answers(A)
decoder = partial(variant, A, "BahdanauDecoder")  # tests/test_sandbox_grading.py makes a decoder that hangs with it

CHANGED = "[[b, j] for b, length in enumerate(lengths) if length < src_len for j in range(src_len)]"
COUNT = "query_dim * hidden_dim + key_dim * hidden_dim + hidden_dim"
SCORES = "batch * tgt_len * src_len"
SCORE = "self.v(torch.tanh(self.W_q(query).unsqueeze(1) + self.W_k(keys)))"

TESTS = {
    "AdditiveAttention": ["test_additive_shapes", "test_additive_mask", "test_additive_values"],
    "BahdanauDecoder": ["test_step_shapes", "test_step_values"],
    "additive_attention_parameters": ["test_additive_attention_parameters"],
    "attention_scores_computed": ["test_attention_scores_computed"],
    "zero_gradients": ["test_zero_gradients"],
    "changed_weights": ["test_changed_weights"],
}

BUGS = [
    # ------------------------------------------------------------------ AdditiveAttention
    bug(
        "additive_softmax_over_batch",
        "AdditiveAttention",
        ("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=0)"),
        why="normalises over the batch",
        cause="the softmax runs over the batch",
    ),
    bug(
        "additive_no_tanh",
        "AdditiveAttention",
        (
            "torch.tanh(self.W_q(query).unsqueeze(1) + self.W_k(keys))",
            "self.W_q(query).unsqueeze(1) + self.W_k(keys)",
        ),
        why="a linear score instead of the tanh layer",
        cause="the scores skip the tanh",
    ),
    bug(
        "additive_mask_inverted",
        "AdditiveAttention",
        ("~mask", "mask"),
        why="hides the real positions",
        cause="the mask is read the wrong way round",
    ),
    bug(
        "additive_mask_after_softmax",
        "AdditiveAttention",
        ('scores = scores.masked_fill(~mask, float("-inf"))', "scores = scores"),
        why="zeroes weights without renormalising",
        cause="mask the scores before the softmax",
    ),
    bug(
        "additive_nan_on_full_mask",
        "AdditiveAttention",
        ("weights = weights.masked_fill(~mask, 0.0)", "weights = weights"),
        why="a fully masked row softmaxes to NaN",
        cause="a sequence with no visible position gets NaN",
    ),
    bug(
        "additive_query_not_unsqueezed",
        "AdditiveAttention",
        ("self.W_q(query).unsqueeze(1)", "self.W_q(query)"),
        why="adds (B, H) to (B, S, H): an error, or a silent mix-up of sequences and positions when B == S",
        cause="of that same sequence",
    ),
    bug(
        "additive_tanh_after_v",
        "AdditiveAttention",
        (SCORE, "torch.tanh(self.v(self.W_q(query).unsqueeze(1) + self.W_k(keys)))"),
        why="tanh(v(...)) instead of v(tanh(...))",
        cause="the tanh must come before v",
    ),
    bug(
        "additive_scaled_scores",
        "AdditiveAttention",
        (".squeeze(-1)\n", ".squeeze(-1) / math.sqrt(keys.size(-1))\n"),
        why="divides the scores by sqrt(key_dim) as in dot-product attention",
        cause="additive scores are not scaled",
    ),
    bug(
        "additive_context_from_keys",
        "AdditiveAttention",
        ("torch.bmm(weights.unsqueeze(1), values)", "torch.bmm(weights.unsqueeze(1), keys)"),
        why="sums the keys instead of the values",
        cause="the weighted sum of the values, not of the keys",
    ),
    bug(
        "additive_large_negative_no_zeroing",
        "AdditiveAttention",
        ('float("-inf")', "-1e9"),
        ("weights = weights.masked_fill(~mask, 0.0)", "weights = weights"),
        why="-1e9 alone: a fully masked row gets even weights over the padding",
        cause="a large negative fill alone spreads its weight",
    ),
    bug(
        "additive_mask_with_zero",
        "AdditiveAttention",
        ('float("-inf")', "0.0"),
        why="a masked score of 0 still gets weight",
        cause="a masked score set to zero still gets a share",
    ),
    bug(
        "additive_with_bias",
        "AdditiveAttention",
        (", bias=False)", ")"),
        why="leaves nn.Linear's default bias on W_q, W_k and v",
        cause="no bias in W_q, W_k or v",
    ),
    # ------------------------------------------------------------------ BahdanauDecoder.step
    bug(
        "step_attends_with_new_state",
        "BahdanauDecoder",
        (
            "        logits = self.out(",
            "        context, weights = self.attention(hidden, enc_outputs, enc_outputs, src_mask)\n"
            "        logits = self.out(",
        ),
        why="uses s_t, not s_{t-1}, as the query",
        cause="the previous state s_{t-1}",
    ),
    bug(
        "step_rnn_input_order",
        "BahdanauDecoder",
        ("torch.cat([embedded, context], dim=-1)", "torch.cat([context, embedded], dim=-1)"),
        why="concatenates [context, embedded]",
        cause="the embedding followed by the context",
    ),
    bug(
        "step_output_order",
        "BahdanauDecoder",
        ("torch.cat([hidden, context, embedded], dim=-1)", "torch.cat([hidden, embedded, context], dim=-1)"),
        why="concatenates [hidden, embedded, context]",
        cause="the new state, the context and the embedding, in that order",
    ),
    bug(
        "step_ignores_mask",
        "BahdanauDecoder",
        (
            "self.attention(hidden, enc_outputs, enc_outputs, src_mask)",
            "self.attention(hidden, enc_outputs, enc_outputs)",
        ),
        why="attends to padding",
        cause="src_mask is not passed on to the attention",
    ),
    bug(
        "step_returns_old_state",
        "BahdanauDecoder",
        ("hidden = self.rnn(", "new_hidden = self.rnn("),
        ("self.out(torch.cat([hidden,", "self.out(torch.cat([new_hidden,"),
        why="returns s_{t-1} instead of s_t",
        cause="return the new state s_t",
    ),
    bug(
        "step_output_reads_old_state",
        "BahdanauDecoder",
        ("hidden = self.rnn(", "new_hidden = self.rnn("),
        ("return logits, hidden, weights", "return logits, new_hidden, weights"),
        why="the output layer reads s_{t-1}",
        cause="the output layer must read the new state s_t",
    ),
    bug(
        "step_gru_from_zeros",
        "BahdanauDecoder",
        ("torch.cat([embedded, context], dim=-1), hidden)", "torch.cat([embedded, context], dim=-1))"),
        why="calls the GRU cell without the previous state",
        cause="not start from zeros",
    ),
    bug(
        "step_returns_probabilities",
        "BahdanauDecoder",
        ("return logits, hidden, weights", "return torch.softmax(logits, dim=-1), hidden, weights"),
        why="applies a softmax to the logits",
        cause="not probabilities",
    ),
    bug(
        "step_inverts_mask",
        "BahdanauDecoder",
        ("enc_outputs, src_mask)", "enc_outputs, None if src_mask is None else ~src_mask)"),
        why="converts src_mask as if the attention wanted True = padding",
        cause="pass it on to the attention as it is",
    ),
    # ------------------------------------------------------------------ additive_attention_parameters
    bug(
        "parameters_with_biases",
        "additive_attention_parameters",
        (COUNT, COUNT + " + 2 * hidden_dim + 1"),
        why="counts a bias in each linear layer, as nn.Linear has by default",
        cause="biases are counted",
    ),
    bug(
        "parameters_without_v",
        "additive_attention_parameters",
        (COUNT, "query_dim * hidden_dim + key_dim * hidden_dim"),
        why="counts W_q and W_k only",
        cause="the vector v",
    ),
    bug(
        "parameters_square_v",
        "additive_attention_parameters",
        (COUNT, "query_dim * hidden_dim + key_dim * hidden_dim + hidden_dim * hidden_dim"),
        why="counts v as a hidden_dim x hidden_dim matrix",
        cause="not hidden_dim x hidden_dim",
    ),
    # ------------------------------------------------------------------ attention_scores_computed
    bug(
        "scores_once",
        "attention_scores_computed",
        (SCORES, "batch * src_len"),
        why="computes the scores once, as if the query did not change between steps",
        cause="again at every decoding step",
    ),
    bug(
        "scores_one_per_step",
        "attention_scores_computed",
        (SCORES, "batch * tgt_len"),
        why="one score per step",
        cause="one score per source position",
    ),
    bug(
        "scores_no_batch",
        "attention_scores_computed",
        (SCORES, "tgt_len * src_len"),
        why="counts one sentence only",
        cause="every sentence of the batch",
    ),
    # ------------------------------------------------------------------ zero_gradients
    bug(
        "gradients_zero_query_learns",
        "zero_gradients",
        ('"every query is all zeros": ["W_q"]', '"every query is all zeros": []'),
        why="a zero query is said to leave W_q's gradient alone",
        cause="a zero query gives W_q a zero gradient",
    ),
    bug(
        "gradients_zero_weight_no_gradient",
        "zero_gradients",
        ('"the weights of v are all zeros": ["W_q", "W_k"]', '"the weights of v are all zeros": ["v"]'),
        why="a zero v is said to get no gradient itself, and W_q, W_k to learn",
        cause="a zero weight still gets a gradient",
    ),
    bug(
        "gradients_same_values_learn",
        "zero_gradients",
        ('(the keys differ)": ["W_q", "W_k", "v"]', '(the keys differ)": []'),
        why="equal values are said to leave the scores something to learn",
        cause="the context is that value whatever the weights",
    ),
    bug(
        "gradients_one_visible_learns",
        "zero_gradients",
        ('in each sequence": ["W_q", "W_k", "v"]', 'in each sequence": []'),
        why="one visible position is said to leave the scores something to learn",
        cause="a softmax over one visible position",
    ),
    bug(
        "gradients_lone_string",
        "zero_gradients",
        ('"every query is all zeros": ["W_q"]', '"every query is all zeros": "W_q"'),
        why="answers one name as a string, not in a list",
        cause='["W_q"], not "W_q"',
    ),
    # ------------------------------------------------------------------ changed_weights
    bug(
        "changed_padding_only",
        "changed_weights",
        (CHANGED, "[[b, j] for b, length in enumerate(lengths) for j in range(length, src_len)]"),
        why="only the padding positions are said to change",
        cause="the real positions' weights change too",
    ),
    bug(
        "changed_every_row",
        "changed_weights",
        (CHANGED, "[[b, j] for b in range(len(lengths)) for j in range(src_len)]"),
        why="every sequence's weights are said to change, padded or not",
        cause="a sequence without padding has nothing to hide",
    ),
    bug(
        "changed_real_only",
        "changed_weights",
        (CHANGED, "[[b, j] for b, length in enumerate(lengths) if length < src_len for j in range(length)]"),
        why="only the real positions of padded sequences are said to change",
        cause="the padding positions change too",
    ),
]
