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
