"""Published checkpoints in the course's own layers: GPT-2 and the Llama family.

``from_pretrained(name_or_path)`` reads a checkpoint in the Hugging Face layout (``config.json`` and
``model.safetensors`` or ``pytorch_model.bin``, possibly in shards) and returns the course's
:class:`~attention_course.models.transformer.DecoderOnly`, its every weight in one of the course's modules:

- the GPT-2 family (``GPT2LMHeadModel``): learned positions, layer norms, a GELU feed-forward network,
  the attention's three projections fused into one matrix ``c_attn`` (split here into ``W_q``, ``W_k``,
  ``W_v``), weights stored transposed (GPT-2's ``Conv1D`` computes ``x @ W``), the output layer tied to
  the embedding;
- the Llama family (``LlamaForCausalLM``: Llama 2, 3, 3.1 and 3.2, TinyLlama, SmolLM and others of the
  same layout): RMS norms, a SwiGLU feed-forward network, grouped-query attention with rotary positions
  (chapter 7's ``RotaryGroupedQueryAttention``), a tied or untied output layer; rotary frequencies scaled
  for long contexts (``rope_scaling`` of type ``llama3``, ``yarn`` or ``linear``: :mod:`attention_course.models.rope`);
- Mistral (``MistralForCausalLM``): the Llama layout, attending within a sliding window;
- Qwen2 and Qwen2.5 (``Qwen2ForCausalLM``): the Llama layout with biases on the query, key and value
  projections, and sliding windows in the layers its config names.

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
from pathlib import Path

import torch

from attention_course.models.transformer import DecoderOnly
from attention_course.published.layouts import CheckpointError, Piece, layout

WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json")


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
    kind = layout(config)
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
    weight is in the course's modules, named as :mod:`attention_course.models.transformer` names them."""
    folder = checkpoint_folder(name_or_path)
    config = read_config(folder)
    kind = layout(config)
    settings = kind.settings(config)
    tensors = kind.checkpoint_keys(read_tensors(folder))
    state = course_state(kind.pieces(settings), tensors, kind.IGNORED, folder)
    dtype = dtype or torch.float32
    with torch.device("meta"):  # no memory and no random initialisation for weights about to be replaced
        model = DecoderOnly(dropout=0.0, fused=True, **settings)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if settings["tie_weights"]:
        expected.pop("generator.weight")
    assert set(expected) == set(state), sorted(set(expected) ^ set(state))  # the layouts map every parameter
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
