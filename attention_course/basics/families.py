"""Four families of Transformer models trained side by side on the date task (chapter 6).

The encoder-decoder reads the source and the target as two streams, joined by cross-attention. The
other three read one stream, the source, ``<bos>``, then the target, through the same stack of
layers (:class:`~attention_course.models.transformer.DecoderOnly`), and differ only in the attention mask and
the objective:

- **decoder-only**: every position attends to itself and the positions before it (a causal mask),
  and predicts the next token;
- **prefix-LM**: the positions of the prefix (the source and ``<bos>``) attend to the whole prefix,
  in both directions; the target's positions are causal. The objective is the decoder-only one;
- **encoder-only**: every position attends to every real position. The target's characters are
  replaced by a mask token and predicted at once, in one pass: a masked-language-model objective
  whose masked span is the answer.

All four are scored alike: the exact match of the ISO dates they give for test dates, greedily.
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attention_course.basics.schedule import scheduler
from attention_course.basics.training import exact_match, to_device
from attention_course.basics.training import train as train_steps
from attention_course.data.dates import SOURCE_VOCAB, TARGET_VOCAB, CharVocab, DateTask, Example, batch
from attention_course.devices import seed_everything
from attention_course.models.transformer import DecoderOnly, EncoderDecoder
from attention_course.solutions.ch04_masking import decoder_self_attention_mask
from attention_course.solutions.ch06_transformer import greedy_decode

FAMILIES = ("encoder-only", "decoder-only", "prefix-LM", "encoder-decoder")
STREAM_FAMILIES = FAMILIES[:3]
MASK_CHARACTER = "_"  # the encoder-only model's mask token: the blanks it fills in
# One vocabulary for a stream that holds both the source and the target: the source's characters
# (which include the digits and "-" of ISO dates) and the mask token.
STREAM_VOCAB = CharVocab("".join(SOURCE_VOCAB.tokens[4:]) + MASK_CHARACTER)
TARGET_LENGTH = len("2000-01-01")


def _check_family(family: str, families: Sequence[str] = FAMILIES) -> None:
    if family not in families:
        raise ValueError(f"family must be one of {', '.join(families)}, got {family!r}")


def attention_mask(family: str, prefix_lengths: torch.Tensor, lengths: torch.Tensor, size: int) -> torch.Tensor:
    """bool (B, 1, size, size): True where a query (row) may attend to a key (column) in a stream model.

    ``prefix_lengths`` (B,) counts each sequence's prefix (its source and ``<bos>``), ``lengths`` (B,) its
    real positions; the positions after them are padding, which no query attends to.
    """
    _check_family(family, STREAM_FAMILIES)
    keys = torch.arange(size, device=lengths.device)
    real_key = (keys < lengths[:, None])[:, None, :]  # (B, 1, size)
    causal = keys[None, :] <= keys[:, None]  # (size, size): key j <= query i
    if family == "encoder-only":
        allowed = real_key.expand(-1, size, -1)
    elif family == "decoder-only":
        allowed = causal & real_key
    else:  # prefix-LM: causal, and every query sees the whole prefix
        in_prefix = (keys < prefix_lengths[:, None])[:, None, :]
        allowed = (causal | in_prefix) & real_key
    return allowed[:, None]


def stream_batch(examples: Sequence[Example], family: str) -> dict[str, torch.Tensor]:
    """The tensors a stream model trains on: ``ids`` (B, L), ``targets`` (B, L), ``mask`` (B, 1, L, L).

    ``targets`` holds, at each position, the token the model must predict there, and ``<pad>`` (not
    scored) where it predicts nothing. Decoder-only and prefix-LM: ``ids`` is the source, ``<bos>``
    and the target, and each position from ``<bos>`` on predicts the next token (the target's last
    character predicts ``<eos>``). Encoder-only: ``ids`` is the source, ``<bos>`` and one mask token
    per target character, and each mask token predicts its character.
    """
    _check_family(family, STREAM_FAMILIES)
    if not examples:
        raise ValueError("examples must not be empty")
    rows, target_rows, prefix_lengths = [], [], []
    for example in examples:
        prefix = STREAM_VOCAB.encode(example.source, eos=False) + [STREAM_VOCAB.bos_id]
        answer = STREAM_VOCAB.encode(example.target, eos=True)
        if family == "encoder-only":
            blanks = STREAM_VOCAB.encode(MASK_CHARACTER * (len(answer) - 1))
            rows.append(prefix + blanks)
            target_rows.append([STREAM_VOCAB.pad_id] * len(prefix) + answer[:-1])
        else:
            rows.append(prefix + answer[:-1])
            target_rows.append([STREAM_VOCAB.pad_id] * (len(prefix) - 1) + answer)
        prefix_lengths.append(len(prefix))
    size = max(map(len, rows))
    ids = torch.full((len(rows), size), STREAM_VOCAB.pad_id, dtype=torch.long)
    targets = torch.full_like(ids, STREAM_VOCAB.pad_id)
    for i, (row, target_row) in enumerate(zip(rows, target_rows)):
        ids[i, : len(row)], targets[i, : len(target_row)] = torch.tensor(row), torch.tensor(target_row)
    lengths = torch.tensor([len(row) for row in rows])
    return {"ids": ids, "targets": targets, "mask": attention_mask(family, torch.tensor(prefix_lengths), lengths, size)}


@dataclass(frozen=True)
class Shape:
    """The width and depth every family gets; the encoder-decoder splits ``layers`` between its stacks."""

    d_model: int = 64
    heads: int = 4
    layers: int = 2
    d_ff: int = 256


def build(family: str, shape: Shape = Shape()) -> torch.nn.Module:
    """A freshly initialised model of ``family``: the stream families a pre-norm :class:`DecoderOnly` of
    ``shape.layers`` layers, the encoder-decoder an :class:`EncoderDecoder` of ``shape.layers // 2`` per stack."""
    _check_family(family)
    if family == "encoder-decoder":
        return EncoderDecoder(
            len(SOURCE_VOCAB), len(TARGET_VOCAB), shape.d_model, shape.heads, shape.layers // 2, shape.d_ff, 0.0, 64
        )
    return DecoderOnly(len(STREAM_VOCAB), shape.d_model, shape.heads, shape.layers, shape.d_ff, 0.0, max_len=64)


def loss(family: str, model: torch.nn.Module, examples: Sequence[Example]) -> torch.Tensor:
    """The mean cross-entropy of the tokens that ``family``'s objective scores on ``examples``: the target's
    characters and ``<eos>`` (the encoder-only model predicts no ``<eos>``: its answer has a fixed length)."""
    _check_family(family)
    device = next(model.parameters()).device
    if family == "encoder-decoder":
        b = to_device(batch(examples), device)
        tgt_in, target = b["tgt"][:, :-1], b["tgt"][:, 1:]
        logits = model(b["src"], tgt_in, b["src_mask"], decoder_self_attention_mask(tgt_in, TARGET_VOCAB.pad_id))
        return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=TARGET_VOCAB.pad_id)
    b = to_device(stream_batch(examples, family), device)
    logits = model(b["ids"], mask=b["mask"])
    return F.cross_entropy(logits.flatten(0, 1), b["targets"].flatten(), ignore_index=STREAM_VOCAB.pad_id)


@torch.no_grad()
def predict(family: str, model: torch.nn.Module, examples: Sequence[Example]) -> list[str]:
    """The ISO dates ``model`` gives for the sources of ``examples``, greedily.

    The encoder-only model fills in all the target's mask tokens in one pass. The decoder-only and
    prefix-LM models generate one character per pass, each after the characters before it, until
    ``<eos>``; sources of one length are decoded together, so that no sequence needs padding.
    """
    _check_family(family)
    model.eval()
    device = next(model.parameters()).device
    if family == "encoder-decoder":
        b = to_device(batch(examples), device)
        ids = greedy_decode(model, b["src"], b["src_mask"], TARGET_VOCAB.bos_id, TARGET_VOCAB.eos_id, TARGET_LENGTH + 1)
        return [TARGET_VOCAB.decode(row) for row in ids.tolist()]
    if family == "encoder-only":
        b = to_device(stream_batch(examples, family), device)
        guesses = model(b["ids"], mask=b["mask"]).argmax(dim=-1)
        blanks = b["ids"] == STREAM_VOCAB.index[MASK_CHARACTER]
        return [STREAM_VOCAB.decode(row[blank].tolist()) for row, blank in zip(guesses, blanks)]
    by_length = defaultdict(list)
    for i, example in enumerate(examples):
        by_length[len(example.source)].append(i)
    predictions = [""] * len(examples)
    for indices in by_length.values():
        prompts = [STREAM_VOCAB.encode(examples[i].source) + [STREAM_VOCAB.bos_id] for i in indices]
        ids = torch.tensor(prompts, device=device)
        prefix = torch.full((len(indices),), ids.size(1), device=device)
        for _ in range(TARGET_LENGTH + 1):
            size = ids.size(1)
            mask = attention_mask(family, prefix, torch.full_like(prefix, size), size)
            next_token = model(ids, mask=mask)[:, -1].argmax(dim=-1, keepdim=True)
            ids = torch.cat([ids, next_token], dim=1)
        for i, row in zip(indices, ids[:, prefix[0] :].tolist()):
            predictions[i] = STREAM_VOCAB.decode(row)
    return predictions


@dataclass
class Result:
    """One family's training run: its losses by step, exact match on the test dates, size and time."""

    family: str
    losses: list[float]
    exact_match: float
    parameters: int
    train_seconds: float


def train(
    family: str,
    steps: int = 300,
    *,
    batch_size: int = 32,
    lr: float = 6e-3,
    warmup: int = 30,
    seed: int = 0,
    shape: Shape = Shape(),
    test_examples: int = 500,
    device: torch.device | str = "cpu",
) -> Result:
    """Train a fresh model of ``family`` for ``steps`` steps of AdamW (warm-up, then a cosine decay to a
    tenth of ``lr``) on training dates, and score its greedy answers on ``test_examples`` test dates."""
    _check_family(family)
    if steps < 1 or batch_size < 1 or test_examples < 1:
        raise ValueError(
            f"steps, batch_size and test_examples must be positive, got {steps}, {batch_size}, {test_examples}"
        )
    seed_everything(seed)
    task = DateTask(seed=seed)
    train_examples = task.examples("train", steps * batch_size)
    model = build(family, shape).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = scheduler(optimizer, lr, steps, warmup)
    batches = [train_examples[start : start + batch_size] for start in range(0, len(train_examples), batch_size)]
    started = time.perf_counter()
    losses = train_steps(
        model,
        lambda: batches,
        functools.partial(loss, family),
        optimizer,
        steps,
        device,
        progress=False,
        desc=family,
        schedule=schedule,
    )
    seconds = time.perf_counter() - started
    tests = task.examples("test", test_examples)
    score = exact_match(predict(family, model, tests), [e.target for e in tests])
    return Result(family, losses, score, sum(p.numel() for p in model.parameters()), seconds)
