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
    "activation_memory_bytes": [
        "test_activation_memory",
        "test_activation_checkpointing",
        "test_activation_memory_errors",
    ],
    "accumulation_steps": ["test_accumulation_steps", "test_accumulation_errors"],
    "zero_memory_per_gpu": ["test_zero_memory", "test_zero_memory_errors"],
    "compute_optimal": ["test_compute_optimal", "test_compute_optimal_errors"],
    "min_loss_scale": ["test_min_loss_scale"],
    "attention_share": ["test_attention_share"],
}

PASSES = "passes = 3 if training else 1"
ATTENTION = "attention = 4 * n_layers * d_model * context_len"
MFU = "tokens_per_second * flops_per_token / peak_flops"
PER_WEIGHT = "weight + gradient + 2 * moment"
SMALLEST = "smallest = 2.0**-24"
SHARE = "attention / (6 * n_params_non_embedding + attention)"
CHECKPOINTED = "values = positions * d_model  # the layer's input"
PER_MICRO_STEP = "micro_batch_size * seq_len * n_gpus"
STAGES = "[0, optimiser, optimiser + gradients, optimiser + gradients + weights]"
SQUARE = "(compute_flops / (6 * tokens_per_parameter)) ** 0.5"


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

BUGS += [
    # ------------------------------------------------------------------ activation_memory_bytes
    bug(
        "activation_memory_bytes",
        "leaves the attention weights out, as if the attention were fused",
        "the softmax keeps its weights",
        ("weights = num_heads * seq_len", "weights = 0"),
        name="activations_no_attention_weights",
    ),
    bug(
        "activation_memory_bytes",
        "counts the scores besides the weights: two (B, H, L, L) tensors",
        "the scores are not kept",
        ("weights = num_heads * seq_len", "weights = 2 * num_heads * seq_len"),
        name="activations_scores_and_weights",
    ),
    bug(
        "activation_memory_bytes",
        "counts the ReLU's input and its output",
        "needs only its output",
        ("feed_forward_block = 2 * d_model + d_ff", "feed_forward_block = 2 * d_model + 2 * d_ff"),
        name="activations_relu_input_and_output",
    ),
    bug(
        "activation_memory_bytes",
        "forgets the layer norms' mean and 1 / standard deviation",
        "mean and 1 / standard deviation",
        ("statistics = 4", "statistics = 0"),
        name="activations_no_norm_statistics",
    ),
    bug(
        "activation_memory_bytes",
        "ignores checkpointing: the full count either way",
        "its input alone",
        ("if checkpointing:", "if False:"),
        name="activations_ignore_checkpointing",
    ),
    bug(
        "activation_memory_bytes",
        "a checkpointed layer keeps nothing",
        "still keeps its input",
        (CHECKPOINTED, "values = 0  # the layer's input"),
        name="activations_checkpoint_keeps_nothing",
    ),
    bug(
        "activation_memory_bytes",
        "counts the memory in bits / 8: the right number of bytes as a float",
        "returns an int",
        ("total = values * bytes_per_value", "total = values * (8 * bytes_per_value) / 8"),
        name="activations_float_bytes",
    ),
    bug(
        "activation_memory_bytes",
        "checks no head count: 3 heads of a width of 16 counted as if they divided it",
        "does not divide d_model",
        ("    if num_heads < 1 or d_model % num_heads != 0:\n", "    if num_heads < 1:\n"),
        name="activations_no_heads_check",
    ),
    # ------------------------------------------------------------------ accumulation_steps
    bug(
        "accumulation_steps",
        "forgets the GPUs: the micro-batches of one GPU alone make the batch",
        "times n_gpus",
        (PER_MICRO_STEP, "micro_batch_size * seq_len"),
        name="accumulation_without_gpus",
    ),
    bug(
        "accumulation_steps",
        "counts the batch in sequences, not tokens",
        "counts tokens, not sequences",
        (PER_MICRO_STEP, "micro_batch_size * n_gpus"),
        name="accumulation_sequences",
    ),
    bug(
        "accumulation_steps",
        "rounds up a batch that no whole number of micro-batches makes",
        "rather than rounding",
        (
            "    if target_tokens <= 0 or target_tokens % tokens_per_micro_step != 0:",
            "    if target_tokens <= 0:",
        ),
        ("steps = target_tokens // tokens_per_micro_step", "steps = -(-target_tokens // tokens_per_micro_step)"),
        name="accumulation_rounds_up",
    ),
    bug(
        "accumulation_steps",
        "divides with /: the right count as a float",
        "returns an int",
        ("steps = target_tokens // tokens_per_micro_step", "steps = target_tokens / tokens_per_micro_step"),
        name="accumulation_float",
    ),
    bug(
        "accumulation_steps",
        "checks no GPU count: n_gpus=0 divides by zero",
        "names it",
        ('(("micro_batch_size", micro_batch_size), ("seq_len", seq_len), ("n_gpus", n_gpus))', "()"),
        name="accumulation_no_size_check",
    ),
    # ------------------------------------------------------------------ zero_memory_per_gpu
    bug(
        "zero_memory_per_gpu",
        "autocast's accounting: 4-byte weights and gradients, 8 bytes of moments as the optimiser state",
        "12 bytes a weight",
        ("weights, gradients, optimiser = 2, 2, 12", "weights, gradients, optimiser = 4, 4, 8"),
        name="zero_autocast_accounting",
    ),
    bug(
        "zero_memory_per_gpu",
        "rounds the shard down",
        "rounded up, not down",
        ("shard = -(-n_params // n_gpus)", "shard = n_params // n_gpus"),
        name="zero_shard_rounded_down",
    ),
    bug(
        "zero_memory_per_gpu",
        "stage 1 partitions the gradients too",
        "stage 1 partitions the optimiser state alone",
        (STAGES, "[0, optimiser + gradients, optimiser + gradients, optimiser + gradients + weights]"),
        name="zero_stage1_gradients",
    ),
    bug(
        "zero_memory_per_gpu",
        "stage 2 partitions the weights too",
        "only stage 3 partitions the weights",
        (STAGES, "[0, optimiser, optimiser + gradients + weights, optimiser + gradients + weights]"),
        name="zero_stage2_weights",
    ),
    bug(
        "zero_memory_per_gpu",
        "divides by n_gpus with /: a float",
        "returns an int",
        ("shard = -(-n_params // n_gpus)", "shard = n_params / n_gpus"),
        name="zero_float_shard",
    ),
    bug(
        "zero_memory_per_gpu",
        "checks no stage: stage 4 is an IndexError",
        "a valueerror naming stage",
        ("    if stage not in (0, 1, 2, 3):\n", "    if False:\n"),
        name="zero_no_stage_check",
    ),
    # ------------------------------------------------------------------ compute_optimal
    bug(
        "compute_optimal",
        "C = N D: no FLOPs per parameter and token",
        "not n d",
        ("compute_flops / (6 * tokens_per_parameter)", "compute_flops / tokens_per_parameter"),
        name="optimal_no_six",
    ),
    bug(
        "compute_optimal",
        "C = 2 N D: the forward pass alone",
        "not the forward pass's 2",
        ("compute_flops / (6 * tokens_per_parameter)", "compute_flops / (2 * tokens_per_parameter)"),
        name="optimal_forward_only",
    ),
    bug(
        "compute_optimal",
        "20 parameters per token",
        "20 times fewer parameters than training tokens",
        ("compute_flops / (6 * tokens_per_parameter)", "compute_flops * tokens_per_parameter / 6"),
        ("n_tokens = tokens_per_parameter * n_params", "n_tokens = n_params / tokens_per_parameter"),
        name="optimal_inverted_ratio",
    ),
    bug(
        "compute_optimal",
        "no square root",
        "take the square root",
        (SQUARE, "compute_flops / (6 * tokens_per_parameter)"),
        name="optimal_no_square_root",
    ),
    bug(
        "compute_optimal",
        "returns (n_tokens, n_params)",
        "return (n_params, n_tokens), in that order",
        ("return n_params, n_tokens", "return n_tokens, n_params"),
        name="optimal_swapped",
    ),
    bug(
        "compute_optimal",
        "checks no budget: a budget of 0 gives a model of no parameters",
        "names compute_flops",
        ("    if compute_flops <= 0:\n", "    if False:\n"),
        name="optimal_no_budget_check",
    ),
]
