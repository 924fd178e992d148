"""Wrong answers to ch05_positional_encoding that students really write.

Sinusoidal encodings, rotary embeddings, Llama 3's frequencies, and the questions on wavelengths and on what
positions change.
"""

from tests.buggy import wrong_answers

A = "ch05_positional_encoding"

bug = wrong_answers(A)

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
BLEND = "(1 - blend) * inverse / factor + blend * inverse"

TESTS = {
    "sinusoidal_positional_encoding": ["test_sinusoidal_values", "test_sinusoidal_long", "test_sinusoidal_error"],
    "PositionalEncoding": ["test_positional_encoding", "test_positional_encoding_error"],
    "apply_rotary": ["test_rotary_values", "test_rotary_options"],
    "llama3_inverse_frequencies": ["test_llama3_values", "test_llama3_settings", "test_llama3_error"],
    "wavelength": ["test_wavelength"],
    "effect": ["test_effect"],
}

BUGS = [
    # ------------------------------------------------------------------ sinusoidal_positional_encoding
    bug(
        "sin_cos_concatenated",
        "sinusoidal_positional_encoding",
        (PAIRS, "pe = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)"),
        why="[all sines | all cosines]",
        cause="all the sines come first",
    ),
    bug(
        "sin_cos_exponent_i_over_d",
        "sinusoidal_positional_encoding",
        (EXPONENTS, "-torch.arange(d_model // 2, dtype=torch.float64) / d_model"),
        why="10000^(i/d) instead of 10000^(2i/d)",
        cause="the exponent of the pair i is i/d",
    ),
    bug(
        "sin_cos_swapped",
        "sinusoidal_positional_encoding",
        (PAIRS, "pe[:, 0::2] = torch.cos(angles)\n    pe[:, 1::2] = torch.sin(angles)"),
        why="cosines in the even columns",
        cause="the cosines are in the even columns",
    ),
    bug(
        "sin_cos_frequency_per_column",
        "sinusoidal_positional_encoding",
        (
            PAIRS,
            "every = positions * 10000.0 ** (-torch.arange(d_model, dtype=torch.float64) / d_model)\n"
            "    pe[:, 0::2] = torch.sin(every[:, 0::2])\n"
            "    pe[:, 1::2] = torch.cos(every[:, 1::2])",
        ),
        why="each column its own exponent j/d, so a pair does not share a frequency",
        cause="a frequency of its own",
    ),
    bug(
        "sin_cos_positions_from_one",
        "sinusoidal_positional_encoding",
        ("torch.arange(max_len, dtype=torch.float64)", "torch.arange(1, max_len + 1, dtype=torch.float64)"),
        why="positions 1..max_len",
        cause="the positions start at 1",
    ),
    bug(
        "sin_cos_exponent_sign",
        "sinusoidal_positional_encoding",
        ("10000.0 ** (-torch.arange", "10000.0 ** (torch.arange"),
        why="p * 10000^(2i/d): the exponent's sign",
        cause="multiplied by 10000^(2i/d)",
    ),
    bug(
        "sin_cos_integer_division",
        "sinusoidal_positional_encoding",
        (EXPONENTS, "-(torch.arange(0, d_model, 2) // d_model)"),
        why="2i // d: integer division makes every exponent 0",
        cause="integer division",
    ),
    bug(
        "sin_cos_numpy",
        "sinusoidal_positional_encoding",
        ("return pe.float()", "return pe.float().numpy()"),
        why="returns a NumPy array",
        cause="return a torch.tensor",
    ),
    bug(
        "sin_cos_no_error",
        "sinusoidal_positional_encoding",
        (ODD_CHECK + "\n    ", ""),
        why="odd d_model fails with a RuntimeError",
        cause="must raise a valueerror",
    ),
    bug(
        "sin_cos_assert",
        "sinusoidal_positional_encoding",
        (ODD_CHECK, 'assert d_model % 2 == 0, f"d_model must be even, got {d_model}"'),
        why="an assert: odd d_model is an AssertionError",
        cause="must raise a valueerror",
    ),
    bug(
        "sin_cos_message_without_name",
        "sinusoidal_positional_encoding",
        ('f"d_model must be even (sin/cos pairs), got {d_model}"', '"the width must be even"'),
        why="the message does not say which argument is wrong",
        cause="whose message names d_model",
    ),
    # ------------------------------------------------------------------ PositionalEncoding
    bug(
        "encoding_sequence_first",
        "PositionalEncoding",
        ("self.pe[:length]", "self.pe[:x.size(0)]"),
        why="slices pe by x.size(0), the batch",
        cause="batch first",
    ),
    bug(
        "encoding_tutorial_layout",
        "PositionalEncoding",
        (TABLE + ")", TABLE + ".unsqueeze(1))"),
        ("self.pe[:length]", "self.pe[:x.size(0)]"),
        why="a (max_len, 1, d) buffer for (L, B, D) inputs",
        cause="laid out for sequence-first input",
    ),
    bug(
        "encoding_no_slice",
        "PositionalEncoding",
        ("self.pe[:length]", "self.pe"),
        why="adds the whole buffer",
        cause="for the l positions of x",
    ),
    bug(
        "encoding_no_length_check",
        "PositionalEncoding",
        (LONG_CHECK, ""),
        why="a RuntimeError from broadcasting instead",
        cause="must raise a valueerror",
    ),
    bug(
        "encoding_length_off_by_one",
        "PositionalEncoding",
        ("if length > self.pe.size(0):", "if length >= self.pe.size(0):"),
        why="rejects a sequence of exactly max_len positions",
        cause="exactly max_len",
    ),
    bug(
        "encoding_message_without_name",
        "PositionalEncoding",
        ('f"x has {length} positions, more than max_len={self.pe.size(0)}"', 'f"sequence too long: {length}"'),
        why="the error does not say which limit",
        cause="names max_len",
    ),
    bug(
        "encoding_upcasts_float16",
        "PositionalEncoding",
        (".to(x.dtype)", ""),
        why="float16 input comes back as float32",
        cause="the dtype of x",
    ),
    bug(
        "encoding_zero_buffer",
        "PositionalEncoding",
        (TABLE, "torch.zeros(max_len, d_model)"),
        why="a buffer of zeros: the table is never filled in",
        cause="the buffer pe holds zeros",
    ),
    bug(
        "encoding_pe_parameter",
        "PositionalEncoding",
        (BUFFER, "self.pe = nn.Parameter(sinusoidal_positional_encoding(max_len, d_model))"),
        why="pe is a trainable parameter",
        cause="not a parameter",
    ),
    bug(
        "encoding_pe_attribute",
        "PositionalEncoding",
        (BUFFER, "self.pe = sinusoidal_positional_encoding(max_len, d_model)"),
        why="pe is a plain attribute: neither saved nor moved with the module",
        cause="not a plain attribute",
    ),
    bug(
        "encoding_dropout_before",
        "PositionalEncoding",
        (ADDED, "return self.dropout(x) + self.pe[:length].to(x.dtype)"),
        why="dropout on x before the encoding is added",
        cause="the dropout acts on x before",
    ),
    bug(
        "encoding_no_dropout",
        "PositionalEncoding",
        (ADDED, "return x + self.pe[:length].to(x.dtype)"),
        why="no dropout at all",
        cause="the dropout is never applied",
    ),
    bug(
        "encoding_dropout_always_on",
        "PositionalEncoding",
        (
            "self.dropout(x + self.pe[:length].to(x.dtype))",
            "F.dropout(x + self.pe[:length].to(x.dtype), p=self.dropout.p)",
        ),
        why="F.dropout without training=: drops in eval mode too",
        cause="dropout must be off",
    ),
    bug(
        "encoding_scales_x",
        "PositionalEncoding",
        ("x + self.pe", "x * math.sqrt(x.size(-1)) + self.pe"),
        why="scales x by sqrt(d_model) as the embedding layer would",
        cause="multiplied by the square root of d_model",
    ),
    # ------------------------------------------------------------------ apply_rotary
    bug(
        "rotary_half_split",
        "apply_rotary",
        (
            "x0, x1 = x[..., 0::2].to(compute), x[..., 1::2].to(compute)",
            "x0, x1 = x[..., : d // 2].to(compute), x[..., d // 2:].to(compute)",
        ),
        ("torch.stack([" + TURN + "], dim=-1)", "torch.cat([" + TURN + "], dim=-1)"),
        ("return rotated.flatten(-2).to(x.dtype)", "return rotated.to(x.dtype)"),
        why="pairs feature i with i + d/2 (the GPT-NeoX layout)",
        cause="paired with feature i + d/2",
    ),
    bug(
        "rotary_wrong_sign",
        "apply_rotary",
        (TURN, "x0 * cos + x1 * sin, -x0 * sin + x1 * cos"),
        why="rotates by -theta",
        cause="turns the wrong way",
    ),
    bug(
        "rotary_ignores_positions",
        "apply_rotary",
        ("if positions is None:\n        positions = " + DEFAULT_POSITIONS, "positions = " + DEFAULT_POSITIONS),
        why="always uses 0..L-1",
        cause="by positions[l], not by l",
    ),
    bug(
        "rotary_in_place",
        "apply_rotary",
        (
            ROTATED,
            "x[..., 0::2], x[..., 1::2] = (x0 * cos - x1 * sin).to(x.dtype), (x0 * sin + x1 * cos).to(x.dtype)\n"
            "    return x",
        ),
        why="writes the rotation into x",
        cause="x must be unchanged",
    ),
    bug(
        "rotary_exponent_i_over_d",
        "apply_rotary",
        (
            "torch.arange(0, d, 2, device=x.device, dtype=compute) / d",
            "torch.arange(d // 2, device=x.device, dtype=compute) / d",
        ),
        why="base^(-i/d): the frequencies fall too slowly",
        cause="the exponent of the pair i is i/d",
    ),
    bug(
        "rotary_ignores_base",
        "apply_rotary",
        ("base ** (", "10000.0 ** ("),
        why="the base is always 10000",
        cause="use the base you are given",
    ),
    bug(
        "rotary_positions_from_one",
        "apply_rotary",
        (DEFAULT_POSITIONS, "torch.arange(1, length + 1, device=x.device)"),
        why="default positions 1..L",
        cause="the default positions start at 1",
    ),
    bug(
        "rotary_float32_inside",
        "apply_rotary",
        ("compute = torch.promote_types(x.dtype, torch.float32)", "compute = torch.float32"),
        why="computes in float32 whatever the dtype of x",
        cause="compute in the dtype of x",
    ),
    bug(
        "rotary_upcasts_float16",
        "apply_rotary",
        (".flatten(-2).to(x.dtype)", ".flatten(-2)"),
        why="float16 input comes back as float32",
        cause="dtype of x (float16 here)",
    ),
    # ------------------------------------------------------------------ llama3_inverse_frequencies
    bug(
        "llama3_bands_swapped",
        "llama3_inverse_frequencies",
        ("wavelength > context / low_freq_factor", "wavelength < context / high_freq_factor"),
        ("torch.where(wavelength < context / high_freq_factor", "torch.where(wavelength > context / low_freq_factor"),
        why="slows the fast pairs and keeps the slow ones",
        cause="the bands are the wrong way round",
    ),
    bug(
        "llama3_blend_reversed",
        "llama3_inverse_frequencies",
        (BLEND, "blend * inverse / factor + (1 - blend) * inverse"),
        why="weighs the blend's two ends the wrong way",
        cause="the blend weighs the two ends the wrong way",
    ),
    bug(
        "llama3_wavelength_without_two_pi",
        "llama3_inverse_frequencies",
        ("wavelength = 2 * math.pi / inverse", "wavelength = 1 / inverse"),
        why="takes 1/ω for the wavelength",
        cause="the wavelength is 2π/ω positions",
    ),
    bug(
        "llama3_multiplied_by_factor",
        "llama3_inverse_frequencies",
        ("inverse / factor, blended", "inverse * factor, blended"),
        (BLEND, "(1 - blend) * inverse * factor + blend * inverse"),
        why="multiplies the slow pairs' frequencies by factor",
        cause="divided by factor, not multiplied",
    ),
    bug(
        "llama3_exponent_i_over_d",
        "llama3_inverse_frequencies",
        ("torch.arange(0, head_dim, 2, dtype=torch.float32)", "torch.arange(head_dim // 2, dtype=torch.float32)"),
        why="base^(-i/d) for pair i",
        cause="the exponent of pair i is 2i/head_dim",
    ),
    bug(
        "llama3_blend_weight_inverted",
        "llama3_inverse_frequencies",
        ("(context / wavelength - low_freq_factor)", "(wavelength / context - low_freq_factor)"),
        why="s = (λ/L - low) / (high - low)",
        cause="not λ over L",
    ),
    bug(
        "llama3_base_hard_coded",
        "llama3_inverse_frequencies",
        ("1.0 / base **", "1.0 / 500000.0 **"),
        why="the base is always Llama 3's 500,000",
        cause="use the base",
    ),
    bug(
        "llama3_ignores_low_freq_factor",
        "llama3_inverse_frequencies",
        ("wavelength > context / low_freq_factor", "wavelength > context"),
        why="the long-wave band starts at the original context whatever low_freq_factor is",
        cause="use the low_freq_factor you are given",
    ),
    bug(
        "llama3_odd_head_dim_accepted",
        "llama3_inverse_frequencies",
        (
            'if head_dim % 2 != 0:\n        raise ValueError(f"head_dim must be even (rotary turns pairs), got '
            'head_dim={head_dim}")\n    ',
            "",
        ),
        why="no error for an odd head_dim",
        cause="an odd head_dim must raise a ValueError",
    ),
    # ------------------------------------------------------------------ wavelength
    bug(
        "wavelength_without_two_pi",
        "wavelength",
        (WAVE, "base ** (2 * i / d_model)"),
        why="takes 1 / frequency for the wavelength, forgetting that a full turn is 2π",
        cause="a full turn, 2π radians",
    ),
    bug(
        "wavelength_exponent_i_over_d",
        "wavelength",
        ("2 * i / d_model", "i / d_model"),
        why="base^(i/d) instead of base^(2i/d)",
        cause="the exponent of the pair i is 2i/d",
    ),
    bug(
        "wavelength_is_angular_frequency",
        "wavelength",
        (WAVE, "base ** (-2 * i / d_model)"),
        why="returns the angular frequency base^(-2i/d), the reciprocal of what is asked (up to 2π)",
        cause="that is the angular frequency",
    ),
    bug(
        "wavelength_base_hard_coded",
        "wavelength",
        ("base **", "10000.0 **"),
        why="uses 10000 whatever base is given",
        cause="use the base you are given",
    ),
    # ------------------------------------------------------------------ effect
    bug(
        "effect_no_positions_invariant",
        "effect",
        (PLAIN, PLAIN.replace('"permuted the same way"', '"unchanged"')),
        why="without positions, permuting the tokens is said to leave the outputs unchanged (invariance for "
        "equivariance)",
        cause="equivariant, not invariant",
    ),
    bug(
        "effect_added_encodings_permuted",
        "effect",
        (ADDED_PERMUTED, ADDED_PERMUTED.replace('"changed"', '"permuted the same way"')),
        why="with added encodings, the outputs are said to be permuted like the tokens (as if the encodings moved "
        "with them)",
        cause="the encodings stay at their positions",
    ),
    bug(
        "effect_rotary_shift_changes",
        "effect",
        (ROTARY_SHIFTED, ROTARY_SHIFTED.replace('"unchanged"', '"changed"')),
        why="rotary scores are said to change under a common shift",
        cause="depends only on the distance between their positions",
    ),
    bug(
        "effect_absolute_shift_unchanged",
        "effect",
        (ADDED_SHIFTED, ADDED_SHIFTED.replace('"changed"', '"unchanged"')),
        why="scores with added (absolute) encodings are said to survive a common shift, as if they were relative",
        cause="added encodings are absolute",
    ),
    bug(
        "effect_own_words",
        "effect",
        (PLAIN, PLAIN.replace('"permuted the same way"', '"permuted"')),
        why="answers in its own words, not one of the options",
        cause="one of the strings of EFFECT_OPTIONS",
    ),
]
