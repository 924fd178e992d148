"""The tokenizers of the language-model tasks, and the unit their losses are compared in.

- :func:`train_bpe`: a byte-level BPE tokenizer (GPT-2's kind, with Hugging Face's ``tokenizers``),
  trained on a text: every text encodes, and decodes back exactly;
- :func:`encode`, :func:`token_bytes`: a text as a tensor of ids, and the UTF-8 bytes each id stands for;
- :func:`bits_per_byte`: a loss in bits per byte of text, the same unit for any two tokenizers.
"""

from __future__ import annotations

import math

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

BYTES = 256  # a byte-level BPE vocabulary starts with one token per byte value


def train_bpe(text: str, vocab_size: int) -> Tokenizer:
    """A byte-level BPE tokenizer trained on ``text``: the 256 bytes, then merges of the most frequent
    pairs until it has ``vocab_size`` tokens (fewer if the text runs out of pairs to merge).

    The same text and size give the same tokenizer. No prefix space is added, so that
    ``tokenizer.decode(tokenizer.encode(s).ids) == s`` for every string ``s``.
    """
    if vocab_size <= BYTES:
        raise ValueError(f"a byte-level BPE vocabulary needs more than {BYTES} tokens, got {vocab_size}")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator([text], trainer=trainer)
    return tokenizer


def encode(tokenizer: Tokenizer, text: str) -> torch.Tensor:
    """The ids of ``text``, as one LongTensor."""
    return torch.tensor(tokenizer.encode(text).ids, dtype=torch.long)


def token_bytes(tokenizer: Tokenizer) -> torch.Tensor:
    """The number of UTF-8 bytes each id of a byte-level ``tokenizer`` stands for, indexed by id.

    A byte-level token is written with one printable character per byte, so its bytes are its length;
    ``token_bytes(tokenizer)[ids].sum()`` counts the bytes of any ids exactly, even where they cut a
    character's bytes in two (which decoding them alone would not show).
    """
    return torch.tensor([len(tokenizer.id_to_token(i)) for i in range(tokenizer.get_vocab_size())])


def bits_per_byte(loss_per_token_nats: float, tokens: int, utf8_bytes: int) -> float:
    """The loss of ``tokens`` tokens that cover ``utf8_bytes`` bytes of text, in bits per byte.

    A loss per token depends on the tokenizer: a BPE token holds several characters, so it is harder to
    predict than one character, and a character may be one to four bytes. The cost of the whole text
    does not: it is ``loss_per_token_nats * tokens`` nats, whatever the tokens are. Divided by the
    text's bytes (and by ln 2, from nats to bits), it compares a character model with a BPE model, or
    any two tokenizers, on the same text.
    """
    return loss_per_token_nats * tokens / (math.log(2) * utf8_bytes)
