"""The course's modules next to PyTorch's built-ins: the same weights, the other conventions.

The course names its submodules as the contract says (``W_q``, ``W_k``, ``W_v``, ``W_o``;
``self_attn``, ``cross_attn``, ``ff.linear1``, ``norm1``, ...). The functions here read weights
under those names, from a module or a ``state_dict``, and build the ``torch.nn`` built-in that
computes the same thing: ``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer``,
``nn.TransformerDecoderLayer``. ``to_torch_attn_mask`` turns the course's mask (True = may
attend) into the built-ins' (True = may not). Chapters 3, 4 and 6 use them to show that the
course's code equals PyTorch's; the grader uses them to check students' modules.
"""

from __future__ import annotations

import torch
import torch.nn as nn

PROJECTIONS = ("W_q", "W_k", "W_v")


def to_torch_attn_mask(mask: torch.Tensor, batch: int, num_heads: int, q_len: int, k_len: int) -> torch.Tensor:
    """The course's mask (True = attend, broadcastable to (B, H, Lq, Lk)) as ``nn.MultiheadAttention``'s
    ``attn_mask``: True = may NOT attend, shaped (B * H, Lq, Lk)."""
    full = mask.expand(batch, num_heads, q_len, k_len)
    return ~full.reshape(batch * num_heads, q_len, k_len)


def _like(state: dict, key: str) -> dict:
    tensor = state[key]
    return {"device": tensor.device, "dtype": tensor.dtype}


def load_multihead(builtin: nn.MultiheadAttention, state: dict, prefix: str = "") -> nn.MultiheadAttention:
    """Copy a multi-head attention's weights (``{prefix}W_q.weight``, ...) into ``builtin``."""
    bias = f"{prefix}W_q.bias" in state
    with torch.no_grad():
        builtin.in_proj_weight.copy_(torch.cat([state[f"{prefix}{name}.weight"] for name in PROJECTIONS]))
        builtin.out_proj.weight.copy_(state[f"{prefix}W_o.weight"])
        if bias:
            builtin.in_proj_bias.copy_(torch.cat([state[f"{prefix}{name}.bias"] for name in PROJECTIONS]))
            builtin.out_proj.bias.copy_(state[f"{prefix}W_o.bias"])
    return builtin


def multihead_from_state(state: dict, num_heads: int, prefix: str = "") -> nn.MultiheadAttention:
    """An ``nn.MultiheadAttention(batch_first=True)`` holding the weights ``state`` holds under ``prefix``."""
    d_model = state[f"{prefix}W_q.weight"].shape[1]
    bias = f"{prefix}W_q.bias" in state
    builtin = nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=True)
    return load_multihead(builtin.to(**_like(state, f"{prefix}W_q.weight")), state, prefix)


def to_torch_multihead(module: nn.Module, num_heads: int | None = None) -> nn.MultiheadAttention:
    """An ``nn.MultiheadAttention(batch_first=True)`` holding the same weights as ``module``."""
    return multihead_from_state(module.state_dict(), num_heads or module.num_heads)


def _load_layer(builtin: nn.Module, state: dict, norms: int, attentions: dict[str, str]) -> nn.Module:
    for ours, theirs in attentions.items():
        load_multihead(getattr(builtin, theirs), state, f"{ours}.")
    with torch.no_grad():
        for name in ("linear1", "linear2"):
            getattr(builtin, name).weight.copy_(state[f"ff.{name}.weight"])
            getattr(builtin, name).bias.copy_(state[f"ff.{name}.bias"])
        for i in range(1, norms + 1):
            getattr(builtin, f"norm{i}").weight.copy_(state[f"norm{i}.weight"])
            getattr(builtin, f"norm{i}").bias.copy_(state[f"norm{i}.bias"])
    return builtin


def encoder_layer_from_state(state: dict, num_heads: int, norm_first: bool = False) -> nn.TransformerEncoderLayer:
    """An ``nn.TransformerEncoderLayer(batch_first=True, activation="relu", dropout=0)`` with these weights."""
    d_ff, d_model = state["ff.linear1.weight"].shape
    builtin = nn.TransformerEncoderLayer(
        d_model, num_heads, d_ff, dropout=0.0, activation="relu", batch_first=True, norm_first=norm_first
    )
    builtin = builtin.to(**_like(state, "norm1.weight"))
    return _load_layer(builtin, state, 2, {"self_attn": "self_attn"}).eval()


def decoder_layer_from_state(state: dict, num_heads: int, norm_first: bool = False) -> nn.TransformerDecoderLayer:
    """An ``nn.TransformerDecoderLayer(batch_first=True, activation="relu", dropout=0)`` with these weights."""
    d_ff, d_model = state["ff.linear1.weight"].shape
    builtin = nn.TransformerDecoderLayer(
        d_model, num_heads, d_ff, dropout=0.0, activation="relu", batch_first=True, norm_first=norm_first
    )
    builtin = builtin.to(**_like(state, "norm1.weight"))
    return _load_layer(builtin, state, 3, {"self_attn": "self_attn", "cross_attn": "multihead_attn"}).eval()


def to_torch_encoder_layer(layer: nn.Module) -> nn.TransformerEncoderLayer:
    """The built-in encoder layer with ``layer``'s weights, its number of heads and its ``norm_first``."""
    return encoder_layer_from_state(layer.state_dict(), layer.self_attn.num_heads, layer.norm_first)


def to_torch_decoder_layer(layer: nn.Module) -> nn.TransformerDecoderLayer:
    """The built-in decoder layer with ``layer``'s weights, its number of heads and its ``norm_first``."""
    return decoder_layer_from_state(layer.state_dict(), layer.self_attn.num_heads, layer.norm_first)
