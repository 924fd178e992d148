"""Wrong answers to ch05_positional_encoding that students really write."""

from tests.buggy import Bug

TESTS = {
    "sinusoidal_positional_encoding": ["test_sinusoidal_values", "test_sinusoidal_long", "test_sinusoidal_error"],
    "PositionalEncoding": ["test_positional_encoding", "test_positional_encoding_error"],
    "apply_rotary": ["test_rotary_values", "test_rotary_options"],
}


def sinusoidal(body: str) -> str:
    return '''
def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
''' + body


def encoding(forward: str, init: str = '''
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))
''') -> str:
    return '''
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()''' + init + '''
    def forward(self, x):''' + forward


def rotary(body: str) -> str:
    return '''
def apply_rotary(x, positions=None, base=10000.0):
    length, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(length)
    frequencies = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    angles = positions.to(x.dtype)[:, None] * frequencies
    cos, sin = torch.cos(angles), torch.sin(angles)
''' + body


BUGS = [
    # ------------------------------------------------------------------ sinusoidal_positional_encoding
    Bug("sin_cos_concatenated", "sinusoidal_positional_encoding", why="[all sines | all cosines]", code=sinusoidal('''
    frequencies = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    angles = position * frequencies
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)
''')),
    Bug("sin_cos_exponent_i_over_d", "sinusoidal_positional_encoding", why="10000^(i/d) instead of 10000^(2i/d)",
        code=sinusoidal('''
    frequencies = 10000.0 ** (-torch.arange(d_model // 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * frequencies)
    pe[:, 1::2] = torch.cos(position * frequencies)
    return pe
''')),
    Bug("sin_cos_swapped", "sinusoidal_positional_encoding", why="cosines in the even columns", code=sinusoidal('''
    frequencies = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.cos(position * frequencies)
    pe[:, 1::2] = torch.sin(position * frequencies)
    return pe
''')),
    Bug("sin_cos_frequency_per_column", "sinusoidal_positional_encoding",
        why="each column its own exponent j/d, so a pair does not share a frequency", code=sinusoidal('''
    frequencies = 10000.0 ** (-torch.arange(d_model, dtype=torch.float32) / d_model)
    angles = position * frequencies
    pe = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, 1::2])
    return pe
''')),
    Bug("sin_cos_no_error", "sinusoidal_positional_encoding", why="odd d_model fails with a RuntimeError", code='''
def sinusoidal_positional_encoding(max_len, d_model):
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
    frequencies = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * frequencies)
    pe[:, 1::2] = torch.cos(position * frequencies)
    return pe
'''),
    # ------------------------------------------------------------------ PositionalEncoding
    Bug("encoding_sequence_first", "PositionalEncoding", why="slices pe by x.size(0), the batch", code=encoding('''
        if x.size(1) > self.pe.size(0):
            raise ValueError(f"sequence longer than max_len={self.pe.size(0)}")
        return self.dropout(x + self.pe[:x.size(0)])
''')),
    Bug("encoding_tutorial_layout", "PositionalEncoding", why="a (max_len, 1, d) buffer for (L, B, D) inputs",
        code=encoding('''
        if x.size(1) > self.pe.size(0):
            raise ValueError(f"sequence longer than max_len={self.pe.size(0)}")
        return self.dropout(x + self.pe[:x.size(0)])
''', init='''
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model).unsqueeze(1))
''')),
    Bug("encoding_no_slice", "PositionalEncoding", why="adds the whole buffer", code=encoding('''
        if x.size(1) > self.pe.size(0):
            raise ValueError(f"sequence longer than max_len={self.pe.size(0)}")
        return self.dropout(x + self.pe)
''')),
    Bug("encoding_no_length_check", "PositionalEncoding", why="a RuntimeError from broadcasting instead", code=encoding('''
        return self.dropout(x + self.pe[:x.size(1)].to(x.dtype))
''')),
    Bug("encoding_upcasts_float16", "PositionalEncoding", why="float16 input comes back as float32", code=encoding('''
        if x.size(1) > self.pe.size(0):
            raise ValueError(f"sequence longer than max_len={self.pe.size(0)}")
        return self.dropout(x + self.pe[:x.size(1)])
''')),
    # ------------------------------------------------------------------ apply_rotary
    Bug("rotary_half_split", "apply_rotary", why="pairs feature i with i + d/2 (the GPT-NeoX layout)", code=rotary('''
    x0, x1 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)
''')),
    Bug("rotary_wrong_sign", "apply_rotary", why="rotates by -theta", code=rotary('''
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos + x1 * sin, -x0 * sin + x1 * cos], dim=-1).flatten(-2)
''')),
    Bug("rotary_ignores_positions", "apply_rotary", why="always uses 0..L-1", code='''
def apply_rotary(x, positions=None, base=10000.0):
    length, d = x.shape[-2], x.shape[-1]
    positions = torch.arange(length)
    frequencies = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    angles = positions.to(x.dtype)[:, None] * frequencies
    cos, sin = torch.cos(angles), torch.sin(angles)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)
'''),
    Bug("rotary_in_place", "apply_rotary", why="writes the rotation into x", code=rotary('''
    x0, x1 = x[..., 0::2].clone(), x[..., 1::2].clone()
    x[..., 0::2] = x0 * cos - x1 * sin
    x[..., 1::2] = x0 * sin + x1 * cos
    return x
''')),
    Bug("rotary_exponent_i_over_d", "apply_rotary", why="base^(-i/d): the frequencies fall too slowly", code='''
def apply_rotary(x, positions=None, base=10000.0):
    length, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(length)
    frequencies = base ** (-torch.arange(d // 2, dtype=x.dtype) / d)
    angles = positions.to(x.dtype)[:, None] * frequencies
    cos, sin = torch.cos(angles), torch.sin(angles)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)
'''),
]
