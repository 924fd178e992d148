"""The ``torch.nn`` built-ins that graded modules must equal, given the same weights.

A converter makes random weights for the student's module from its constructor arguments alone
(a ``state_dict`` under the contract's names: no implementation of the module is needed, so the
visible tests can run on a student's machine), and, given those weights, the constructor
arguments and the call's inputs, builds the built-in with the same weights
(:mod:`attention_course.models.interop`), converts the inputs to the built-in's conventions (masks with
True = may NOT attend, for instance) and returns its outputs by name.

Layer norms get random weights and biases too, not the fresh ones and zeros that hide a norm used
in the wrong place.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from attention_course.models.interop import (
    decoder_layer_from_state,
    encoder_layer_from_state,
    multihead_from_state,
    to_torch_attn_mask,
)
from autograder.calls import global_rng


def _linear(state: dict, name: str, n_in: int, n_out: int, bias: bool, generator: torch.Generator) -> None:
    bound = 1 / math.sqrt(n_in)
    state[f"{name}.weight"] = (torch.rand(n_out, n_in, generator=generator) * 2 - 1) * bound
    if bias:
        state[f"{name}.bias"] = (torch.rand(n_out, generator=generator) * 2 - 1) * bound


def _norm(state: dict, name: str, size: int, generator: torch.Generator) -> None:
    state[f"{name}.weight"] = 1 + 0.5 * torch.randn(size, generator=generator)
    state[f"{name}.bias"] = 0.5 * torch.randn(size, generator=generator)


def _attention(state: dict, prefix: str, d_model: int, bias: bool, generator: torch.Generator) -> None:
    for name in ("W_q", "W_k", "W_v", "W_o"):
        _linear(state, f"{prefix}{name}", d_model, d_model, bias, generator)


def _ff(state: dict, d_model: int, d_ff: int, generator: torch.Generator) -> None:
    _linear(state, "ff.linear1", d_model, d_ff, True, generator)
    _linear(state, "ff.linear2", d_ff, d_model, True, generator)


def _layer_args(init):
    """(d_model, num_heads, d_ff, dropout=0.0, norm_first=False) -> (d_model, num_heads, d_ff, norm_first)."""
    d_model, num_heads, d_ff, *rest = init
    return d_model, num_heads, d_ff, bool(rest[1]) if len(rest) > 1 else False


def _argument(inputs, keywords, index: int, name: str, default=None):
    return inputs[index] if len(inputs) > index else keywords.get(name, default)


class Converter:
    """A built-in: ``label`` its name, ``make_weights(init, generator)`` random weights under the
    contract's names, ``function(weights, init, inputs, keywords)`` its outputs by name."""

    def __init__(self, label: str, make_weights, function):
        self.label, self.make_weights, self.function = label, make_weights, function

    def weights(self, init: tuple, seed: int) -> dict:
        """Random weights for a module built with ``init``, under the contract's names."""
        generator = torch.Generator().manual_seed(seed)
        return self.make_weights(tuple(init), generator)

    def __call__(self, weights, init, inputs, keywords) -> dict:
        # Building the built-in draws its first weights from PyTorch's generator, which a train-mode check
        # graded beside this one (in another thread of `make grade`) has seeded for its own dropout.
        with global_rng.forked(), torch.no_grad():
            return self.function(weights, tuple(init), inputs, keywords)


def _multihead_weights(init, generator):
    d_model, _, *rest = init
    state = {}
    _attention(state, "", d_model, bool(rest[0]) if rest else True, generator)
    return state


def _multihead_attention(weights, init, inputs, keywords):
    num_heads = init[1]
    builtin = multihead_from_state(weights, num_heads)
    query, key, value = inputs[:3]
    mask = _argument(inputs, keywords, 3, "mask")
    attn_mask = None
    if mask is not None:
        attn_mask = to_torch_attn_mask(mask, query.size(0), num_heads, query.size(1), key.size(1))
    output, per_head = builtin(query, key, value, attn_mask=attn_mask, need_weights=True, average_attn_weights=False)
    return {"output": output, "weights": per_head}


def _feed_forward_weights(init, generator):
    state = {}
    _ff(state, init[0], init[1], generator)
    return {key.removeprefix("ff."): value for key, value in state.items()}


def _feed_forward(weights, init, inputs, keywords):
    linear1, linear2 = nn.Linear(init[0], init[1]), nn.Linear(init[1], init[0])
    linear1.load_state_dict({"weight": weights["linear1.weight"], "bias": weights["linear1.bias"]})
    linear2.load_state_dict({"weight": weights["linear2.weight"], "bias": weights["linear2.bias"]})
    return {"result": nn.Sequential(linear1, nn.ReLU(), linear2)(inputs[0])}


def _encoder_weights(init, generator):
    d_model, _, d_ff, _ = _layer_args(init)
    state = {}
    _attention(state, "self_attn.", d_model, True, generator)
    _ff(state, d_model, d_ff, generator)
    for i in (1, 2):
        _norm(state, f"norm{i}", d_model, generator)
    return state


def _encoder_layer(weights, init, inputs, keywords):
    _, num_heads, _, norm_first = _layer_args(init)
    x = inputs[0]
    mask = _argument(inputs, keywords, 1, "mask")
    attn_mask = None if mask is None else to_torch_attn_mask(mask, x.size(0), num_heads, x.size(1), x.size(1))
    return {"result": encoder_layer_from_state(weights, num_heads, norm_first)(x, src_mask=attn_mask)}


def _decoder_weights(init, generator):
    d_model, _, d_ff, _ = _layer_args(init)
    state = {}
    _attention(state, "self_attn.", d_model, True, generator)
    _attention(state, "cross_attn.", d_model, True, generator)
    _ff(state, d_model, d_ff, generator)
    for i in (1, 2, 3):
        _norm(state, f"norm{i}", d_model, generator)
    return state


def _decoder_layer(weights, init, inputs, keywords):
    _, num_heads, _, norm_first = _layer_args(init)
    x, memory = inputs[:2]
    tgt_mask = _argument(inputs, keywords, 2, "tgt_mask")
    memory_mask = _argument(inputs, keywords, 3, "memory_mask")
    batch, length, sources = x.size(0), x.size(1), memory.size(1)
    tgt_mask = None if tgt_mask is None else to_torch_attn_mask(tgt_mask, batch, num_heads, length, length)
    memory_mask = None if memory_mask is None else to_torch_attn_mask(memory_mask, batch, num_heads, length, sources)
    builtin = decoder_layer_from_state(weights, num_heads, norm_first)
    return {"result": builtin(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)}


def _gqa_weights(init, generator):
    d_model, num_heads, num_kv_heads, *rest = init
    bias = bool(rest[0]) if rest else False
    kv = num_kv_heads * (d_model // num_heads)
    state = {}
    _linear(state, "W_q", d_model, d_model, bias, generator)
    _linear(state, "W_k", d_model, kv, bias, generator)
    _linear(state, "W_v", d_model, kv, bias, generator)
    _linear(state, "W_o", d_model, d_model, bias, generator)
    return state


def _repeat_heads(tensor: torch.Tensor, num_kv_heads: int, repeats: int) -> torch.Tensor:
    """A projection's rows (or bias) for key/value heads, each head's block repeated ``repeats`` times in turn."""
    blocks = tensor.reshape(num_kv_heads, -1, *tensor.shape[1:])
    return blocks.repeat_interleave(repeats, dim=0).reshape(-1, *tensor.shape[1:])


def _grouped_query_attention(weights, init, inputs, keywords):
    """Grouped-query attention is multi-head attention whose key and value projections repeat each
    key/value head's rows for the query heads that share it."""
    d_model, num_heads, num_kv_heads, *_ = init
    repeats = num_heads // num_kv_heads
    state = dict(weights)
    for name in ("W_k", "W_v"):
        state[f"{name}.weight"] = _repeat_heads(weights[f"{name}.weight"], num_kv_heads, repeats)
        if f"{name}.bias" in weights:
            state[f"{name}.bias"] = _repeat_heads(weights[f"{name}.bias"], num_kv_heads, repeats)
    builtin = multihead_from_state(state, num_heads)
    x = inputs[0]
    mask = _argument(inputs, keywords, 1, "mask")
    attn_mask = None if mask is None else to_torch_attn_mask(mask, x.size(0), num_heads, x.size(1), x.size(1))
    output, _ = builtin(x, x, x, attn_mask=attn_mask, need_weights=False)
    return {"output": output}


CONVERTERS = {
    "multihead_attention": Converter("torch.nn.MultiheadAttention", _multihead_weights, _multihead_attention),
    "feed_forward": Converter("nn.Sequential(linear1, nn.ReLU(), linear2)", _feed_forward_weights, _feed_forward),
    "encoder_layer": Converter("torch.nn.TransformerEncoderLayer", _encoder_weights, _encoder_layer),
    "decoder_layer": Converter("torch.nn.TransformerDecoderLayer", _decoder_weights, _decoder_layer),
    "grouped_query_attention": Converter(
        "torch.nn.MultiheadAttention with each key/value head repeated", _gqa_weights, _grouped_query_attention
    ),
}
