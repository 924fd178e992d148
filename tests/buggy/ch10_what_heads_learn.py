"""Wrong answers to ch10_what_heads_learn that students really write.

Each is the reference answer with one realistic mistake in it (``variant``); ``cause`` is what the hint of
a failing test of its item must name.
"""

from tests.buggy import Bug, variant

A = "ch10_what_heads_learn"

TESTS = {
    "previous_token_score": ["test_previous_token"],
    "prefix_matching_score": ["test_prefix_matching", "test_prefix_matching_errors"],
    "copying_score": ["test_copying"],
    "ablation_effects": ["test_ablation"],
    "split_prefix_score": ["test_split_prefix_score"],
    "after_ablating_previous": ["test_after_ablating_previous"],
}

PREVIOUS_MEAN = "to_previous.mean(dim=(0, -1))"
PREFIX_MEAN = "pattern[:, :, queries, keys].mean(dim=(0, -1))"
KEYS = "keys = queries - period + 1"
QUERIES = "queries = torch.arange(period, length)"
EIGENVALUES = "eigenvalues = torch.linalg.eigvals(ov)"
LOGITS = "logits = model(tokens)[:, period:-1]"
TARGETS = "tokens[:, period + 1 :]"
SPLIT = "score = sum(1 / k for k in range(1, repeats)) / (repeats - 1)"


def bug(item, why, cause, *replacements, name, only=""):
    return Bug(name, item, variant(A, item, *replacements), why, cause, only=only)


BUGS = [
    # ------------------------------------------------------------------ previous_token_score
    bug(
        "previous_token_score",
        "takes the diagonal above the main one: key i + 1, which a causal pattern never attends to",
        "just left of the diagonal",
        ("offset=-1", "offset=1"),
        name="previous_above_diagonal",
    ),
    bug(
        "previous_token_score",
        "takes the main diagonal: the weight on the query's own key",
        "not on the query's own key",
        ("offset=-1", "offset=0"),
        name="previous_own_token",
    ),
    bug(
        "previous_token_score",
        "averages over the batch and the heads: one score per query",
        "not over the heads",
        (PREVIOUS_MEAN, "to_previous.mean(dim=(0, 1))"),
        name="previous_mean_over_heads",
    ),
    bug(
        "previous_token_score",
        "divides by T: counts query 0, which has no previous position",
        "query 0 has no previous position",
        (PREVIOUS_MEAN, "to_previous.sum(dim=-1).mean(dim=0) / pattern.size(-1)"),
        name="previous_divided_by_length",
    ),
    bug(
        "previous_token_score",
        "sums the weights instead of averaging them",
        "divide the sum",
        (PREVIOUS_MEAN, "to_previous.sum(dim=(0, -1))"),
        name="previous_sum",
    ),
    # ------------------------------------------------------------------ prefix_matching_score
    bug(
        "prefix_matching_score",
        "scores attention to the earlier occurrence itself (a duplicate-token head), not to the token after it",
        "not to the earlier occurrence itself",
        (KEYS, "keys = queries - period"),
        name="prefix_duplicate_token",
    ),
    bug(
        "prefix_matching_score",
        "starts the queries one early, at the last token of the first occurrence",
        "start the queries at period",
        (QUERIES, "queries = torch.arange(period - 1, length)"),
        name="prefix_queries_one_early",
    ),
    bug(
        "prefix_matching_score",
        "averages over the batch and the heads",
        "not over the heads",
        (PREFIX_MEAN, "pattern[:, :, queries, keys].mean(dim=(0, 1))"),
        name="prefix_mean_over_heads",
    ),
    bug(
        "prefix_matching_score",
        "scores the previous token (key i - 1), as a previous-token head",
        "not i - 1",
        (KEYS, "keys = queries - 1"),
        name="prefix_previous_token",
    ),
    bug(
        "prefix_matching_score",
        "never checks the period: a period of T averages no query and returns nan",
        "names period",
        ("    if not 1 <= period <= length - 1:\n", "    if False:\n"),
        name="prefix_period_unchecked",
        only="test_prefix_matching_errors",
    ),
    bug(
        "prefix_matching_score",
        "lets a period of T through (<= length), which leaves no query",
        "names period",
        ("period <= length - 1", "period <= length"),
        name="prefix_period_of_length",
        only="test_prefix_matching_errors",
    ),
    # ------------------------------------------------------------------ copying_score
    bug(
        "copying_score",
        "uses the singular values, which are never negative: every matrix scores 1",
        "singular values are never negative",
        (EIGENVALUES, "eigenvalues = torch.linalg.svdvals(ov)"),
        name="copying_singular_values",
    ),
    bug(
        "copying_score",
        "uses eigvalsh, which reads one triangle of the matrix as if it were symmetric",
        "not symmetric",
        (EIGENVALUES, "eigenvalues = torch.linalg.eigvalsh(ov)"),
        name="copying_eigvalsh",
    ),
    bug(
        "copying_score",
        "divides by the sum of the real parts' absolute values, not of the eigenvalues'",
        "counts their imaginary parts",
        ("eigenvalues.abs().sum(dim=-1)", "eigenvalues.real.abs().sum(dim=-1)"),
        name="copying_real_abs",
    ),
    bug(
        "copying_score",
        "divides the trace by the sum of the singular values (the nuclear norm) instead of the eigenvalues'",
        "eigenvalues",
        (
            "score = eigenvalues.real.sum(dim=-1) / eigenvalues.abs().sum(dim=-1)",
            "score = eigenvalues.real.sum(dim=-1) / torch.linalg.svdvals(ov).sum(dim=-1)",
        ),
        name="copying_nuclear_norm",
    ),
    # ------------------------------------------------------------------ ablation_effects
    bug(
        "ablation_effects",
        "zeroes z[:, :, head]: a position of every head, not a head",
        "a head is its second dimension",
        ("z[:, head] = 0.0", "z[:, :, head] = 0.0"),
        name="ablation_position_axis",
    ),
    bug(
        "ablation_effects",
        "never removes its hooks: each head is measured with every head before it zeroed as well",
        "remove each hook",
        (
            "                finally:\n                    hook.remove()",
            "                finally:\n                    pass",
        ),
        name="ablation_hooks_left",
    ),
    bug(
        "ablation_effects",
        "measures the loss at every position, not on the repeat",
        "period .. T - 2 only",
        (LOGITS, "logits = model(tokens)[:, :-1]"),
        (TARGETS, "tokens[:, 1:]"),
        name="ablation_every_position",
    ),
    bug(
        "ablation_effects",
        "subtracts the other way: the intact loss minus the ablated one",
        "ablated loss minus the intact",
        ("repeat_loss() - clean", "clean - repeat_loss()"),
        name="ablation_sign",
    ),
    bug(
        "ablation_effects",
        "starts the repeat one position early, where the token has not occurred before",
        "has not occurred before",
        (LOGITS, "logits = model(tokens)[:, period - 1 : -1]"),
        (TARGETS, "tokens[:, period:]"),
        name="ablation_repeat_one_early",
    ),
    # ------------------------------------------------------------------ split_prefix_score
    bug(
        "split_prefix_score",
        "gives every copy the share of the last one: 1 / (repeats - 1)",
        "copy k splits the weight k ways",
        (SPLIT, "score = 1 / (repeats - 1)"),
        name="split_last_copy_only",
    ),
    bug(
        "split_prefix_score",
        "averages over all the copies, the first one too",
        "average over the repeats - 1",
        ("/ (repeats - 1)", "/ repeats"),
        name="split_over_every_copy",
    ),
    bug(
        "split_prefix_score",
        "answers 1: an induction head attends to the token after the earlier occurrence",
        "gives that key a share",
        (SPLIT, "score = 1.0"),
        name="split_always_one",
    ),
    # ------------------------------------------------------------------ after_ablating_previous
    bug(
        "after_ablating_previous",
        "expects the ablated head's own pattern to change",
        "its pattern is computed before its output",
        (
            '"the previous-token head\'s previous-token score": "unchanged"',
            '"the previous-token head\'s previous-token score": "falls"',
        ),
        name="after_own_pattern_falls",
    ),
    bug(
        "after_ablating_previous",
        "expects the induction head to keep attending where it did",
        "no key matches",
        (
            '"the induction head\'s prefix-matching score": "falls"',
            '"the induction head\'s prefix-matching score": "unchanged"',
        ),
        name="after_prefix_unchanged",
    ),
    bug(
        "after_ablating_previous",
        "expects the copying score, read off the weights, to fall",
        "an ablation does not touch",
        ('"the induction head\'s copying score": "unchanged"', '"the induction head\'s copying score": "falls"'),
        name="after_copying_falls",
    ),
]
