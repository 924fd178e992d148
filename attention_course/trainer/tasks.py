"""The tasks of ``make train``: each task's data, model, batches, loss, FLOPs, evaluation and files.

- ``dates`` (:class:`DatesTask`): the encoder-decoder translates dates written in many formats into ISO
  dates; scored by exact match of greedy decoding on the test split.
- ``chars`` (:class:`CharsTask`): a decoder-only character language model on a text; scored by
  validation loss.
- ``lm`` (:class:`LmTask`): the same model on the tokens of a byte-level BPE tokenizer trained on the
  training text (saved as ``tokenizer.json``).

The two language models share :class:`LanguageModelTask`, and report their validation loss in bits per
byte of text too, which compares them whatever their tokens.

A training step's batch is gathered on the device from the task's examples, kept there whole
(``step_batch``): the host sends the step's example numbers alone, through pinned memory, and never waits
for the device. Its tokens and FLOPs are counted on the host. The dates task pads every batch to the longest
date of its pool, so that each step has the same shapes (which compiled CUDA graphs need). A run given
``--without device-batches`` builds each batch on the host and copies it, as a plain loop would.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F

from attention_course.basics.training import exact_match
from attention_course.data import tokenization
from attention_course.data.corpora import course_text, tiny_shakespeare
from attention_course.data.dates import SOURCE_VOCAB, TARGET_VOCAB, DateTask, batch
from attention_course.models.fused_attention import CAUSAL
from attention_course.models.transformer import NO_BIASES, DecoderOnly, EncoderDecoder, ModelConfig
from attention_course.scale.flops import training_flops
from attention_course.solutions.ch04_masking import causal_mask, decoder_self_attention_mask
from attention_course.solutions.ch06_transformer import greedy_decode


def model_config(args, fused: bool, max_len: int) -> ModelConfig:
    """The settings of the options' model, the same for both models: --d-model, --heads, --layers, --d-ff,
    --dropout, --norm and --tie-weights; fused attention where ``fused``; positions up to ``max_len``."""
    return ModelConfig(
        args.d_model,
        args.heads,
        args.layers,
        args.d_ff,
        args.dropout,
        max_len=max_len,
        norm_first=args.norm == "pre",
        fused=fused,
        tie_weights=args.tie_weights,
    )


def without(args, speedup: str) -> bool:
    """Whether the run was asked to go without one of the speed-ups (``--without``), as a benchmark measures each."""
    return speedup in (getattr(args, "without", None) or ())


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``tensor`` copied to ``device`` without the host waiting: a copy from pageable memory to a GPU waits for
    every kernel queued before it, one from pinned memory does not."""
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


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
        pool = batch(self.train_examples)  # padded to the pool's longest source and target
        self.pool = {"src": pool["src"], "tgt": pool["tgt"]}
        self.source_lengths = pool["src_mask"].sum(dim=1)
        self.target_lengths = (pool["tgt"][:, 1:] != TARGET_VOCAB.pad_id).sum(dim=1)
        self._device_pool, self._pool_device = None, None  # the pool on the device that trains

    def model(self, fused: bool) -> torch.nn.Module:
        return EncoderDecoder.from_config(len(SOURCE_VOCAB), len(TARGET_VOCAB), model_config(self.args, fused, 64))

    def batch(self, indices: torch.Tensor, examples=None) -> dict:
        return batch([(examples or self.train_examples)[i] for i in indices.tolist()])

    def step_batch(self, model, indices: torch.Tensor, device: torch.device) -> tuple[dict, int, float]:
        """The batch of the examples ``indices`` on ``device``, its real tokens (source and target) and its
        model FLOPs, counted on the host."""
        if without(self.args, "device-batches"):
            b = {k: v.to(device, non_blocking=True) for k, v in self.batch(indices).items()}
        else:
            if self._pool_device != device:
                self._device_pool, self._pool_device = {k: v.to(device) for k, v in self.pool.items()}, device
            rows = to_device(indices, device)
            src = self._device_pool["src"][rows]
            b = {"src": src, "src_mask": src != SOURCE_VOCAB.pad_id, "tgt": self._device_pool["tgt"][rows]}
        sources, targets = self.source_lengths[indices], self.target_lengths[indices]
        return b, int(sources.sum() + targets.sum()), training_flops(model, sources, targets)

    def loss(self, model, b: dict, label_smoothing: float) -> torch.Tensor:
        tgt_in, target = b["tgt"][:, :-1], b["tgt"][:, 1:]
        # Padding comes after a target's tokens, where the look-ahead mask already hides it from every real
        # query (the loss ignores the padded ones): the look-ahead mask alone, as the fused kernels' is_causal.
        if without(self.args, "is-causal"):
            tgt_mask = decoder_self_attention_mask(tgt_in, TARGET_VOCAB.pad_id)
        else:
            tgt_mask = CAUSAL
        logits = model(b["src"], tgt_in, b["src_mask"], tgt_mask)
        return F.cross_entropy(
            logits.flatten(0, 1).float(),
            target.flatten(),
            ignore_index=TARGET_VOCAB.pad_id,
            label_smoothing=label_smoothing,
        )

    @torch.no_grad()
    def validation_loss(self, model, device) -> float:
        b = {k: v.to(device) for k, v in batch(self.val_examples).items()}
        return self.loss(model, b, 0.0).item()

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
        self._device_data = self._data_device = self._offsets = None  # the text on the device that trains
        self._flops = self._flops_shape = None

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
        options = {} if getattr(self.args, "bias", True) else NO_BIASES  # --no-bias
        return DecoderOnly.from_config(self.vocab_size, model_config(self.args, fused, self.args.block_size), **options)

    def _windows(self, data: torch.Tensor, starts: torch.Tensor) -> dict:
        windows = torch.stack([data[s : s + self.args.block_size + 1] for s in starts.tolist()])
        return {"x": windows[:, :-1], "y": windows[:, 1:]}

    def batch(self, indices: torch.Tensor) -> dict:
        return self._windows(self.train_data, indices)

    def step_batch(self, model, indices: torch.Tensor, device: torch.device) -> tuple[dict, int, float]:
        """The windows starting at ``indices`` on ``device`` (gathered there from the training text), their
        tokens and their model FLOPs, counted on the host."""
        if without(self.args, "device-batches"):
            b = {k: v.to(device, non_blocking=True) for k, v in self.batch(indices).items()}
        else:
            if self._data_device != device:
                self._device_data, self._data_device = self.train_data.to(device), device
                self._offsets = torch.arange(self.args.block_size + 1, device=device)
            windows = self._device_data[to_device(indices, device)[:, None] + self._offsets]
            b = {"x": windows[:, :-1], "y": windows[:, 1:]}
        shape = (len(indices), self.args.block_size)
        if self._flops_shape != shape:  # the same for every batch of this size
            self._flops, self._flops_shape = training_flops(model, [shape[1]] * shape[0]), shape
        return b, shape[0] * shape[1], self._flops

    def validation_windows(self) -> dict:
        """The windows of the validation text that the validation loss is measured on: the same at every
        evaluation (seeded), at most 256 of them."""
        generator = torch.Generator().manual_seed(1234)
        starts = torch.randint(
            len(self.val_data) - self.args.block_size - 1, (min(self.args.eval_examples, 256),), generator=generator
        )
        return self._windows(self.val_data, starts)

    def loss(self, model, b: dict, label_smoothing: float) -> torch.Tensor:
        # The model's own look-ahead mask is the fused kernels' is_causal; --without is-causal gives it as a tensor.
        mask = causal_mask(b["x"].size(1), device=b["x"].device) if without(self.args, "is-causal") else None
        logits = model(b["x"], mask)
        return F.cross_entropy(logits.flatten(0, 1).float(), b["y"].flatten(), label_smoothing=label_smoothing)

    @torch.no_grad()
    def validation_loss(self, model, device) -> float:
        b = {k: v.to(device) for k, v in self.validation_windows().items()}
        return self.loss(model, b, 0.0).item()

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
