"""Wrong answers to ch04_masking that students really write."""

from tests.buggy import Bug

TESTS = {
    "padding_mask": ["test_padding_mask"],
    "causal_mask": ["test_causal_mask"],
    "masked_softmax": ["test_masked_softmax_mask", "test_masked_softmax_general"],
    "teacher_forcing_split": ["test_teacher_forcing_split"],
    "decoder_self_attention_mask": ["test_decoder_mask"],
}


def softmax(body: str) -> str:
    return "\ndef masked_softmax(scores, mask=None, dim=-1):\n" + body


def decoder_mask(body: str) -> str:
    return "\ndef decoder_self_attention_mask(tgt, pad_id):\n" + body


BUGS = [
    # ------------------------------------------------------------------ padding_mask
    Bug("padding_inverted", "padding_mask", why="True at padding (nn.MultiheadAttention's convention)", code='''
def padding_mask(tokens, pad_id):
    return tokens == pad_id
'''),
    Bug("padding_hard_coded_zero", "padding_mask", why="assumes pad_id is 0", code='''
def padding_mask(tokens, pad_id):
    return tokens != 0
'''),
    Bug("padding_as_float", "padding_mask", why="returns a float mask", code='''
def padding_mask(tokens, pad_id):
    return (tokens != pad_id).float()
'''),
    Bug("padding_from_first_pad", "padding_mask", why="counts the length up to the first pad only", code='''
def padding_mask(tokens, pad_id):
    lengths = (tokens != pad_id).long().cumprod(dim=1).sum(dim=1)
    return torch.arange(tokens.size(1))[None, :] < lengths[:, None]
'''),
    # ------------------------------------------------------------------ causal_mask
    Bug("causal_off_by_one", "causal_mask", why="hides the diagonal: a position cannot see itself", code='''
def causal_mask(size, device=None):
    return torch.ones(size, size, dtype=torch.bool, device=device).tril(diagonal=-1)
'''),
    Bug("causal_upper_triangle", "causal_mask", why="lets queries see the future instead of the past", code='''
def causal_mask(size, device=None):
    return torch.ones(size, size, dtype=torch.bool, device=device).triu()
'''),
    Bug("causal_pytorch_convention", "causal_mask", why="True above the diagonal (True = ignore)", code='''
def causal_mask(size, device=None):
    return torch.ones(size, size, dtype=torch.bool, device=device).triu(diagonal=1)
'''),
    Bug("causal_additive_float", "causal_mask", why="an additive -inf float mask", code='''
def causal_mask(size, device=None):
    return torch.full((size, size), float("-inf"), device=device).triu(diagonal=1)
'''),
    # ------------------------------------------------------------------ masked_softmax
    Bug("softmax_mask_with_zero", "masked_softmax", why="sets masked scores to 0 instead of -inf", code=softmax('''
    if mask is None:
        return torch.softmax(scores, dim=dim)
    return torch.softmax(scores.masked_fill(~mask, 0.0), dim=dim)
''')),
    Bug("softmax_mask_after", "masked_softmax", why="multiplies the weights by the mask after the softmax",
        code=softmax('''
    weights = torch.softmax(scores, dim=dim)
    if mask is not None:
        weights = weights * mask
    return weights
''')),
    Bug("softmax_nan_full_rows", "masked_softmax", why="a fully masked row gives NaN", code=softmax('''
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=dim)
''')),
    Bug("softmax_minus_1e9", "masked_softmax", why="-1e9: uniform weights on fully masked rows, fails in float16",
        code=softmax('''
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    return torch.softmax(scores, dim=dim)
''')),
    Bug("softmax_ignores_dim", "masked_softmax", why="always normalises the last dimension", code=softmax('''
    if mask is None:
        return torch.softmax(scores, dim=-1)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights.masked_fill(~mask, 0.0)
''')),
    Bug("softmax_in_place", "masked_softmax", why="masked_fill_ overwrites the caller's scores", code=softmax('''
    if mask is None:
        return torch.softmax(scores, dim=dim)
    scores.masked_fill_(~mask, float("-inf"))
    return torch.softmax(scores, dim=dim).masked_fill(~mask, 0.0)
''')),
    Bug("softmax_inverted", "masked_softmax", why="masks where the mask is True", code=softmax('''
    if mask is None:
        return torch.softmax(scores, dim=dim)
    weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=dim)
    return weights.masked_fill(mask, 0.0)
''')),
    # ------------------------------------------------------------------ teacher_forcing_split
    Bug("split_swapped", "teacher_forcing_split", why="returns (target, input)", code='''
def teacher_forcing_split(tgt):
    return tgt[:, 1:], tgt[:, :-1]
'''),
    Bug("split_batch_dim", "teacher_forcing_split", why="slices the batch, not the positions", code='''
def teacher_forcing_split(tgt):
    return tgt[:-1], tgt[1:]
'''),
    Bug("split_no_offset", "teacher_forcing_split", why="the decoder sees the token it must predict", code='''
def teacher_forcing_split(tgt):
    return tgt[:, :-1], tgt[:, :-1]
'''),
    # ------------------------------------------------------------------ decoder_self_attention_mask
    Bug("decoder_mask_no_head_dim", "decoder_self_attention_mask", why="returns (B, L, L)", code=decoder_mask('''
    return causal_mask(tgt.size(1), tgt.device)[None] & padding_mask(tgt, pad_id)[:, None, :]
''')),
    Bug("decoder_mask_pads_queries", "decoder_self_attention_mask", why="masks padded queries, not padded keys",
        code=decoder_mask('''
    return causal_mask(tgt.size(1), tgt.device)[None, None] & padding_mask(tgt, pad_id)[:, None, :, None]
''')),
    Bug("decoder_mask_or", "decoder_self_attention_mask", why="combines the masks with | instead of &",
        code=decoder_mask('''
    return causal_mask(tgt.size(1), tgt.device)[None, None] | padding_mask(tgt, pad_id)[:, None, None, :]
''')),
    Bug("decoder_mask_causal_only", "decoder_self_attention_mask", why="forgets the padding", code=decoder_mask('''
    causal = causal_mask(tgt.size(1), tgt.device)
    return causal.expand(tgt.size(0), 1, tgt.size(1), tgt.size(1))
''')),
    Bug("decoder_mask_pad_zero", "decoder_self_attention_mask", why="hard-codes pad id 0", code=decoder_mask('''
    return causal_mask(tgt.size(1), tgt.device)[None, None] & (tgt != 0)[:, None, None, :]
''')),
]
