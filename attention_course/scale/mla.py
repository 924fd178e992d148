"""DeepSeek-V2 and V3's multi-head latent attention in the course's layers.

Chapter 7's multi-head latent attention holding the weights of a ``transformers`` DeepSeek-V3 model, and the
cache such an attention keeps.

transformers' ``DeepseekV3Attention`` stores what chapter 7's ``MultiHeadLatentAttention`` splits into seven
matrices in four, and normalises the latents (and, where ``q_lora_rank`` is set, a latent of the queries too):

- ``q_proj`` (or ``q_a_proj``, an RMS norm ``q_a_layernorm`` and ``q_b_proj``): for every head, ``qk_nope_head_dim``
  rows of non-rotary query (``W_q``) then ``qk_rope_head_dim`` rows of rotary query (``W_qr``);
- ``kv_a_proj_with_mqa``: ``kv_lora_rank`` rows down to the latent (``W_dkv``, followed by the RMS norm
  ``kv_a_layernorm``, whose output is what the cache holds), then the rotary key's rows (``W_kr``);
- ``kv_b_proj``: for every head, ``qk_nope_head_dim`` rows of key (``W_uk``) then ``v_head_dim`` rows of value
  (``W_uv``);
- ``o_proj``: ``W_o``.

The course's class takes its submodules as they come, so the norms go where DeepSeek has them: ``W_dkv`` becomes
the down-projection followed by the norm (:func:`latent_attention`). With ``rope_interleave`` (DeepSeek's own layout,
and transformers' default) the rotary features come in interleaved pairs, as chapter 5 rotates them; without it
they are rotated in halves, and their rows are reordered
(:func:`~attention_course.published.layouts.interleave_rotary_rows`).
:func:`from_deepseek` builds a whole model of dense layers, :class:`LatentDecoderOnly`.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from attention_course.models.rope import rope_parameters
from attention_course.models.transformer import DecoderOnly
from attention_course.published.layouts import CheckpointError, interleave_rotary_rows
from attention_course.solutions.ch07_efficient_attention import MultiHeadLatentAttention

LATENT_NORM_EPS = 1e-6  # transformers' DeepseekV3RMSNorm of the latents is built with its default eps


def latent_cache_bytes(
    num_layers: int, kv_latent_dim: int, rope_dim: int, tokens: int, batch_size: int, bytes_per_value: int
) -> int:
    """Bytes of the caches of ``num_layers`` multi-head latent attentions holding ``tokens`` positions of
    ``batch_size`` sequences: a latent and a rotary key per position, whatever the number of heads."""
    return num_layers * (kv_latent_dim + rope_dim) * tokens * batch_size * bytes_per_value


DECODE_WAYS = ("naive", "latent", "absorbed")


def decode_cost_per_position(
    way: str,
    num_heads: int,
    head_dim: int,
    rope_dim: int,
    kv_latent_dim: int,
    bytes_per_value: int = 2,
    queries: int = 1,
) -> tuple[int, int]:
    """``(FLOPs, bytes read)`` that one cached position adds to a decoding step of one layer of multi-head latent
    attention, for one sequence and ``queries`` new queries per head (1; 2 where a step also checks a guessed
    token, as DeepSeek-V3's multi-token prediction does): the work that grows with the cache's length. The
    projections of the new tokens, the same at any length, are left out. The position is read once for all the
    queries, so its FLOPs grow with ``queries`` and its bytes do not (the keys and values that the ``"latent"`` way
    makes again serve all of them).

    - ``"naive"`` (DeepSeek's inference code's other way): the cache holds every head's keys, ``head_dim +
      rope_dim`` wide with the shared rotary part copied in, and values, ``head_dim`` wide; each number read is
      used in one multiply-add.
    - ``"latent"`` (chapter 7's ``absorb=False`` with a cache of latents): the cache holds the latent and the rotary
      key, and every head's keys and values are made again from the latent, ``2 * head_dim * kv_latent_dim``
      multiply-adds each per head.
    - ``"absorbed"`` (``absorb=True``): every head's query, carried into the latent's space, scores the
      ``kv_latent_dim + rope_dim`` numbers of the position and averages its ``kv_latent_dim`` latent numbers:
      multi-query attention with keys of ``kv_latent_dim + rope_dim`` features and values of ``kv_latent_dim``.
    """
    if way not in DECODE_WAYS:
        raise ValueError(f"way must be one of {', '.join(DECODE_WAYS)}, got way={way!r}")
    if isinstance(queries, bool) or not isinstance(queries, int) or queries < 1:
        raise ValueError(
            f"queries must be a whole number of at least 1 (new queries per head), got queries={queries!r}"
        )
    h, d, r, c, n = num_heads, head_dim, rope_dim, kv_latent_dim, queries
    if way == "naive":
        return n * 2 * h * (2 * d + r), h * (2 * d + r) * bytes_per_value
    if way == "latent":
        return n * 2 * h * (2 * d + r) + 2 * h * 2 * d * c, (c + r) * bytes_per_value
    return n * 2 * h * (2 * c + r), (c + r) * bytes_per_value


def _linear(weight: torch.Tensor) -> nn.Linear:
    layer = nn.Linear(weight.size(1), weight.size(0), bias=False)
    with torch.no_grad():
        layer.weight.copy_(weight)
    return layer


def _rms_norm(weight: torch.Tensor) -> nn.RMSNorm:
    norm = nn.RMSNorm(weight.numel(), eps=LATENT_NORM_EPS)
    with torch.no_grad():
        norm.weight.copy_(weight)
    return norm


def check_config(config: dict) -> None:
    """A CheckpointError naming the setting where a DeepSeek-V3 ``config`` (``config.to_dict()``, or a
    ``config.json``) describes what the course's model cannot compute."""
    layers = config["num_hidden_layers"]
    rope = rope_parameters(config)
    problems = {
        "rope_parameters": (
            rope["rope_type"] != "default",
            "the course's latent attention turns its pairs at the "
            "default frequencies: YaRN also scales the softmax by mscale², which it does not",
        ),
        "first_k_dense_replace": (
            (config.get("first_k_dense_replace") or 0) < layers,
            f"layers from {config.get('first_k_dense_replace')} on are mixtures of experts; "
            f"the course's layers have one feed-forward network (set it to {layers} or more)",
        ),
        "v_head_dim": (
            config.get("v_head_dim") != config["qk_nope_head_dim"],
            "the course's heads have values as wide as their non-rotary keys (qk_nope_head_dim)",
        ),
        "num_key_value_heads": (
            (config.get("num_key_value_heads") or config["num_attention_heads"]) != config["num_attention_heads"],
            "every head has its own keys and values",
        ),
        "attention_bias": (bool(config.get("attention_bias")), "the course's latent attention has no biases"),
        "hidden_act": (config.get("hidden_act", "silu") != "silu", "SwiGLU needs silu"),
    }
    for setting, (wrong, why) in problems.items():
        if wrong:
            value = rope["rope_type"] if setting == "rope_parameters" else config.get(setting)
            raise CheckpointError(f"config sets {setting}: {value!r}; {why}")


def latent_attention(weights: dict, config: dict, prefix: str = "") -> MultiHeadLatentAttention:
    """Chapter 7's ``MultiHeadLatentAttention`` holding the weights of one transformers ``DeepseekV3Attention``:
    ``weights`` holds its tensors under ``prefix`` (``"model.layers.0.self_attn."``), ``config`` the model's
    settings. Its ``W_dkv`` is the down-projection followed by DeepSeek's RMS norm of the latent; where
    ``q_lora_rank`` is set, ``W_q`` and ``W_qr`` share the queries' down-projection and norm."""
    check_config(config)
    heads, nope, rope_dim = config["num_attention_heads"], config["qk_nope_head_dim"], config["qk_rope_head_dim"]
    latent_dim, d_model = config["kv_lora_rank"], config["hidden_size"]
    attention = MultiHeadLatentAttention(
        d_model, heads, latent_dim, nope, rope_dim, base=float(rope_parameters(config)["rope_theta"])
    )

    def rotary(rows: torch.Tensor, count: int) -> torch.Tensor:  # to interleaved pairs, where they are halves
        return rows if config.get("rope_interleave", True) else interleave_rotary_rows(rows, count)

    w = {key.removeprefix(prefix): value for key, value in weights.items() if key.startswith(prefix)}
    if config.get("q_lora_rank") is None:
        queries = w["q_proj.weight"].view(heads, nope + rope_dim, d_model)
        attention.W_q = _linear(queries[:, :nope].reshape(heads * nope, d_model))
        attention.W_qr = _linear(rotary(queries[:, nope:].reshape(heads * rope_dim, d_model), heads))
    else:
        down, norm = _linear(w["q_a_proj.weight"]), _rms_norm(w["q_a_layernorm.weight"])
        queries = w["q_b_proj.weight"].view(heads, nope + rope_dim, -1)
        attention.W_q = nn.Sequential(down, norm, _linear(queries[:, :nope].reshape(heads * nope, -1)))
        attention.W_qr = nn.Sequential(
            down, norm, _linear(rotary(queries[:, nope:].reshape(heads * rope_dim, -1), heads))
        )
    latent_and_key = w["kv_a_proj_with_mqa.weight"]
    attention.W_dkv = nn.Sequential(_linear(latent_and_key[:latent_dim]), _rms_norm(w["kv_a_layernorm.weight"]))
    attention.W_kr = _linear(rotary(latent_and_key[latent_dim:], 1))
    keys_values = w["kv_b_proj.weight"].view(heads, 2 * nope, latent_dim)
    attention.W_uk = _linear(keys_values[:, :nope].reshape(heads * nope, latent_dim))
    attention.W_uv = _linear(keys_values[:, nope:].reshape(heads * nope, latent_dim))
    attention.W_o = _linear(w["o_proj.weight"])
    return attention


class LatentDecoderOnly(DecoderOnly):
    """The course's ``DecoderOnly`` whose layers attend with multi-head latent attention. Its cache holds, for
    every layer, the latents and the rotary keys ``(B, L, ·)``: their positions count along dimension 1, where
    grouped-query attention's ``(B, H_kv, L, d_h)`` count them along dimension 2. :meth:`absorb` makes every
    layer compute its attention with the up-projections absorbed: the same logits."""

    @staticmethod
    def cached_length(cache) -> int:
        return cache[0][0].size(1)

    def hidden_states(self, ids, cache=None, mask=None, positions=None):
        if positions is not None:
            raise ValueError("positions: the latent attention numbers its new positions after those of its cache")
        return super().hidden_states(ids, cache, mask)

    def absorb(self, absorb: bool = True) -> LatentDecoderOnly:
        """Every layer's attention computed with ``absorb`` (in place)."""
        for layer in self.layers:
            layer.self_attn.absorb = absorb
        return self


class LatentSelfAttention(nn.Module):
    """A layer's multi-head latent attention, called with its ``absorb`` setting."""

    def __init__(self, attention: MultiHeadLatentAttention, absorb: bool = False):
        super().__init__()
        self.attention, self.absorb = attention, absorb

    def forward(self, x, mask=None, cache=None):
        return self.attention(x, mask, cache, absorb=self.absorb)


def from_deepseek(weights: dict, config: dict) -> LatentDecoderOnly:
    """The course's model of a transformers ``DeepseekV3ForCausalLM`` whose layers are all dense
    (``first_k_dense_replace`` at least ``num_hidden_layers``): ``weights`` is its ``state_dict()``, ``config``
    its ``config.to_dict()``. RMS norms, SwiGLU feed-forward networks and chapter 7's multi-head latent
    attention; the logits equal transformers' up to float rounding."""
    check_config(config)
    model = LatentDecoderOnly(
        config["vocab_size"],
        config["hidden_size"],
        num_heads=1,  # the grouped-query attention that DecoderOnly builds, replaced below
        num_layers=config["num_hidden_layers"],
        d_ff=config["intermediate_size"],
        dropout=0.0,
        max_len=config["max_position_embeddings"],
        tie_weights=config.get("tie_word_embeddings", False),
        positions="rotary",
        norm="rms",
        norm_eps=config.get("rms_norm_eps", 1e-6),
        feed_forward="swiglu",
        bias=False,
        output_bias=False,
    )
    ours = {"embed.tokens.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight"}
    if model.generator.weight is not model.embed.tokens.weight:
        ours["generator.weight"] = "lm_head.weight"
    for i, layer in enumerate(model.layers):
        theirs = f"model.layers.{i}."
        layer.self_attn = LatentSelfAttention(latent_attention(weights, config, theirs + "self_attn."))
        for name, key in (("norm1", "input_layernorm"), ("norm2", "post_attention_layernorm")):
            ours[f"layers.{i}.{name}.weight"] = theirs + key + ".weight"
        for name, key in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
            ours[f"layers.{i}.ff.{name}.weight"] = theirs + f"mlp.{key}.weight"
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name, key in ours.items():
            parameters[name].copy_(weights[key])
    return model.eval()
