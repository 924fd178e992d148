"""The course's models that a check puts a student's module into, and the student's module in one of their layers.

A small Llama-family decoder-only model (``attention_course.models.transformer.DecoderOnly`` with rotary positions,
RMS norms and SwiGLU, as :mod:`attention_course.published.pretrained` loads real checkpoints into it) with random
weights, the same model with the attention of every layer replaced by other modules holding the same weights, and
:class:`GuestAttention`, the student's module (called through a check's :class:`~autograder.calls.call.Call`) in
place of one layer's attention.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable

import torch

from attention_course.models.transformer import DecoderOnly
from autograder.api.items import shape_difference, type_name
from autograder.calls import global_rng
from autograder.calls.call import Call
from autograder.calls.kv_cache import cache_pair


def llama_family(attention: type, init: tuple, layers: int, vocab_size: int, max_len: int, seed: int) -> DecoderOnly:
    """A Llama-family ``DecoderOnly`` in eval mode whose every layer's self-attention is ``attention(*init)``
    (``init``: d_model, num_heads, num_kv_heads[, bias[, base]]), every weight drawn from ``seed``: the
    norms' scales around 1, the rest around 0, large enough for the attention's scores to matter."""
    arguments = inspect.signature(attention).bind(*init)
    arguments.apply_defaults()
    built = arguments.arguments
    generator = torch.Generator().manual_seed(seed)
    with global_rng.forked(seed):
        model = DecoderOnly(
            vocab_size,
            built["d_model"],
            built["num_heads"],
            layers,
            2 * built["d_model"],
            dropout=0.0,
            max_len=max_len,
            num_kv_heads=built["num_kv_heads"],
            positions="rotary",
            rotary_base=built["base"],
            norm="rms",
            feed_forward="swiglu",
            bias=built["bias"],
            output_bias=False,
        )
        for layer in model.layers:
            layer.self_attn = attention(*init)
    with torch.no_grad():
        for name, p in model.named_parameters():
            drawn = torch.randn(p.shape, generator=generator) * (0.3 if p.dim() > 1 else 0.1)
            p.copy_(drawn + 1 if name.endswith(("norm1.weight", "norm2.weight", "norm.weight")) else drawn)
    return model.eval()


def with_attention(model: DecoderOnly, replace: Callable[[int, torch.nn.Module], torch.nn.Module]) -> DecoderOnly:
    """A copy of ``model`` whose layer ``i``'s self-attention is ``replace(i, that layer's self-attention)``."""
    twin = copy.deepcopy(model)
    for i, layer in enumerate(twin.layers):
        layer.self_attn = replace(i, model.layers[i].self_attn)
    return twin


class GuestAttention(torch.nn.Module):
    """The student's module in place of one layer's attention: built in the sandbox with that layer's weights,
    each call sent there, and what comes back checked for its shapes before the model goes on with it."""

    def __init__(self, call: Call, attention: torch.nn.Module, layer: int):
        super().__init__()
        call.weights = {k: v.detach().clone() for k, v in attention.state_dict().items()}
        self.call, self.layer = call, layer
        self.instance = call.instance(call.item.obj)
        self.kv_heads, self.d_head = attention.num_kv_heads, attention.W_q.out_features // attention.num_heads

    def forward(self, x, mask=None, cache=None):
        past = 0 if cache is None else cache[0].size(2)
        got = self.call.outputs(self.call.invoke(self.instance, [x], {"mask": mask, "cache": cache}))
        keys, values = cache_pair(self.call, got)
        kv_shape = (x.size(0), self.kv_heads, past + x.size(1), self.d_head)
        for name, value, shape in (
            ("output", got.get("output"), x.shape),
            ("keys", keys, kv_shape),
            ("values", values, kv_shape),
        ):
            where = f"in layer {self.layer}, after {past} cached positions, the {name} tensor it returned"
            if not isinstance(value, torch.Tensor) or not value.is_floating_point():
                found = f"a {type_name(value)}" if not isinstance(value, torch.Tensor) else f"of dtype {value.dtype}"
                self.call.fail(f"{where} is {found}; expected a float tensor {tuple(shape)}")
            if value.shape != shape:
                self.call.fail(shape_difference(where, value.shape, shape, "expected a float tensor with"))
        return got["output"].to(x.dtype), (keys.to(x.dtype), values.to(x.dtype))
