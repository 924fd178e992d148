"""Published checkpoints in the course's own layers: GPT-2 and the Llama family.

``from_pretrained(name_or_path)`` reads a checkpoint in the Hugging Face layout (``config.json`` and
``model.safetensors`` or ``pytorch_model.bin``, possibly in shards) and returns the course's
:class:`~attention_course.model.DecoderOnly`, its every weight in one of the course's modules:

- the GPT-2 family (``GPT2LMHeadModel``): learned positions, layer norms, a GELU feed-forward network,
  the attention's three projections fused into one matrix ``c_attn`` (split here into ``W_q``, ``W_k``,
  ``W_v``), weights stored transposed (GPT-2's ``Conv1D`` computes ``x @ W``), the output layer tied to
  the embedding;
- the Llama family (``LlamaForCausalLM``: Llama 2 and 3, TinyLlama, SmolLM and others of the same
  layout): RMS norms, a SwiGLU feed-forward network, grouped-query attention with rotary positions
  (chapter 7's ``RotaryGroupedQueryAttention``), a tied or untied output layer.

Llama checkpoints rotate each head's features in two halves ("rotate half": feature ``j`` is paired with
``j + dh/2``), while the course's rotary embedding (chapter 5) rotates interleaved pairs ``(2i, 2i+1)``
with the same frequencies. The two differ only in the order of the features of each head, so the rows of
``W_q`` and ``W_k`` are permuted within each head (:func:`interleave_rotary_rows`): the scores, and so
everything the model computes, stay the same.

A name (``"gpt2"``, ``"HuggingFaceTB/SmolLM-135M"``) is downloaded from the Hugging Face Hub with
``huggingface_hub`` where there is a network; a path reads a local folder (for instance one that
``transformers``' ``save_pretrained`` wrote). ``load_tokenizer`` reads the same checkpoint's tokenizer
with the ``tokenizers`` library. Neither needs ``transformers``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from attention_course.model import DecoderOnly

WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json")
FAMILIES = (
    "GPT2LMHeadModel (the GPT-2 family) and LlamaForCausalLM (the Llama family: Llama 2 and 3, TinyLlama, SmolLM)"
)


class CheckpointError(ValueError):
    """A checkpoint that the course's model cannot hold: the message names the file, key or setting."""


class DownloadError(OSError):
    """A checkpoint that could not be downloaded (no network, or no such repository)."""


# --------------------------------------------------------------------------- files


def checkpoint_folder(name_or_path: str | Path, patterns: tuple[str, ...] = ("config.json", *WEIGHT_FILES)) -> Path:
    """The local folder of a checkpoint: ``name_or_path`` itself where it is a folder, else the Hugging Face
    Hub repository of that name, downloaded (the files matching ``patterns``) into the Hub's cache."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise CheckpointError(f"{path} is a file: give the folder that holds config.json and the weights")
    name = str(name_or_path)
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise CheckpointError(f"there is no folder {path}")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id=name, allow_patterns=[*patterns, "*.safetensors", "*.bin"]))
    except Exception as exc:  # offline, unreachable, or no such repository: huggingface_hub's many errors
        raise DownloadError(
            f"could not download {name!r} from the Hugging Face Hub ({type(exc).__name__}: {exc}). Without a "
            f"network, give the path of a local folder that holds config.json and model.safetensors (or "
            f"pytorch_model.bin), such as one written by transformers' save_pretrained"
        ) from None


def read_config(folder: Path) -> dict:
    path = folder / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{folder} has no config.json")
    return json.loads(path.read_text())


def read_tensors(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint in ``folder``, by name, on the CPU: from ``model.safetensors`` (or its
    shards, listed in ``model.safetensors.index.json``), else from ``pytorch_model.bin`` (or its shards)."""
    from safetensors.torch import load_file

    def load_bin(path: Path) -> dict:
        return torch.load(path, map_location="cpu", weights_only=True)

    for name, load in (("model.safetensors", load_file), ("pytorch_model.bin", load_bin)):
        if (folder / name).is_file():
            return dict(load(folder / name))
        index = folder / f"{name}.index.json"
        if index.is_file():
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            tensors = {}
            for shard in shards:
                tensors.update(load(folder / shard))
            return tensors
    raise CheckpointError(f"{folder} holds no weights: none of {', '.join(WEIGHT_FILES)}")


# --------------------------------------------------------------------------- the families


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

    @staticmethod
    def settings(config: dict) -> dict:
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
        rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type != "default":
            raise CheckpointError(
                f"config.json asks for rotary scaling of type {rope_type!r}; the course's rotary embedding turns "
                f"pair i by position * base^(-2i/dh), without scaling (rope_type 'default')"
            )
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
            "rotary_base": float(rope.get("rope_theta", config.get("rope_theta", 10000.0))),
            "norm": "rms",
            "norm_eps": config.get("rms_norm_eps", 1e-6),
            "feed_forward": "swiglu",
            "bias": attention_bias,
            "output_bias": False,
        }

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
                if s["bias"]:
                    pieces.append(Piece(f"{m}{theirs}.bias", shape[:1], {f"{layer}{ours}.bias": convert}))
            pieces += [
                Piece(m + "input_layernorm.weight", (d,), {layer + "norm1.weight": _SAME}),
                Piece(m + "post_attention_layernorm.weight", (d,), {layer + "norm2.weight": _SAME}),
            ]
        return pieces

    @staticmethod
    def checkpoint_keys(tensors: dict) -> dict:
        return dict(tensors)


ARCHITECTURES = {"GPT2LMHeadModel": GPT2, "LlamaForCausalLM": Llama}
MODEL_TYPES = {"gpt2": GPT2, "llama": Llama}


def family(config: dict):
    """The family of a checkpoint's config (:class:`GPT2` or :class:`Llama`), or a CheckpointError."""
    architectures = config.get("architectures") or []
    for architecture in architectures:
        if architecture in ARCHITECTURES:
            return ARCHITECTURES[architecture]
    if not architectures and config.get("model_type") in MODEL_TYPES:
        return MODEL_TYPES[config["model_type"]]
    found = ", ".join(architectures) or f"model_type {config.get('model_type')!r}"
    raise CheckpointError(f"config.json describes {found}: the course loads {FAMILIES}")


def course_state(pieces: list[Piece], tensors: dict, ignored: tuple[str, ...], where: Path) -> dict:
    """The course's parameters made from the checkpoint's tensors; a CheckpointError naming the tensor where
    one is missing, has another shape than its config gives it, or has no place in the course's model."""
    state, used = {}, set()
    for piece in pieces:
        if piece.key not in tensors:
            raise CheckpointError(
                f"{where}: the checkpoint has no tensor {piece.key!r} (for {', '.join(piece.targets)})"
            )
        tensor = tensors[piece.key]
        if tuple(tensor.shape) != piece.shape:
            raise CheckpointError(
                f"{where}: tensor {piece.key!r} has shape {tuple(tensor.shape)}; config.json makes it {piece.shape}"
            )
        used.add(piece.key)
        for name, convert in piece.targets.items():
            state[name] = convert.apply(tensor)
    extra = sorted(k for k in tensors if k not in used and not k.endswith(ignored) and k != "lm_head.weight")
    if extra:
        more = f" and {len(extra) - 5} more" if len(extra) > 5 else ""
        raise CheckpointError(
            f"{where}: the checkpoint has tensors that the course's model has no place for: "
            f"{', '.join(map(repr, extra[:5]))}{more}"
        )
    return state


def tensor_map(config: dict) -> list[tuple[str, tuple[int, ...], str, str]]:
    """``(checkpoint tensor, its shape, the course's parameter, how it is converted)`` for every tensor of a
    checkpoint with this config: where :func:`from_pretrained` puts each."""
    kind = family(config)
    return [
        (piece.key, piece.shape, name, convert.how)
        for piece in kind.pieces(kind.settings(config))
        for name, convert in piece.targets.items()
    ]


# --------------------------------------------------------------------------- loading


def from_pretrained(
    name_or_path: str | Path, device: str | torch.device | None = None, dtype: torch.dtype | None = None
) -> DecoderOnly:
    """The checkpoint ``name_or_path`` (a local folder, or a Hugging Face Hub name) as the course's
    ``DecoderOnly``, in eval mode, with its weights in ``dtype`` (default float32) on ``device`` (default
    the CPU). Its attention computes through ``F.scaled_dot_product_attention`` (``fused=True``); every
    weight is in the course's modules, named as :mod:`attention_course.model` names them."""
    folder = checkpoint_folder(name_or_path)
    config = read_config(folder)
    kind = family(config)
    settings = kind.settings(config)
    tensors = kind.checkpoint_keys(read_tensors(folder))
    state = course_state(kind.pieces(settings), tensors, kind.IGNORED, folder)
    dtype = dtype or torch.float32
    with torch.device("meta"):  # no memory and no random initialisation for weights about to be replaced
        model = DecoderOnly(dropout=0.0, fused=True, **settings)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if settings["tie_weights"]:
        expected.pop("generator.weight")
    assert set(expected) == set(state), sorted(set(expected) ^ set(state))  # the families map every parameter
    for name, shape in expected.items():
        assert tuple(state[name].shape) == shape, (name, state[name].shape, shape)
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=False, assign=True)
    if settings["tie_weights"]:
        model.generator.weight = model.embed.tokens.weight
    return model.to(device or "cpu").eval()


def load_tokenizer(name_or_path: str | Path):
    """The tokenizer of a checkpoint (``tokenizers.Tokenizer``): its ``tokenizer.json``, or GPT-2's
    ``vocab.json`` and ``merges.txt`` (byte-level BPE)."""
    from tokenizers import Tokenizer
    from tokenizers.implementations import ByteLevelBPETokenizer

    folder = checkpoint_folder(name_or_path, TOKENIZER_FILES)
    if (folder / "tokenizer.json").is_file():
        return Tokenizer.from_file(str(folder / "tokenizer.json"))
    if (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
        return ByteLevelBPETokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))._tokenizer
    raise CheckpointError(f"{folder} has no tokenizer: neither tokenizer.json nor vocab.json and merges.txt")


def parameter_count(model: torch.nn.Module) -> int:
    """The number of distinct parameters (a tied matrix counted once)."""
    return sum(p.numel() for p in model.parameters())


def describe(model: DecoderOnly) -> str:
    """One line on the shape of a loaded model."""
    layer = model.layers[0]
    attention = layer.self_attn
    d_model = attention.W_q.in_features
    return (
        f"{len(model.layers)} layers, d_model {d_model}, {attention.num_heads} heads "
        f"({attention.num_kv_heads} key/value), {parameter_count(model) / 1e6:,.1f}M parameters, "
        f"head size {d_model // attention.num_heads}, context {model.max_len}"
    )
