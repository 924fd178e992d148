"""Train the course's Transformer: ``make train ARGS="..."`` or ``python -m attention_course.trainer``.

Three tasks:

- ``dates`` (the default): the encoder-decoder translates dates written in many
  formats into ISO dates; scored by exact match of greedy decoding on the test split.
- ``chars``: a decoder-only character language model, on the course's own text by
  default (no download), on tiny Shakespeare (``--corpus shakespeare``, downloaded
  once and checked), or on any text file (``--text PATH``); scored by validation loss.
- ``lm``: the same GPT-style model and texts, on the tokens of a byte-level BPE
  tokenizer of ``--vocab-size`` tokens trained on the training text (saved as
  ``tokenizer.json``). Both language models also report their validation loss in
  bits per byte of text, which compares them whatever their tokens.

It runs on the best device there is (cuda, then mps, then cpu), shows a progress
bar with the loss and the throughput, writes checkpoints, ``metrics.jsonl`` and
``loss_curve.png`` to ``--out``, and ends by printing one JSON line of final
metrics. Under ``torchrun --nproc_per_node N`` it trains data-parallel: the
global batch is split between the processes, so N processes take the same steps
as one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from tqdm import tqdm

from attention_course import tokenization
from attention_course.corpora import course_text, tiny_shakespeare
from attention_course.dates import SOURCE_VOCAB, TARGET_VOCAB, DateTask, batch
from attention_course.devices import best_device
from attention_course.model import DecoderOnly, EncoderDecoder
from attention_course.solutions.ch04_masking import decoder_self_attention_mask
from attention_course.solutions.ch06_transformer import greedy_decode
from attention_course.training import exact_match, warmup_cosine

# Dense bf16 tensor-core peaks, in FLOP/s, by the exact name that torch.cuda.get_device_name reports, from
# the vendors' data sheets. The data sheets give these peaks "with sparsity" (2:4 structured sparsity, which
# dense training does not use); the dense peak is half of that. Form factors of one chip differ (an H100 in
# a PCIe card runs at lower clocks and power than in an SXM module), so a name must match exactly.
PEAK_BF16_FLOPS = {
    "NVIDIA H100 80GB HBM3": 1979e12 / 2,  # H100 SXM5: NVIDIA H100 data sheet
    "NVIDIA H100 NVL": 1671e12 / 2,  # NVIDIA H100 data sheet
    "NVIDIA H100 PCIe": 1513e12 / 2,  # NVIDIA H100 PCIe product brief
    "NVIDIA H200": 1979e12 / 2,  # H200 SXM: NVIDIA H200 data sheet
    "NVIDIA H200 NVL": 1671e12 / 2,  # NVIDIA H200 data sheet
    "NVIDIA A100-SXM4-40GB": 624e12 / 2,  # NVIDIA A100 data sheet: the same peak in every form factor
    "NVIDIA A100-SXM4-80GB": 624e12 / 2,
    "NVIDIA A100-PCIE-40GB": 624e12 / 2,
    "NVIDIA A100 80GB PCIe": 624e12 / 2,
    "NVIDIA A10": 250e12 / 2,  # NVIDIA A10 data sheet
    "NVIDIA L4": 242e12 / 2,  # NVIDIA L4 data sheet
    "NVIDIA GeForce RTX 4090": 330.4e12 / 2,  # NVIDIA Ada Lovelace architecture white paper
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m attention_course.trainer",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--task",
        choices=tuple(TASKS),
        default="dates",
        help="dates: translation to ISO dates; chars: a character language model; "
        "lm: a language model on byte-level BPE tokens",
    )
    p.add_argument(
        "--corpus", choices=("course", "shakespeare"), default="course", help="text of the chars and lm tasks"
    )
    p.add_argument("--text", type=Path, help="a text file for the chars and lm tasks (instead of --corpus)")
    p.add_argument(
        "--block-size",
        type=int,
        default=128,
        help="tokens (chars: characters) per training window of the chars and lm tasks",
    )
    p.add_argument(
        "--vocab-size",
        type=int,
        default=1024,
        help="tokens of the lm task's byte-level BPE tokenizer (the 256 bytes and its merges), "
        "trained on the training text",
    )
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2, help="layers of the encoder and of the decoder each")
    p.add_argument("--d-ff", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--norm", choices=("pre", "post"), default="pre", help="layer norm before or after each block")
    p.add_argument(
        "--tie-weights",
        action="store_true",
        help="the output layer shares the (target) embedding's matrix, as in the paper (its section 3.4)",
    )
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--time-budget", type=float, default=None, help="stop training after this many seconds")
    p.add_argument(
        "--stop-after",
        type=int,
        default=None,
        help="stop after this step and save a checkpoint (the schedule still plans --steps); "
        "continue later with --resume",
    )
    p.add_argument("--batch-size", type=int, default=128, help="global batch, split between processes")
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    p.add_argument(
        "--schedule",
        choices=("cosine", "noam"),
        default="cosine",
        help="warm-up then cosine decay, or the paper's warm-up then 1/sqrt(step)",
    )
    p.add_argument("--warmup", type=int, default=150, help="warm-up steps")
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0, help="gradient norm clipping (0: none)")
    p.add_argument(
        "--precision",
        choices=("fp32", "bf16", "fp16"),
        default="fp32",
        help="bf16/fp16: mixed precision with autocast (fp16 on cuda only)",
    )
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument(
        "--attention",
        choices=("course", "fused"),
        default="fused",
        help="the course's attention, or F.scaled_dot_product_attention's fused kernels",
    )
    p.add_argument("--device", default=None, help="cuda, mps or cpu (default: the best available)")
    p.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="peak TFLOP/s of one device, for the model FLOPs utilisation "
        "(default: the dense bf16 peak of the GPU's data sheet, where the course knows its name)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("runs/train"), help="directory for checkpoints and metrics")
    p.add_argument("--resume", type=Path, default=None, help="a checkpoint to continue from")
    p.add_argument(
        "--eval-examples",
        type=int,
        default=2000,
        help="test dates scored (dates task), or validation windows (chars and lm tasks, at most 256)",
    )
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--checkpoint-every", type=int, default=500)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    for name in ("d_model", "heads", "layers", "d_ff", "steps", "batch_size", "block_size", "eval_examples"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.vocab_size <= tokenization.BYTES:
        p.error(
            f"--vocab-size must be at least {tokenization.BYTES + 1} (a token for each of the {tokenization.BYTES} "
            f"byte values and at least one merge), got {args.vocab_size}"
        )
    if args.d_model % args.heads:
        p.error(f"--heads ({args.heads}) must divide --d-model ({args.d_model})")
    if not 0 <= args.dropout < 1:
        p.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.peak_tflops is not None and args.peak_tflops <= 0:
        p.error(f"--peak-tflops must be positive, got {args.peak_tflops}")
    return args


# --------------------------------------------------------------------------- processes and devices


class Processes:
    """One process, or one of several under torchrun (data parallel)."""

    def __init__(self, device_name: str | None):
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        device = torch.device(device_name) if device_name else best_device()
        if device.type == "cuda" and self.world > 1:
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
        self.device = device
        if self.world > 1:
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")

    @property
    def main(self) -> bool:
        return self.rank == 0

    def mean(self, value: float) -> float:
        if self.world == 1:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.item() / self.world

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def close(self) -> None:
        if self.world > 1:
            dist.destroy_process_group()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --------------------------------------------------------------------------- tasks


class DatesTask:
    """Human-written dates -> ISO dates, with the encoder-decoder Transformer."""

    name = "dates"
    pool_size = 100_000

    def __init__(self, args):
        self.args = args
        task = DateTask(seed=args.seed)
        self.train_examples = task.examples("train", self.pool_size)
        self.val_examples = task.examples("val", 2000)
        self.test_examples = task.examples("test", args.eval_examples)
        self.max_len = len(TARGET_VOCAB.encode("2000-01-01")) + 1  # the ISO date and eos

    def model(self, fused: bool) -> torch.nn.Module:
        a = self.args
        return EncoderDecoder(
            len(SOURCE_VOCAB),
            len(TARGET_VOCAB),
            a.d_model,
            a.heads,
            a.layers,
            a.d_ff,
            a.dropout,
            max_len=64,
            norm_first=a.norm == "pre",
            fused=fused,
            tie_weights=a.tie_weights,
        )

    def batch(self, indices: torch.Tensor, examples=None) -> dict:
        return batch([(examples or self.train_examples)[i] for i in indices.tolist()])

    def loss(self, model, b: dict, label_smoothing: float) -> tuple[torch.Tensor, int]:
        tgt_in, target = b["tgt"][:, :-1], b["tgt"][:, 1:]
        tgt_mask = decoder_self_attention_mask(tgt_in, TARGET_VOCAB.pad_id)
        logits = model(b["src"], tgt_in, b["src_mask"], tgt_mask)
        loss = F.cross_entropy(
            logits.flatten(0, 1).float(),
            target.flatten(),
            ignore_index=TARGET_VOCAB.pad_id,
            label_smoothing=label_smoothing,
        )
        return loss, int(b["src_mask"].sum() + (target != TARGET_VOCAB.pad_id).sum())

    def flops(self, model, b: dict) -> float:
        """Model FLOPs of a training step on batch ``b``: its real source and target tokens."""
        target_lengths = (b["tgt"][:, 1:] != TARGET_VOCAB.pad_id).sum(dim=1)
        return training_flops(model, b["src_mask"].sum(dim=1).tolist(), target_lengths.tolist())

    @torch.no_grad()
    def validation_loss(self, model, device) -> float:
        b = {k: v.to(device) for k, v in batch(self.val_examples).items()}
        return self.loss(model, b, 0.0)[0].item()

    def save(self, directory: Path) -> None:
        """Nothing to save beside the checkpoint: the vocabularies are the course's."""

    @torch.no_grad()
    def evaluate(self, model, device) -> dict:
        predictions = []
        for start in range(0, len(self.test_examples), 500):
            b = {k: v.to(device) for k, v in batch(self.test_examples[start : start + 500]).items()}
            ids = greedy_decode(model, b["src"], b["src_mask"], TARGET_VOCAB.bos_id, TARGET_VOCAB.eos_id, self.max_len)
            predictions += [TARGET_VOCAB.decode(row) for row in ids.tolist()]
        score = exact_match(predictions, [e.target for e in self.test_examples])
        return {
            "exact_match": score,
            "test_examples": len(self.test_examples),
            "val_loss": self.validation_loss(model, device),
        }


class LanguageModelTask:
    """Next-token prediction with a decoder-only model, on windows of --block-size tokens of a text (--text,
    or --corpus): the first 90% of the text to train on, the rest to validate on. What the chars and lm tasks
    share; each says how text becomes ids and back (``tokenize``, ``encode``, ``decode``)."""

    name: str

    def __init__(self, args):
        self.args = args
        if args.text is not None:
            text, self.corpus = args.text.read_text(), str(args.text)
        elif args.corpus == "shakespeare":
            text, self.corpus = tiny_shakespeare(), "shakespeare"
        else:
            text, self.corpus = course_text(), "course"
        cut = int(0.9 * len(text))
        self.tokenize(text[:cut], text)
        self.train_data, self.val_data = self.encode(text[:cut]), self.encode(text[cut:])
        if len(self.val_data) <= args.block_size + 1:
            raise SystemExit(
                f"the text has {len(text)} characters, too few for --block-size {args.block_size} "
                f"({len(self.val_data)} tokens of validation text)"
            )
        self.train_examples = range(len(self.train_data) - args.block_size - 1)

    def tokenize(self, train_text: str, text: str) -> None:
        """Make the vocabulary from the training text (or the whole text): set ``token_bytes``, the UTF-8 bytes
        that each id stands for, and ``prompt``, the ids that samples start from."""
        raise NotImplementedError

    def encode(self, text: str) -> torch.Tensor:
        raise NotImplementedError

    def decode(self, ids: list[int]) -> str:
        raise NotImplementedError

    def save(self, directory: Path) -> None:
        """Save what a checkpoint needs beside it to be used (nothing, unless a subclass says)."""

    @property
    def vocab_size(self) -> int:
        return len(self.token_bytes)

    def model(self, fused: bool) -> torch.nn.Module:
        a = self.args
        return DecoderOnly(
            self.vocab_size,
            a.d_model,
            a.heads,
            a.layers,
            a.d_ff,
            a.dropout,
            max_len=a.block_size,
            norm_first=a.norm == "pre",
            fused=fused,
            tie_weights=a.tie_weights,
        )

    def _windows(self, data: torch.Tensor, starts: torch.Tensor) -> dict:
        windows = torch.stack([data[s : s + self.args.block_size + 1] for s in starts.tolist()])
        return {"x": windows[:, :-1], "y": windows[:, 1:]}

    def batch(self, indices: torch.Tensor) -> dict:
        return self._windows(self.train_data, indices)

    def validation_windows(self) -> dict:
        """The windows of the validation text that the validation loss is measured on: the same at every
        evaluation (seeded), at most 256 of them."""
        generator = torch.Generator().manual_seed(1234)
        starts = torch.randint(
            len(self.val_data) - self.args.block_size - 1, (min(self.args.eval_examples, 256),), generator=generator
        )
        return self._windows(self.val_data, starts)

    def loss(self, model, b: dict, label_smoothing: float) -> tuple[torch.Tensor, int]:
        logits = model(b["x"])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), b["y"].flatten(), label_smoothing=label_smoothing)
        return loss, b["x"].numel()

    def flops(self, model, b: dict) -> float:
        """Model FLOPs of a training step on batch ``b``: full windows of ``--block-size`` tokens."""
        return training_flops(model, [b["x"].size(1)] * b["x"].size(0))

    @torch.no_grad()
    def validation_loss(self, model, device) -> float:
        b = {k: v.to(device) for k, v in self.validation_windows().items()}
        return self.loss(model, b, 0.0)[0].item()

    @torch.no_grad()
    def evaluate(self, model, device) -> dict:
        val_loss = self.validation_loss(model, device)
        targets = self.validation_windows()["y"]
        covered_bytes = int(self.token_bytes[targets].sum())  # the bytes of text that the scored tokens hold
        prompt = torch.tensor([self.prompt], dtype=torch.long, device=device)
        sample = model.generate(
            prompt, 200, temperature=0.8, generator=None if device.type != "cpu" else torch.Generator().manual_seed(0)
        )
        return {
            "val_loss": val_loss,
            "val_bits_per_byte": tokenization.bits_per_byte(val_loss, targets.numel(), covered_bytes),
            "val_bytes_per_token": covered_bytes / targets.numel(),
            "corpus": self.corpus,
            "vocab_size": self.vocab_size,
            "sample": self.decode(sample[0, len(self.prompt) :].tolist()),
        }


class CharsTask(LanguageModelTask):
    """Next-character prediction: a token for each character of the text (of the whole text, so that the
    validation text has no character the model has never seen)."""

    name = "chars"

    def tokenize(self, train_text: str, text: str) -> None:
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}
        self.token_bytes = torch.tensor([len(c.encode()) for c in self.chars])
        self.prompt = [0]

    def encode(self, text: str) -> torch.Tensor:
        return torch.tensor([self.index[c] for c in text], dtype=torch.long)

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)

    def evaluate(self, model, device) -> dict:
        result = super().evaluate(model, device)
        return {"val_loss": result["val_loss"], "val_bits_per_char": result["val_loss"] / math.log(2), **result}


class LmTask(LanguageModelTask):
    """Next-token prediction on byte-level BPE tokens: a tokenizer of --vocab-size tokens trained on the
    training text alone (the validation text is new to it too), and saved as ``tokenizer.json``. Training it
    again on the same text gives the same tokenizer, so a resumed run has the tokens it was trained on."""

    name = "lm"

    def tokenize(self, train_text: str, text: str) -> None:
        self.tokenizer = tokenization.train_bpe(train_text, self.args.vocab_size)
        self.token_bytes = tokenization.token_bytes(self.tokenizer)
        self.prompt = self.encode("\n").tolist()

    def encode(self, text: str) -> torch.Tensor:
        return tokenization.encode(self.tokenizer, text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def save(self, directory: Path) -> None:
        self.tokenizer.save(str(directory / "tokenizer.json"))


TASKS = {"dates": DatesTask, "chars": CharsTask, "lm": LmTask}


# --------------------------------------------------------------------------- training


def learning_rate(step: int, args) -> float:
    warmup = max(1, args.warmup)
    if args.schedule == "noam":  # the paper's schedule, scaled so that its peak (at the end of warm-up) is --lr
        return args.lr * min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))
    return args.lr * warmup_cosine(step, args.steps, warmup)


def global_indices(step: int, args, pool: int) -> torch.Tensor:
    """The examples of one step's global batch: the same in every process, and after a resume."""
    generator = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
    return torch.randint(pool, (args.batch_size,), generator=generator)


def _matrix_weights(*modules: torch.nn.Module) -> int:
    """The weights of the matrix products in ``modules``: their linear layers' weight matrices.

    Embedding look-ups, biases and layer norms are left out, as in the standard accounting.
    """
    return sum(m.weight.numel() for module in modules for m in module.modules() if isinstance(m, torch.nn.Linear))


def training_flops(model: torch.nn.Module, lengths, target_lengths=None) -> float:
    """Model FLOPs of one training step (forward and backward pass) on sequences of the given lengths.

    The standard accounting (Kaplan et al. 2020, Chowdhery et al. 2022): a token costs 6 FLOPs for each
    weight of a matrix product it goes through (2 in the forward pass, 4 in the backward pass), and each
    attention layer adds 12 d L FLOPs per query, for its products with the L keys and L values (d: the
    width of the queries). Embedding look-ups, biases and norms are not counted.

    ``lengths``: the length of each sequence of a ``DecoderOnly`` model, or of each source of an
    ``EncoderDecoder``, whose ``target_lengths`` are the lengths of the decoder's sequences. Source tokens
    go through the encoder and the cross-attention's key and value projections; target tokens go through
    the rest of the decoder and the output layer. Self-attention spans a sequence's own length,
    cross-attention the source's.
    """
    lengths = [int(n) for n in lengths]
    if isinstance(model, EncoderDecoder):
        if target_lengths is None or len(target_lengths) != len(lengths):
            raise ValueError("an EncoderDecoder needs one target length for each source length")
        targets = [int(n) for n in target_lengths]
        encoder, decoder = model.encoder_layers, model.decoder_layers
        cross_kv = sum(_matrix_weights(layer.cross_attn.W_k, layer.cross_attn.W_v) for layer in decoder)
        per_source = _matrix_weights(encoder) + cross_kv
        per_target = _matrix_weights(decoder, model.generator) - cross_kv
        encoder_width = sum(layer.self_attn.W_q.out_features for layer in encoder)
        self_width = sum(layer.self_attn.W_q.out_features for layer in decoder)
        cross_width = sum(layer.cross_attn.W_q.out_features for layer in decoder)
        return float(
            sum(
                6 * (s * per_source + t * per_target)
                + 12 * (s * s * encoder_width + t * t * self_width + t * s * cross_width)
                for s, t in zip(lengths, targets)
            )
        )
    if isinstance(model, DecoderOnly):
        if target_lengths is not None:
            raise ValueError("a DecoderOnly model has one stream: give its lengths only")
        per_token = _matrix_weights(model.layers, model.generator)
        width = sum(layer.self_attn.W_q.out_features for layer in model.layers)
        return float(sum(6 * n * per_token + 12 * n * n * width for n in lengths))
    raise TypeError(f"training_flops counts EncoderDecoder and DecoderOnly models, not {type(model).__name__}")


def peak_flops(device: torch.device, peak_tflops: float | None = None) -> tuple[float | None, str]:
    """The peak FLOP/s of one ``device``, and where it comes from; ``(None, why)`` where none is known."""
    if peak_tflops is not None:
        return peak_tflops * 1e12, "--peak-tflops"
    if device.type != "cuda":
        return None, f"no peak is known for a {device.type} device: give one with --peak-tflops"
    name = torch.cuda.get_device_name(device)
    if name not in PEAK_BF16_FLOPS:
        return None, f"no peak is known for {name!r}: give its dense bf16 peak with --peak-tflops"
    return PEAK_BF16_FLOPS[name], f"{name}: dense bf16 peak of its data sheet"


def mfu(flops_per_second: float, peak: float | None, devices: int = 1) -> float | None:
    """Model FLOPs utilisation: the model FLOP/s achieved on ``devices`` devices over their peak."""
    return None if peak is None else flops_per_second / (peak * devices)


def plot_losses(history: list[dict], validation: list[dict], path: Path) -> None:
    from matplotlib.figure import Figure  # not pyplot: leaves the caller's backend and figures alone

    fig = Figure(figsize=(6, 3.5))
    ax = fig.subplots()
    ax.plot([h["step"] for h in history], [h["loss"] for h in history], label="training loss")
    if validation:
        ax.plot([v["step"] for v in validation], [v["val_loss"] for v in validation], "o-", label="validation loss")
    ax.set(xlabel="step", ylabel="cross-entropy", yscale="log", title="training")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def save_checkpoint(path: Path, model, optimizer, step: int, args, history, validation, tokens, seconds) -> None:
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "step": step,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "history": history,
        "validation": validation,
        "tokens": tokens,
        "train_seconds": seconds,
    }
    partial = path.with_suffix(".part")
    torch.save(state, partial)
    partial.replace(path)


# --------------------------------------------------------------------------- the run


@dataclass
class Run:
    """What a run trains with: its options, its processes, the task, the model (as built, for checkpoints,
    evaluation and FLOPs; as trained, data-parallel where there are several processes; as stepped,
    compiled with --compile), the optimizer and the precision."""

    args: argparse.Namespace
    procs: Processes
    task: DatesTask | LanguageModelTask
    raw_model: torch.nn.Module
    model: torch.nn.Module
    step_model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    autocast: contextlib.AbstractContextManager
    scaler: torch.amp.GradScaler

    @property
    def device(self) -> torch.device:
        return self.procs.device


@dataclass
class Progress:
    """How far training has gone, a resumed run's included (what a checkpoint saves), and this process's
    model FLOPs and tokens in this run alone."""

    step: int = 0
    history: list = field(default_factory=list)
    validation: list = field(default_factory=list)
    tokens: int = 0
    train_seconds: float = 0.0
    run_flops: float = 0.0
    run_tokens: int = 0


def check_options(args: argparse.Namespace, procs: Processes) -> None:
    """Refuse options that these processes and this device cannot run."""
    if args.batch_size % procs.world:
        raise SystemExit(
            f"--batch-size ({args.batch_size}) must be divisible by the number of processes ({procs.world})"
        )
    if args.precision == "fp16" and procs.device.type != "cuda":
        raise SystemExit("--precision fp16 needs a cuda device; use bf16 on other devices")


def build(args: argparse.Namespace, procs: Processes) -> tuple[Run, Progress]:
    """The task, the model and its optimizer (seeded; from --resume's checkpoint where given), wrapped for
    data parallelism and compiled as the options say, and the progress so far."""
    device = procs.device
    torch.manual_seed(args.seed)
    task = TASKS[args.task](args)
    model = task.model(fused=args.attention == "fused").to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    progress = Progress() if args.resume is None else resume(args.resume, model, optimizer, device)
    raw_model = model
    if procs.world > 1:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    step_model = torch.compile(model) if args.compile else model
    autocast = (
        torch.autocast(device.type, dtype=torch.bfloat16 if args.precision == "bf16" else torch.float16)
        if args.precision != "fp32"
        else contextlib.nullcontext()
    )
    scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "fp16")
    return Run(args, procs, task, raw_model, model, step_model, optimizer, autocast, scaler), progress


def resume(path: Path, model, optimizer, device: torch.device) -> Progress:
    """Load the model and optimizer from the checkpoint at ``path``; the progress it saved."""
    state = torch.load(path, map_location=device, weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return Progress(
        step=state["step"],
        history=state["history"],
        validation=state["validation"],
        tokens=state["tokens"],
        train_seconds=state["train_seconds"],
    )


def train(run: Run, progress: Progress, metrics) -> None:
    """Train up to the last step (--steps, or --stop-after), or until --time-budget is spent; every
    --log-every steps (and at the last) log the window since the previous log (:func:`log_window`)."""
    args, procs = run.args, run.procs
    bar = tqdm(
        total=args.steps,
        initial=progress.step,
        desc=f"{run.task.name} on {run.device.type}",
        file=sys.stderr,
        disable=args.no_progress or not procs.main,
        mininterval=1.0,
        dynamic_ncols=True,
    )
    window_tokens, window_start = 0, time.perf_counter()
    run.model.train()
    last_step = min(args.steps, args.stop_after or args.steps)
    while progress.step < last_step:
        if (
            args.time_budget is not None
            and progress.train_seconds + (time.perf_counter() - window_start) >= args.time_budget
        ):
            break
        loss, step_tokens = train_step(run, progress)
        progress.step += 1
        window_tokens += step_tokens * procs.world
        progress.run_tokens += step_tokens
        if progress.step % args.log_every == 0 or progress.step == last_step:
            log_window(run, progress, loss, window_tokens, window_start, metrics, bar)
            window_tokens, window_start = 0, time.perf_counter()
    bar.close()
    if window_tokens:
        synchronize(run.device)
        progress.train_seconds += time.perf_counter() - window_start
        progress.tokens += window_tokens


def train_step(run: Run, progress: Progress) -> tuple[torch.Tensor, int]:
    """One optimizer step on this process's share of the step's global batch: its loss and tokens."""
    args, procs = run.args, run.procs
    for group in run.optimizer.param_groups:
        group["lr"] = learning_rate(progress.step, args)
    share = args.batch_size // procs.world
    indices = global_indices(progress.step, args, len(run.task.train_examples))[
        procs.rank * share : (procs.rank + 1) * share
    ]
    b = run.task.batch(indices)
    progress.run_flops += run.task.flops(run.raw_model, b)  # from the batch on the host: no wait for the device
    b = {k: v.to(run.device, non_blocking=True) for k, v in b.items()}
    with run.autocast:
        loss, step_tokens = run.task.loss(run.step_model, b, args.label_smoothing)
    run.optimizer.zero_grad(set_to_none=True)
    run.scaler.scale(loss).backward()
    if args.clip > 0:
        run.scaler.unscale_(run.optimizer)
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), args.clip)
    run.scaler.step(run.optimizer)
    run.scaler.update()
    return loss, step_tokens


def log_window(run: Run, progress: Progress, loss, window_tokens: int, window_start: float, metrics, bar) -> None:
    """The end of a window of steps: its time and tokens counted, its loss (averaged over the processes) and
    throughput recorded, written to metrics.jsonl and shown; every --checkpoint-every steps, the validation
    loss and a checkpoint."""
    args, procs = run.args, run.procs
    synchronize(run.device)
    now = time.perf_counter()
    progress.train_seconds += now - window_start
    progress.tokens += window_tokens
    rate = window_tokens / max(now - window_start, 1e-9)
    mean_loss = procs.mean(loss.item())
    record = {
        "step": progress.step,
        "loss": mean_loss,
        "lr": learning_rate(progress.step - 1, args),
        "tokens_per_second": rate,
    }
    progress.history.append(record)
    if procs.main:
        metrics.write(json.dumps(record) + "\n")
        metrics.flush()
        bar.set_postfix(loss=f"{mean_loss:.3f}", tok_s=f"{rate:,.0f}")
    bar.update(progress.step - bar.n)
    if progress.step % args.checkpoint_every == 0 and procs.main:
        run.raw_model.eval()
        progress.validation.append(
            {"step": progress.step, "val_loss": run.task.validation_loss(run.raw_model, run.device)}
        )
        run.raw_model.train()
        checkpoint(run, progress)
    procs.barrier()


def checkpoint(run: Run, progress: Progress) -> None:
    """Save the run to --out/checkpoint.pt."""
    save_checkpoint(
        run.args.out / "checkpoint.pt",
        run.raw_model,
        run.optimizer,
        progress.step,
        run.args,
        progress.history,
        progress.validation,
        progress.tokens,
        progress.train_seconds,
    )


def report(run: Run, progress: Progress, started: float) -> dict:
    """The final evaluation, checkpoint and loss curve, and the run's final metrics (written to final.json)."""
    args, raw_model, device = run.args, run.raw_model, run.device
    raw_model.eval()
    result = run.task.evaluate(raw_model, device)
    progress.validation.append({"step": progress.step, "val_loss": result["val_loss"]})
    checkpoint(run, progress)
    plot_losses(progress.history, progress.validation, args.out / "loss_curve.png")
    rate = progress.tokens / max(progress.train_seconds, 1e-9)
    flops_per_token = progress.run_flops / progress.run_tokens if progress.run_tokens else None
    peak, peak_source = peak_flops(device, args.peak_tflops)
    utilisation = mfu(rate * flops_per_token, peak, run.procs.world) if flops_per_token else None
    if utilisation is None and not progress.run_tokens:
        peak_source = "no training step in this run: no FLOPs per token"
    result = {
        "task": run.task.name,
        "device": str(device),
        "processes": run.procs.world,
        "steps": progress.step,
        **result,
        "tokens_per_second": round(rate, 1),
        "train_seconds": round(progress.train_seconds, 2),
        "wall_seconds": round(time.perf_counter() - started, 2),
        "parameters": sum(p.numel() for p in raw_model.parameters()),
        "flops_per_token": round(flops_per_token, 1) if flops_per_token else None,
        "mfu": float(f"{utilisation:.3g}") if utilisation is not None else None,  # small models: 0.0001 is not 0
        "peak_tflops": peak / 1e12 if peak is not None else None,
        "peak_source": peak_source,
        "precision": args.precision,
        "compile": args.compile,
        "attention": args.attention,
        "tie_weights": args.tie_weights,
        "out": str(args.out),
    }
    if utilisation is None:
        print(f"no model FLOPs utilisation: {peak_source}", file=sys.stderr)
    (args.out / "final.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def main(argv=None) -> dict:
    args = parse_args(argv)
    started = time.perf_counter()
    procs = Processes(args.device)
    check_options(args, procs)
    run, progress = build(args, procs)
    if procs.main:
        args.out.mkdir(parents=True, exist_ok=True)
        run.task.save(args.out)
    metrics = (args.out / "metrics.jsonl").open("a") if procs.main else None
    train(run, progress, metrics)
    result = {}
    if procs.main:
        result = report(run, progress, started)
        metrics.close()
        print(json.dumps(result), flush=True)
    procs.barrier()
    procs.close()
    return result


if __name__ == "__main__":
    main()
