"""Wrong answers to ch06_transformer that students really write.

Each is the reference answer with one realistic mistake in it: ``variant`` replaces pieces of the
reference solution's code and checks that each piece is there, so a wrong answer cannot silently
become the right one. Each loses points in its own item only, with a hint that names its cause.
"""

from functools import partial

from tests.buggy import Bug, variant

TESTS = {
    "FeedForward": ["test_feed_forward"],
    "EncoderLayer": ["test_encoder_layer"],
    "DecoderLayer": ["test_decoder_layer"],
    "Transformer": ["test_transformer_shapes", "test_transformer_causal", "test_transformer_padding"],
    "greedy_decode": ["test_greedy_decode"],
    "temperature_probs": ["test_temperature_probs"],
    "top_k_probs": ["test_top_k_probs"],
    "top_p_probs": ["test_top_p_probs"],
    "min_p_probs": ["test_min_p_probs"],
    "speculative_decode": ["test_speculative_matches_greedy", "test_speculative_calls"],
    "encoder_layer_parameters": ["test_encoder_layer_parameters"],
    "cross_attention_weights_shape": ["test_cross_attention_weights_shape"],
    "decoded_positions": ["test_decoded_positions"],
    "normalised_output": ["test_normalised_output"],
}

STEPS = "steps = min(max(eos_steps), max_len)"

variant = partial(variant, "ch06_transformer")

# Pieces of the reference that several wrong answers change.
ENC_POST_ATTN = "x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))"
ENC_POST_FF = "return self.norm2(x + self.dropout2(self.ff(x)))"
DEC_POST_SELF = "x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)[0]))"
DEC_POST_CROSS = "x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)[0]))"
DEC_POST_FF = "return self.norm3(x + self.dropout3(self.ff(x)))"
FF = "return self.linear2(self.dropout(F.relu(self.linear1(x))))"
ATTENTION = "attention = 4 * (d_model * d_model + d_model)"
FEED_FORWARD = "feed_forward = d_model * d_ff + d_ff + d_ff * d_model + d_model"
SHAPE = "(batch_size, num_heads, tgt_len, src_len)"

TOP_K_RETURN = 'return torch.softmax(logits.masked_fill(logits < kth, float("-inf")), dim=-1)'
MIN_P_KEEP = "kept = probs.masked_fill(probs < min_p * probs.amax(dim=-1, keepdim=True), 0.0)"
SPEC_TOKEN = "token = chosen[:, j].masked_fill(done, eos_id)"

BUGS = [
    # ------------------------------------------------------------------ temperature_probs
    Bug(
        "temperature_multiplies",
        "temperature_probs",
        why="softmax(logits * T)",
        cause="multiplied by the temperature",
        code=variant("temperature_probs", ("logits / temperature", "logits * temperature")),
    ),
    Bug(
        "temperature_zero_first_argmax",
        "temperature_probs",
        why="temperature 0 gives a one-hot of argmax, the first of tied tokens taking everything",
        cause="tied for the largest logit must share",
        code=variant(
            "temperature_probs",
            (
                "top = logits == logits.amax(dim=-1, keepdim=True)",
                "top = F.one_hot(logits.argmax(dim=-1), logits.size(-1)).bool()",
            ),
        ),
    ),
    Bug(
        "temperature_softmax_dim0",
        "temperature_probs",
        why="the softmax over dim 0",
        cause="must run over the vocabulary, the last one",
        code=variant(
            "temperature_probs",
            ("torch.softmax(logits / temperature, dim=-1)", "torch.softmax(logits / temperature, dim=0)"),
        ),
    ),
    Bug(
        "temperature_negative_accepted",
        "temperature_probs",
        why="no error for a negative temperature",
        cause="a negative temperature is a ValueError",
        code=variant(
            "temperature_probs",
            (
                'if temperature < 0:\n        raise ValueError(f"temperature must be 0 or more, got temperature={temperature}")\n    ',
                "",
            ),
        ),
    ),
    # ------------------------------------------------------------------ top_k_probs
    Bug(
        "top_k_exactly_k_indices",
        "top_k_probs",
        why="keeps the k indices topk returns, dropping tokens tied with the k-th",
        cause="a token tied with the k-th largest logit must be kept too",
        code=variant(
            "top_k_probs",
            (
                TOP_K_RETURN,
                "keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, logits.topk(k, dim=-1).indices, True)\n"
                '    return torch.softmax(logits.masked_fill(~keep, float("-inf")), dim=-1)',
            ),
        ),
    ),
    Bug(
        "top_k_not_renormalised",
        "top_k_probs",
        why="zeroes the other tokens' probabilities after the softmax, without renormalising",
        cause="without renormalising",
        code=variant(
            "top_k_probs", (TOP_K_RETURN, "return torch.softmax(logits, dim=-1).masked_fill(logits < kth, 0.0)")
        ),
    ),
    Bug(
        "top_k_one_too_few",
        "top_k_probs",
        why="drops the logits at or below the k-th largest: k - 1 tokens kept (none for k = 1)",
        cause="the k-th largest logit itself must be kept",
        code=variant("top_k_probs", ("logits.masked_fill(logits < kth", "logits.masked_fill(logits <= kth")),
    ),
    Bug(
        "top_k_larger_than_vocabulary_fails",
        "top_k_probs",
        why="topk(k) with k above the vocabulary size raises",
        cause="a k larger than the vocabulary keeps every token",
        code=variant("top_k_probs", ("    k = min(k, logits.size(-1))\n", "")),
    ),
    # ------------------------------------------------------------------ top_p_probs
    Bug(
        "top_p_drops_crossing_token",
        "top_p_probs",
        why="keeps tokens while the running total including them is below p",
        cause="the token that brings the total to p or beyond must be kept",
        code=variant(
            "top_p_probs",
            (
                "needed = (before < p).sum(dim=-1, keepdim=True)",
                "needed = (ordered.cumsum(dim=-1) < p).sum(dim=-1, keepdim=True).clamp(min=1)",
            ),
        ),
    ),
    Bug(
        "top_p_ties_dropped",
        "top_p_probs",
        why="keeps exactly the sorted prefix, dropping a token tied with the last one kept",
        cause="a token as likely as the last one taken must be kept too",
        code=variant(
            "top_p_probs",
            (
                "kept = probs.masked_fill(probs < threshold, 0.0)",
                "order = probs.argsort(dim=-1, descending=True)\n"
                "    inside = torch.arange(probs.size(-1), device=probs.device) < needed\n"
                "    kept = torch.zeros_like(probs).scatter(-1, order, ordered * inside)",
            ),
        ),
    ),
    Bug(
        "top_p_not_renormalised",
        "top_p_probs",
        why="returns the kept probabilities without renormalising",
        cause="must be renormalised",
        code=variant("top_p_probs", ("return kept / kept.sum(dim=-1, keepdim=True)", "return kept")),
    ),
    Bug(
        "top_p_one_refused",
        "top_p_probs",
        why="p = 1 raises a ValueError",
        cause="p = 1 keeps every token",
        code=variant("top_p_probs", ("if not 0 < p <= 1:", "if not 0 < p < 1:")),
    ),
    # ------------------------------------------------------------------ min_p_probs
    Bug(
        "min_p_absolute_threshold",
        "min_p_probs",
        why="keeps the tokens whose probability is at least min_p",
        cause="not min_p itself",
        code=variant("min_p_probs", ("probs < min_p * probs.amax(dim=-1, keepdim=True)", "probs < min_p")),
    ),
    Bug(
        "min_p_on_logits",
        "min_p_probs",
        why="compares the logits with min_p times the largest logit",
        cause="compare probabilities, not logits",
        code=variant(
            "min_p_probs",
            ("probs < min_p * probs.amax(dim=-1, keepdim=True)", "logits < min_p * logits.amax(dim=-1, keepdim=True)"),
        ),
    ),
    Bug(
        "min_p_not_renormalised",
        "min_p_probs",
        why="returns the kept probabilities without renormalising",
        cause="must be renormalised",
        code=variant("min_p_probs", ("return kept / kept.sum(dim=-1, keepdim=True)", "return kept")),
    ),
    Bug(
        "min_p_strictly_above",
        "min_p_probs",
        why="keeps only tokens strictly above the threshold: min_p = 1 keeps nothing",
        cause="at least, not strictly more",
        code=variant("min_p_probs", (MIN_P_KEEP, MIN_P_KEEP.replace("probs < min_p", "probs <= min_p"))),
    ),
    # ------------------------------------------------------------------ speculative_decode
    Bug(
        "speculative_keeps_draft_token",
        "speculative_decode",
        why="at the first disagreement, appends the draft's guess instead of the model's token",
        cause="the model's own token is the one to keep",
        code=variant(
            "speculative_decode",
            (
                "            new.append(token)\n",
                "            new.append(guess[:, ys.size(1) + j] if ys.size(1) + j < guess.size(1) else token)\n",
            ),
        ),
    ),
    Bug(
        "speculative_reads_one_late",
        "speculative_decode",
        why="reads the model's tokens from position ys.size(1) instead of ys.size(1) - 1",
        cause="read one position late",
        code=variant(
            "speculative_decode",
            ("chosen = logits[:, ys.size(1) - 1 :].argmax(dim=-1)", "chosen = logits[:, ys.size(1) :].argmax(dim=-1)"),
        ),
    ),
    Bug(
        "speculative_no_eos_fill",
        "speculative_decode",
        why="a finished sequence keeps the model's words after its eos_id",
        cause="a finished sequence goes on with words",
        code=variant("speculative_decode", (SPEC_TOKEN, "token = chosen[:, j]")),
    ),
    Bug(
        "speculative_past_max_len",
        "speculative_decode",
        why="the draft always guesses lookahead tokens, so the output can pass max_len",
        cause="the draft guesses past max_len",
        code=variant(
            "speculative_decode",
            ("for _ in range(min(lookahead, max_len - (ys.size(1) - 1) - 1)):", "for _ in range(lookahead):"),
        ),
    ),
    Bug(
        "speculative_without_guesses",
        "speculative_decode",
        why="never uses the draft's guesses: one call of the model per token, greedy decoding in disguise",
        cause="call model.decode once per round",
        code=variant(
            "speculative_decode",
            ("for _ in range(min(lookahead, max_len - (ys.size(1) - 1) - 1)):", "for _ in range(0):"),
        ),
    ),
    Bug(
        "speculative_drops_bonus_token",
        "speculative_decode",
        why="when every guess is right, the model's own next token is thrown away: lookahead tokens per call",
        cause="plus its own next token",
        code=variant(
            "speculative_decode",
            (
                "            " + SPEC_TOKEN + "\n",
                "            if 0 < j == chosen.size(1) - 1:\n                break\n            " + SPEC_TOKEN + "\n",
            ),
        ),
    ),
    # ------------------------------------------------------------------ FeedForward
    Bug(
        "ff_relu_after_linear2",
        "FeedForward",
        why="the ReLU at the end",
        cause="the ReLU comes after",
        code=variant("FeedForward", (FF, "return F.relu(self.linear2(self.dropout(self.linear1(x))))")),
    ),
    Bug(
        "ff_no_activation",
        "FeedForward",
        why="two linear layers with nothing between",
        cause="there is no ReLU",
        code=variant("FeedForward", ("F.relu(self.linear1(x))", "self.linear1(x)")),
    ),
    Bug(
        "ff_gelu",
        "FeedForward",
        why="GELU where the paper has ReLU",
        cause="GELU is used",
        code=variant("FeedForward", ("F.relu(", "F.gelu(")),
    ),
    Bug(
        "ff_own_residual",
        "FeedForward",
        why="adds x to its output, as the layer around it already does",
        cause="adds its input to its output",
        code=variant("FeedForward", ("return self.linear2(", "return x + self.linear2(")),
    ),
    Bug(
        "ff_dropout_after_linear2",
        "FeedForward",
        why="dropout on the network's output",
        cause="dropout acts on the output of linear2",
        code=variant("FeedForward", (FF, "return self.dropout(self.linear2(F.relu(self.linear1(x))))")),
    ),
    Bug(
        "ff_dropout_on_input",
        "FeedForward",
        why="dropout on the input, before linear1",
        cause="dropout acts on the input x",
        code=variant("FeedForward", (FF, "return self.linear2(F.relu(self.linear1(self.dropout(x))))")),
    ),
    Bug(
        "ff_no_dropout",
        "FeedForward",
        why="builds the dropout submodule and never uses it",
        cause="dropout is never applied",
        code=variant("FeedForward", ("self.dropout(F.relu(self.linear1(x)))", "F.relu(self.linear1(x))")),
    ),
    Bug(
        "ff_dropout_always_on",
        "FeedForward",
        why="F.dropout without training=self.training",
        cause="dropout stays on in eval mode",
        code=variant(
            "FeedForward",
            ("self.dropout(F.relu(self.linear1(x)))", "F.dropout(F.relu(self.linear1(x)), self.dropout.p)"),
        ),
    ),
    # ------------------------------------------------------------------ EncoderLayer
    Bug(
        "encoder_ignores_norm_first",
        "EncoderLayer",
        why="always post-norm",
        cause="norm_first=True is ignored",
        code=variant("EncoderLayer", ("if self.norm_first:", "if False:")),
    ),
    Bug(
        "encoder_norm_before_residual",
        "EncoderLayer",
        why="post-norm that normalises the block, not the sum",
        cause="the layer norm acts on the attention's output alone",
        code=variant(
            "EncoderLayer", (ENC_POST_ATTN, "x = x + self.norm1(self.dropout1(self.self_attn(x, x, x, mask)[0]))")
        ),
    ),
    Bug(
        "encoder_no_attention_residual",
        "EncoderLayer",
        why="drops the residual around attention",
        cause="the attention block has no residual connection",
        code=variant(
            "EncoderLayer",
            ("x = self.norm1(x + self.dropout1(", "x = self.norm1(self.dropout1("),
            (
                "x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])",
                "x = self.dropout1(self.self_attn(h, h, h, mask)[0])",
            ),
        ),
    ),
    Bug(
        "encoder_mask_not_passed",
        "EncoderLayer",
        why="attends to padding",
        cause="the mask does not reach the self-attention",
        code=variant(
            "EncoderLayer",
            ("self.self_attn(x, x, x, mask)", "self.self_attn(x, x, x)"),
            ("self.self_attn(h, h, h, mask)", "self.self_attn(h, h, h)"),
        ),
    ),
    Bug(
        "encoder_pre_norm_residual_from_norm",
        "EncoderLayer",
        why="pre-norm adds to norm1(x) instead of x",
        cause="added to the layer-normed x",
        code=variant(
            "EncoderLayer",
            (
                "x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])",
                "x = h + self.dropout1(self.self_attn(h, h, h, mask)[0])",
            ),
        ),
    ),
    Bug(
        "encoder_norms_swapped",
        "EncoderLayer",
        why="norm2 after the attention, norm1 after the feed-forward",
        cause="the two layer norms are swapped",
        code=variant(
            "EncoderLayer",
            ("x = self.norm1(x + self.dropout1(", "x = self.norm2(x + self.dropout1("),
            ("return self.norm2(x + self.dropout2(", "return self.norm1(x + self.dropout2("),
            ("h = self.norm1(x)", "h = self.norm2(x)"),
            ("self.ff(self.norm2(x))", "self.ff(self.norm1(x))"),
        ),
    ),
    Bug(
        "encoder_one_norm_reused",
        "EncoderLayer",
        why="norm1 for both blocks, norm2 never used",
        cause="one layer norm serves both blocks",
        code=variant(
            "EncoderLayer",
            ("return self.norm2(x + self.dropout2(", "return self.norm1(x + self.dropout2("),
            ("self.ff(self.norm2(x))", "self.ff(self.norm1(x))"),
        ),
    ),
    Bug(
        "encoder_layer_norm_without_parameters",
        "EncoderLayer",
        why="F.layer_norm without the norms' weight and bias",
        cause="without its learned weight and bias",
        code=variant(
            "EncoderLayer",
            (
                "self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))",
                "F.layer_norm(x + self.dropout1(self.self_attn(x, x, x, mask)[0]), x.shape[-1:])",
            ),
            ("self.norm2(x + self.dropout2(self.ff(x)))", "F.layer_norm(x + self.dropout2(self.ff(x)), x.shape[-1:])"),
            ("h = self.norm1(x)", "h = F.layer_norm(x, x.shape[-1:])"),
            ("self.ff(self.norm2(x))", "self.ff(F.layer_norm(x, x.shape[-1:]))"),
        ),
    ),
    Bug(
        "encoder_dropout_on_the_sum",
        "EncoderLayer",
        why="dropout on x + block(x) instead of on block(x)",
        cause="dropout acts on the residual sum",
        code=variant(
            "EncoderLayer",
            (
                "self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))",
                "self.norm1(self.dropout1(x + self.self_attn(x, x, x, mask)[0]))",
            ),
            ("self.norm2(x + self.dropout2(self.ff(x)))", "self.norm2(self.dropout2(x + self.ff(x)))"),
            (
                "x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])",
                "x = self.dropout1(x + self.self_attn(h, h, h, mask)[0])",
            ),
            ("return x + self.dropout2(self.ff(self.norm2(x)))", "return self.dropout2(x + self.ff(self.norm2(x)))"),
        ),
    ),
    Bug(
        "encoder_dropout_after_norm",
        "EncoderLayer",
        why="post-norm with dropout on the normalised sum",
        cause="dropout acts after the layer norm",
        code=variant(
            "EncoderLayer",
            (ENC_POST_ATTN, "x = self.dropout1(self.norm1(x + self.self_attn(x, x, x, mask)[0]))"),
            (ENC_POST_FF, "return self.dropout2(self.norm2(x + self.ff(x)))"),
        ),
    ),
    Bug(
        "encoder_no_dropout",
        "EncoderLayer",
        why="builds dropout1 and dropout2 and never uses them",
        cause="the blocks' outputs are added without dropout",
        code=variant(
            "EncoderLayer",
            ("self.dropout1(self.self_attn(x, x, x, mask)[0])", "self.self_attn(x, x, x, mask)[0]"),
            ("self.dropout2(self.ff(x))", "self.ff(x)"),
            ("self.dropout1(self.self_attn(h, h, h, mask)[0])", "self.self_attn(h, h, h, mask)[0]"),
            ("self.dropout2(self.ff(self.norm2(x)))", "self.ff(self.norm2(x))"),
        ),
    ),
    Bug(
        "encoder_dropout_always_on",
        "EncoderLayer",
        why="F.dropout without training=self.training",
        cause="dropout stays on in eval mode",
        code=variant(
            "EncoderLayer",
            (
                "self.dropout1(self.self_attn(x, x, x, mask)[0])",
                "F.dropout(self.self_attn(x, x, x, mask)[0], self.dropout1.p)",
            ),
            ("self.dropout2(self.ff(x))", "F.dropout(self.ff(x), self.dropout2.p)"),
            (
                "self.dropout1(self.self_attn(h, h, h, mask)[0])",
                "F.dropout(self.self_attn(h, h, h, mask)[0], self.dropout1.p)",
            ),
            ("self.dropout2(self.ff(self.norm2(x)))", "F.dropout(self.ff(self.norm2(x)), self.dropout2.p)"),
        ),
    ),
    Bug(
        "encoder_pre_norm_normalises_the_sum",
        "EncoderLayer",
        why="pre-norm that also normalises its output",
        cause="in pre-norm nothing follows the sum",
        code=variant(
            "EncoderLayer",
            (
                "return x + self.dropout2(self.ff(self.norm2(x)))",
                "return self.norm2(x + self.dropout2(self.ff(self.norm2(x))))",
            ),
        ),
    ),
    # ------------------------------------------------------------------ DecoderLayer
    Bug(
        "decoder_cross_attends_to_itself",
        "DecoderLayer",
        why="keys and values from x, not memory",
        cause="takes its keys and values from x",
        code=variant(
            "DecoderLayer",
            ("self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(x, x, x, memory_mask)"),
            ("self.cross_attn(h, memory, memory, memory_mask)", "self.cross_attn(h, h, h, memory_mask)"),
        ),
    ),
    Bug(
        "decoder_queries_from_memory",
        "DecoderLayer",
        why="queries and keys swapped",
        cause="the queries come from the decoder's x",
        code=variant(
            "DecoderLayer",
            ("self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(memory, x, x, memory_mask)"),
            ("self.cross_attn(h, memory, memory, memory_mask)", "self.cross_attn(memory, h, h, memory_mask)"),
        ),
    ),
    Bug(
        "decoder_masks_swapped",
        "DecoderLayer",
        why="self-attention gets memory_mask",
        cause="the self-attention gets memory_mask",
        code=variant(
            "DecoderLayer",
            ("self.self_attn(x, x, x, tgt_mask)", "self.self_attn(x, x, x, memory_mask)"),
            ("self.self_attn(h, h, h, tgt_mask)", "self.self_attn(h, h, h, memory_mask)"),
        ),
    ),
    Bug(
        "decoder_normalises_memory",
        "DecoderLayer",
        why="pre-norm applies norm2 to memory too",
        cause="memory is never normalised",
        code=variant(
            "DecoderLayer",
            (
                "self.cross_attn(h, memory, memory, memory_mask)",
                "self.cross_attn(h, self.norm2(memory), self.norm2(memory), memory_mask)",
            ),
        ),
    ),
    Bug(
        "decoder_ignores_norm_first",
        "DecoderLayer",
        why="always post-norm",
        cause="norm_first=True is ignored",
        code=variant("DecoderLayer", ("if self.norm_first:", "if False:")),
    ),
    Bug(
        "decoder_no_cross_residual",
        "DecoderLayer",
        why="the cross-attention's output replaces x",
        cause="the cross-attention block has no residual connection",
        code=variant(
            "DecoderLayer",
            ("x = self.norm2(x + self.dropout2(", "x = self.norm2(self.dropout2("),
            ("x = x + self.dropout2(self.cross_attn(h", "x = self.dropout2(self.cross_attn(h"),
        ),
    ),
    Bug(
        "decoder_attention_norms_swapped",
        "DecoderLayer",
        why="norm2 after the self-attention, norm1 after the cross",
        cause="the layer norms of the two attention blocks are swapped",
        code=variant(
            "DecoderLayer",
            ("x = self.norm1(x + self.dropout1(", "x = self.NORM(x + self.dropout1("),
            ("x = self.norm2(x + self.dropout2(", "x = self.norm1(x + self.dropout2("),
            ("h = self.norm1(x)", "h = self.NORM(x)"),
            ("h = self.norm2(x)", "h = self.norm1(x)"),
            ("self.NORM", "self.norm2"),
        ),
    ),
    Bug(
        "decoder_one_norm_reused",
        "DecoderLayer",
        why="norm2 for the cross-attention and the feed-forward",
        cause="one layer norm serves two blocks",
        code=variant(
            "DecoderLayer",
            ("return self.norm3(x + self.dropout3(", "return self.norm2(x + self.dropout3("),
            ("self.ff(self.norm3(x))", "self.ff(self.norm2(x))"),
        ),
    ),
    Bug(
        "decoder_layer_norm_without_parameters",
        "DecoderLayer",
        why="F.layer_norm without the norms' weight and bias",
        cause="without its learned weight and bias",
        code=variant(
            "DecoderLayer",
            (DEC_POST_SELF, "x = F.layer_norm(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)[0]), x.shape[-1:])"),
            (
                DEC_POST_CROSS,
                "x = F.layer_norm(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)[0]), x.shape[-1:])",
            ),
            (DEC_POST_FF, "return F.layer_norm(x + self.dropout3(self.ff(x)), x.shape[-1:])"),
            ("h = self.norm1(x)", "h = F.layer_norm(x, x.shape[-1:])"),
            ("h = self.norm2(x)", "h = F.layer_norm(x, x.shape[-1:])"),
            ("self.ff(self.norm3(x))", "self.ff(F.layer_norm(x, x.shape[-1:]))"),
        ),
    ),
    Bug(
        "decoder_dropout_on_the_sum",
        "DecoderLayer",
        why="dropout on x + block(x) instead of on block(x)",
        cause="dropout acts on the residual sum",
        code=variant(
            "DecoderLayer",
            (
                "x + self.dropout1(self.self_attn(x, x, x, tgt_mask)[0])",
                "self.dropout1(x + self.self_attn(x, x, x, tgt_mask)[0])",
            ),
            (
                "x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)[0])",
                "self.dropout2(x + self.cross_attn(x, memory, memory, memory_mask)[0])",
            ),
            ("x + self.dropout3(self.ff(x))", "self.dropout3(x + self.ff(x))"),
            (
                "x + self.dropout1(self.self_attn(h, h, h, tgt_mask)[0])",
                "self.dropout1(x + self.self_attn(h, h, h, tgt_mask)[0])",
            ),
            (
                "x + self.dropout2(self.cross_attn(h, memory, memory, memory_mask)[0])",
                "self.dropout2(x + self.cross_attn(h, memory, memory, memory_mask)[0])",
            ),
            ("x + self.dropout3(self.ff(self.norm3(x)))", "self.dropout3(x + self.ff(self.norm3(x)))"),
        ),
    ),
    Bug(
        "decoder_no_dropout",
        "DecoderLayer",
        why="builds dropout1 to dropout3 and never uses them",
        cause="the blocks' outputs are added without dropout",
        code=variant(
            "DecoderLayer",
            ("self.dropout1(self.self_attn(x, x, x, tgt_mask)[0])", "self.self_attn(x, x, x, tgt_mask)[0]"),
            (
                "self.dropout2(self.cross_attn(x, memory, memory, memory_mask)[0])",
                "self.cross_attn(x, memory, memory, memory_mask)[0]",
            ),
            ("self.dropout3(self.ff(x))", "self.ff(x)"),
            ("self.dropout1(self.self_attn(h, h, h, tgt_mask)[0])", "self.self_attn(h, h, h, tgt_mask)[0]"),
            (
                "self.dropout2(self.cross_attn(h, memory, memory, memory_mask)[0])",
                "self.cross_attn(h, memory, memory, memory_mask)[0]",
            ),
            ("self.dropout3(self.ff(self.norm3(x)))", "self.ff(self.norm3(x))"),
        ),
    ),
    Bug(
        "decoder_dropout_always_on",
        "DecoderLayer",
        why="F.dropout without training=self.training",
        cause="dropout stays on in eval mode",
        code=variant(
            "DecoderLayer",
            (
                "self.dropout1(self.self_attn(x, x, x, tgt_mask)[0])",
                "F.dropout(self.self_attn(x, x, x, tgt_mask)[0], self.dropout1.p)",
            ),
            (
                "self.dropout2(self.cross_attn(x, memory, memory, memory_mask)[0])",
                "F.dropout(self.cross_attn(x, memory, memory, memory_mask)[0], self.dropout2.p)",
            ),
            ("self.dropout3(self.ff(x))", "F.dropout(self.ff(x), self.dropout3.p)"),
            (
                "self.dropout1(self.self_attn(h, h, h, tgt_mask)[0])",
                "F.dropout(self.self_attn(h, h, h, tgt_mask)[0], self.dropout1.p)",
            ),
            (
                "self.dropout2(self.cross_attn(h, memory, memory, memory_mask)[0])",
                "F.dropout(self.cross_attn(h, memory, memory, memory_mask)[0], self.dropout2.p)",
            ),
            ("self.dropout3(self.ff(self.norm3(x)))", "F.dropout(self.ff(self.norm3(x)), self.dropout3.p)"),
        ),
    ),
    # ------------------------------------------------------------------ Transformer
    Bug(
        "transformer_no_look_ahead",
        "Transformer",
        why="decode forgets tgt_mask",
        cause="tgt_mask does not reach the decoder's self-attention",
        code=variant(
            "Transformer", ("x = layer(x, memory, tgt_mask, memory_mask)", "x = layer(x, memory, None, memory_mask)")
        ),
        only="test_transformer_causal",
    ),
    Bug(
        "transformer_encoder_sees_padding",
        "Transformer",
        why="encode forgets src_mask",
        cause="src_mask does not reach the encoder's self-attention",
        code=variant("Transformer", ("x = layer(x, mask)", "x = layer(x)")),
        only="test_transformer_padding",
    ),
    Bug(
        "transformer_cross_sees_padding",
        "Transformer",
        why="forward does not pass src_mask to decode",
        cause="does not reach the cross-attention as the memory mask",
        code=variant(
            "Transformer", ("self.encode(src, src_mask), tgt_mask, src_mask)", "self.encode(src, src_mask), tgt_mask)")
        ),
        only="test_transformer_padding",
    ),
    Bug(
        "transformer_decode_drops_memory_mask",
        "Transformer",
        why="decode does not give the layers memory_mask",
        cause="does not reach the cross-attention as the memory mask",
        code=variant("Transformer", ("x = layer(x, memory, tgt_mask, memory_mask)", "x = layer(x, memory, tgt_mask)")),
        only="test_transformer_padding",
    ),
    Bug(
        "transformer_returns_features",
        "Transformer",
        why="no output layer",
        cause="it must end with the output layer",
        code=variant("Transformer", ("return self.generator(x)", "return x")),
    ),
    Bug(
        "transformer_ignores_target",
        "Transformer",
        why="decodes from zeros",
        cause="the logits do not depend on the target tokens",
        code=variant("Transformer", ("self.tgt_embedding(tgt_in)", "self.tgt_embedding(torch.zeros_like(tgt_in))")),
    ),
    Bug(
        "transformer_no_positional_encoding",
        "Transformer",
        why="builds the positional encoding and never adds it",
        cause="the positional encoding is not added",
        code=variant(
            "Transformer",
            ("x = self.positions(self.src_embedding(src) * self.scale)", "x = self.src_embedding(src) * self.scale"),
            (
                "x = self.positions(self.tgt_embedding(tgt_in) * self.scale)",
                "x = self.tgt_embedding(tgt_in) * self.scale",
            ),
        ),
    ),
    Bug(
        "transformer_no_scaling",
        "Transformer",
        why="embeddings not multiplied by sqrt(d_model)",
        cause="not multiplied by √d_model",
        code=variant("Transformer", (" * self.scale)", ")")),
    ),
    Bug(
        "transformer_scales_after_positions",
        "Transformer",
        why="sqrt(d_model) times (embedding + PE)",
        cause="scales the embeddings alone",
        code=variant(
            "Transformer",
            (
                "self.positions(self.src_embedding(src) * self.scale)",
                "self.positions(self.src_embedding(src)) * self.scale",
            ),
            (
                "self.positions(self.tgt_embedding(tgt_in) * self.scale)",
                "self.positions(self.tgt_embedding(tgt_in)) * self.scale",
            ),
        ),
    ),
    Bug(
        "transformer_encoder_output_discarded",
        "Transformer",
        why="encode runs the layers and returns the embeddings",
        cause="the memory is not the encoder layers' output",
        code=variant("Transformer", ("x = layer(x, mask)", "layer(x, mask)")),
    ),
    Bug(
        "transformer_encoder_layers_read_embeddings",
        "Transformer",
        why="every encoder layer gets the embeddings",
        cause="every encoder layer reads the embeddings",
        code=variant("Transformer", ("x = layer(x, mask)\n        return x", "y = layer(x, mask)\n        return y")),
    ),
    Bug(
        "transformer_decoder_layers_read_embeddings",
        "Transformer",
        why="every decoder layer gets the embeddings",
        cause="every decoder layer reads the embeddings",
        code=variant(
            "Transformer",
            (
                "x = layer(x, memory, tgt_mask, memory_mask)\n        return self.generator(x)",
                "y = layer(x, memory, tgt_mask, memory_mask)\n        return self.generator(y)",
            ),
        ),
    ),
    Bug(
        "transformer_returns_probabilities",
        "Transformer",
        why="a softmax after the output layer",
        cause="decode returns probabilities",
        code=variant("Transformer", ("return self.generator(x)", "return torch.softmax(self.generator(x), dim=-1)")),
    ),
    Bug(
        "transformer_no_layers",
        "Transformer",
        why="builds the layers and never runs them",
        cause="the memory is not the encoder layers' output",
        code=variant(
            "Transformer",
            ("        for layer in self.encoder_layers:\n            x = layer(x, mask)\n", ""),
            (
                "        for layer in self.decoder_layers:\n            x = layer(x, memory, tgt_mask, memory_mask)\n",
                "",
            ),
        ),
    ),
    # ------------------------------------------------------------------ greedy_decode
    Bug(
        "greedy_keeps_bos",
        "greedy_decode",
        why="returns the leading bos_id",
        cause="the result starts with bos_id",
        code=variant("greedy_decode", ("return ys[:, 1:]", "return ys")),
    ),
    Bug(
        "greedy_samples",
        "greedy_decode",
        why="draws each next token from the softmax instead of taking the argmax",
        cause="the next token is drawn from the softmax (sampling)",
        code=variant(
            "greedy_decode",
            (
                "next_token = logits[:, -1].argmax(dim=-1).masked_fill(finished, eos_id)",
                "probs = torch.softmax(logits[:, -1], dim=-1)\n"
                "        next_token = torch.multinomial(probs, num_samples=1).squeeze(-1).masked_fill(finished, eos_id)",
            ),
        ),
    ),
    Bug(
        "greedy_first_position",
        "greedy_decode",
        why="argmax at position 0 instead of the last",
        cause="the next token is read at the first position",
        code=variant("greedy_decode", ("logits[:, -1]", "logits[:, 0]")),
    ),
    Bug(
        "greedy_never_stops_early",
        "greedy_decode",
        why="always runs max_len steps",
        cause="decoding goes on after every sequence has produced eos_id",
        code=variant("greedy_decode", ("        if finished.all():\n            break\n", "")),
    ),
    Bug(
        "greedy_stops_at_first_eos",
        "greedy_decode",
        why="stops when any sequence ends",
        cause="decoding stops when one sequence has produced eos_id",
        code=variant("greedy_decode", ("if finished.all():", "if finished.any():")),
    ),
    Bug(
        "greedy_no_eos_fill",
        "greedy_decode",
        why="keeps generating after a sequence's eos",
        cause="a finished sequence goes on with words",
        code=variant("greedy_decode", (".argmax(dim=-1).masked_fill(finished, eos_id)", ".argmax(dim=-1)")),
    ),
    Bug(
        "greedy_forgets_memory_mask",
        "greedy_decode",
        why="decodes without the source padding mask",
        cause="src_mask does not reach model.decode",
        code=variant(
            "greedy_decode",
            ("causal_mask(ys.size(1), device=src.device), src_mask)", "causal_mask(ys.size(1), device=src.device))"),
        ),
    ),
    Bug(
        "greedy_no_look_ahead",
        "greedy_decode",
        why="decodes without a look-ahead mask",
        cause="model.decode gets no look-ahead mask",
        code=variant("greedy_decode", ("causal_mask(ys.size(1), device=src.device), src_mask)", "None, src_mask)")),
    ),
    Bug(
        "greedy_look_ahead_in_torch_convention",
        "greedy_decode",
        why="True above the diagonal, as nn.Transformer's masks (True = may not attend)",
        cause="model.decode gets no look-ahead mask",
        code=variant(
            "greedy_decode",
            (
                "causal_mask(ys.size(1), device=src.device)",
                "torch.ones(ys.size(1), ys.size(1), dtype=torch.bool, device=src.device).triu(1)",
            ),
        ),
    ),
    Bug(
        "greedy_fixed_bos",
        "greedy_decode",
        why="starts every sequence from token 1",
        cause="decoding starts from a fixed token instead of bos_id",
        code=variant("greedy_decode", ("torch.full((src.size(0), 1), bos_id,", "torch.full((src.size(0), 1), 1,")),
    ),
    Bug(
        "greedy_fixed_eos",
        "greedy_decode",
        why="token 2 stands for eos_id",
        cause="a fixed token id stands for eos_id",
        code=variant(
            "greedy_decode",
            ("masked_fill(finished, eos_id)", "masked_fill(finished, 2)"),
            ("next_token == eos_id", "next_token == 2"),
        ),
    ),
    Bug(
        "greedy_counts_bos_in_max_len",
        "greedy_decode",
        why="stops when the sequence with bos_id is max_len long",
        cause="the leading bos_id is counted in max_len",
        code=variant("greedy_decode", ("for _ in range(max_len):", "while ys.size(1) < max_len:")),
    ),
    Bug(
        "greedy_feeds_last_token_only",
        "greedy_decode",
        why="decodes the last token alone at each step",
        cause="model.decode sees only the last token",
        code=variant(
            "greedy_decode",
            (
                "model.decode(ys, memory, causal_mask(ys.size(1), device=src.device), src_mask)",
                "model.decode(ys[:, -1:], memory, causal_mask(1, device=src.device), src_mask)",
            ),
        ),
    ),
    # ------------------------------------------------------------------ encoder_layer_parameters
    Bug(
        "parameters_no_layer_norms",
        "encoder_layer_parameters",
        why="counts the attention and the feed-forward network only",
        cause="the two layer norms are not counted",
        code=variant(
            "encoder_layer_parameters",
            ("count = attention + feed_forward + norms", "count = attention + feed_forward"),
        ),
    ),
    Bug(
        "parameters_no_biases",
        "encoder_layer_parameters",
        why="counts the weight matrices of the linear layers only",
        cause="the biases of the linear layers are not counted",
        code=variant(
            "encoder_layer_parameters",
            (ATTENTION, "attention = 4 * d_model * d_model"),
            (FEED_FORWARD, "feed_forward = d_model * d_ff + d_ff * d_model"),
        ),
    ),
    Bug(
        "parameters_layer_norm_weight_only",
        "encoder_layer_parameters",
        why="counts d_model numbers per layer norm",
        cause="a layer norm holds a bias as well as a weight",
        code=variant("encoder_layer_parameters", ("norms = 2 * 2 * d_model", "norms = 2 * d_model")),
    ),
    Bug(
        "parameters_three_projections",
        "encoder_layer_parameters",
        why="forgets the output projection W_o",
        cause="the output projection W_o is a layer too",
        code=variant("encoder_layer_parameters", ("attention = 4 * (", "attention = 3 * (")),
    ),
    Bug(
        "parameters_projections_per_head",
        "encoder_layer_parameters",
        why="counts d_model x d_model projections for every head",
        cause="the heads share the four projections",
        code=variant("encoder_layer_parameters", ("attention = 4 * (", "attention = 4 * num_heads * (")),
    ),
    # ------------------------------------------------------------------ cross_attention_weights_shape
    Bug(
        "cross_shape_swapped",
        "cross_attention_weights_shape",
        why="one row per key and one column per query",
        cause="queries and keys are swapped",
        code=variant("cross_attention_weights_shape", (SHAPE, "(batch_size, num_heads, src_len, tgt_len)")),
    ),
    Bug(
        "cross_shape_self_attention",
        "cross_attention_weights_shape",
        why="the shape of the decoder's self-attention",
        cause="that is the shape of the decoder's self-attention",
        code=variant("cross_attention_weights_shape", (SHAPE, "(batch_size, num_heads, tgt_len, tgt_len)")),
    ),
    Bug(
        "cross_shape_no_heads",
        "cross_attention_weights_shape",
        why="forgets the dimension of the heads",
        cause="every head has its own weights",
        code=variant("cross_attention_weights_shape", (SHAPE, "(batch_size, tgt_len, src_len)")),
    ),
    Bug(
        "cross_shape_no_batch",
        "cross_attention_weights_shape",
        why="forgets the dimension of the batch",
        cause="every pair of the batch has its own weights",
        code=variant("cross_attention_weights_shape", (SHAPE, "(num_heads, tgt_len, src_len)")),
    ),
    Bug(
        "cross_shape_as_list",
        "cross_attention_weights_shape",
        why="returns a list, not a tuple",
        cause="a tuple of Python ints",
        code=variant("cross_attention_weights_shape", ("return shape", "return list(shape)")),
    ),
]

# Found by the second review of the grader: answers that the grader used to pass, or that cost points
# in other items than their own.
BUGS += [
    Bug(
        "ff_fixed_dropout",
        "FeedForward",
        code=variant("FeedForward", ("self.dropout = nn.Dropout(dropout)", "self.dropout = nn.Dropout(0.1)")),
        why="a dropout probability written into the code",
        cause="the dropout's probability is fixed",
    ),
    Bug(
        "enc_ff_without_dropout",
        "EncoderLayer",
        code=variant(
            "EncoderLayer", ("self.ff = FeedForward(d_model, d_ff, dropout)", "self.ff = FeedForward(d_model, d_ff)")
        ),
        why="the feed-forward network built without the layer's dropout",
        cause="built without the layer's dropout",
    ),
    Bug(
        "dec_ff_without_dropout",
        "DecoderLayer",
        code=variant(
            "DecoderLayer", ("self.ff = FeedForward(d_model, d_ff, dropout)", "self.ff = FeedForward(d_model, d_ff)")
        ),
        why="the feed-forward network built without the layer's dropout",
        cause="built without the layer's dropout",
    ),
    Bug(
        "dec_shared_attention",
        "DecoderLayer",
        code=variant(
            "DecoderLayer",
            ("self.cross_attn = MultiHeadAttention(d_model, num_heads)", "self.cross_attn = self.self_attn"),
        ),
        why="one MultiHeadAttention for self-attention and cross-attention",
        cause="are one module",
    ),
    Bug(
        "transformer_shared_encoder_layer",
        "Transformer",
        code=variant(
            "Transformer",
            (
                "nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))",
                "nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)] * num_layers)",
            ),
        ),
        why="one encoder layer object repeated, so the layers share their weights",
        cause="one encoder layer object is repeated",
    ),
    Bug(
        "transformer_shared_decoder_layer",
        "Transformer",
        code=variant(
            "Transformer",
            (
                "nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))",
                "nn.ModuleList([DecoderLayer(d_model, num_heads, d_ff, dropout)] * num_layers)",
            ),
        ),
        why="one decoder layer object repeated, so the layers share their weights",
        cause="one decoder layer object is repeated",
    ),
    Bug(
        "decode_makes_its_own_mask",
        "Transformer",
        code=variant(
            "Transformer",
            (
                "x = layer(x, memory, tgt_mask, memory_mask)",
                "x = layer(x, memory, causal_mask(tgt_in.size(1), device=tgt_in.device), memory_mask)",
            ),
        ),
        why="decode ignores tgt_mask and always applies a look-ahead mask of its own",
        cause="a look-ahead mask of its own",
    ),
    # ------------------------------------------------------------------ decoded_positions
    Bug(
        "positions_no_early_stop",
        "decoded_positions",
        why="max_len steps always, as if decoding never stopped early",
        cause="stops as soon as every sequence has written eos_id",
        code=variant("decoded_positions", (STEPS, "steps = max_len")),
    ),
    Bug(
        "positions_first_to_finish",
        "decoded_positions",
        why="stops with the first sequence to finish",
        cause="it stops only once every sequence has finished",
        code=variant("decoded_positions", (STEPS, "steps = min(min(eos_steps), max_len)")),
    ),
    Bug(
        "positions_one_per_step",
        "decoded_positions",
        why="one position per step, as with a key/value cache",
        cause="each call decodes the whole output so far again",
        code=variant("decoded_positions", ("total = steps * (steps + 1) // 2", "total = steps")),
    ),
    Bug(
        "positions_no_max_len",
        "decoded_positions",
        why="forgets that max_len caps the steps",
        cause="stops after max_len steps",
        code=variant("decoded_positions", (STEPS, "steps = max(eos_steps)")),
    ),
    Bug(
        "positions_without_bos",
        "decoded_positions",
        why="counts the tokens generated before each step, bos_id left out: 0 + 1 + ... + (steps - 1)",
        cause="bos_id is one of the positions decoded",
        code=variant("decoded_positions", ("total = steps * (steps + 1) // 2", "total = sum(range(steps))")),
    ),
    # ------------------------------------------------------------------ normalised_output
    Bug(
        "normalised_pre_norm",
        "normalised_output",
        why="a pre-norm encoder layer is said to normalise its output",
        cause="a pre-norm layer normalises the input of each block, not its output",
        code=variant("normalised_output", ('"EncoderLayer, pre-norm": False', '"EncoderLayer, pre-norm": True')),
    ),
    Bug(
        "normalised_post_norm",
        "normalised_output",
        why="a post-norm encoder layer is said not to normalise its output",
        cause="a post-norm layer ends with a layer norm",
        code=variant("normalised_output", ('"EncoderLayer, post-norm": True', '"EncoderLayer, post-norm": False')),
    ),
    Bug(
        "normalised_pre_norm_decoder",
        "normalised_output",
        why="a pre-norm decoder layer is said to normalise its output",
        cause="a pre-norm decoder layer normalises the input of each of its three blocks",
        code=variant("normalised_output", ('"DecoderLayer, pre-norm": False', '"DecoderLayer, pre-norm": True')),
    ),
    Bug(
        "normalised_final_norm",
        "normalised_output",
        why="the layer norm after a pre-norm stack is said not to normalise the output",
        cause="the layer norm after the stack is the last thing the model computes",
        code=variant(
            "normalised_output",
            ('followed by one nn.LayerNorm": True', 'followed by one nn.LayerNorm": False'),
        ),
    ),
    Bug(
        "normalised_string",
        "normalised_output",
        why="answers with the string 'True', not the truth value",
        cause="answer True or False",
        code=variant("normalised_output", ('"EncoderLayer, post-norm": True', '"EncoderLayer, post-norm": "True"')),
    ),
]
