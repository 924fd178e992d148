"""How each layout of published checkpoints maps onto the course's ``DecoderOnly``: its settings and its tensors.

A layout (:class:`GPT2`, :class:`Llama`, :class:`Mistral`, :class:`Qwen2`) reads a ``config.json`` into the
keyword arguments of :class:`~attention_course.models.transformer.DecoderOnly` (``settings``), refusing by name a
setting the course cannot compute, and lists every tensor of its checkpoints with the course's parameters made
from it (``pieces``). :mod:`attention_course.published.pretrained` reads the files and loads them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from attention_course.models.rope import inverse_frequencies, rope_parameters

FAMILIES = (
    "GPT2LMHeadModel (the GPT-2 family), LlamaForCausalLM (the Llama family: Llama 2, 3, 3.1 and 3.2, TinyLlama, "
    "SmolLM), MistralForCausalLM (Mistral) and Qwen2ForCausalLM (Qwen2 and Qwen2.5)"
)


class CheckpointError(ValueError):
    """A checkpoint that the course's model cannot hold: the message names the file, key or setting."""


@dataclass(frozen=True)
class Convert:
    """How a checkpoint's tensor becomes a parameter of the course's model, in words and as a function."""

    how: str
    apply: Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Piece:
    """One tensor of a checkpoint: its name, the shape its config gives it, and the course's parameters made
    from it (course name -> how)."""

    key: str
    shape: tuple[int, ...]
    targets: dict[str, Convert]


_SAME = Convert("as it is", lambda t: t)
_TRANSPOSED = Convert("transposed (GPT-2's Conv1D computes x @ W)", lambda t: t.t())


def interleave_rotary_rows(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """The rows (or entries, for a bias) of a query or key projection in Hugging Face's "rotate half" layout,
    reordered within each head for interleaved rotary pairs: new row 2i is old row i, new row 2i+1 is old row
    i + dh/2. This undoes the permutation by which Hugging Face's conversion of Meta's Llama weights made them
    rotate-half; weights in Meta's own layout are interleaved already and are not to be permuted."""
    d_head = weight.size(0) // heads
    order = torch.arange(d_head).view(2, d_head // 2).t().reshape(-1)  # 0, dh/2, 1, dh/2 + 1, ...
    return weight.reshape(heads, d_head, *weight.shape[1:])[:, order].reshape(weight.shape)


class GPT2:
    """``GPT2LMHeadModel``: the course's DecoderOnly with learned positions, layer norms and GELU."""

    IGNORED = (".attn.bias", ".attn.masked_bias")  # the causal mask kept as a buffer, not a weight

    @staticmethod
    def settings(config: dict) -> dict:
        unsupported = {
            "scale_attn_weights": (config.get("scale_attn_weights", True), True),
            "scale_attn_by_inverse_layer_idx": (config.get("scale_attn_by_inverse_layer_idx", False), False),
            "reorder_and_upcast_attn": (config.get("reorder_and_upcast_attn", False), False),
            "add_cross_attention": (config.get("add_cross_attention", False), False),
        }
        for setting, (value, supported) in unsupported.items():
            if value != supported:
                raise CheckpointError(f"config.json sets {setting}={value}; the course's GPT-2 needs {supported}")
        activations = {"gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu": "gelu_exact"}
        activation = config.get("activation_function", "gelu_new")
        if activation not in activations:
            raise CheckpointError(
                f"config.json's activation_function is {activation!r}; the course's GPT-2 knows "
                f"{', '.join(activations)}"
            )
        d_model = config["n_embd"]
        return {
            "vocab_size": config["vocab_size"],
            "d_model": d_model,
            "num_heads": config["n_head"],
            "num_layers": config["n_layer"],
            "d_ff": config.get("n_inner") or 4 * d_model,
            "max_len": config["n_positions"],
            "tie_weights": config.get("tie_word_embeddings", True),
            "positions": "learned",
            "norm_eps": config.get("layer_norm_epsilon", 1e-5),
            "feed_forward": activations[activation],
            "bias": True,
            "output_bias": False,
        }

    @staticmethod
    def pieces(s: dict) -> list[Piece]:
        d, f = s["d_model"], s["d_ff"]

        def third(i):  # c_attn holds [W_q | W_k | W_v] side by side, each (d_model, d_model), stored as x @ W
            return Convert(
                f"part {i + 1} of 3 (columns {i * d} to {(i + 1) * d - 1}), transposed",
                lambda t: t[..., i * d : (i + 1) * d].t() if t.dim() == 2 else t[i * d : (i + 1) * d],
            )

        pieces = [
            Piece("wte.weight", (s["vocab_size"], d), {"embed.tokens.weight": _SAME}),
            Piece("wpe.weight", (s["max_len"], d), {"embed.positions.weight": _SAME}),
            Piece("ln_f.weight", (d,), {"norm.weight": _SAME}),
            Piece("ln_f.bias", (d,), {"norm.bias": _SAME}),
        ]
        if not s["tie_weights"]:
            pieces.append(Piece("lm_head.weight", (s["vocab_size"], d), {"generator.weight": _SAME}))
        for i in range(s["num_layers"]):
            h, layer = f"h.{i}.", f"layers.{i}."
            attention = {f"{layer}self_attn.W_{name}": third(j) for j, name in enumerate("qkv")}
            pieces += [
                Piece(h + "ln_1.weight", (d,), {layer + "norm1.weight": _SAME}),
                Piece(h + "ln_1.bias", (d,), {layer + "norm1.bias": _SAME}),
                Piece(h + "attn.c_attn.weight", (d, 3 * d), {k + ".weight": v for k, v in attention.items()}),
                Piece(h + "attn.c_attn.bias", (3 * d,), {k + ".bias": v for k, v in attention.items()}),
                Piece(h + "attn.c_proj.weight", (d, d), {layer + "self_attn.W_o.weight": _TRANSPOSED}),
                Piece(h + "attn.c_proj.bias", (d,), {layer + "self_attn.W_o.bias": _SAME}),
                Piece(h + "ln_2.weight", (d,), {layer + "norm2.weight": _SAME}),
                Piece(h + "ln_2.bias", (d,), {layer + "norm2.bias": _SAME}),
                Piece(h + "mlp.c_fc.weight", (d, f), {layer + "ff.linear1.weight": _TRANSPOSED}),
                Piece(h + "mlp.c_fc.bias", (f,), {layer + "ff.linear1.bias": _SAME}),
                Piece(h + "mlp.c_proj.weight", (f, d), {layer + "ff.linear2.weight": _TRANSPOSED}),
                Piece(h + "mlp.c_proj.bias", (d,), {layer + "ff.linear2.bias": _SAME}),
            ]
        return pieces

    @staticmethod
    def checkpoint_keys(tensors: dict) -> dict:
        """The checkpoint's tensors named without the ``transformer.`` prefix that some checkpoints have."""
        return {k.removeprefix("transformer."): v for k, v in tensors.items()}


class Llama:
    """``LlamaForCausalLM``: the course's DecoderOnly with rotary positions, RMS norms and SwiGLU."""

    IGNORED = ("rotary_emb.inv_freq",)  # the rotary frequencies kept as a buffer by older checkpoints

    @classmethod
    def settings(cls, config: dict) -> dict:
        d_model, heads = config["hidden_size"], config["num_attention_heads"]
        if config.get("hidden_act", "silu") != "silu":
            raise CheckpointError(f"config.json's hidden_act is {config['hidden_act']!r}; SwiGLU needs silu")
        head_dim = config.get("head_dim") or d_model // heads
        if head_dim * heads != d_model:
            raise CheckpointError(
                f"config.json's head_dim is {head_dim} with {heads} heads and hidden_size {d_model}; the course's "
                f"attention splits hidden_size into the heads (head_dim = hidden_size / num_attention_heads)"
            )
        attention_bias, mlp_bias = config.get("attention_bias", False), config.get("mlp_bias", False)
        if attention_bias != mlp_bias:
            raise CheckpointError(
                f"config.json sets attention_bias={attention_bias} and mlp_bias={mlp_bias}; the course's layer "
                f"gives its attention and its feed-forward network biases alike"
            )
        rope = rope_parameters(config)
        try:
            inverse_frequencies(head_dim, rope, config["max_position_embeddings"])
        except (ValueError, KeyError) as exc:
            key = f"its setting {exc}" if isinstance(exc, KeyError) else exc
            raise CheckpointError(f"config.json's rotary scaling (rope_scaling or rope_parameters): {key}") from None
        return {
            "vocab_size": config["vocab_size"],
            "d_model": d_model,
            "num_heads": heads,
            "num_kv_heads": config.get("num_key_value_heads") or heads,
            "num_layers": config["num_hidden_layers"],
            "d_ff": config["intermediate_size"],
            "max_len": config["max_position_embeddings"],
            "tie_weights": config.get("tie_word_embeddings", False),
            "positions": "rotary",
            "rotary_base": float(rope["rope_theta"]),
            "rotary_scaling": None if rope["rope_type"] == "default" else rope,
            "sliding_window": cls.windows(config),
            "norm": "rms",
            "norm_eps": config.get("rms_norm_eps", 1e-6),
            "feed_forward": "swiglu",
            "bias": attention_bias,
            "qkv_bias": False,
            "output_bias": False,
        }

    @staticmethod
    def windows(config: dict) -> list[int | None] | None:
        """The sliding window of each layer: None for the Llama family, which attends to every position."""
        return None

    @staticmethod
    def pieces(s: dict) -> list[Piece]:
        d, f, heads, kv_heads = s["d_model"], s["d_ff"], s["num_heads"], s["num_kv_heads"]
        d_kv = kv_heads * (d // heads)

        def rows_of(h):
            return Convert(
                "rows reordered within each head, from rotate-half to interleaved pairs",
                lambda t: interleave_rotary_rows(t, h),
            )

        pieces = [
            Piece("model.embed_tokens.weight", (s["vocab_size"], d), {"embed.tokens.weight": _SAME}),
            Piece("model.norm.weight", (d,), {"norm.weight": _SAME}),
        ]
        if not s["tie_weights"]:
            pieces.append(Piece("lm_head.weight", (s["vocab_size"], d), {"generator.weight": _SAME}))
        for i in range(s["num_layers"]):
            m, layer = f"model.layers.{i}.", f"layers.{i}."
            projections = [  # (checkpoint name, course name, (out, in), how the rows become the course's)
                ("self_attn.q_proj", "self_attn.W_q", (d, d), rows_of(heads)),
                ("self_attn.k_proj", "self_attn.W_k", (d_kv, d), rows_of(kv_heads)),
                ("self_attn.v_proj", "self_attn.W_v", (d_kv, d), _SAME),
                ("self_attn.o_proj", "self_attn.W_o", (d, d), _SAME),
                ("mlp.gate_proj", "ff.gate", (f, d), _SAME),
                ("mlp.up_proj", "ff.up", (f, d), _SAME),
                ("mlp.down_proj", "ff.down", (d, f), _SAME),
            ]
            for theirs, ours, shape, convert in projections:
                pieces.append(Piece(f"{m}{theirs}.weight", shape, {f"{layer}{ours}.weight": convert}))
                if s["bias"] or (s["qkv_bias"] and theirs[-6:] in ("q_proj", "k_proj", "v_proj")):
                    pieces.append(Piece(f"{m}{theirs}.bias", shape[:1], {f"{layer}{ours}.bias": convert}))
            pieces += [
                Piece(m + "input_layernorm.weight", (d,), {layer + "norm1.weight": _SAME}),
                Piece(m + "post_attention_layernorm.weight", (d,), {layer + "norm2.weight": _SAME}),
            ]
        return pieces

    @staticmethod
    def checkpoint_keys(tensors: dict) -> dict:
        return dict(tensors)


class Mistral(Llama):
    """``MistralForCausalLM``: the Llama family's layout, every layer attending within ``sliding_window``
    positions (chapter 7's sliding-window mask) where the config sets one."""

    @staticmethod
    def windows(config: dict) -> list[int | None] | None:
        return [config.get("sliding_window")] * config["num_hidden_layers"]


class Qwen2(Llama):
    """``Qwen2ForCausalLM`` (Qwen2 and Qwen2.5): the Llama family's layout with biases on the query, key and
    value projections (none on the output projection or the feed-forward network); where the config turns
    ``use_sliding_window`` on, the layers that ``layer_types`` marks ``sliding_attention`` attend within
    ``sliding_window``."""

    @classmethod
    def settings(cls, config: dict) -> dict:
        for setting in ("attention_bias", "mlp_bias"):  # Qwen2's layout is fixed: no such settings
            if config.get(setting):
                raise CheckpointError(f"config.json sets {setting}; Qwen2 biases its q, k and v projections only")
        return {**super().settings(config), "qkv_bias": True}

    @staticmethod
    def windows(config: dict) -> list[int | None] | None:
        layers = config["num_hidden_layers"]
        kinds = config.get("layer_types")
        if kinds is None:  # configs written before layer_types: sliding from layer max_window_layers on
            sliding = config.get("use_sliding_window", False)
            start = config.get("max_window_layers", layers)
            kinds = ["sliding_attention" if sliding and i >= start else "full_attention" for i in range(layers)]
        if len(kinds) != layers or not set(kinds) <= {"full_attention", "sliding_attention"}:
            raise CheckpointError(f"config.json's layer_types {kinds} are not one full or sliding kind per layer")
        window = config.get("sliding_window") if config.get("use_sliding_window", False) else None
        return [window if kind == "sliding_attention" else None for kind in kinds]


ARCHITECTURES = {
    "GPT2LMHeadModel": GPT2,
    "LlamaForCausalLM": Llama,
    "MistralForCausalLM": Mistral,
    "Qwen2ForCausalLM": Qwen2,
}
MODEL_TYPES = {"gpt2": GPT2, "llama": Llama, "mistral": Mistral, "qwen2": Qwen2}


def layout(config: dict):
    """The layout of a checkpoint's config (:class:`GPT2` or :class:`Llama`), or a CheckpointError."""
    architectures = config.get("architectures") or []
    for architecture in architectures:
        if architecture in ARCHITECTURES:
            return ARCHITECTURES[architecture]
    if not architectures and config.get("model_type") in MODEL_TYPES:
        return MODEL_TYPES[config["model_type"]]
    found = ", ".join(architectures) or f"model_type {config.get('model_type')!r}"
    raise CheckpointError(f"config.json describes {found}: the course loads {FAMILIES}")
