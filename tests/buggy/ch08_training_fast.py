"""Wrong answers to ch08_training_fast that students really write.

The arithmetic of FLOPs, utilisation, memory, activations, accumulation, ZeRO sharding, compute-optimal sizes,
loss scaling and attention's share.
"""

from tests.buggy import wrong_answers

A = "ch08_training_fast"

bug = wrong_answers(A)

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

BUGS = [
    # ------------------------------------------------------------------ flops_per_token
    bug(
        "flops_backward_as_forward",
        "flops_per_token",
        (PASSES, "passes = 2 if training else 1"),
        why="counts the backward pass once: 4N to train",
        cause="3 times the forward flops",
    ),
    bug(
        "flops_one_attention_product",
        "flops_per_token",
        (ATTENTION, ATTENTION.replace("4 *", "2 *")),
        why="counts one of attention's two products",
        cause="two products per layer",
    ),
    bug(
        "flops_attention_one_layer",
        "flops_per_token",
        (ATTENTION, ATTENTION.replace("n_layers * ", "")),
        why="counts attention in one layer",
        cause="paid in every layer",
    ),
    bug(
        "flops_without_attention",
        "flops_per_token",
        ("flops = passes * (weights + attention)", "flops = passes * weights"),
        why="leaves attention out: 6N only",
        cause="add the attention term",
    ),
    bug(
        "flops_ignores_training",
        "flops_per_token",
        (PASSES, "passes = 3"),
        why="ignores training=False: always the training count",
        cause="the forward pass alone",
    ),
    bug(
        "flops_forward_divided",
        "flops_per_token",
        (
            "    passes = 3 if training else 1  # the backward pass costs twice the forward\n"
            "    flops = passes * (weights + attention)\n",
            "    flops = 3 * (weights + attention)\n    if not training:\n        flops = flops / 3\n",
        ),
        why="gets the forward count as a third of the training count, with /: the right number as a float",
        cause="returns an int",
    ),
    # ------------------------------------------------------------------ mfu
    bug(
        "mfu_tokens_over_peak",
        "mfu",
        (MFU, "tokens_per_second / peak_flops"),
        why="forgets the FLOPs per token",
        cause="times the flops of each token",
    ),
    bug("mfu_percentage", "mfu", (MFU, "100 * " + MFU), why="a percentage", cause="not a percentage"),
    bug(
        "mfu_inverted",
        "mfu",
        (MFU, "peak_flops / (tokens_per_second * flops_per_token)"),
        why="the peak over the achieved FLOP/s",
        cause="not the peak over them",
    ),
    bug(
        "mfu_zero_peak_only",
        "mfu",
        ("peak_flops <= 0", "peak_flops == 0"),
        why="refuses a peak of 0 only",
        cause="a negative peak must be refused too",
    ),
    bug(
        "mfu_no_check",
        "mfu",
        ("    if peak_flops <= 0:\n", "    if False:\n"),
        why="checks nothing: a peak of 0 divides by zero",
        cause="raise a valueerror whose message names peak_flops",
    ),
    # ------------------------------------------------------------------ training_memory_bytes
    bug(
        "memory_one_moment",
        "training_memory_bytes",
        (PER_WEIGHT, "weight + gradient + moment"),
        why="counts one AdamW moment",
        cause="two moments",
    ),
    bug(
        "memory_no_gradients",
        "training_memory_bytes",
        (PER_WEIGHT, "weight + 2 * moment"),
        why="leaves the gradients out",
        cause="its gradient",
    ),
    bug(
        "memory_mixed_halves_weights",
        "training_memory_bytes",
        ('"mixed": (4, 4, 4)', '"mixed": (2, 2, 4)'),
        why="mixed precision with 16-bit weights and gradients",
        cause="halves the activations, not the weights",
    ),
    bug(
        "memory_bf16_float32_moments",
        "training_memory_bytes",
        ('"bf16": (2, 2, 2)', '"bf16": (2, 2, 4)'),
        why="a bfloat16 model with float32 AdamW moments",
        cause="adamw moments in bfloat16 too",
    ),
    bug(
        "memory_no_precision_check",
        "training_memory_bytes",
        ("    if precision not in sizes:\n", "    if False:\n"),
        why="checks no precision: an unknown one is a KeyError",
        cause="a valueerror whose message names precision",
    ),
    bug(
        "memory_bits_over_eight",
        "training_memory_bytes",
        (
            '{"fp32": (4, 4, 4), "bf16": (2, 2, 2), "mixed": (4, 4, 4)}',
            '{"fp32": (32 / 8,) * 3, "bf16": (16 / 8,) * 3, "mixed": (32 / 8,) * 3}',
        ),
        why="reads each precision's bytes as its bits / 8: the right number of bytes as a float",
        cause="returns an int",
    ),
    # ------------------------------------------------------------------ min_loss_scale
    bug(
        "scale_smallest_normal",
        "min_loss_scale",
        (SMALLEST, "smallest = 2.0**-14"),
        why="float16's smallest normal number, torch.finfo's tiny",
        cause="smallest normal number",
    ),
    bug(
        "scale_rounded_down",
        "min_loss_scale",
        ("while gradient * scale < smallest:", "while gradient * scale * 2 < smallest:"),
        why="rounds the power of two down",
        cause="round the power of two up",
    ),
    bug(
        "scale_epsilon",
        "min_loss_scale",
        (SMALLEST, "smallest = 2.0**-10"),
        why="float16's machine epsilon, torch.finfo's eps, as the smallest number",
        cause="finfo(torch.float16).eps",
    ),
    bug(
        "scale_not_floored_at_one",
        "min_loss_scale",
        (
            "    scale = 1.0\n    while gradient * scale < smallest:\n        scale *= 2\n",
            "    exponent = math.ceil(math.log2(smallest / gradient))\n    scale = 2.0**exponent\n",
        ),
        why="2 to the ceiling of log2(smallest / gradient): below 1 for a gradient that needs no scaling",
        cause="never a fraction",
    ),
    bug(
        "scale_strict_at_least",
        "min_loss_scale",
        ("while gradient * scale < smallest:", "while not gradient * scale > smallest:"),
        why="doubles while the product is at most the smallest number: one doubling too many at equality",
        cause="at least, not more than",
    ),
    # ------------------------------------------------------------------ attention_share
    bug(
        "share_over_weights",
        "attention_share",
        (SHARE, "attention / (6 * n_params_non_embedding)"),
        why="attention over the weights' FLOPs, not over the whole step",
        cause="of the whole step",
    ),
    bug(
        "share_one_layer",
        "attention_share",
        ("attention = 12 * n_layers * d_model", "attention = 12 * d_model"),
        why="attention in one layer",
        cause="paid in every layer",
    ),
    bug(
        "share_forward_attention",
        "attention_share",
        ("attention = 12 * n_layers", "attention = 4 * n_layers"),
        why="attention counted for the forward pass beside the weights counted for training",
        cause="count both terms for training",
    ),
]

BUGS += [
    # ------------------------------------------------------------------ activation_memory_bytes
    bug(
        "activations_no_attention_weights",
        "activation_memory_bytes",
        ("weights = num_heads * seq_len", "weights = 0"),
        why="leaves the attention weights out, as if the attention were fused",
        cause="the softmax keeps its weights",
    ),
    bug(
        "activations_scores_and_weights",
        "activation_memory_bytes",
        ("weights = num_heads * seq_len", "weights = 2 * num_heads * seq_len"),
        why="counts the scores besides the weights: two (B, H, L, L) tensors",
        cause="the scores are not kept",
    ),
    bug(
        "activations_relu_input_and_output",
        "activation_memory_bytes",
        ("feed_forward_block = 2 * d_model + d_ff", "feed_forward_block = 2 * d_model + 2 * d_ff"),
        why="counts the ReLU's input and its output",
        cause="needs only its output",
    ),
    bug(
        "activations_no_norm_statistics",
        "activation_memory_bytes",
        ("statistics = 4", "statistics = 0"),
        why="forgets the layer norms' mean and 1 / standard deviation",
        cause="mean and 1 / standard deviation",
    ),
    bug(
        "activations_ignore_checkpointing",
        "activation_memory_bytes",
        ("if checkpointing:", "if False:"),
        why="ignores checkpointing: the full count either way",
        cause="its input alone",
    ),
    bug(
        "activations_checkpoint_keeps_nothing",
        "activation_memory_bytes",
        (CHECKPOINTED, "values = 0  # the layer's input"),
        why="a checkpointed layer keeps nothing",
        cause="still keeps its input",
    ),
    bug(
        "activations_float_bytes",
        "activation_memory_bytes",
        ("total = values * bytes_per_value", "total = values * (8 * bytes_per_value) / 8"),
        why="counts the memory in bits / 8: the right number of bytes as a float",
        cause="returns an int",
    ),
    bug(
        "activations_no_heads_check",
        "activation_memory_bytes",
        ("    if num_heads < 1 or d_model % num_heads != 0:\n", "    if num_heads < 1:\n"),
        why="checks no head count: 3 heads of a width of 16 counted as if they divided it",
        cause="does not divide d_model",
    ),
    # ------------------------------------------------------------------ accumulation_steps
    bug(
        "accumulation_without_gpus",
        "accumulation_steps",
        (PER_MICRO_STEP, "micro_batch_size * seq_len"),
        why="forgets the GPUs: the micro-batches of one GPU alone make the batch",
        cause="times n_gpus",
    ),
    bug(
        "accumulation_sequences",
        "accumulation_steps",
        (PER_MICRO_STEP, "micro_batch_size * n_gpus"),
        why="counts the batch in sequences, not tokens",
        cause="counts tokens, not sequences",
    ),
    bug(
        "accumulation_rounds_up",
        "accumulation_steps",
        (
            "    if target_tokens <= 0 or target_tokens % tokens_per_micro_step != 0:",
            "    if target_tokens <= 0:",
        ),
        ("steps = target_tokens // tokens_per_micro_step", "steps = -(-target_tokens // tokens_per_micro_step)"),
        why="rounds up a batch that no whole number of micro-batches makes",
        cause="rather than rounding",
    ),
    bug(
        "accumulation_float",
        "accumulation_steps",
        ("steps = target_tokens // tokens_per_micro_step", "steps = target_tokens / tokens_per_micro_step"),
        why="divides with /: the right count as a float",
        cause="returns an int",
    ),
    bug(
        "accumulation_no_size_check",
        "accumulation_steps",
        ('(("micro_batch_size", micro_batch_size), ("seq_len", seq_len), ("n_gpus", n_gpus))', "()"),
        why="checks no GPU count: n_gpus=0 divides by zero",
        cause="names it",
    ),
    # ------------------------------------------------------------------ zero_memory_per_gpu
    bug(
        "zero_autocast_accounting",
        "zero_memory_per_gpu",
        ("weights, gradients, optimiser = 2, 2, 12", "weights, gradients, optimiser = 4, 4, 8"),
        why="autocast's accounting: 4-byte weights and gradients, 8 bytes of moments as the optimiser state",
        cause="12 bytes a weight",
    ),
    bug(
        "zero_shard_rounded_down",
        "zero_memory_per_gpu",
        ("shard = -(-n_params // n_gpus)", "shard = n_params // n_gpus"),
        why="rounds the shard down",
        cause="rounded up, not down",
    ),
    bug(
        "zero_stage1_gradients",
        "zero_memory_per_gpu",
        (STAGES, "[0, optimiser + gradients, optimiser + gradients, optimiser + gradients + weights]"),
        why="stage 1 partitions the gradients too",
        cause="stage 1 partitions the optimiser state alone",
    ),
    bug(
        "zero_stage2_weights",
        "zero_memory_per_gpu",
        (STAGES, "[0, optimiser, optimiser + gradients + weights, optimiser + gradients + weights]"),
        why="stage 2 partitions the weights too",
        cause="only stage 3 partitions the weights",
    ),
    bug(
        "zero_float_shard",
        "zero_memory_per_gpu",
        ("shard = -(-n_params // n_gpus)", "shard = n_params / n_gpus"),
        why="divides by n_gpus with /: a float",
        cause="returns an int",
    ),
    bug(
        "zero_no_stage_check",
        "zero_memory_per_gpu",
        ("    if stage not in (0, 1, 2, 3):\n", "    if False:\n"),
        why="checks no stage: stage 4 is an IndexError",
        cause="a valueerror naming stage",
    ),
    # ------------------------------------------------------------------ compute_optimal
    bug(
        "optimal_no_six",
        "compute_optimal",
        ("compute_flops / (6 * tokens_per_parameter)", "compute_flops / tokens_per_parameter"),
        why="C = N D: no FLOPs per parameter and token",
        cause="not n d",
    ),
    bug(
        "optimal_forward_only",
        "compute_optimal",
        ("compute_flops / (6 * tokens_per_parameter)", "compute_flops / (2 * tokens_per_parameter)"),
        why="C = 2 N D: the forward pass alone",
        cause="not the forward pass's 2",
    ),
    bug(
        "optimal_inverted_ratio",
        "compute_optimal",
        ("compute_flops / (6 * tokens_per_parameter)", "compute_flops * tokens_per_parameter / 6"),
        ("n_tokens = tokens_per_parameter * n_params", "n_tokens = n_params / tokens_per_parameter"),
        why="20 parameters per token",
        cause="20 times fewer parameters than training tokens",
    ),
    bug(
        "optimal_no_square_root",
        "compute_optimal",
        (SQUARE, "compute_flops / (6 * tokens_per_parameter)"),
        why="no square root",
        cause="take the square root",
    ),
    bug(
        "optimal_swapped",
        "compute_optimal",
        ("return n_params, n_tokens", "return n_tokens, n_params"),
        why="returns (n_tokens, n_params)",
        cause="return (n_params, n_tokens), in that order",
    ),
    bug(
        "optimal_no_budget_check",
        "compute_optimal",
        ("    if compute_flops <= 0:\n", "    if False:\n"),
        why="checks no budget: a budget of 0 gives a model of no parameters",
        cause="names compute_flops",
    ),
]
