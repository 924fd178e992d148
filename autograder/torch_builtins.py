"""The ``torch.nn`` built-ins that graded modules must equal, given the same weights.

A converter makes weights for the student's module (a state_dict under the
contract's names, from the course's own module), and, given those weights, the
module's constructor arguments and the call's inputs, builds the built-in with
the same weights, converts the inputs to the built-in's conventions
(masks with True = may NOT attend, for instance) and returns its outputs by name.
"""

from __future__ import annotations

import torch

from attention_course.attention import MultiHeadAttention, to_torch_attn_mask, to_torch_multihead


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


CONVERTERS = {
    "multihead_attention": Converter("torch.nn.MultiheadAttention", MultiHeadAttention, _multihead_attention),
}
