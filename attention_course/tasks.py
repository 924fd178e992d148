"""The tasks of ``make train``: each task's data, model, batches, loss, FLOPs, evaluation and files.

- ``dates`` (:class:`DatesTask`): the encoder-decoder translates dates written in many formats into ISO
  dates; scored by exact match of greedy decoding on the test split.
- ``chars`` (:class:`CharsTask`): a decoder-only character language model on a text; scored by
  validation loss.
- ``lm`` (:class:`LmTask`): the same model on the tokens of a byte-level BPE tokenizer trained on the
  training text (saved as ``tokenizer.json``).

The two language models share :class:`LanguageModelTask`, and report their validation loss in bits per
byte of text too, which compares them whatever their tokens.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F

from attention_course import tokenization
from attention_course.corpora import course_text, tiny_shakespeare
from attention_course.dates import SOURCE_VOCAB, TARGET_VOCAB, DateTask, batch
from attention_course.flops import training_flops
from attention_course.model import DecoderOnly, EncoderDecoder, ModelConfig
from attention_course.solutions.ch04_masking import decoder_self_attention_mask
from attention_course.solutions.ch06_transformer import greedy_decode
from attention_course.training import exact_match


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
        return EncoderDecoder.from_config(len(SOURCE_VOCAB), len(TARGET_VOCAB), model_config(self.args, fused, 64))

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
        return DecoderOnly.from_config(self.vocab_size, model_config(self.args, fused, self.args.block_size))

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
