"""Wrong answers to ch08_training_fast that students really write.

Each is the reference answer with one realistic mistake in it (``variant``); ``cause`` is what the hint of
a failing test of its item must name.
"""

from tests.buggy import Bug, variant

A = "ch08_training_fast"

TESTS = {
    "flops_per_token": ["test_flops_training", "test_flops_forward"],
    "mfu": ["test_mfu", "test_mfu_errors"],
    "training_memory_bytes": ["test_memory", "test_memory_errors"],
    "min_loss_scale": ["test_min_loss_scale"],
    "attention_share": ["test_attention_share"],
}

PASSES = "passes = 3 if training else 1"
ATTENTION = "attention = 4 * n_layers * d_model * context_len"
MFU = "tokens_per_second * flops_per_token / peak_flops"
PER_WEIGHT = "weight + gradient + 2 * moment"
SMALLEST = "smallest = 2.0**-24"
SHARE = "attention / (6 * n_params_non_embedding + attention)"


def bug(item, why, cause, *replacements, name):
    return Bug(name, item, variant(A, item, *replacements), why, cause)


BUGS = [
    # ------------------------------------------------------------------ flops_per_token
    bug(
        "flops_per_token",
        "counts the backward pass once: 4N to train",
        "3 times the forward flops",
        (PASSES, "passes = 2 if training else 1"),
        name="flops_backward_as_forward",
    ),
    bug(
        "flops_per_token",
        "counts one of attention's two products",
        "two products per layer",
        (ATTENTION, ATTENTION.replace("4 *", "2 *")),
        name="flops_one_attention_product",
    ),
    bug(
        "flops_per_token",
        "counts attention in one layer",
        "paid in every layer",
        (ATTENTION, ATTENTION.replace("n_layers * ", "")),
        name="flops_attention_one_layer",
    ),
    bug(
        "flops_per_token",
        "leaves attention out: 6N only",
        "add the attention term",
        ("flops = passes * (weights + attention)", "flops = passes * weights"),
        name="flops_without_attention",
    ),
    bug(
        "flops_per_token",
        "ignores training=False: always the training count",
        "the forward pass alone",
        (PASSES, "passes = 3"),
        name="flops_ignores_training",
    ),
    bug(
        "flops_per_token",
        "gets the forward count as a third of the training count, with /: the right number as a float",
        "returns an int",
        (
            "    passes = 3 if training else 1  # the backward pass costs twice the forward\n"
            "    flops = passes * (weights + attention)\n",
            "    flops = 3 * (weights + attention)\n    if not training:\n        flops = flops / 3\n",
        ),
        name="flops_forward_divided",
    ),
    # ------------------------------------------------------------------ mfu
    bug(
        "mfu",
        "forgets the FLOPs per token",
        "times the flops of each token",
        (MFU, "tokens_per_second / peak_flops"),
        name="mfu_tokens_over_peak",
    ),
    bug("mfu", "a percentage", "not a percentage", (MFU, "100 * " + MFU), name="mfu_percentage"),
    bug(
        "mfu",
        "the peak over the achieved FLOP/s",
        "not the peak over them",
        (MFU, "peak_flops / (tokens_per_second * flops_per_token)"),
        name="mfu_inverted",
    ),
    bug(
        "mfu",
        "refuses a peak of 0 only",
        "a negative peak must be refused too",
        ("peak_flops <= 0", "peak_flops == 0"),
        name="mfu_zero_peak_only",
    ),
    bug(
        "mfu",
        "checks nothing: a peak of 0 divides by zero",
        "raise a valueerror whose message names peak_flops",
        ("    if peak_flops <= 0:\n", "    if False:\n"),
        name="mfu_no_check",
    ),
    # ------------------------------------------------------------------ training_memory_bytes
    bug(
        "training_memory_bytes",
        "counts one AdamW moment",
        "two moments",
        (PER_WEIGHT, "weight + gradient + moment"),
        name="memory_one_moment",
    ),
    bug(
        "training_memory_bytes",
        "leaves the gradients out",
        "its gradient",
        (PER_WEIGHT, "weight + 2 * moment"),
        name="memory_no_gradients",
    ),
    bug(
        "training_memory_bytes",
        "mixed precision with 16-bit weights and gradients",
        "halves the activations, not the weights",
        ('"mixed": (4, 4, 4)', '"mixed": (2, 2, 4)'),
        name="memory_mixed_halves_weights",
    ),
    bug(
        "training_memory_bytes",
        "a bfloat16 model with float32 AdamW moments",
        "adamw moments in bfloat16 too",
        ('"bf16": (2, 2, 2)', '"bf16": (2, 2, 4)'),
        name="memory_bf16_float32_moments",
    ),
    bug(
        "training_memory_bytes",
        "checks no precision: an unknown one is a KeyError",
        "a valueerror whose message names precision",
        ("    if precision not in sizes:\n", "    if False:\n"),
        name="memory_no_precision_check",
    ),
    bug(
        "training_memory_bytes",
        "reads each precision's bytes as its bits / 8: the right number of bytes as a float",
        "returns an int",
        (
            '{"fp32": (4, 4, 4), "bf16": (2, 2, 2), "mixed": (4, 4, 4)}',
            '{"fp32": (32 / 8,) * 3, "bf16": (16 / 8,) * 3, "mixed": (32 / 8,) * 3}',
        ),
        name="memory_bits_over_eight",
    ),
    # ------------------------------------------------------------------ min_loss_scale
    bug(
        "min_loss_scale",
        "float16's smallest normal number, torch.finfo's tiny",
        "smallest normal number",
        (SMALLEST, "smallest = 2.0**-14"),
        name="scale_smallest_normal",
    ),
    bug(
        "min_loss_scale",
        "rounds the power of two down",
        "round the power of two up",
        ("while gradient * scale < smallest:", "while gradient * scale * 2 < smallest:"),
        name="scale_rounded_down",
    ),
    bug(
        "min_loss_scale",
        "float16's machine epsilon, torch.finfo's eps, as the smallest number",
        "finfo(torch.float16).eps",
        (SMALLEST, "smallest = 2.0**-10"),
        name="scale_epsilon",
    ),
    bug(
        "min_loss_scale",
        "2 to the ceiling of log2(smallest / gradient): below 1 for a gradient that needs no scaling",
        "never a fraction",
        (
            "    scale = 1.0\n    while gradient * scale < smallest:\n        scale *= 2\n",
            "    exponent = math.ceil(math.log2(smallest / gradient))\n    scale = 2.0**exponent\n",
        ),
        name="scale_not_floored_at_one",
    ),
    bug(
        "min_loss_scale",
        "doubles while the product is at most the smallest number: one doubling too many at equality",
        "at least, not more than",
        ("while gradient * scale < smallest:", "while not gradient * scale > smallest:"),
        name="scale_strict_at_least",
    ),
    # ------------------------------------------------------------------ attention_share
    bug(
        "attention_share",
        "attention over the weights' FLOPs, not over the whole step",
        "of the whole step",
        (SHARE, "attention / (6 * n_params_non_embedding)"),
        name="share_over_weights",
    ),
    bug(
        "attention_share",
        "attention in one layer",
        "paid in every layer",
        ("attention = 12 * n_layers * d_model", "attention = 12 * d_model"),
        name="share_one_layer",
    ),
    bug(
        "attention_share",
        "attention counted for the forward pass beside the weights counted for training",
        "count both terms for training",
        ("attention = 12 * n_layers", "attention = 4 * n_layers"),
        name="share_forward_attention",
    ),
]
