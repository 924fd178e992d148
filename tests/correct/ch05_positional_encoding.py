"""Correct answers to ch05_positional_encoding in other idioms than the reference's."""

from tests.catalogue import reference_head
from tests.correct import Answer

A = "ch05_positional_encoding"
# The options of the question on what positions change, as the reference states them.
EFFECTS = "\n" + reference_head(A, "effect", "def effect")

ANSWERS: list[Answer] = [
    # ------------------------------------------------------------------ sinusoidal_positional_encoding
    Answer(
        "sin_cos_loop",
        "sinusoidal_positional_encoding",
        """
def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} is odd; sines and cosines come in pairs")
    rows = []
    for p in range(max_len):
        row = []
        for i in range(d_model // 2):
            angle = p / 10000 ** (2 * i / d_model)
            row += [math.sin(angle), math.cos(angle)]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32).reshape(max_len, d_model)
""",
        "a loop over positions and pairs with math.sin and math.cos",
    ),
    Answer(
        "sin_cos_exp_log",
        "sinusoidal_positional_encoding",
        """
def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2 == 1:
        raise ValueError("d_model must be even")
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe
""",
        "the exp/log form of the frequencies, in float32 throughout",
    ),
    Answer(
        "sin_cos_stack",
        "sinusoidal_positional_encoding",
        """
def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2 != 0:
        raise ValueError(f"got d_model={d_model}, which is odd")
    pair = torch.arange(d_model // 2, dtype=torch.float64)
    angles = torch.outer(torch.arange(max_len, dtype=torch.float64), torch.pow(10000.0, -2 * pair / d_model))
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).to(torch.float32)
""",
        "sines and cosines stacked on a new last axis and flattened, float64 intermediates",
    ),
    Answer(
        "sin_cos_numpy_inside",
        "sinusoidal_positional_encoding",
        """
import numpy as np

def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even, got " + str(d_model))
    positions = np.arange(max_len)[:, None]
    frequencies = 1.0 / np.power(10000.0, np.arange(0, d_model, 2) / d_model)
    table = np.zeros((max_len, d_model))
    table[:, 0::2] = np.sin(positions * frequencies)
    table[:, 1::2] = np.cos(positions * frequencies)
    return torch.from_numpy(table).float()
""",
        "computed in NumPy, returned as a torch tensor",
    ),
    Answer(
        "sin_cos_complex",
        "sinusoidal_positional_encoding",
        """
def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even, got d_model={d_model}")
    frequencies = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * frequencies
    unit = torch.polar(torch.ones_like(angles), angles)  # cos + i sin
    return torch.view_as_real(unit).flip(-1).reshape(max_len, d_model).float()
""",
        "complex numbers e^(i angle), real and imaginary parts swapped into (sin, cos)",
    ),
    # ------------------------------------------------------------------ PositionalEncoding
    Answer(
        "encoding_extra_buffer",
        "PositionalEncoding",
        """
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)
        self.register_buffer("positions", torch.arange(max_len))

    def forward(self, x):
        if x.size(1) > self.pe.size(0):
            raise ValueError(f"x has {x.size(1)} positions; max_len is {self.pe.size(0)}")
        return self.dropout(x + self.pe[self.positions[: x.size(1)]].to(x.dtype))
""",
        "its own table (exp/log form), an extra buffer of positions used to index it",
    ),
    Answer(
        "encoding_functional_dropout",
        "PositionalEncoding",
        """
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.p = dropout
        self.max_len = max_len
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model).clone())

    def forward(self, x):
        batch, length, _ = x.shape
        if length > self.max_len:
            raise ValueError(f"a sequence of {length} positions is longer than max_len={self.max_len}")
        summed = torch.add(x, self.pe.narrow(0, 0, length).type_as(x).unsqueeze(0))
        return F.dropout(summed, p=self.p, training=self.training)
""",
        "functional dropout that follows the module's mode, narrow and type_as, no dropout submodule",
    ),
    Answer(
        "encoding_loop_table",
        "PositionalEncoding",
        """
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        table = [[math.sin(p / 10000 ** (j / d_model)) if j % 2 == 0 else math.cos(p / 10000 ** ((j - 1) / d_model))
                  for j in range(d_model)] for p in range(max_len)]
        self.register_buffer("pe", torch.tensor(table, dtype=torch.float64))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        length = x.shape[-2]
        if length > len(self.pe):
            raise ValueError(f"max_len={len(self.pe)} is smaller than the {length} positions of x")
        return self.dropout((x.double() + self.pe[:length]).to(x.dtype))
""",
        "a float64 table built in a Python loop, the sum taken in float64",
    ),
    Answer(
        "encoding_complex_table",
        "PositionalEncoding",
        """
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        frequencies = torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        angles = torch.arange(max_len, dtype=torch.float64)[:, None] * frequencies
        table = torch.view_as_real(torch.exp(1j * angles)).flip(-1).reshape(max_len, d_model)
        self.register_buffer("pe", table.float(), persistent=True)
        self.register_buffer("scale", torch.ones(()))

    def forward(self, x):
        if x.size(1) > self.pe.shape[0]:
            raise ValueError(f"x is longer ({x.size(1)}) than max_len ({self.pe.shape[0]})")
        return self.dropout(x + self.scale.to(x.dtype) * self.pe[None, : x.size(1), :].to(dtype=x.dtype))
""",
        "a complex-exponential table, a second buffer, the table broadcast with a leading axis",
    ),
    # ------------------------------------------------------------------ apply_rotary
    Answer(
        "rotary_complex",
        "apply_rotary",
        """
def apply_rotary(x, positions=None, base=10000.0):
    length, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(length, device=x.device)
    work = torch.promote_types(x.dtype, torch.float32)
    frequencies = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angles = positions.to(torch.float64)[:, None] * frequencies
    turn = torch.polar(torch.ones_like(angles), angles).to(torch.complex128 if work == torch.float64 else torch.complex64)
    pairs = torch.view_as_complex(x.to(work).reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(pairs * turn).reshape(x.shape).to(x.dtype)
""",
        "complex numbers: each pair times e^(i angle)",
    ),
    Answer(
        "rotary_loop_over_pairs",
        "apply_rotary",
        """
def apply_rotary(x, positions=None, base=10000.0):
    length, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(length)
    work = torch.promote_types(x.dtype, torch.float32)
    p = positions.to(device=x.device, dtype=work)
    out = torch.empty(x.shape, dtype=work, device=x.device)
    for i in range(d // 2):
        theta = p * base ** (-2 * i / d)
        a, b = x[..., 2 * i].to(work), x[..., 2 * i + 1].to(work)
        out[..., 2 * i] = a * torch.cos(theta) - b * torch.sin(theta)
        out[..., 2 * i + 1] = a * torch.sin(theta) + b * torch.cos(theta)
    return out.to(x.dtype)
""",
        "a loop over the pairs",
    ),
    Answer(
        "rotary_rotate_every_two",
        "apply_rotary",
        """
def rotate_every_two(x):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rotary(x, positions=None, base=10000.0):
    length, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(length, device=x.device)
    work = torch.promote_types(x.dtype, torch.float32)
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device).to(work) / d))
    angles = torch.einsum("l,f->lf", positions.to(work), inv_freq).repeat_interleave(2, dim=-1)
    y = x.to(work)
    return (y * angles.cos() + rotate_every_two(y) * angles.sin()).to(x.dtype)
""",
        "x cos + rotate_every_two(x) sin, with frequencies repeated per pair and a helper function",
    ),
    Answer(
        "rotary_float64_inside",
        "apply_rotary",
        """
def apply_rotary(x, positions=None, base=10000.0):
    *lead, length, d = x.shape
    positions = torch.arange(length) if positions is None else positions
    angles = positions.double().cpu()[:, None] * torch.tensor(
        [base ** (-2.0 * i / d) for i in range(d // 2)], dtype=torch.float64)
    cos, sin = angles.cos().to(x.device), angles.sin().to(x.device)
    pairs = x.double().reshape(*lead, length, d // 2, 2)
    first, second = pairs[..., 0], pairs[..., 1]
    turned = torch.stack((first * cos - second * sin, first * sin + second * cos), dim=-1)
    return turned.reshape(x.shape).to(x.dtype)
""",
        "float64 intermediates, pairs by reshape",
    ),
    Answer(
        "rotary_matrices",
        "apply_rotary",
        """
def apply_rotary(x, positions=None, base=10000.0):
    length, d = x.size(-2), x.size(-1)
    if positions is None:
        positions = torch.arange(length, device=x.device)
    work = torch.promote_types(x.dtype, torch.float32)
    theta = positions.to(work)[:, None] * torch.pow(torch.tensor(base, dtype=work),
                                                     -torch.arange(0, d, 2, dtype=work) / d)
    c, s = theta.cos(), theta.sin()
    rotation = torch.stack((torch.stack((c, -s), -1), torch.stack((s, c), -1)), -2)  # (L, d/2, 2, 2)
    pairs = x.to(work).unflatten(-1, (d // 2, 2))
    return torch.einsum("lpij,...lpj->...lpi", rotation, pairs).flatten(-2).to(x.dtype)
""",
        "2x2 rotation matrices applied with einsum",
    ),
    # ------------------------------------------------------------------ wavelength
    Answer(
        "wavelength_tau",
        "wavelength",
        """
def wavelength(i, d_model, base=10000.0):
    return math.tau * pow(base, 2 * i / d_model)
""",
        "math.tau and pow",
    ),
    Answer(
        "wavelength_from_frequency",
        "wavelength",
        """
def wavelength(i, d_model, base=10000.0):
    frequency = 1.0 / base ** (2 * i / d_model)  # radians per position
    return 2 * math.pi / frequency
""",
        "a full turn divided by the angular frequency",
    ),
    Answer(
        "wavelength_exp_log",
        "wavelength",
        """
def wavelength(i, d_model, base=10000.0):
    return 2 * math.pi * math.exp(2 * i * math.log(base) / d_model)
""",
        "exp and log",
    ),
    Answer(
        "wavelength_torch_table",
        "wavelength",
        """
def wavelength(i, d_model, base=10000.0):
    frequencies = torch.tensor(base, dtype=torch.float64) ** (-torch.arange(0, d_model, 2, dtype=torch.float64)
                                                               / d_model)
    return (2 * torch.pi / frequencies[i]).item()
""",
        "the frequencies of every pair with torch, in float64, then the pair's",
    ),
    Answer(
        "wavelength_numpy",
        "wavelength",
        """
import numpy as np


def wavelength(i, d_model, base=10000.0):
    return np.float64(2 * np.pi) * np.power(np.float64(base), 2 * i / d_model)
""",
        "NumPy scalars",
    ),
    # ------------------------------------------------------------------ llama3_inverse_frequencies
    Answer(
        "llama3_clamped_weight",
        "llama3_inverse_frequencies",
        """
def llama3_inverse_frequencies(
    head_dim, base=500000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
    original_max_position_embeddings=8192,
):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    omega = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    turns = original_max_position_embeddings * omega / (2 * math.pi)  # L / wavelength
    s = ((turns - low_freq_factor) / (high_freq_factor - low_freq_factor)).clamp(0, 1)
    return (1 - s) * omega / factor + s * omega
""",
        "one blend everywhere, its weight clamped to [0, 1] so that the two outer bands come out of it",
    ),
    Answer(
        "llama3_loop",
        "llama3_inverse_frequencies",
        """
def llama3_inverse_frequencies(head_dim, base=500000.0, factor=8.0, low_freq_factor=1.0,
                               high_freq_factor=4.0, original_max_position_embeddings=8192):
    if head_dim % 2 == 1:
        raise ValueError("head_dim must be even")
    old = original_max_position_embeddings
    result = []
    for omega in (1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)).tolist():
        wave = 2 * math.pi / omega
        if wave < old / high_freq_factor:
            result.append(omega)
        elif wave > old / low_freq_factor:
            result.append(omega / factor)
        else:
            smooth = (old / wave - low_freq_factor) / (high_freq_factor - low_freq_factor)
            result.append((1 - smooth) * omega / factor + smooth * omega)
    return torch.tensor(result)
""",
        "a loop over the pairs in Python floats, one branch per band",
    ),
    Answer(
        "llama3_numpy_float64",
        "llama3_inverse_frequencies",
        """
import numpy as np


def llama3_inverse_frequencies(head_dim, base=500000.0, factor=8.0, low_freq_factor=1.0,
                               high_freq_factor=4.0, original_max_position_embeddings=8192):
    if head_dim % 2 != 0:
        raise ValueError(f"expected an even head_dim, got {head_dim}")
    freqs = base ** -(np.arange(0, head_dim, 2) / head_dim)
    wavelen = 2 * np.pi / freqs
    low_wavelen = original_max_position_embeddings / low_freq_factor
    high_wavelen = original_max_position_embeddings / high_freq_factor
    smooth = (original_max_position_embeddings / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    out = np.where(wavelen > low_wavelen, freqs / factor, (1 - smooth) * freqs / factor + smooth * freqs)
    out = np.where(wavelen < high_wavelen, freqs, out)
    return torch.from_numpy(out)
""",
        "NumPy in float64 throughout, returned as a float64 tensor",
    ),
    Answer(
        "llama3_masks",
        "llama3_inverse_frequencies",
        """
def llama3_inverse_frequencies(
    head_dim,
    base=500000.0,
    factor=8.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    original_max_position_embeddings=8192,
):
    if head_dim % 2:
        raise ValueError(f"rotary needs an even head_dim, not {head_dim}")
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    wavelen = 2 * math.pi / inv_freq
    long_waves = wavelen > original_max_position_embeddings / low_freq_factor
    short_waves = wavelen < original_max_position_embeddings / high_freq_factor
    middle = ~(long_waves | short_waves)
    new = inv_freq.clone()
    new[long_waves] = inv_freq[long_waves] / factor
    smooth = (original_max_position_embeddings / wavelen[middle] - low_freq_factor) / (
        high_freq_factor - low_freq_factor
    )
    new[middle] = (1 - smooth) * inv_freq[middle] / factor + smooth * inv_freq[middle]
    return new
""",
        "boolean masks of the three bands, each written into a copy",
    ),
    # ------------------------------------------------------------------ effect
    Answer(
        "effect_keywords",
        "effect",
        EFFECTS
        + """

def effect(situation):
    if "rotary" in situation:
        return EFFECT_OPTIONS[0]
    if "without" in situation:
        return EFFECT_OPTIONS[1]
    return EFFECT_OPTIONS[2]
""",
        "keywords of the situation, answers taken from EFFECT_OPTIONS",
    ),
    Answer(
        "effect_match",
        "effect",
        EFFECTS
        + """

def effect(situation):
    match situation:
        case "outputs without positional encoding, when the tokens are permuted":
            return "permuted the same way"
        case "scores with rotary embeddings, when both positions are shifted by the same offset":
            return "unchanged"
        case _:
            return "changed"
""",
        "a match statement",
    ),
    Answer(
        "effect_rules",
        "effect",
        EFFECTS
        + """

def effect(situation):
    absolute = "sinusoidal" in situation  # the layer reads the position itself
    if absolute:
        return "changed"
    return "permuted the same way" if situation.startswith("outputs") else "unchanged"
""",
        "built from a rule: absolute positions change the result, otherwise outputs follow their tokens",
    ),
    Answer(
        "effect_indices",
        "effect",
        EFFECTS
        + """

def effect(situation):
    return EFFECT_OPTIONS[[1, 2, 0, 2][SITUATIONS.index(situation)]]
""",
        "the option's index looked up by the situation's index",
    ),
]
