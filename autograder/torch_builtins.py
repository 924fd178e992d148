"""The ``torch.nn`` built-ins that graded modules must equal, given the same weights.

A converter makes weights for the student's module (a state_dict under the
contract's names, from the course's own module), and, given those weights, the
module's constructor arguments and the call's inputs, builds the built-in with
the same weights, converts the inputs to the built-in's conventions
(masks with True = may NOT attend, for instance) and returns its outputs by name.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from attention_course.attention import MultiHeadAttention, to_torch_attn_mask, to_torch_multihead
from attention_course.transformer import (DecoderLayer, EncoderLayer, FeedForward, to_torch_decoder_layer,
                                          to_torch_encoder_layer)


class Converter:
    """``label``: the built-in's name; ``module``: a course module with the contract's submodule names."""

    def __init__(self, label: str, module, function):
        self.label, self.module, self.function = label, module, function

    def weights(self, init: tuple, seed: int) -> dict:
        """Random weights for a module built with ``init``, under the contract's names."""
        torch.manual_seed(seed)
        return self.module(*init).state_dict()

    def __call__(self, weights, init, inputs, keywords) -> dict:
        with torch.no_grad():
            return self.function(weights, init, inputs, keywords)


def _argument(inputs, keywords, index: int, name: str, default=None):
    return inputs[index] if len(inputs) > index else keywords.get(name, default)


def _multihead_attention(weights, init, inputs, keywords):
    d_model, num_heads, *rest = init
    course = MultiHeadAttention(d_model, num_heads, bias=rest[0] if rest else keywords.get("bias", True))
    course.load_state_dict(weights)
    builtin = to_torch_multihead(course)
    query, key, value = inputs[:3]
    mask = _argument(inputs, keywords, 3, "mask")
    attn_mask = None
    if mask is not None:
        attn_mask = to_torch_attn_mask(mask, query.size(0), num_heads, query.size(1), key.size(1))
    output, per_head = builtin(query, key, value, attn_mask=attn_mask, need_weights=True,
                               average_attn_weights=False)
    return {"output": output, "weights": per_head}


def _feed_forward(weights, init, inputs, keywords):
    course = FeedForward(*init[:2])
    course.load_state_dict(weights)
    builtin = nn.Sequential(course.linear1, nn.ReLU(), course.linear2)
    return {"result": builtin(inputs[0])}


def _layer_args(init):
    """(d_model, num_heads, d_ff, dropout=0.0, norm_first=False) -> the same, with dropout 0."""
    d_model, num_heads, d_ff, *rest = init
    norm_first = rest[1] if len(rest) > 1 else False
    return d_model, num_heads, d_ff, 0.0, norm_first


def _encoder_layer(weights, init, inputs, keywords):
    course = EncoderLayer(*_layer_args(init))
    course.load_state_dict(weights)
    x = inputs[0]
    mask = _argument(inputs, keywords, 1, "mask")
    attn_mask = None if mask is None else to_torch_attn_mask(mask, x.size(0), init[1], x.size(1), x.size(1))
    return {"result": to_torch_encoder_layer(course).eval()(x, src_mask=attn_mask)}


def _decoder_layer(weights, init, inputs, keywords):
    course = DecoderLayer(*_layer_args(init))
    course.load_state_dict(weights)
    x, memory = inputs[:2]
    tgt_mask = _argument(inputs, keywords, 2, "tgt_mask")
    memory_mask = _argument(inputs, keywords, 3, "memory_mask")
    batch, heads, length, sources = x.size(0), init[1], x.size(1), memory.size(1)
    tgt_mask = None if tgt_mask is None else to_torch_attn_mask(tgt_mask, batch, heads, length, length)
    memory_mask = None if memory_mask is None else to_torch_attn_mask(memory_mask, batch, heads, length, sources)
    return {"result": to_torch_decoder_layer(course).eval()(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)}


CONVERTERS = {
    "multihead_attention": Converter("torch.nn.MultiheadAttention", MultiHeadAttention, _multihead_attention),
    "feed_forward": Converter("nn.Sequential(linear1, nn.ReLU(), linear2)", lambda *init: FeedForward(*init[:2]),
                              _feed_forward),
    "encoder_layer": Converter("torch.nn.TransformerEncoderLayer", lambda *init: EncoderLayer(*_layer_args(init)),
                               _encoder_layer),
    "decoder_layer": Converter("torch.nn.TransformerDecoderLayer", lambda *init: DecoderLayer(*_layer_args(init)),
                               _decoder_layer),
}
