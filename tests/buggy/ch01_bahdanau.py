"""Wrong answers to ch01_bahdanau that students really write.

Each is the reference answer with one realistic mistake in it (:func:`tests.buggy.variant`).
"""

from functools import partial

from tests.buggy import Bug, variant

TESTS = {
    "AdditiveAttention": ["test_additive_shapes", "test_additive_mask", "test_additive_values"],
    "BahdanauDecoder": ["test_step_shapes", "test_step_values"],
    "additive_attention_parameters": ["test_additive_attention_parameters"],
    "attention_scores_computed": ["test_attention_scores_computed"],
    "zero_gradients": ["test_zero_gradients"],
    "changed_weights": ["test_changed_weights"],
}

attention = partial(variant, "ch01_bahdanau", "AdditiveAttention")
decoder = partial(variant, "ch01_bahdanau", "BahdanauDecoder")
parameters = partial(variant, "ch01_bahdanau", "additive_attention_parameters")
scores = partial(variant, "ch01_bahdanau", "attention_scores_computed")
gradients = partial(variant, "ch01_bahdanau", "zero_gradients")
changed = partial(variant, "ch01_bahdanau", "changed_weights")
CHANGED = "[[b, j] for b, length in enumerate(lengths) if length < src_len for j in range(src_len)]"
COUNT = "query_dim * hidden_dim + key_dim * hidden_dim + hidden_dim"
SCORES = "batch * tgt_len * src_len"

SCORE = "self.v(torch.tanh(self.W_q(query).unsqueeze(1) + self.W_k(keys)))"

BUGS = [
    # ------------------------------------------------------------------ AdditiveAttention
    Bug(
        "additive_softmax_over_batch",
        "AdditiveAttention",
        why="normalises over the batch",
        cause="the softmax runs over the batch",
        code=attention(("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=0)")),
    ),
    Bug(
        "additive_no_tanh",
        "AdditiveAttention",
        why="a linear score instead of the tanh layer",
        cause="the scores skip the tanh",
        code=attention(
            (
                "torch.tanh(self.W_q(query).unsqueeze(1) + self.W_k(keys))",
                "self.W_q(query).unsqueeze(1) + self.W_k(keys)",
            )
        ),
    ),
    Bug(
        "additive_mask_inverted",
        "AdditiveAttention",
        why="hides the real positions",
        cause="the mask is read the wrong way round",
        code=attention(("~mask", "mask")),
    ),
    Bug(
        "additive_mask_after_softmax",
        "AdditiveAttention",
        why="zeroes weights without renormalising",
        cause="mask the scores before the softmax",
        code=attention(('scores = scores.masked_fill(~mask, float("-inf"))', "scores = scores")),
    ),
    Bug(
        "additive_nan_on_full_mask",
        "AdditiveAttention",
        why="a fully masked row softmaxes to NaN",
        cause="a sequence with no visible position gets NaN",
        code=attention(("weights = weights.masked_fill(~mask, 0.0)", "weights = weights")),
    ),
    Bug(
        "additive_query_not_unsqueezed",
        "AdditiveAttention",
        why="adds (B, H) to (B, S, H): an error, or a silent mix-up of sequences and positions when B == S",
        cause="of that same sequence",
        code=attention(("self.W_q(query).unsqueeze(1)", "self.W_q(query)")),
    ),
    Bug(
        "additive_tanh_after_v",
        "AdditiveAttention",
        why="tanh(v(...)) instead of v(tanh(...))",
        cause="the tanh must come before v",
        code=attention((SCORE, "torch.tanh(self.v(self.W_q(query).unsqueeze(1) + self.W_k(keys)))")),
    ),
    Bug(
        "additive_scaled_scores",
        "AdditiveAttention",
        why="divides the scores by sqrt(key_dim) as in dot-product attention",
        cause="additive scores are not scaled",
        code=attention((".squeeze(-1)\n", ".squeeze(-1) / math.sqrt(keys.size(-1))\n")),
    ),
    Bug(
        "additive_context_from_keys",
        "AdditiveAttention",
        why="sums the keys instead of the values",
        cause="the weighted sum of the values, not of the keys",
        code=attention(("torch.bmm(weights.unsqueeze(1), values)", "torch.bmm(weights.unsqueeze(1), keys)")),
    ),
    Bug(
        "additive_large_negative_no_zeroing",
        "AdditiveAttention",
        why="-1e9 alone: a fully masked row gets even weights over the padding",
        cause="a large negative fill alone spreads its weight",
        code=attention(('float("-inf")', "-1e9"), ("weights = weights.masked_fill(~mask, 0.0)", "weights = weights")),
    ),
    Bug(
        "additive_mask_with_zero",
        "AdditiveAttention",
        why="a masked score of 0 still gets weight",
        cause="a masked score set to zero still gets a share",
        code=attention(('float("-inf")', "0.0")),
    ),
    Bug(
        "additive_with_bias",
        "AdditiveAttention",
        why="leaves nn.Linear's default bias on W_q, W_k and v",
        cause="no bias in W_q, W_k or v",
        code=attention((", bias=False)", ")")),
    ),
    # ------------------------------------------------------------------ BahdanauDecoder.step
    Bug(
        "step_attends_with_new_state",
        "BahdanauDecoder",
        why="uses s_t, not s_{t-1}, as the query",
        cause="the previous state s_{t-1}",
        code=decoder(
            (
                "        logits = self.out(",
                "        context, weights = self.attention(hidden, enc_outputs, enc_outputs, src_mask)\n"
                "        logits = self.out(",
            )
        ),
    ),
    Bug(
        "step_rnn_input_order",
        "BahdanauDecoder",
        why="concatenates [context, embedded]",
        cause="the embedding followed by the context",
        code=decoder(("torch.cat([embedded, context], dim=-1)", "torch.cat([context, embedded], dim=-1)")),
    ),
    Bug(
        "step_output_order",
        "BahdanauDecoder",
        why="concatenates [hidden, embedded, context]",
        cause="the new state, the context and the embedding, in that order",
        code=decoder(
            ("torch.cat([hidden, context, embedded], dim=-1)", "torch.cat([hidden, embedded, context], dim=-1)")
        ),
    ),
    Bug(
        "step_ignores_mask",
        "BahdanauDecoder",
        why="attends to padding",
        cause="src_mask is not passed on to the attention",
        code=decoder(
            (
                "self.attention(hidden, enc_outputs, enc_outputs, src_mask)",
                "self.attention(hidden, enc_outputs, enc_outputs)",
            )
        ),
    ),
    Bug(
        "step_returns_old_state",
        "BahdanauDecoder",
        why="returns s_{t-1} instead of s_t",
        cause="return the new state s_t",
        code=decoder(
            ("hidden = self.rnn(", "new_hidden = self.rnn("),
            ("self.out(torch.cat([hidden,", "self.out(torch.cat([new_hidden,"),
        ),
    ),
    Bug(
        "step_output_reads_old_state",
        "BahdanauDecoder",
        why="the output layer reads s_{t-1}",
        cause="the output layer must read the new state s_t",
        code=decoder(
            ("hidden = self.rnn(", "new_hidden = self.rnn("),
            ("return logits, hidden, weights", "return logits, new_hidden, weights"),
        ),
    ),
    Bug(
        "step_gru_from_zeros",
        "BahdanauDecoder",
        why="calls the GRU cell without the previous state",
        cause="not start from zeros",
        code=decoder(("torch.cat([embedded, context], dim=-1), hidden)", "torch.cat([embedded, context], dim=-1))")),
    ),
    Bug(
        "step_returns_probabilities",
        "BahdanauDecoder",
        why="applies a softmax to the logits",
        cause="not probabilities",
        code=decoder(("return logits, hidden, weights", "return torch.softmax(logits, dim=-1), hidden, weights")),
    ),
    Bug(
        "step_inverts_mask",
        "BahdanauDecoder",
        why="converts src_mask as if the attention wanted True = padding",
        cause="pass it on to the attention as it is",
        code=decoder(("enc_outputs, src_mask)", "enc_outputs, None if src_mask is None else ~src_mask)")),
    ),
    # ------------------------------------------------------------------ additive_attention_parameters
    Bug(
        "parameters_with_biases",
        "additive_attention_parameters",
        why="counts a bias in each linear layer, as nn.Linear has by default",
        cause="biases are counted",
        code=parameters((COUNT, COUNT + " + 2 * hidden_dim + 1")),
    ),
    Bug(
        "parameters_without_v",
        "additive_attention_parameters",
        why="counts W_q and W_k only",
        cause="the vector v",
        code=parameters((COUNT, "query_dim * hidden_dim + key_dim * hidden_dim")),
    ),
    Bug(
        "parameters_square_v",
        "additive_attention_parameters",
        why="counts v as a hidden_dim x hidden_dim matrix",
        cause="not hidden_dim x hidden_dim",
        code=parameters((COUNT, "query_dim * hidden_dim + key_dim * hidden_dim + hidden_dim * hidden_dim")),
    ),
    # ------------------------------------------------------------------ attention_scores_computed
    Bug(
        "scores_once",
        "attention_scores_computed",
        why="computes the scores once, as if the query did not change between steps",
        cause="again at every decoding step",
        code=scores((SCORES, "batch * src_len")),
    ),
    Bug(
        "scores_one_per_step",
        "attention_scores_computed",
        why="one score per step",
        cause="one score per source position",
        code=scores((SCORES, "batch * tgt_len")),
    ),
    Bug(
        "scores_no_batch",
        "attention_scores_computed",
        why="counts one sentence only",
        cause="every sentence of the batch",
        code=scores((SCORES, "tgt_len * src_len")),
    ),
    # ------------------------------------------------------------------ zero_gradients
    Bug(
        "gradients_zero_query_learns",
        "zero_gradients",
        why="a zero query is said to leave W_q's gradient alone",
        cause="a zero query gives W_q a zero gradient",
        code=gradients(('"every query is all zeros": ["W_q"]', '"every query is all zeros": []')),
    ),
    Bug(
        "gradients_zero_weight_no_gradient",
        "zero_gradients",
        why="a zero v is said to get no gradient itself, and W_q, W_k to learn",
        cause="a zero weight still gets a gradient",
        code=gradients(('"the weights of v are all zeros": ["W_q", "W_k"]', '"the weights of v are all zeros": ["v"]')),
    ),
    Bug(
        "gradients_same_values_learn",
        "zero_gradients",
        why="equal values are said to leave the scores something to learn",
        cause="the context is that value whatever the weights",
        code=gradients(('(the keys differ)": ["W_q", "W_k", "v"]', '(the keys differ)": []')),
    ),
    Bug(
        "gradients_one_visible_learns",
        "zero_gradients",
        why="one visible position is said to leave the scores something to learn",
        cause="a softmax over one visible position",
        code=gradients(('in each sequence": ["W_q", "W_k", "v"]', 'in each sequence": []')),
    ),
    Bug(
        "gradients_lone_string",
        "zero_gradients",
        why="answers one name as a string, not in a list",
        cause='["W_q"], not "W_q"',
        code=gradients(('"every query is all zeros": ["W_q"]', '"every query is all zeros": "W_q"')),
    ),
    # ------------------------------------------------------------------ changed_weights
    Bug(
        "changed_padding_only",
        "changed_weights",
        why="only the padding positions are said to change",
        cause="the real positions' weights change too",
        code=changed((CHANGED, "[[b, j] for b, length in enumerate(lengths) for j in range(length, src_len)]")),
    ),
    Bug(
        "changed_every_row",
        "changed_weights",
        why="every sequence's weights are said to change, padded or not",
        cause="a sequence without padding has nothing to hide",
        code=changed((CHANGED, "[[b, j] for b in range(len(lengths)) for j in range(src_len)]")),
    ),
    Bug(
        "changed_real_only",
        "changed_weights",
        why="only the real positions of padded sequences are said to change",
        cause="the padding positions change too",
        code=changed(
            (CHANGED, "[[b, j] for b, length in enumerate(lengths) if length < src_len for j in range(length)]")
        ),
    ),
]
