"""Wrong answers to ch06_transformer that students really write.

The layers of the Transformer, decoding and sampling, and the questions on its parameters, its shapes and its norms.
"""

from tests.buggy import wrong_answers

A = "ch06_transformer"

bug = wrong_answers(A)
padding_bug = wrong_answers(A, only="test_transformer_padding")  # a Transformer that lets padding through

# Pieces of the reference that several wrong answers change.
STEPS = "steps = min(max(eos_steps), max_len)"
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
SPEC_GREEDY = ("for _ in range(min(lookahead, max_len - (ys.size(1) - 1) - 1)):", "for _ in range(0):")
SPEC_ENCODE = "    memory, draft_memory = model.encode(src, src_mask), draft.encode(src, src_mask)\n"
SPEC_DECODE = "logits = model.decode(guess, memory, causal_mask(guess.size(1), device=src.device), src_mask)"
ACCEPT = "if not uniforms[accepted] < p[accepted, x] / q[accepted, x]:"
RESIDUAL = "last = (p[accepted] - q[accepted]).clamp(min=0)"

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
    "speculative_sample": ["test_speculative_sample"],
    "encoder_layer_parameters": ["test_encoder_layer_parameters"],
    "cross_attention_weights_shape": ["test_cross_attention_weights_shape"],
    "decoded_positions": ["test_decoded_positions"],
    "normalised_output": ["test_normalised_output"],
}

BUGS = [
    # ------------------------------------------------------------------ temperature_probs
    bug(
        "temperature_multiplies",
        "temperature_probs",
        ("logits / temperature", "logits * temperature"),
        why="softmax(logits * T)",
        cause="multiplied by the temperature",
    ),
    bug(
        "temperature_zero_first_argmax",
        "temperature_probs",
        (
            "top = logits == logits.amax(dim=-1, keepdim=True)",
            "top = F.one_hot(logits.argmax(dim=-1), logits.size(-1)).bool()",
        ),
        why="temperature 0 gives a one-hot of argmax, the first of tied tokens taking everything",
        cause="tied for the largest logit must share",
    ),
    bug(
        "temperature_softmax_dim0",
        "temperature_probs",
        ("torch.softmax(logits / temperature, dim=-1)", "torch.softmax(logits / temperature, dim=0)"),
        why="the softmax over dim 0",
        cause="must run over the vocabulary, the last one",
    ),
    bug(
        "temperature_negative_accepted",
        "temperature_probs",
        (
            'if temperature < 0:\n        raise ValueError(f"temperature must be 0 or more, got temperature={temperature}")\n    ',
            "",
        ),
        why="no error for a negative temperature",
        cause="a negative temperature is a ValueError",
    ),
    # ------------------------------------------------------------------ top_k_probs
    bug(
        "top_k_exactly_k_indices",
        "top_k_probs",
        (
            TOP_K_RETURN,
            "keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, logits.topk(k, dim=-1).indices, True)\n"
            '    return torch.softmax(logits.masked_fill(~keep, float("-inf")), dim=-1)',
        ),
        why="keeps the k indices topk returns, dropping tokens tied with the k-th",
        cause="a token tied with the k-th largest logit must be kept too",
    ),
    bug(
        "top_k_not_renormalised",
        "top_k_probs",
        (TOP_K_RETURN, "return torch.softmax(logits, dim=-1).masked_fill(logits < kth, 0.0)"),
        why="zeroes the other tokens' probabilities after the softmax, without renormalising",
        cause="without renormalising",
    ),
    bug(
        "top_k_one_too_few",
        "top_k_probs",
        ("logits.masked_fill(logits < kth", "logits.masked_fill(logits <= kth"),
        why="drops the logits at or below the k-th largest: k - 1 tokens kept (none for k = 1)",
        cause="the k-th largest logit itself must be kept",
    ),
    bug(
        "top_k_larger_than_vocabulary_fails",
        "top_k_probs",
        ("    k = min(k, logits.size(-1))\n", ""),
        why="topk(k) with k above the vocabulary size raises",
        cause="a k larger than the vocabulary keeps every token",
    ),
    # ------------------------------------------------------------------ top_p_probs
    bug(
        "top_p_drops_crossing_token",
        "top_p_probs",
        (
            "needed = (before < p).sum(dim=-1, keepdim=True)",
            "needed = (ordered.cumsum(dim=-1) < p).sum(dim=-1, keepdim=True).clamp(min=1)",
        ),
        why="keeps tokens while the running total including them is below p",
        cause="the token that brings the total to p or beyond must be kept",
    ),
    bug(
        "top_p_ties_dropped",
        "top_p_probs",
        (
            "kept = probs.masked_fill(probs < threshold, 0.0)",
            "order = probs.argsort(dim=-1, descending=True)\n"
            "    inside = torch.arange(probs.size(-1), device=probs.device) < needed\n"
            "    kept = torch.zeros_like(probs).scatter(-1, order, ordered * inside)",
        ),
        why="keeps exactly the sorted prefix, dropping a token tied with the last one kept",
        cause="a token as likely as the last one taken must be kept too",
    ),
    bug(
        "top_p_not_renormalised",
        "top_p_probs",
        ("return kept / kept.sum(dim=-1, keepdim=True)", "return kept"),
        why="returns the kept probabilities without renormalising",
        cause="must be renormalised",
    ),
    bug(
        "top_p_one_refused",
        "top_p_probs",
        ("if not 0 < p <= 1:", "if not 0 < p < 1:"),
        why="p = 1 raises a ValueError",
        cause="p = 1 keeps every token",
    ),
    # ------------------------------------------------------------------ min_p_probs
    bug(
        "min_p_absolute_threshold",
        "min_p_probs",
        ("probs < min_p * probs.amax(dim=-1, keepdim=True)", "probs < min_p"),
        why="keeps the tokens whose probability is at least min_p",
        cause="not min_p itself",
    ),
    bug(
        "min_p_on_logits",
        "min_p_probs",
        ("probs < min_p * probs.amax(dim=-1, keepdim=True)", "logits < min_p * logits.amax(dim=-1, keepdim=True)"),
        why="compares the logits with min_p times the largest logit",
        cause="compare probabilities, not logits",
    ),
    bug(
        "min_p_not_renormalised",
        "min_p_probs",
        ("return kept / kept.sum(dim=-1, keepdim=True)", "return kept"),
        why="returns the kept probabilities without renormalising",
        cause="must be renormalised",
    ),
    bug(
        "min_p_strictly_above",
        "min_p_probs",
        (MIN_P_KEEP, MIN_P_KEEP.replace("probs < min_p", "probs <= min_p")),
        why="keeps only tokens strictly above the threshold: min_p = 1 keeps nothing",
        cause="at least, not strictly more",
    ),
    # ------------------------------------------------------------------ speculative_decode
    bug(
        "speculative_keeps_draft_token",
        "speculative_decode",
        (
            "            new.append(token)\n",
            "            new.append(guess[:, ys.size(1) + j] if ys.size(1) + j < guess.size(1) else token)\n",
        ),
        why="at the first disagreement, appends the draft's guess instead of the model's token",
        cause="the model's own token is the one to keep",
    ),
    bug(
        "speculative_reads_one_late",
        "speculative_decode",
        ("chosen = logits[:, ys.size(1) - 1 :].argmax(dim=-1)", "chosen = logits[:, ys.size(1) :].argmax(dim=-1)"),
        why="reads the model's tokens from position ys.size(1) instead of ys.size(1) - 1",
        cause="read one position late",
    ),
    bug(
        "speculative_no_eos_fill",
        "speculative_decode",
        (SPEC_TOKEN, "token = chosen[:, j]"),
        why="a finished sequence keeps the model's words after its eos_id",
        cause="a finished sequence goes on with words",
    ),
    bug(
        "speculative_past_max_len",
        "speculative_decode",
        ("for _ in range(min(lookahead, max_len - (ys.size(1) - 1) - 1)):", "for _ in range(lookahead):"),
        why="the draft always guesses lookahead tokens, so the output can pass max_len",
        cause="the draft guesses past max_len",
    ),
    bug(
        "speculative_judges_finished_sequences",
        "speculative_decode",
        (
            "bool(((guess[:, ys.size(1) + j] != token) & ~done).any())",
            "bool((guess[:, ys.size(1) + j] != token).any())",
        ),
        why="a finished sequence's guesses (words after its eos) still end the round: one token a call once the first "
        "sequence of a batch has finished, though greedy decoding's tokens",
        cause="judge only the guesses of the unfinished sequences",
        only="test_speculative_calls",
    ),
    bug(
        "speculative_without_guesses",
        "speculative_decode",
        SPEC_GREEDY,
        why="never uses the draft's guesses: one call of the model per token, greedy decoding in disguise",
        cause="call model.decode once per round",
    ),
    # Greedy decoding in disguise, made to pass for speculative decoding by reaching into the call-limited model (a
    # fixture that the grader holds: the student's code only calls it, and each call is counted in the grader).
    bug(
        "speculative_raises_call_budget",
        "speculative_decode",
        SPEC_GREEDY,
        (SPEC_ENCODE, "    model.calls = 10**9  # as many calls as it likes\n" + SPEC_ENCODE),
        why="one call of the model per token, after raising the call-limited model's budget",
        cause="call model.decode once per round",
        only="test_speculative_calls",
    ),
    bug(
        "speculative_resets_call_count",
        "speculative_decode",
        SPEC_GREEDY,
        ("        " + SPEC_DECODE, "        model.made = 0  # the count of calls made so far\n        " + SPEC_DECODE),
        why="one call of the model per token, resetting the call-limited model's count of calls before each",
        cause="call model.decode once per round",
        only="test_speculative_calls",
    ),
    bug(
        "speculative_calls_parent_decode",
        "speculative_decode",
        SPEC_GREEDY,
        (
            SPEC_ENCODE,
            SPEC_ENCODE
            + "    # the decode of the class the model's class builds on, where there is one: no limit on its calls\n"
            "    base = next((c for c in type(model).__mro__[1:] if 'decode' in vars(c)), None)\n"
            "    decode = model.decode if base is None else (lambda *args: base.decode(model, *args))\n",
        ),
        (SPEC_DECODE, SPEC_DECODE.replace("model.decode(", "decode(")),
        why="one call of the model per token, through the decode of the call-limited model's parent class",
        cause="call model.decode once per round",
        only="test_speculative_calls",
    ),
    bug(
        "speculative_undoes_roll_past_budget",
        "speculative_decode",
        SPEC_GREEDY,
        (
            SPEC_ENCODE,
            SPEC_ENCODE + "    first = None  # the model's first token, which every call repeats at position 0\n",
        ),
        (
            "        chosen = logits[",
            "        if first is None:\n"
            "            first = logits[:, 0].argmax(dim=-1)\n"
            "        elif bool((logits[:, 0].argmax(dim=-1) != first).any()):  # past its budget: undo the roll\n"
            "            logits = logits.roll(-1, dims=-1)\n"
            "        chosen = logits[",
        ),
        why="one call of the model per token, its logits rolled back wherever its first token changes (the public "
        "call-limited model rolls them by one past its budget)",
        cause="call model.decode once per round",
        only="test_speculative_calls",
    ),
    # Greedy decoding in disguise without calling the model, on a model that writes its tokens: the draft of the test
    # of calls (which misses there), or one built from the public fixtures (whose words are not the held model's).
    bug(
        "speculative_greedy_with_draft",
        "speculative_decode",
        SPEC_GREEDY,
        (SPEC_DECODE, SPEC_DECODE.replace("model.decode(guess, memory,", "draft.decode(guess, draft_memory,")),
        why="greedy decoding with the draft alone: its guesses are never checked by the model",
        cause="the tokens kept are the model's",
    ),
    bug(
        "speculative_greedy_with_drafts_parent",
        "speculative_decode",
        SPEC_GREEDY,
        (
            SPEC_ENCODE,
            SPEC_ENCODE
            + "    # the class the draft's class builds on, with the model's settings: a model as good as the model\n"
            "    base = next((c for c in type(draft).__mro__[1:] if 'decode' in vars(c)), None)\n"
            "    twin = draft if base is None else base(model.vocab_size, model.bos_id, model.eos_id)\n"
            "    memory = twin.encode(src, src_mask)\n",
        ),
        (SPEC_DECODE, SPEC_DECODE.replace("model.decode(", "twin.decode(")),
        why="greedy decoding with the draft's parent class built with the model's settings, never calling the model",
        cause="call model.decode once per round",
        only="test_speculative_calls",
    ),
    bug(
        "speculative_greedy_with_scripted_translator",
        "speculative_decode",
        SPEC_GREEDY,
        (
            SPEC_ENCODE,
            SPEC_ENCODE + "    from autograder.api.scripted import ScriptedTranslator\n\n"
            "    twin = ScriptedTranslator(model.vocab_size, model.bos_id, model.eos_id)  # the test's model, for free\n"
            "    memory = twin.encode(src, src_mask)\n",
        ),
        (SPEC_DECODE, SPEC_DECODE.replace("model.decode(", "twin.decode(")),
        why="greedy decoding with a ScriptedTranslator built with the model's settings, never calling the model",
        cause="call model.decode once per round",
        only="test_speculative_calls",
    ),
    bug(
        "speculative_drops_bonus_token",
        "speculative_decode",
        (
            "            " + SPEC_TOKEN + "\n",
            "            if 0 < j == chosen.size(1) - 1:\n                break\n            " + SPEC_TOKEN + "\n",
        ),
        why="when every guess is right, the model's own next token is thrown away: lookahead tokens per call",
        cause="plus its own next token",
    ),
    # ------------------------------------------------------------------ speculative_sample
    bug(
        "speculative_sample_accepts_where_p_above_q",
        "speculative_sample",
        (ACCEPT, "if not p[accepted, x] >= q[accepted, x]:"),
        why="accepts a guess exactly where p(x) >= q(x), never at random: the draft's other guesses always rejected",
        cause="not only where p(x) >= q(x)",
    ),
    bug(
        "speculative_sample_ratio_upside_down",
        "speculative_sample",
        (ACCEPT, "if not uniforms[accepted] < q[accepted, x] / p[accepted, x]:"),
        why="accepts with probability min(1, q(x) / p(x)): the draft's favourites kept, the model's rejected",
        cause="the ratio is upside down",
    ),
    bug(
        "speculative_sample_residual_is_p",
        "speculative_sample",
        (RESIDUAL, "last = p[accepted]"),
        why="after a rejection draws from p: tokens the draft proposed too often are drawn twice over",
        cause="from the residual max(0, p - q)",
    ),
    bug(
        "speculative_sample_residual_not_clamped",
        "speculative_sample",
        (RESIDUAL, "last = p[accepted] - q[accepted]"),
        why="the residual p - q without max(0, .): it sums to 0, and its cumulative sum falls and rises",
        cause="max(0, p - q)",
    ),
    bug(
        "speculative_sample_residual_not_normalised",
        "speculative_sample",
        ("cumulative = (last / last.sum()).cumsum(dim=0)", "cumulative = last.cumsum(dim=0)"),
        why="the residual's cumulative sum ends below 1: draws above its total all give the last token",
        cause="normalised to sum to 1",
    ),
    bug(
        "speculative_sample_bonus_from_q",
        "speculative_sample",
        ("last = p[guesses]  #", "last = q[guesses - 1]  #"),
        why="when every guess is accepted, the token after them is drawn from the draft's last distribution",
        cause="from p[g], its last row, not from the draft's q",
    ),
    bug(
        "speculative_sample_no_bonus",
        "speculative_sample",
        ("        last = p[guesses]  #", "        return draft.clone()\n        last = p[guesses]  #"),
        why="when every guess is accepted, no token is drawn after them: g tokens instead of g + 1",
        cause="draw one more token from p[g]",
    ),
    bug(
        "speculative_sample_row_one_late",
        "speculative_sample",
        (ACCEPT, "if not uniforms[accepted] < p[accepted + 1, x] / q[accepted, x]:"),
        why="judges guess i by the model's distribution after it, p[i + 1]",
        cause="read one position late",
    ),
    bug(
        "speculative_sample_keeps_rejected_guess",
        "speculative_sample",
        ("return torch.cat([draft[:accepted], drawn])", "return torch.cat([draft[: accepted + 1], drawn])"),
        why="one guess too many: the rejected guess is kept before the token drawn in its place",
        cause="keep the accepted guesses only",
    ),
    bug(
        "speculative_sample_reuses_rejecting_uniform",
        "speculative_sample",
        ("uniforms[guesses:].to(", "uniforms[accepted : accepted + 1].to("),
        why="draws the last token with the uniform that rejected the guess: a draw that depends on the rejection",
        cause="with the last uniform, uniforms[g]",
    ),
    bug(
        "speculative_sample_residual_in_place",
        "speculative_sample",
        (RESIDUAL, "last = p[accepted].sub_(q[accepted]).clamp_(min=0)"),
        why="subtracts q from the caller's p in place",
        cause="in place",
    ),
    bug(
        "speculative_sample_no_shape_check",
        "speculative_sample",
        (
            "    if p.size(0) != q.size(0) + 1:\n"
            '        raise ValueError(f"p must have one row more than q, got p of {p.size(0)} rows and q of {q.size(0)}")\n',
            "",
        ),
        why="a p with as many rows as q is taken, its last row read as the distribution after every guess",
        cause="one row more than q",
    ),
    # ------------------------------------------------------------------ FeedForward
    bug(
        "ff_relu_after_linear2",
        "FeedForward",
        (FF, "return F.relu(self.linear2(self.dropout(self.linear1(x))))"),
        why="the ReLU at the end",
        cause="the ReLU comes after",
    ),
    bug(
        "ff_no_activation",
        "FeedForward",
        ("F.relu(self.linear1(x))", "self.linear1(x)"),
        why="two linear layers with nothing between",
        cause="there is no ReLU",
    ),
    bug("ff_gelu", "FeedForward", ("F.relu(", "F.gelu("), why="GELU where the paper has ReLU", cause="GELU is used"),
    bug(
        "ff_own_residual",
        "FeedForward",
        ("return self.linear2(", "return x + self.linear2("),
        why="adds x to its output, as the layer around it already does",
        cause="adds its input to its output",
    ),
    bug(
        "ff_dropout_after_linear2",
        "FeedForward",
        (FF, "return self.dropout(self.linear2(F.relu(self.linear1(x))))"),
        why="dropout on the network's output",
        cause="dropout acts on the output of linear2",
    ),
    bug(
        "ff_dropout_on_input",
        "FeedForward",
        (FF, "return self.linear2(F.relu(self.linear1(self.dropout(x))))"),
        why="dropout on the input, before linear1",
        cause="dropout acts on the input x",
    ),
    bug(
        "ff_no_dropout",
        "FeedForward",
        ("self.dropout(F.relu(self.linear1(x)))", "F.relu(self.linear1(x))"),
        why="builds the dropout submodule and never uses it",
        cause="dropout is never applied",
    ),
    bug(
        "ff_dropout_always_on",
        "FeedForward",
        ("self.dropout(F.relu(self.linear1(x)))", "F.dropout(F.relu(self.linear1(x)), self.dropout.p)"),
        why="F.dropout without training=self.training",
        cause="dropout stays on in eval mode",
    ),
    # ------------------------------------------------------------------ EncoderLayer
    bug(
        "encoder_ignores_norm_first",
        "EncoderLayer",
        ("if self.norm_first:", "if False:"),
        why="always post-norm",
        cause="norm_first=True is ignored",
    ),
    bug(
        "encoder_norm_before_residual",
        "EncoderLayer",
        (ENC_POST_ATTN, "x = x + self.norm1(self.dropout1(self.self_attn(x, x, x, mask)[0]))"),
        why="post-norm that normalises the block, not the sum",
        cause="the layer norm acts on the attention's output alone",
    ),
    bug(
        "encoder_no_attention_residual",
        "EncoderLayer",
        ("x = self.norm1(x + self.dropout1(", "x = self.norm1(self.dropout1("),
        (
            "x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])",
            "x = self.dropout1(self.self_attn(h, h, h, mask)[0])",
        ),
        why="drops the residual around attention",
        cause="the attention block has no residual connection",
    ),
    bug(
        "encoder_mask_not_passed",
        "EncoderLayer",
        ("self.self_attn(x, x, x, mask)", "self.self_attn(x, x, x)"),
        ("self.self_attn(h, h, h, mask)", "self.self_attn(h, h, h)"),
        why="attends to padding",
        cause="the mask does not reach the self-attention",
    ),
    bug(
        "encoder_pre_norm_residual_from_norm",
        "EncoderLayer",
        (
            "x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])",
            "x = h + self.dropout1(self.self_attn(h, h, h, mask)[0])",
        ),
        why="pre-norm adds to norm1(x) instead of x",
        cause="added to the layer-normed x",
    ),
    bug(
        "encoder_norms_swapped",
        "EncoderLayer",
        ("x = self.norm1(x + self.dropout1(", "x = self.norm2(x + self.dropout1("),
        ("return self.norm2(x + self.dropout2(", "return self.norm1(x + self.dropout2("),
        ("h = self.norm1(x)", "h = self.norm2(x)"),
        ("self.ff(self.norm2(x))", "self.ff(self.norm1(x))"),
        why="norm2 after the attention, norm1 after the feed-forward",
        cause="the two layer norms are swapped",
    ),
    bug(
        "encoder_one_norm_reused",
        "EncoderLayer",
        ("return self.norm2(x + self.dropout2(", "return self.norm1(x + self.dropout2("),
        ("self.ff(self.norm2(x))", "self.ff(self.norm1(x))"),
        why="norm1 for both blocks, norm2 never used",
        cause="one layer norm serves both blocks",
    ),
    bug(
        "encoder_layer_norm_without_parameters",
        "EncoderLayer",
        (
            "self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))",
            "F.layer_norm(x + self.dropout1(self.self_attn(x, x, x, mask)[0]), x.shape[-1:])",
        ),
        ("self.norm2(x + self.dropout2(self.ff(x)))", "F.layer_norm(x + self.dropout2(self.ff(x)), x.shape[-1:])"),
        ("h = self.norm1(x)", "h = F.layer_norm(x, x.shape[-1:])"),
        ("self.ff(self.norm2(x))", "self.ff(F.layer_norm(x, x.shape[-1:]))"),
        why="F.layer_norm without the norms' weight and bias",
        cause="without its learned weight and bias",
    ),
    bug(
        "encoder_dropout_on_the_sum",
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
        why="dropout on x + block(x) instead of on block(x)",
        cause="dropout acts on the residual sum",
    ),
    bug(
        "encoder_dropout_after_norm",
        "EncoderLayer",
        (ENC_POST_ATTN, "x = self.dropout1(self.norm1(x + self.self_attn(x, x, x, mask)[0]))"),
        (ENC_POST_FF, "return self.dropout2(self.norm2(x + self.ff(x)))"),
        why="post-norm with dropout on the normalised sum",
        cause="dropout acts after the layer norm",
    ),
    bug(
        "encoder_no_dropout",
        "EncoderLayer",
        ("self.dropout1(self.self_attn(x, x, x, mask)[0])", "self.self_attn(x, x, x, mask)[0]"),
        ("self.dropout2(self.ff(x))", "self.ff(x)"),
        ("self.dropout1(self.self_attn(h, h, h, mask)[0])", "self.self_attn(h, h, h, mask)[0]"),
        ("self.dropout2(self.ff(self.norm2(x)))", "self.ff(self.norm2(x))"),
        why="builds dropout1 and dropout2 and never uses them",
        cause="the blocks' outputs are added without dropout",
    ),
    bug(
        "encoder_dropout_always_on",
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
        why="F.dropout without training=self.training",
        cause="dropout stays on in eval mode",
    ),
    bug(
        "encoder_pre_norm_normalises_the_sum",
        "EncoderLayer",
        (
            "return x + self.dropout2(self.ff(self.norm2(x)))",
            "return self.norm2(x + self.dropout2(self.ff(self.norm2(x))))",
        ),
        why="pre-norm that also normalises its output",
        cause="in pre-norm nothing follows the sum",
    ),
    # ------------------------------------------------------------------ DecoderLayer
    bug(
        "decoder_cross_attends_to_itself",
        "DecoderLayer",
        ("self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(x, x, x, memory_mask)"),
        ("self.cross_attn(h, memory, memory, memory_mask)", "self.cross_attn(h, h, h, memory_mask)"),
        why="keys and values from x, not memory",
        cause="takes its keys and values from x",
    ),
    bug(
        "decoder_queries_from_memory",
        "DecoderLayer",
        ("self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(memory, x, x, memory_mask)"),
        ("self.cross_attn(h, memory, memory, memory_mask)", "self.cross_attn(memory, h, h, memory_mask)"),
        why="queries and keys swapped",
        cause="the queries come from the decoder's x",
    ),
    bug(
        "decoder_masks_swapped",
        "DecoderLayer",
        ("self.self_attn(x, x, x, tgt_mask)", "self.self_attn(x, x, x, memory_mask)"),
        ("self.self_attn(h, h, h, tgt_mask)", "self.self_attn(h, h, h, memory_mask)"),
        why="self-attention gets memory_mask",
        cause="the self-attention gets memory_mask",
    ),
    bug(
        "decoder_normalises_memory",
        "DecoderLayer",
        (
            "self.cross_attn(h, memory, memory, memory_mask)",
            "self.cross_attn(h, self.norm2(memory), self.norm2(memory), memory_mask)",
        ),
        why="pre-norm applies norm2 to memory too",
        cause="memory is never normalised",
    ),
    bug(
        "decoder_ignores_norm_first",
        "DecoderLayer",
        ("if self.norm_first:", "if False:"),
        why="always post-norm",
        cause="norm_first=True is ignored",
    ),
    bug(
        "decoder_no_cross_residual",
        "DecoderLayer",
        ("x = self.norm2(x + self.dropout2(", "x = self.norm2(self.dropout2("),
        ("x = x + self.dropout2(self.cross_attn(h", "x = self.dropout2(self.cross_attn(h"),
        why="the cross-attention's output replaces x",
        cause="the cross-attention block has no residual connection",
    ),
    bug(
        "decoder_attention_norms_swapped",
        "DecoderLayer",
        ("x = self.norm1(x + self.dropout1(", "x = self.NORM(x + self.dropout1("),
        ("x = self.norm2(x + self.dropout2(", "x = self.norm1(x + self.dropout2("),
        ("h = self.norm1(x)", "h = self.NORM(x)"),
        ("h = self.norm2(x)", "h = self.norm1(x)"),
        ("self.NORM", "self.norm2"),
        why="norm2 after the self-attention, norm1 after the cross",
        cause="the layer norms of the two attention blocks are swapped",
    ),
    bug(
        "decoder_one_norm_reused",
        "DecoderLayer",
        ("return self.norm3(x + self.dropout3(", "return self.norm2(x + self.dropout3("),
        ("self.ff(self.norm3(x))", "self.ff(self.norm2(x))"),
        why="norm2 for the cross-attention and the feed-forward",
        cause="one layer norm serves two blocks",
    ),
    bug(
        "decoder_layer_norm_without_parameters",
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
        why="F.layer_norm without the norms' weight and bias",
        cause="without its learned weight and bias",
    ),
    bug(
        "decoder_dropout_on_the_sum",
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
        why="dropout on x + block(x) instead of on block(x)",
        cause="dropout acts on the residual sum",
    ),
    bug(
        "decoder_no_dropout",
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
        why="builds dropout1 to dropout3 and never uses them",
        cause="the blocks' outputs are added without dropout",
    ),
    bug(
        "decoder_dropout_always_on",
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
        why="F.dropout without training=self.training",
        cause="dropout stays on in eval mode",
    ),
    # ------------------------------------------------------------------ Transformer
    bug(
        "transformer_no_look_ahead",
        "Transformer",
        ("x = layer(x, memory, tgt_mask, memory_mask)", "x = layer(x, memory, None, memory_mask)"),
        why="decode forgets tgt_mask",
        cause="tgt_mask does not reach the decoder's self-attention",
        only="test_transformer_causal",
    ),
    padding_bug(
        "transformer_encoder_sees_padding",
        "Transformer",
        ("x = layer(x, mask)", "x = layer(x)"),
        why="encode forgets src_mask",
        cause="src_mask does not reach the encoder's self-attention",
    ),
    padding_bug(
        "transformer_cross_sees_padding",
        "Transformer",
        ("self.encode(src, src_mask), tgt_mask, src_mask)", "self.encode(src, src_mask), tgt_mask)"),
        why="forward does not pass src_mask to decode",
        cause="does not reach the cross-attention as the memory mask",
    ),
    padding_bug(
        "transformer_decode_drops_memory_mask",
        "Transformer",
        ("x = layer(x, memory, tgt_mask, memory_mask)", "x = layer(x, memory, tgt_mask)"),
        why="decode does not give the layers memory_mask",
        cause="does not reach the cross-attention as the memory mask",
    ),
    bug(
        "transformer_returns_features",
        "Transformer",
        ("return self.generator(x)", "return x"),
        why="no output layer",
        cause="it must end with the output layer",
    ),
    bug(
        "transformer_ignores_target",
        "Transformer",
        ("self.tgt_embedding(tgt_in)", "self.tgt_embedding(torch.zeros_like(tgt_in))"),
        why="decodes from zeros",
        cause="the logits do not depend on the target tokens",
    ),
    bug(
        "transformer_no_positional_encoding",
        "Transformer",
        ("x = self.positions(self.src_embedding(src) * self.scale)", "x = self.src_embedding(src) * self.scale"),
        (
            "x = self.positions(self.tgt_embedding(tgt_in) * self.scale)",
            "x = self.tgt_embedding(tgt_in) * self.scale",
        ),
        why="builds the positional encoding and never adds it",
        cause="the positional encoding is not added",
    ),
    bug(
        "transformer_no_scaling",
        "Transformer",
        (" * self.scale)", ")"),
        why="embeddings not multiplied by sqrt(d_model)",
        cause="not multiplied by √d_model",
    ),
    bug(
        "transformer_scales_after_positions",
        "Transformer",
        (
            "self.positions(self.src_embedding(src) * self.scale)",
            "self.positions(self.src_embedding(src)) * self.scale",
        ),
        (
            "self.positions(self.tgt_embedding(tgt_in) * self.scale)",
            "self.positions(self.tgt_embedding(tgt_in)) * self.scale",
        ),
        why="sqrt(d_model) times (embedding + PE)",
        cause="scales the embeddings alone",
    ),
    bug(
        "transformer_encoder_output_discarded",
        "Transformer",
        ("x = layer(x, mask)", "layer(x, mask)"),
        why="encode runs the layers and returns the embeddings",
        cause="the memory is not the encoder layers' output",
    ),
    bug(
        "transformer_encoder_layers_read_embeddings",
        "Transformer",
        ("x = layer(x, mask)\n        return x", "y = layer(x, mask)\n        return y"),
        why="every encoder layer gets the embeddings",
        cause="every encoder layer reads the embeddings",
    ),
    bug(
        "transformer_decoder_layers_read_embeddings",
        "Transformer",
        (
            "x = layer(x, memory, tgt_mask, memory_mask)\n        return self.generator(x)",
            "y = layer(x, memory, tgt_mask, memory_mask)\n        return self.generator(y)",
        ),
        why="every decoder layer gets the embeddings",
        cause="every decoder layer reads the embeddings",
    ),
    bug(
        "transformer_returns_probabilities",
        "Transformer",
        ("return self.generator(x)", "return torch.softmax(self.generator(x), dim=-1)"),
        why="a softmax after the output layer",
        cause="decode returns probabilities",
    ),
    bug(
        "transformer_no_layers",
        "Transformer",
        ("        for layer in self.encoder_layers:\n            x = layer(x, mask)\n", ""),
        (
            "        for layer in self.decoder_layers:\n            x = layer(x, memory, tgt_mask, memory_mask)\n",
            "",
        ),
        why="builds the layers and never runs them",
        cause="the memory is not the encoder layers' output",
    ),
    # ------------------------------------------------------------------ greedy_decode
    bug(
        "greedy_keeps_bos",
        "greedy_decode",
        ("return ys[:, 1:]", "return ys"),
        why="returns the leading bos_id",
        cause="the result starts with bos_id",
    ),
    bug(
        "greedy_samples",
        "greedy_decode",
        (
            "next_token = logits[:, -1].argmax(dim=-1).masked_fill(finished, eos_id)",
            "probs = torch.softmax(logits[:, -1], dim=-1)\n"
            "        next_token = torch.multinomial(probs, num_samples=1).squeeze(-1).masked_fill(finished, eos_id)",
        ),
        why="draws each next token from the softmax instead of taking the argmax",
        cause="the next token is drawn from the softmax (sampling)",
    ),
    bug(
        "greedy_first_position",
        "greedy_decode",
        ("logits[:, -1]", "logits[:, 0]"),
        why="argmax at position 0 instead of the last",
        cause="the next token is read at the first position",
    ),
    bug(
        "greedy_never_stops_early",
        "greedy_decode",
        ("        if finished.all():\n            break\n", ""),
        why="always runs max_len steps",
        cause="decoding goes on after every sequence has produced eos_id",
    ),
    bug(
        "greedy_stops_at_first_eos",
        "greedy_decode",
        ("if finished.all():", "if finished.any():"),
        why="stops when any sequence ends",
        cause="decoding stops when one sequence has produced eos_id",
    ),
    bug(
        "greedy_no_eos_fill",
        "greedy_decode",
        (".argmax(dim=-1).masked_fill(finished, eos_id)", ".argmax(dim=-1)"),
        why="keeps generating after a sequence's eos",
        cause="a finished sequence goes on with words",
    ),
    bug(
        "greedy_forgets_memory_mask",
        "greedy_decode",
        ("causal_mask(ys.size(1), device=src.device), src_mask)", "causal_mask(ys.size(1), device=src.device))"),
        why="decodes without the source padding mask",
        cause="src_mask does not reach model.decode",
    ),
    bug(
        "greedy_no_look_ahead",
        "greedy_decode",
        ("causal_mask(ys.size(1), device=src.device), src_mask)", "None, src_mask)"),
        why="decodes without a look-ahead mask",
        cause="model.decode gets no look-ahead mask",
    ),
    bug(
        "greedy_look_ahead_in_torch_convention",
        "greedy_decode",
        (
            "causal_mask(ys.size(1), device=src.device)",
            "torch.ones(ys.size(1), ys.size(1), dtype=torch.bool, device=src.device).triu(1)",
        ),
        why="True above the diagonal, as nn.Transformer's masks (True = may not attend)",
        cause="model.decode gets no look-ahead mask",
    ),
    bug(
        "greedy_fixed_bos",
        "greedy_decode",
        ("torch.full((src.size(0), 1), bos_id,", "torch.full((src.size(0), 1), 1,"),
        why="starts every sequence from token 1",
        cause="decoding starts from a fixed token instead of bos_id",
    ),
    bug(
        "greedy_fixed_eos",
        "greedy_decode",
        ("masked_fill(finished, eos_id)", "masked_fill(finished, 2)"),
        ("next_token == eos_id", "next_token == 2"),
        why="token 2 stands for eos_id",
        cause="a fixed token id stands for eos_id",
    ),
    bug(
        "greedy_counts_bos_in_max_len",
        "greedy_decode",
        ("for _ in range(max_len):", "while ys.size(1) < max_len:"),
        why="stops when the sequence with bos_id is max_len long",
        cause="the leading bos_id is counted in max_len",
    ),
    bug(
        "greedy_feeds_last_token_only",
        "greedy_decode",
        (
            "model.decode(ys, memory, causal_mask(ys.size(1), device=src.device), src_mask)",
            "model.decode(ys[:, -1:], memory, causal_mask(1, device=src.device), src_mask)",
        ),
        why="decodes the last token alone at each step",
        cause="model.decode sees only the last token",
    ),
    # ------------------------------------------------------------------ encoder_layer_parameters
    bug(
        "parameters_no_layer_norms",
        "encoder_layer_parameters",
        ("count = attention + feed_forward + norms", "count = attention + feed_forward"),
        why="counts the attention and the feed-forward network only",
        cause="the two layer norms are not counted",
    ),
    bug(
        "parameters_no_biases",
        "encoder_layer_parameters",
        (ATTENTION, "attention = 4 * d_model * d_model"),
        (FEED_FORWARD, "feed_forward = d_model * d_ff + d_ff * d_model"),
        why="counts the weight matrices of the linear layers only",
        cause="the biases of the linear layers are not counted",
    ),
    bug(
        "parameters_layer_norm_weight_only",
        "encoder_layer_parameters",
        ("norms = 2 * 2 * d_model", "norms = 2 * d_model"),
        why="counts d_model numbers per layer norm",
        cause="a layer norm holds a bias as well as a weight",
    ),
    bug(
        "parameters_three_projections",
        "encoder_layer_parameters",
        ("attention = 4 * (", "attention = 3 * ("),
        why="forgets the output projection W_o",
        cause="the output projection W_o is a layer too",
    ),
    bug(
        "parameters_projections_per_head",
        "encoder_layer_parameters",
        ("attention = 4 * (", "attention = 4 * num_heads * ("),
        why="counts d_model x d_model projections for every head",
        cause="the heads share the four projections",
    ),
    # ------------------------------------------------------------------ cross_attention_weights_shape
    bug(
        "cross_shape_swapped",
        "cross_attention_weights_shape",
        (SHAPE, "(batch_size, num_heads, src_len, tgt_len)"),
        why="one row per key and one column per query",
        cause="queries and keys are swapped",
    ),
    bug(
        "cross_shape_self_attention",
        "cross_attention_weights_shape",
        (SHAPE, "(batch_size, num_heads, tgt_len, tgt_len)"),
        why="the shape of the decoder's self-attention",
        cause="that is the shape of the decoder's self-attention",
    ),
    bug(
        "cross_shape_no_heads",
        "cross_attention_weights_shape",
        (SHAPE, "(batch_size, tgt_len, src_len)"),
        why="forgets the dimension of the heads",
        cause="every head has its own weights",
    ),
    bug(
        "cross_shape_no_batch",
        "cross_attention_weights_shape",
        (SHAPE, "(num_heads, tgt_len, src_len)"),
        why="forgets the dimension of the batch",
        cause="every pair of the batch has its own weights",
    ),
    bug(
        "cross_shape_as_list",
        "cross_attention_weights_shape",
        ("return shape", "return list(shape)"),
        why="returns a list, not a tuple",
        cause="a tuple of Python ints",
    ),
]

# Found by the second review of the grader: answers that the grader used to pass, or that cost points
# in other items than their own.
BUGS += [
    bug(
        "ff_fixed_dropout",
        "FeedForward",
        ("self.dropout = nn.Dropout(dropout)", "self.dropout = nn.Dropout(0.1)"),
        why="a dropout probability written into the code",
        cause="the dropout's probability is fixed",
    ),
    bug(
        "enc_ff_without_dropout",
        "EncoderLayer",
        ("self.ff = FeedForward(d_model, d_ff, dropout)", "self.ff = FeedForward(d_model, d_ff)"),
        why="the feed-forward network built without the layer's dropout",
        cause="built without the layer's dropout",
    ),
    bug(
        "dec_ff_without_dropout",
        "DecoderLayer",
        ("self.ff = FeedForward(d_model, d_ff, dropout)", "self.ff = FeedForward(d_model, d_ff)"),
        why="the feed-forward network built without the layer's dropout",
        cause="built without the layer's dropout",
    ),
    bug(
        "dec_shared_attention",
        "DecoderLayer",
        ("self.cross_attn = MultiHeadAttention(d_model, num_heads)", "self.cross_attn = self.self_attn"),
        why="one MultiHeadAttention for self-attention and cross-attention",
        cause="are one module",
    ),
    bug(
        "transformer_shared_encoder_layer",
        "Transformer",
        (
            "nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))",
            "nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)] * num_layers)",
        ),
        why="one encoder layer object repeated, so the layers share their weights",
        cause="one encoder layer object is repeated",
    ),
    bug(
        "transformer_shared_decoder_layer",
        "Transformer",
        (
            "nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))",
            "nn.ModuleList([DecoderLayer(d_model, num_heads, d_ff, dropout)] * num_layers)",
        ),
        why="one decoder layer object repeated, so the layers share their weights",
        cause="one decoder layer object is repeated",
    ),
    bug(
        "decode_makes_its_own_mask",
        "Transformer",
        (
            "x = layer(x, memory, tgt_mask, memory_mask)",
            "x = layer(x, memory, causal_mask(tgt_in.size(1), device=tgt_in.device), memory_mask)",
        ),
        why="decode ignores tgt_mask and always applies a look-ahead mask of its own",
        cause="a look-ahead mask of its own",
    ),
    # ------------------------------------------------------------------ decoded_positions
    bug(
        "positions_no_early_stop",
        "decoded_positions",
        (STEPS, "steps = max_len"),
        why="max_len steps always, as if decoding never stopped early",
        cause="stops as soon as every sequence has written eos_id",
    ),
    bug(
        "positions_first_to_finish",
        "decoded_positions",
        (STEPS, "steps = min(min(eos_steps), max_len)"),
        why="stops with the first sequence to finish",
        cause="it stops only once every sequence has finished",
    ),
    bug(
        "positions_one_per_step",
        "decoded_positions",
        ("total = steps * (steps + 1) // 2", "total = steps"),
        why="one position per step, as with a key/value cache",
        cause="each call decodes the whole output so far again",
    ),
    bug(
        "positions_no_max_len",
        "decoded_positions",
        (STEPS, "steps = max(eos_steps)"),
        why="forgets that max_len caps the steps",
        cause="stops after max_len steps",
    ),
    bug(
        "positions_without_bos",
        "decoded_positions",
        ("total = steps * (steps + 1) // 2", "total = sum(range(steps))"),
        why="counts the tokens generated before each step, bos_id left out: 0 + 1 + ... + (steps - 1)",
        cause="bos_id is one of the positions decoded",
    ),
    # ------------------------------------------------------------------ normalised_output
    bug(
        "normalised_pre_norm",
        "normalised_output",
        ('"EncoderLayer, pre-norm": False', '"EncoderLayer, pre-norm": True'),
        why="a pre-norm encoder layer is said to normalise its output",
        cause="a pre-norm layer normalises the input of each block, not its output",
    ),
    bug(
        "normalised_post_norm",
        "normalised_output",
        ('"EncoderLayer, post-norm": True', '"EncoderLayer, post-norm": False'),
        why="a post-norm encoder layer is said not to normalise its output",
        cause="a post-norm layer ends with a layer norm",
    ),
    bug(
        "normalised_pre_norm_decoder",
        "normalised_output",
        ('"DecoderLayer, pre-norm": False', '"DecoderLayer, pre-norm": True'),
        why="a pre-norm decoder layer is said to normalise its output",
        cause="a pre-norm decoder layer normalises the input of each of its three blocks",
    ),
    bug(
        "normalised_final_norm",
        "normalised_output",
        ('followed by one nn.LayerNorm": True', 'followed by one nn.LayerNorm": False'),
        why="the layer norm after a pre-norm stack is said not to normalise the output",
        cause="the layer norm after the stack is the last thing the model computes",
    ),
    bug(
        "normalised_string",
        "normalised_output",
        ('"EncoderLayer, post-norm": True', '"EncoderLayer, post-norm": "True"'),
        why="answers with the string 'True', not the truth value",
        cause="answer True or False",
    ),
]
