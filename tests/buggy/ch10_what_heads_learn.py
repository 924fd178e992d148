"""Wrong answers to ch10_what_heads_learn that students really write.

The scores of previous-token, induction and copying heads, what ablating them does, and path patching.
"""

from tests.buggy import wrong_answers

A = "ch10_what_heads_learn"

bug = wrong_answers(A)

PREVIOUS_MEAN = "to_previous.mean(dim=(0, -1))"
PREFIX_MEAN = "pattern[:, :, queries, keys].mean(dim=(0, -1))"
KEYS = "keys = queries - period + 1"
QUERIES = "queries = torch.arange(period, length)"
EIGENVALUES = "eigenvalues = torch.linalg.eigvals(ov)"
LOGITS = "logits = model(tokens)[:, period:-1]"
TARGETS = "tokens[:, period + 1 :]"
SPLIT = "score = sum(1 / k for k in range(1, repeats)) / (repeats - 1)"
RECEIVER_HOOK = "getattr(model.layers[receiver], inputs[path]).register_forward_hook(remove_output),"
SENT = 'sent["output"] = torch.einsum("bhte,hed->btd", z[:, heads], model.layers[layer].W_O[heads])'
REMOVED = 'return x - sent["output"]'

TESTS = {
    "previous_token_score": ["test_previous_token"],
    "prefix_matching_score": ["test_prefix_matching", "test_prefix_matching_errors"],
    "copying_score": ["test_copying"],
    "ablation_effects": ["test_ablation"],
    "path_patch": ["test_path_patch", "test_path_patch_errors"],
    "split_prefix_score": ["test_split_prefix_score"],
    "after_ablating_previous": ["test_after_ablating_previous"],
}

BUGS = [
    # ------------------------------------------------------------------ previous_token_score
    bug(
        "previous_above_diagonal",
        "previous_token_score",
        ("offset=-1", "offset=1"),
        why="takes the diagonal above the main one: key i + 1, which a causal pattern never attends to",
        cause="just left of the diagonal",
    ),
    bug(
        "previous_own_token",
        "previous_token_score",
        ("offset=-1", "offset=0"),
        why="takes the main diagonal: the weight on the query's own key",
        cause="not on the query's own key",
    ),
    bug(
        "previous_mean_over_heads",
        "previous_token_score",
        (PREVIOUS_MEAN, "to_previous.mean(dim=(0, 1))"),
        why="averages over the batch and the heads: one score per query",
        cause="not over the heads",
    ),
    bug(
        "previous_divided_by_length",
        "previous_token_score",
        (PREVIOUS_MEAN, "to_previous.sum(dim=-1).mean(dim=0) / pattern.size(-1)"),
        why="divides by T: counts query 0, which has no previous position",
        cause="query 0 has no previous position",
    ),
    bug(
        "previous_sum",
        "previous_token_score",
        (PREVIOUS_MEAN, "to_previous.sum(dim=(0, -1))"),
        why="sums the weights instead of averaging them",
        cause="divide the sum",
    ),
    # ------------------------------------------------------------------ prefix_matching_score
    bug(
        "prefix_duplicate_token",
        "prefix_matching_score",
        (KEYS, "keys = queries - period"),
        why="scores attention to the earlier occurrence itself (a duplicate-token head), not to the token after it",
        cause="not to the earlier occurrence itself",
    ),
    bug(
        "prefix_queries_one_early",
        "prefix_matching_score",
        (QUERIES, "queries = torch.arange(period - 1, length)"),
        why="starts the queries one early, at the last token of the first occurrence",
        cause="start the queries at period",
    ),
    bug(
        "prefix_mean_over_heads",
        "prefix_matching_score",
        (PREFIX_MEAN, "pattern[:, :, queries, keys].mean(dim=(0, 1))"),
        why="averages over the batch and the heads",
        cause="not over the heads",
    ),
    bug(
        "prefix_previous_token",
        "prefix_matching_score",
        (KEYS, "keys = queries - 1"),
        why="scores the previous token (key i - 1), as a previous-token head",
        cause="not i - 1",
    ),
    bug(
        "prefix_period_unchecked",
        "prefix_matching_score",
        ("    if not 1 <= period <= length - 1:\n", "    if False:\n"),
        why="never checks the period: a period of T averages no query and returns nan",
        cause="names period",
        only="test_prefix_matching_errors",
    ),
    bug(
        "prefix_period_of_length",
        "prefix_matching_score",
        ("period <= length - 1", "period <= length"),
        why="lets a period of T through (<= length), which leaves no query",
        cause="names period",
        only="test_prefix_matching_errors",
    ),
    # ------------------------------------------------------------------ copying_score
    bug(
        "copying_singular_values",
        "copying_score",
        (EIGENVALUES, "eigenvalues = torch.linalg.svdvals(ov)"),
        why="uses the singular values, which are never negative: every matrix scores 1",
        cause="singular values are never negative",
    ),
    bug(
        "copying_eigvalsh",
        "copying_score",
        (EIGENVALUES, "eigenvalues = torch.linalg.eigvalsh(ov)"),
        why="uses eigvalsh, which reads one triangle of the matrix as if it were symmetric",
        cause="not symmetric",
    ),
    bug(
        "copying_real_abs",
        "copying_score",
        ("eigenvalues.abs().sum(dim=-1)", "eigenvalues.real.abs().sum(dim=-1)"),
        why="divides by the sum of the real parts' absolute values, not of the eigenvalues'",
        cause="counts their imaginary parts",
    ),
    bug(
        "copying_nuclear_norm",
        "copying_score",
        (
            "score = eigenvalues.real.sum(dim=-1) / eigenvalues.abs().sum(dim=-1)",
            "score = eigenvalues.real.sum(dim=-1) / torch.linalg.svdvals(ov).sum(dim=-1)",
        ),
        why="divides the trace by the sum of the singular values (the nuclear norm) instead of the eigenvalues'",
        cause="eigenvalues",
    ),
    # ------------------------------------------------------------------ ablation_effects
    bug(
        "ablation_position_axis",
        "ablation_effects",
        ("z[:, head] = 0.0", "z[:, :, head] = 0.0"),
        why="zeroes z[:, :, head]: a position of every head, not a head",
        cause="a head is its second dimension",
    ),
    bug(
        "ablation_hooks_left",
        "ablation_effects",
        (
            "                finally:\n                    hook.remove()",
            "                finally:\n                    pass",
        ),
        why="never removes its hooks: each head is measured with every head before it zeroed as well",
        cause="remove each hook",
    ),
    bug(
        "ablation_every_position",
        "ablation_effects",
        (LOGITS, "logits = model(tokens)[:, :-1]"),
        (TARGETS, "tokens[:, 1:]"),
        why="measures the loss at every position, not on the repeat",
        cause="period .. T - 2 only",
    ),
    bug(
        "ablation_sign",
        "ablation_effects",
        ("repeat_loss() - clean", "clean - repeat_loss()"),
        why="subtracts the other way: the intact loss minus the ablated one",
        cause="ablated loss minus the intact",
    ),
    bug(
        "ablation_repeat_one_early",
        "ablation_effects",
        (LOGITS, "logits = model(tokens)[:, period - 1 : -1]"),
        (TARGETS, "tokens[:, period:]"),
        why="starts the repeat one position early, where the token has not occurred before",
        cause="has not occurred before",
    ),
    # ------------------------------------------------------------------ path_patch
    bug(
        "path_all_inputs",
        "path_patch",
        (
            RECEIVER_HOOK,
            "*(getattr(model.layers[receiver], name).register_forward_hook(remove_output) for name in inputs.values()),",
        ),
        why="removes the senders from the receiver's queries, keys and values together: every path into it",
        cause="not one path",
    ),
    bug(
        "path_zeroed_everywhere",
        "path_patch",
        (SENT, 'z = z.clone()\n        z[:, heads] = 0.0\n        sent["output"] = 0.0\n        return z'),
        why="zeroes the senders' z, as in Part 4: their output leaves the residual stream for every reader",
        cause="one input",  # on the model built by hand, the same values as patching every input of the receiver
    ),
    bug(
        "path_receiver_w_o",
        "path_patch",
        ("model.layers[layer].W_O[heads]", "model.layers[receiver].W_O[heads]"),
        why="puts the senders' z through the receiver layer's W_O",
        cause="their own layer's W_O",
    ),
    bug(
        "path_mean_ablation",
        "path_patch",
        (REMOVED, 'return x - sent["output"] + sent["output"].mean(dim=0)'),
        why="replaces the senders' output by its mean over the batch (mean ablation) instead of removing it",
        cause="mean ablation",
    ),
    bug(
        "path_first_head_only",
        "path_patch",
        ("heads = list(heads)", "heads = list(heads)[:1]"),
        why="reads sender as one head: removes only the first of the heads it lists",
        cause="every head it lists",
    ),
    bug(
        "path_whole_layer",
        "path_patch",
        ("z[:, heads], model.layers[layer].W_O[heads]", "z, model.layers[layer].W_O"),
        why="removes the output of every head of the sender's layer, not the heads listed",
        cause="not every head of its layer",
    ),
    bug(
        "path_every_position",
        "path_patch",
        ("logits = model(tokens)[:, period:-1]", "logits = model(tokens)[:, :-1]"),
        ("tokens[:, period + 1 :]", "tokens[:, 1:]"),
        why="measures the loss at every position, not on the repeat",
        cause="period .. T - 2 only",
    ),
    bug(
        "path_in_place",
        "path_patch",
        (REMOVED, 'x -= sent["output"]'),
        why="subtracts in place in the hook: the identity's output is the layer's input itself, so the queries, "
        "the values and the residual stream lose the senders too",
        cause="one input",  # the same values as zeroing the senders, or as patching every input of the receiver
    ),
    bug(
        "path_unchecked",
        "path_patch",
        ("    if path not in inputs:\n", "    if False:\n"),
        why="never checks the path: an unknown one is a KeyError, not a ValueError that names path",
        cause="names the argument",
        only="test_path_patch_errors",
    ),
    bug(
        "path_receiver_unchecked",
        "path_patch",
        ("    if not layer < receiver < len(model.layers):\n", "    if False:\n"),
        why="never checks the receiver: the sender's own layer or an earlier one fails with a KeyError",
        cause="names the argument",
        only="test_path_patch_errors",
    ),
    # ------------------------------------------------------------------ split_prefix_score
    bug(
        "split_last_copy_only",
        "split_prefix_score",
        (SPLIT, "score = 1 / (repeats - 1)"),
        why="gives every copy the share of the last one: 1 / (repeats - 1)",
        cause="copy k splits the weight k ways",
    ),
    bug(
        "split_over_every_copy",
        "split_prefix_score",
        ("/ (repeats - 1)", "/ repeats"),
        why="averages over all the copies, the first one too",
        cause="average over the repeats - 1",
    ),
    bug(
        "split_always_one",
        "split_prefix_score",
        (SPLIT, "score = 1.0"),
        why="answers 1: an induction head attends to the token after the earlier occurrence",
        cause="gives that key a share",
    ),
    # ------------------------------------------------------------------ after_ablating_previous
    bug(
        "after_own_pattern_falls",
        "after_ablating_previous",
        (
            '"the previous-token head\'s previous-token score": "unchanged"',
            '"the previous-token head\'s previous-token score": "falls"',
        ),
        why="expects the ablated head's own pattern to change",
        cause="its pattern is computed before its output",
    ),
    bug(
        "after_prefix_unchanged",
        "after_ablating_previous",
        (
            '"the induction head\'s prefix-matching score": "falls"',
            '"the induction head\'s prefix-matching score": "unchanged"',
        ),
        why="expects the induction head to keep attending where it did",
        cause="no key matches",
    ),
    bug(
        "after_copying_falls",
        "after_ablating_previous",
        ('"the induction head\'s copying score": "unchanged"', '"the induction head\'s copying score": "falls"'),
        why="expects the copying score, read off the weights, to fall",
        cause="an ablation does not touch",
    ),
]
