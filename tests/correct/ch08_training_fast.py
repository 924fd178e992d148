"""Correct answers to ch08_training_fast in other idioms than the reference's."""

from tests.correct import Answer

ANSWERS: list[Answer] = [
    # ------------------------------------------------------------------ flops_per_token
    Answer(
        "flops_coefficients",
        "flops_per_token",
        """
def flops_per_token(n_params_non_embedding, n_layers, d_model, context_len, training=True):
    weight_factor, attention_factor = (6, 12) if training else (2, 4)
    return weight_factor * n_params_non_embedding + attention_factor * n_layers * d_model * context_len
""",
        "the two coefficients picked by training, one expression",
    ),
    Answer(
        "flops_forward_then_backward",
        "flops_per_token",
        """
def flops_per_token(n_params_non_embedding, n_layers, d_model, context_len, training=True):
    forward = 2 * n_params_non_embedding
    for layer in range(n_layers):
        forward += 2 * context_len * d_model  # scores
        forward += 2 * context_len * d_model  # weighted values
    backward = 2 * forward if training else 0
    return int(forward + backward)
""",
        "a loop over the layers, the backward pass added as twice the forward",
    ),
    Answer(
        "flops_numpy",
        "flops_per_token",
        """
import numpy as np


def flops_per_token(n_params_non_embedding, n_layers, d_model, context_len, training=True):
    terms = np.array([2 * n_params_non_embedding, 4 * n_layers * d_model * context_len], dtype=np.int64)
    return int(terms.sum() * (3 if training else 1))
""",
        "NumPy int64 terms",
    ),
    Answer(
        "flops_float_training_flag",
        "flops_per_token",
        """
def flops_per_token(n_params_non_embedding, n_layers, d_model, context_len, training=True):
    forward = 2.0 * n_params_non_embedding + 4.0 * n_layers * d_model * context_len
    return int(forward * (1 + 2 * training))  # bool as 0/1: the backward pass costs two forwards
""",
        "float arithmetic (exact below 2**53), the training flag used as 0 or 1, the count returned as an int",
    ),
    # ------------------------------------------------------------------ mfu
    Answer(
        "mfu_achieved_first",
        "mfu",
        """
def mfu(tokens_per_second, flops_per_token, peak_flops):
    if not peak_flops > 0:
        raise ValueError("peak_flops must be a positive number of FLOP/s")
    achieved = tokens_per_second * flops_per_token
    return float(achieved / peak_flops)
""",
        "not-greater-than test (refuses NaN too), the achieved FLOP/s first",
    ),
    Answer(
        "mfu_seconds_per_token",
        "mfu",
        """
def mfu(tokens_per_second, flops_per_token, peak_flops):
    if peak_flops <= 0:
        raise ValueError(f"peak_flops={peak_flops}: a peak must be positive")
    seconds_at_peak = flops_per_token / peak_flops  # per token, were the device always at its peak
    return seconds_at_peak * tokens_per_second
""",
        "the time a token would take at the peak, times the tokens per second",
    ),
    Answer(
        "mfu_tensor",
        "mfu",
        """
def mfu(tokens_per_second, flops_per_token, peak_flops):
    if peak_flops <= 0:
        raise ValueError("expected peak_flops > 0")
    achieved = torch.tensor(tokens_per_second, dtype=torch.float64) * flops_per_token
    return achieved / peak_flops
""",
        "a float64 tensor, returned as the tensor",
    ),
    Answer(
        "mfu_per_token_budget",
        "mfu",
        """
def mfu(tokens_per_second, flops_per_token, peak_flops):
    if peak_flops <= 0:
        raise ValueError("the peak (peak_flops) must be positive")
    tokens_per_second_at_peak = peak_flops / flops_per_token
    return tokens_per_second / tokens_per_second_at_peak
""",
        "the tokens per second achieved over those the peak would allow",
    ),
    # ------------------------------------------------------------------ training_memory_bytes
    Answer(
        "memory_element_sizes",
        "training_memory_bytes",
        """
def training_memory_bytes(n_params, precision, optimizer="adamw"):
    dtypes = {
        "fp32": (torch.float32, torch.float32),
        "bf16": (torch.bfloat16, torch.bfloat16),
        "mixed": (torch.float32, torch.float32),
    }
    if precision not in dtypes:
        raise ValueError(f"unknown precision {precision!r}")
    weights, state = dtypes[precision]
    weight_bytes = torch.empty((), dtype=weights).element_size()
    state_bytes = torch.empty((), dtype=state).element_size()
    return n_params * (2 * weight_bytes + 2 * state_bytes)
""",
        "bytes per element read off empty tensors of each dtype",
    ),
    Answer(
        "memory_per_weight_table",
        "training_memory_bytes",
        """
BYTES_PER_WEIGHT = {"fp32": 4 + 4 + 8, "bf16": 2 + 2 + 4, "mixed": 4 + 4 + 8}


def training_memory_bytes(n_params, precision, optimizer="adamw"):
    try:
        per_weight = BYTES_PER_WEIGHT[precision]
    except KeyError:
        raise ValueError(f"precision must be fp32, bf16 or mixed, not {precision}") from None
    return per_weight * n_params
""",
        "a module-level table of bytes per weight, KeyError turned into ValueError",
    ),
    Answer(
        "memory_finfo",
        "training_memory_bytes",
        """
def training_memory_bytes(n_params, precision, optimizer="adamw"):
    if precision == "fp32" or precision == "mixed":
        bits = torch.finfo(torch.float32).bits
    elif precision == "bf16":
        bits = torch.finfo(torch.bfloat16).bits
    else:
        raise ValueError("precision: expected 'fp32', 'bf16' or 'mixed', got " + str(precision))
    tensors_per_weight = 4  # weight, gradient, first and second moment
    return n_params * tensors_per_weight * bits // 8
""",
        "bits from torch.finfo, an if/elif chain",
    ),
    Answer(
        "memory_match",
        "training_memory_bytes",
        """
def training_memory_bytes(n_params, precision, optimizer="adamw"):
    match precision:
        case "fp32" | "mixed":  # autocast keeps the weights, gradients and moments in float32
            element = 4
        case "bf16":
            element = 2
        case _:
            raise ValueError(f"unsupported precision: {precision!r}")
    weight = gradient = first_moment = second_moment = element
    return n_params * (weight + gradient + first_moment + second_moment)
""",
        "a match statement",
    ),
    # ------------------------------------------------------------------ min_loss_scale
    Answer(
        "scale_log2",
        "min_loss_scale",
        """
def min_loss_scale(gradient):
    smallest = torch.finfo(torch.float16).smallest_normal * torch.finfo(torch.float16).eps  # 2**-24
    k = max(0, math.ceil(math.log2(smallest / gradient)))
    return float(2**k)
""",
        "the exponent from log2, rounded up; the subnormal from finfo",
    ),
    Answer(
        "scale_frexp_loop",
        "min_loss_scale",
        """
def min_loss_scale(gradient):
    k = 0
    while math.ldexp(gradient, k) < math.ldexp(1.0, -24):
        k += 1
    return math.ldexp(1.0, k)
""",
        "math.ldexp for exact powers of two",
    ),
    Answer(
        "scale_int_power",
        "min_loss_scale",
        """
def min_loss_scale(gradient):
    scale = 1
    while gradient * scale < 2**-24:
        scale = scale << 1
    return scale
""",
        "an int scale doubled by a shift (returned as an int)",
    ),
    Answer(
        "scale_fraction_bit_length",
        "min_loss_scale",
        """
from fractions import Fraction


def min_loss_scale(gradient):
    ratio = Fraction(1, 2**24) / Fraction(gradient)  # exact: how far below 2**-24 the gradient is
    if ratio <= 1:
        return 1
    return 2 ** (math.ceil(ratio) - 1).bit_length()  # the smallest power of two >= ratio
""",
        "exact rational arithmetic, the exponent from int.bit_length",
    ),
    # ------------------------------------------------------------------ attention_share
    Answer(
        "share_complement",
        "attention_share",
        """
def attention_share(n_params_non_embedding, n_layers, d_model, context_len):
    weights = 6 * n_params_non_embedding
    attention = 12 * n_layers * d_model * context_len
    return 1.0 - weights / (weights + attention)
""",
        "one minus the weights' share",
    ),
    Answer(
        "share_forward_counts",
        "attention_share",
        """
def attention_share(n_params_non_embedding, n_layers, d_model, context_len):
    forward_attention = 4 * n_layers * d_model * context_len
    forward_total = 2 * n_params_non_embedding + forward_attention
    return forward_attention / forward_total  # the backward pass triples both alike
""",
        "the forward counts, whose ratio is the training ratio",
    ),
    Answer(
        "share_ratio",
        "attention_share",
        """
def attention_share(n_params_non_embedding, n_layers, d_model, context_len):
    ratio = (2 * n_layers * d_model * context_len) / n_params_non_embedding  # attention over weights
    return ratio / (1 + ratio)
""",
        "the ratio of attention's FLOPs to the weights' first, then the share",
    ),
    Answer(
        "share_from_part_1",
        "attention_share",
        """
def attention_share(n_params_non_embedding, n_layers, d_model, context_len):
    total = flops_per_token(n_params_non_embedding, n_layers, d_model, context_len, training=True)
    attention = total - 6 * n_params_non_embedding
    return attention / total
""",
        "Part 1's flops_per_token for the whole step",
    ),
]

ANSWERS += [
    # ------------------------------------------------------------------ activation_memory_bytes
    Answer(
        "activations_tensor_list",
        "activation_memory_bytes",
        """
def activation_memory_bytes(batch_size, seq_len, d_model, num_heads, d_ff, bytes_per_value=4, checkpointing=False):
    if num_heads <= 0 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} cannot be split into num_heads={num_heads} heads")
    b, length = batch_size, seq_len
    if checkpointing:
        shapes = [(b, length, d_model)]
    else:
        shapes = [
            (b, length, d_model), (b, length), (b, length),  # norm1: input, mean, rstd
            (b, length, d_model),  # norm1's output, the projections' input
            (b, num_heads, length, d_model // num_heads),  # q
            (b, num_heads, d_model // num_heads, length),  # k transposed
            (b, num_heads, length, length),  # the softmax weights
            (b, num_heads, length, d_model // num_heads),  # v
            (b, length, d_model),  # the merged heads
            (b, length, d_model), (b, length), (b, length),  # norm2: input, mean, rstd
            (b, length, d_model),  # norm2's output
            (b, length, d_ff),  # the ReLU's output
        ]
    return sum(math.prod(shape) for shape in shapes) * bytes_per_value
""",
        "the list of saved tensors' shapes, each multiplied out with math.prod",
    ),
    Answer(
        "activations_one_expression",
        "activation_memory_bytes",
        """
def activation_memory_bytes(batch_size, seq_len, d_model, num_heads, d_ff, bytes_per_value=4, checkpointing=False):
    if not (num_heads >= 1 and d_model % num_heads == 0):
        raise ValueError("num_heads must divide d_model")
    tokens = batch_size * seq_len
    if checkpointing:
        return bytes_per_value * tokens * d_model
    return bytes_per_value * (tokens * (8 * d_model + d_ff + 4) + batch_size * num_heads * seq_len**2)
""",
        "one expression, the attention weights written as B H L^2",
    ),
    Answer(
        "activations_numpy_int64",
        "activation_memory_bytes",
        """
import numpy as np


def activation_memory_bytes(batch_size, seq_len, d_model, num_heads, d_ff, bytes_per_value=4, checkpointing=False):
    if num_heads < 1 or d_model % num_heads != 0:
        raise ValueError(f"bad num_heads: {num_heads}")
    per_position = np.array([d_model] if checkpointing else [
        d_model + 2,  # first layer norm: its input, mean and 1 / std
        d_model,  # projections' input
        3 * d_model,  # q, k, v
        num_heads * seq_len,  # weights
        d_model,  # W_o's input
        d_model + 2,  # second layer norm: its input, mean and 1 / std
        d_model,  # first linear layer's input
        d_ff,  # relu output
    ], dtype=np.int64)
    return per_position.sum() * np.int64(batch_size * seq_len * bytes_per_value)
""",
        "NumPy int64 terms per position, the result a NumPy integer",
    ),
    Answer(
        "activations_dtype_sizes",
        "activation_memory_bytes",
        """
def activation_memory_bytes(batch_size, seq_len, d_model, num_heads, d_ff, bytes_per_value=4, checkpointing=False):
    try:
        head_size, remainder = divmod(d_model, num_heads)
    except ZeroDivisionError:
        raise ValueError("num_heads must be positive") from None
    if remainder or num_heads < 0:
        raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
    kept = {"layer input": d_model}
    if not checkpointing:
        kept.update(
            {
                "norm statistics": 4,
                "norm1 output": d_model,
                "queries": num_heads * head_size,
                "keys": num_heads * head_size,
                "values": num_heads * head_size,
                "attention weights": num_heads * seq_len,
                "merged heads": d_model,
                "residual after attention": d_model,
                "norm2 output": d_model,
                "relu output": d_ff,
            }
        )
    return batch_size * seq_len * sum(kept.values()) * bytes_per_value
""",
        "a dictionary of named tensors, divmod for the head size",
    ),
    # ------------------------------------------------------------------ accumulation_steps
    Answer(
        "accumulation_divmod",
        "accumulation_steps",
        """
def accumulation_steps(target_tokens, micro_batch_size, seq_len, n_gpus):
    if micro_batch_size < 1 or seq_len < 1 or n_gpus < 1:
        bad = [n for n, v in (("micro_batch_size", micro_batch_size), ("seq_len", seq_len), ("n_gpus", n_gpus)) if v < 1]
        raise ValueError(f"{bad[0]} must be positive")
    steps, left = divmod(target_tokens, micro_batch_size * seq_len * n_gpus)
    if left or steps < 1:
        raise ValueError(f"target_tokens={target_tokens} is not a whole number of micro-steps")
    return steps
""",
        "divmod, the remainder and the count checked together",
    ),
    Answer(
        "accumulation_loop",
        "accumulation_steps",
        """
def accumulation_steps(target_tokens, micro_batch_size, seq_len, n_gpus):
    for name in ("micro_batch_size", "seq_len", "n_gpus"):
        if locals()[name] < 1:
            raise ValueError(name + " must be at least 1")
    seen, steps = 0, 0
    while seen < target_tokens:
        seen += n_gpus * micro_batch_size * seq_len
        steps += 1
    if seen != target_tokens or steps == 0:
        raise ValueError("target_tokens is not reached exactly by whole micro-steps")
    return steps
""",
        "a loop that adds micro-steps until the batch is reached",
    ),
    Answer(
        "accumulation_per_gpu_first",
        "accumulation_steps",
        """
def accumulation_steps(target_tokens, micro_batch_size, seq_len, n_gpus):
    if n_gpus < 1:
        raise ValueError("n_gpus < 1")
    if micro_batch_size < 1:
        raise ValueError("micro_batch_size < 1")
    if seq_len < 1:
        raise ValueError("seq_len < 1")
    if target_tokens < 1 or target_tokens % n_gpus:
        raise ValueError("target_tokens must split evenly over the GPUs")
    per_gpu = target_tokens // n_gpus  # the tokens each GPU sees per step
    if per_gpu % (micro_batch_size * seq_len):
        raise ValueError("target_tokens must be a whole number of micro-batches on each GPU")
    return per_gpu // (micro_batch_size * seq_len)
""",
        "the batch split over the GPUs first, then into micro-batches",
    ),
    Answer(
        "accumulation_fraction",
        "accumulation_steps",
        """
from fractions import Fraction


def accumulation_steps(target_tokens, micro_batch_size, seq_len, n_gpus):
    sizes = {"micro_batch_size": micro_batch_size, "seq_len": seq_len, "n_gpus": n_gpus}
    for name, size in sizes.items():
        if size < 1:
            raise ValueError(f"{name}={size}")
    ratio = Fraction(target_tokens, micro_batch_size * seq_len * n_gpus)
    if ratio.denominator != 1 or ratio <= 0:
        raise ValueError(f"target_tokens={target_tokens}: not a positive whole number of micro-steps")
    return ratio.numerator
""",
        "an exact fraction whose denominator must be 1",
    ),
    # ------------------------------------------------------------------ zero_memory_per_gpu
    Answer(
        "zero_table",
        "zero_memory_per_gpu",
        """
# bytes a weight kept whole on every GPU, and bytes a weight partitioned across the GPUs
ZERO = {0: (16, 0), 1: (2 + 2, 12), 2: (2, 2 + 12), 3: (0, 2 + 2 + 12)}


def zero_memory_per_gpu(n_params, n_gpus, stage):
    if stage not in ZERO:
        raise ValueError(f"unknown ZeRO stage {stage}")
    if n_gpus < 1:
        raise ValueError("n_gpus must be at least 1")
    whole, split = ZERO[stage]
    return whole * n_params + split * ((n_params + n_gpus - 1) // n_gpus)
""",
        "a table of whole and partitioned bytes per stage, the shard as (n + P - 1) // P",
    ),
    Answer(
        "zero_if_chain",
        "zero_memory_per_gpu",
        """
def zero_memory_per_gpu(n_params, n_gpus, stage):
    if n_gpus < 1:
        raise ValueError(f"n_gpus={n_gpus} GPUs")
    shard = math.ceil(n_params / n_gpus)
    fp16_weights = fp16_gradients = 2 * n_params
    master_and_moments = (4 + 4 + 4) * n_params
    if stage == 0:
        return fp16_weights + fp16_gradients + master_and_moments
    elif stage == 1:
        return fp16_weights + fp16_gradients + 12 * shard
    elif stage == 2:
        return fp16_weights + (2 + 12) * shard
    elif stage == 3:
        return 16 * shard
    raise ValueError(f"stage={stage} is not a ZeRO stage")
""",
        "an if/elif chain, math.ceil for the shard",
    ),
    Answer(
        "zero_from_part_3",
        "zero_memory_per_gpu",
        """
def zero_memory_per_gpu(n_params, n_gpus, stage):
    if not 0 <= stage <= 3 or int(stage) != stage:
        raise ValueError("stage must be one of 0, 1, 2, 3")
    if n_gpus <= 0:
        raise ValueError("n_gpus must be positive")
    if stage == 0:
        return training_memory_bytes(n_params, "mixed")  # plain data parallelism: Part 3's mixed precision
    parts = [("optimiser", 12, 1), ("gradients", 2, 2), ("weights", 2, 3)]  # bytes a weight, first stage splitting it
    shard = -(-n_params // n_gpus)
    return sum(size * (shard if stage >= first else n_params) for _, size, first in parts)
""",
        "Part 3's mixed precision for stage 0, a list of parts with the stage that first partitions each",
    ),
    Answer(
        "zero_numpy",
        "zero_memory_per_gpu",
        """
import numpy as np


def zero_memory_per_gpu(n_params, n_gpus, stage):
    if stage not in range(4):
        raise ValueError(f"stage {stage!r}: ZeRO has stages 0 to 3")
    if n_gpus < 1:
        raise ValueError("n_gpus must be at least one")
    bytes_per_weight = np.array([2, 2, 12], dtype=np.int64)  # weights, gradients, optimiser state
    partitioned = np.array([stage >= 3, stage >= 2, stage >= 1])
    shard = np.int64(-(-n_params // n_gpus))
    counts = np.where(partitioned, shard, np.int64(n_params))
    return int((bytes_per_weight * counts).sum())
""",
        "NumPy vectors of sizes and a mask of the partitioned parts",
    ),
    # ------------------------------------------------------------------ compute_optimal
    Answer(
        "optimal_math_sqrt",
        "compute_optimal",
        """
def compute_optimal(compute_flops, tokens_per_parameter=20.0):
    if not compute_flops > 0:
        raise ValueError("compute_flops must be positive")
    if not tokens_per_parameter > 0:
        raise ValueError("tokens_per_parameter must be positive")
    params = math.sqrt(compute_flops / 6 / tokens_per_parameter)
    return params, params * tokens_per_parameter
""",
        "math.sqrt, the tuple built in the return",
    ),
    Answer(
        "optimal_tokens_first",
        "compute_optimal",
        """
def compute_optimal(compute_flops, tokens_per_parameter=20.0):
    if compute_flops <= 0:
        raise ValueError(f"compute_flops={compute_flops}")
    if tokens_per_parameter <= 0:
        raise ValueError(f"tokens_per_parameter={tokens_per_parameter}")
    tokens = (compute_flops * tokens_per_parameter / 6) ** 0.5  # C = 6 (D / r) D
    return tokens / tokens_per_parameter, tokens
""",
        "the tokens solved for first",
    ),
    Answer(
        "optimal_logs",
        "compute_optimal",
        """
def compute_optimal(compute_flops, tokens_per_parameter=20.0):
    if compute_flops <= 0 or tokens_per_parameter <= 0:
        name = "compute_flops" if compute_flops <= 0 else "tokens_per_parameter"
        raise ValueError(f"{name} must be positive")
    log_params = 0.5 * (math.log(compute_flops) - math.log(6 * tokens_per_parameter))
    n_params = math.exp(log_params)
    return (n_params, tokens_per_parameter * n_params)
""",
        "logarithms: half the log of the budget over 6r",
    ),
    Answer(
        "optimal_numpy",
        "compute_optimal",
        """
import numpy as np


def compute_optimal(compute_flops, tokens_per_parameter=20.0):
    if compute_flops <= 0:
        raise ValueError("a budget (compute_flops) must be positive")
    if tokens_per_parameter <= 0:
        raise ValueError("tokens_per_parameter must be positive")
    n = np.sqrt(np.float64(compute_flops) / (6.0 * tokens_per_parameter))
    return float(n), float(n * tokens_per_parameter)
""",
        "NumPy's sqrt, the pair returned as Python floats",
    ),
]
