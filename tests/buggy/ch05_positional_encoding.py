"""Wrong answers to ch05_positional_encoding that students really write.

Each is the reference answer with one realistic mistake in it (``variant``), so a wrong answer cannot
silently become the right one; ``cause`` is what the hint of a failing test of its item must name.
"""

from tests.buggy import Bug, variant

A = "ch05_positional_encoding"

TESTS = {
    "sinusoidal_positional_encoding": ["test_sinusoidal_values", "test_sinusoidal_long", "test_sinusoidal_error"],
    "PositionalEncoding": ["test_positional_encoding", "test_positional_encoding_error"],
    "apply_rotary": ["test_rotary_values", "test_rotary_options"],
    "llama3_inverse_frequencies": ["test_llama3_values", "test_llama3_settings", "test_llama3_error"],
    "wavelength": ["test_wavelength"],
    "effect": ["test_effect"],
}

PAIRS = "pe[:, 0::2] = torch.sin(angles)\n    pe[:, 1::2] = torch.cos(angles)"
EXPONENTS = "-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model"
ODD_CHECK = 'if d_model % 2 != 0:\n        raise ValueError(f"d_model must be even (sin/cos pairs), got {d_model}")'
TABLE = "sinusoidal_positional_encoding(max_len, d_model)"
BUFFER = 'self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))'
ADDED = "return self.dropout(x + self.pe[:length].to(x.dtype))"
LONG_CHECK = (
    "        if length > self.pe.size(0):\n"
    '            raise ValueError(f"x has {length} positions, more than max_len={self.pe.size(0)}")\n'
)
TURN = "x0 * cos - x1 * sin, x0 * sin + x1 * cos"
ROTATED = (
    "rotated = torch.stack([" + TURN + "], dim=-1)  # (..., L, d / 2, 2)\n    return rotated.flatten(-2).to(x.dtype)"
)
DEFAULT_POSITIONS = "torch.arange(length, device=x.device)"
WAVE = "2 * math.pi * base ** (2 * i / d_model)"
PLAIN = '"outputs without positional encoding, when the tokens are permuted": "permuted the same way"'
ADDED_PERMUTED = '"outputs with sinusoidal encodings added, when the tokens are permuted": "changed"'
ROTARY_SHIFTED = '"scores with rotary embeddings, when both positions are shifted by the same offset": "unchanged"'
ADDED_SHIFTED = (
    '"scores with sinusoidal encodings added, when both positions are shifted by the same offset": "changed"'
)


def sinusoidal(why, cause, *replacements, name):
    return Bug(
        name, "sinusoidal_positional_encoding", variant(A, "sinusoidal_positional_encoding", *replacements), why, cause
    )


def encoding(why, cause, *replacements, name):
    return Bug(name, "PositionalEncoding", variant(A, "PositionalEncoding", *replacements), why, cause)


def rotary(why, cause, *replacements, name):
    return Bug(name, "apply_rotary", variant(A, "apply_rotary", *replacements), why, cause)


def llama3(why, cause, *replacements, name):
    return Bug(name, "llama3_inverse_frequencies", variant(A, "llama3_inverse_frequencies", *replacements), why, cause)


BLEND = "(1 - blend) * inverse / factor + blend * inverse"

BUGS = [
    # ------------------------------------------------------------------ sinusoidal_positional_encoding
    sinusoidal(
        "[all sines | all cosines]",
        "all the sines come first",
        (PAIRS, "pe = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)"),
        name="sin_cos_concatenated",
    ),
    sinusoidal(
        "10000^(i/d) instead of 10000^(2i/d)",
        "the exponent of the pair i is i/d",
        (EXPONENTS, "-torch.arange(d_model // 2, dtype=torch.float64) / d_model"),
        name="sin_cos_exponent_i_over_d",
    ),
    sinusoidal(
        "cosines in the even columns",
        "the cosines are in the even columns",
        (PAIRS, "pe[:, 0::2] = torch.cos(angles)\n    pe[:, 1::2] = torch.sin(angles)"),
        name="sin_cos_swapped",
    ),
    sinusoidal(
        "each column its own exponent j/d, so a pair does not share a frequency",
        "a frequency of its own",
        (
            PAIRS,
            "every = positions * 10000.0 ** (-torch.arange(d_model, dtype=torch.float64) / d_model)\n"
            "    pe[:, 0::2] = torch.sin(every[:, 0::2])\n"
            "    pe[:, 1::2] = torch.cos(every[:, 1::2])",
        ),
        name="sin_cos_frequency_per_column",
    ),
    sinusoidal(
        "positions 1..max_len",
        "the positions start at 1",
        ("torch.arange(max_len, dtype=torch.float64)", "torch.arange(1, max_len + 1, dtype=torch.float64)"),
        name="sin_cos_positions_from_one",
    ),
    sinusoidal(
        "p * 10000^(2i/d): the exponent's sign",
        "multiplied by 10000^(2i/d)",
        ("10000.0 ** (-torch.arange", "10000.0 ** (torch.arange"),
        name="sin_cos_exponent_sign",
    ),
    sinusoidal(
        "2i // d: integer division makes every exponent 0",
        "integer division",
        (EXPONENTS, "-(torch.arange(0, d_model, 2) // d_model)"),
        name="sin_cos_integer_division",
    ),
    sinusoidal(
        "returns a NumPy array",
        "return a torch.tensor",
        ("return pe.float()", "return pe.float().numpy()"),
        name="sin_cos_numpy",
    ),
    sinusoidal(
        "odd d_model fails with a RuntimeError",
        "must raise a valueerror",
        (ODD_CHECK + "\n    ", ""),
        name="sin_cos_no_error",
    ),
    sinusoidal(
        "an assert: odd d_model is an AssertionError",
        "must raise a valueerror",
        (ODD_CHECK, 'assert d_model % 2 == 0, f"d_model must be even, got {d_model}"'),
        name="sin_cos_assert",
    ),
    sinusoidal(
        "the message does not say which argument is wrong",
        "whose message names d_model",
        ('f"d_model must be even (sin/cos pairs), got {d_model}"', '"the width must be even"'),
        name="sin_cos_message_without_name",
    ),
    # ------------------------------------------------------------------ PositionalEncoding
    encoding(
        "slices pe by x.size(0), the batch",
        "batch first",
        ("self.pe[:length]", "self.pe[:x.size(0)]"),
        name="encoding_sequence_first",
    ),
    encoding(
        "a (max_len, 1, d) buffer for (L, B, D) inputs",
        "laid out for sequence-first input",
        (TABLE + ")", TABLE + ".unsqueeze(1))"),
        ("self.pe[:length]", "self.pe[:x.size(0)]"),
        name="encoding_tutorial_layout",
    ),
    encoding(
        "adds the whole buffer", "for the l positions of x", ("self.pe[:length]", "self.pe"), name="encoding_no_slice"
    ),
    encoding(
        "a RuntimeError from broadcasting instead",
        "must raise a valueerror",
        (LONG_CHECK, ""),
        name="encoding_no_length_check",
    ),
    encoding(
        "rejects a sequence of exactly max_len positions",
        "exactly max_len",
        ("if length > self.pe.size(0):", "if length >= self.pe.size(0):"),
        name="encoding_length_off_by_one",
    ),
    encoding(
        "the error does not say which limit",
        "names max_len",
        ('f"x has {length} positions, more than max_len={self.pe.size(0)}"', 'f"sequence too long: {length}"'),
        name="encoding_message_without_name",
    ),
    encoding(
        "float16 input comes back as float32", "the dtype of x", (".to(x.dtype)", ""), name="encoding_upcasts_float16"
    ),
    encoding(
        "a buffer of zeros: the table is never filled in",
        "the buffer pe holds zeros",
        (TABLE, "torch.zeros(max_len, d_model)"),
        name="encoding_zero_buffer",
    ),
    encoding(
        "pe is a trainable parameter",
        "not a parameter",
        (BUFFER, "self.pe = nn.Parameter(sinusoidal_positional_encoding(max_len, d_model))"),
        name="encoding_pe_parameter",
    ),
    encoding(
        "pe is a plain attribute: neither saved nor moved with the module",
        "not a plain attribute",
        (BUFFER, "self.pe = sinusoidal_positional_encoding(max_len, d_model)"),
        name="encoding_pe_attribute",
    ),
    encoding(
        "dropout on x before the encoding is added",
        "the dropout acts on x before",
        (ADDED, "return self.dropout(x) + self.pe[:length].to(x.dtype)"),
        name="encoding_dropout_before",
    ),
    encoding(
        "no dropout at all",
        "the dropout is never applied",
        (ADDED, "return x + self.pe[:length].to(x.dtype)"),
        name="encoding_no_dropout",
    ),
    encoding(
        "F.dropout without training=: drops in eval mode too",
        "dropout must be off",
        (
            "self.dropout(x + self.pe[:length].to(x.dtype))",
            "F.dropout(x + self.pe[:length].to(x.dtype), p=self.dropout.p)",
        ),
        name="encoding_dropout_always_on",
    ),
    encoding(
        "scales x by sqrt(d_model) as the embedding layer would",
        "multiplied by the square root of d_model",
        ("x + self.pe", "x * math.sqrt(x.size(-1)) + self.pe"),
        name="encoding_scales_x",
    ),
    # ------------------------------------------------------------------ apply_rotary
    rotary(
        "pairs feature i with i + d/2 (the GPT-NeoX layout)",
        "paired with feature i + d/2",
        (
            "x0, x1 = x[..., 0::2].to(compute), x[..., 1::2].to(compute)",
            "x0, x1 = x[..., : d // 2].to(compute), x[..., d // 2:].to(compute)",
        ),
        ("torch.stack([" + TURN + "], dim=-1)", "torch.cat([" + TURN + "], dim=-1)"),
        ("return rotated.flatten(-2).to(x.dtype)", "return rotated.to(x.dtype)"),
        name="rotary_half_split",
    ),
    rotary(
        "rotates by -theta",
        "turns the wrong way",
        (TURN, "x0 * cos + x1 * sin, -x0 * sin + x1 * cos"),
        name="rotary_wrong_sign",
    ),
    rotary(
        "always uses 0..L-1",
        "by positions[l], not by l",
        ("if positions is None:\n        positions = " + DEFAULT_POSITIONS, "positions = " + DEFAULT_POSITIONS),
        name="rotary_ignores_positions",
    ),
    rotary(
        "writes the rotation into x",
        "x must be unchanged",
        (
            ROTATED,
            "x[..., 0::2], x[..., 1::2] = (x0 * cos - x1 * sin).to(x.dtype), (x0 * sin + x1 * cos).to(x.dtype)\n"
            "    return x",
        ),
        name="rotary_in_place",
    ),
    rotary(
        "base^(-i/d): the frequencies fall too slowly",
        "the exponent of the pair i is i/d",
        (
            "torch.arange(0, d, 2, device=x.device, dtype=compute) / d",
            "torch.arange(d // 2, device=x.device, dtype=compute) / d",
        ),
        name="rotary_exponent_i_over_d",
    ),
    rotary(
        "the base is always 10000",
        "use the base you are given",
        ("base ** (", "10000.0 ** ("),
        name="rotary_ignores_base",
    ),
    rotary(
        "default positions 1..L",
        "the default positions start at 1",
        (DEFAULT_POSITIONS, "torch.arange(1, length + 1, device=x.device)"),
        name="rotary_positions_from_one",
    ),
    rotary(
        "computes in float32 whatever the dtype of x",
        "compute in the dtype of x",
        ("compute = torch.promote_types(x.dtype, torch.float32)", "compute = torch.float32"),
        name="rotary_float32_inside",
    ),
    rotary(
        "float16 input comes back as float32",
        "dtype of x (float16 here)",
        (".flatten(-2).to(x.dtype)", ".flatten(-2)"),
        name="rotary_upcasts_float16",
    ),
    # ------------------------------------------------------------------ llama3_inverse_frequencies
    llama3(
        "slows the fast pairs and keeps the slow ones",
        "the bands are the wrong way round",
        ("wavelength > context / low_freq_factor", "wavelength < context / high_freq_factor"),
        ("torch.where(wavelength < context / high_freq_factor", "torch.where(wavelength > context / low_freq_factor"),
        name="llama3_bands_swapped",
    ),
    llama3(
        "weighs the blend's two ends the wrong way",
        "the blend weighs the two ends the wrong way",
        (BLEND, "blend * inverse / factor + (1 - blend) * inverse"),
        name="llama3_blend_reversed",
    ),
    llama3(
        "takes 1/ω for the wavelength",
        "the wavelength is 2π/ω positions",
        ("wavelength = 2 * math.pi / inverse", "wavelength = 1 / inverse"),
        name="llama3_wavelength_without_two_pi",
    ),
    llama3(
        "multiplies the slow pairs' frequencies by factor",
        "divided by factor, not multiplied",
        ("inverse / factor, blended", "inverse * factor, blended"),
        (BLEND, "(1 - blend) * inverse * factor + blend * inverse"),
        name="llama3_multiplied_by_factor",
    ),
    llama3(
        "base^(-i/d) for pair i",
        "the exponent of pair i is 2i/head_dim",
        ("torch.arange(0, head_dim, 2, dtype=torch.float32)", "torch.arange(head_dim // 2, dtype=torch.float32)"),
        name="llama3_exponent_i_over_d",
    ),
    llama3(
        "s = (λ/L - low) / (high - low)",
        "not λ over L",
        ("(context / wavelength - low_freq_factor)", "(wavelength / context - low_freq_factor)"),
        name="llama3_blend_weight_inverted",
    ),
    llama3(
        "the base is always Llama 3's 500,000",
        "use the base",
        ("1.0 / base **", "1.0 / 500000.0 **"),
        name="llama3_base_hard_coded",
    ),
    llama3(
        "the long-wave band starts at the original context whatever low_freq_factor is",
        "use the low_freq_factor you are given",
        ("wavelength > context / low_freq_factor", "wavelength > context"),
        name="llama3_ignores_low_freq_factor",
    ),
    llama3(
        "no error for an odd head_dim",
        "an odd head_dim must raise a ValueError",
        (
            'if head_dim % 2 != 0:\n        raise ValueError(f"head_dim must be even (rotary turns pairs), got '
            'head_dim={head_dim}")\n    ',
            "",
        ),
        name="llama3_odd_head_dim_accepted",
    ),
    # ------------------------------------------------------------------ wavelength
    Bug(
        "wavelength_without_two_pi",
        "wavelength",
        why="takes 1 / frequency for the wavelength, forgetting that a full turn is 2π",
        cause="a full turn, 2π radians",
        code=variant(A, "wavelength", (WAVE, "base ** (2 * i / d_model)")),
    ),
    Bug(
        "wavelength_exponent_i_over_d",
        "wavelength",
        why="base^(i/d) instead of base^(2i/d)",
        cause="the exponent of the pair i is 2i/d",
        code=variant(A, "wavelength", ("2 * i / d_model", "i / d_model")),
    ),
    Bug(
        "wavelength_is_angular_frequency",
        "wavelength",
        why="returns the angular frequency base^(-2i/d), the reciprocal of what is asked (up to 2π)",
        cause="that is the angular frequency",
        code=variant(A, "wavelength", (WAVE, "base ** (-2 * i / d_model)")),
    ),
    Bug(
        "wavelength_base_hard_coded",
        "wavelength",
        why="uses 10000 whatever base is given",
        cause="use the base you are given",
        code=variant(A, "wavelength", ("base **", "10000.0 **")),
    ),
    # ------------------------------------------------------------------ effect
    Bug(
        "effect_no_positions_invariant",
        "effect",
        why="without positions, permuting the tokens is said to leave the outputs unchanged (invariance for "
        "equivariance)",
        cause="equivariant, not invariant",
        code=variant(A, "effect", (PLAIN, PLAIN.replace('"permuted the same way"', '"unchanged"'))),
    ),
    Bug(
        "effect_added_encodings_permuted",
        "effect",
        why="with added encodings, the outputs are said to be permuted like the tokens (as if the encodings moved "
        "with them)",
        cause="the encodings stay at their positions",
        code=variant(A, "effect", (ADDED_PERMUTED, ADDED_PERMUTED.replace('"changed"', '"permuted the same way"'))),
    ),
    Bug(
        "effect_rotary_shift_changes",
        "effect",
        why="rotary scores are said to change under a common shift",
        cause="depends only on the distance between their positions",
        code=variant(A, "effect", (ROTARY_SHIFTED, ROTARY_SHIFTED.replace('"unchanged"', '"changed"'))),
    ),
    Bug(
        "effect_absolute_shift_unchanged",
        "effect",
        why="scores with added (absolute) encodings are said to survive a common shift, as if they were relative",
        cause="added encodings are absolute",
        code=variant(A, "effect", (ADDED_SHIFTED, ADDED_SHIFTED.replace('"changed"', '"unchanged"'))),
    ),
    Bug(
        "effect_own_words",
        "effect",
        why="answers in its own words, not one of the options",
        cause="one of the strings of EFFECT_OPTIONS",
        code=variant(A, "effect", (PLAIN, PLAIN.replace('"permuted the same way"', '"permuted"'))),
    ),
]
