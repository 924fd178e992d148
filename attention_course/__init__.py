"""Shared helpers for the course *Attention: from Bahdanau to Transformers*.

Chapters and exercises import from here what is not the subject of the lesson
itself: toy data, the date-translation task, plotting, device and seeding
utilities, a training loop and metrics. From chapter 3 on, it also holds the
attention code that later chapters build on (``attention_course.attention``),
the same pieces that the chapters show and the exercises ask students to write.
"""

from attention_course.attention import (
    MultiHeadAttention,
    causal_mask,
    decoder_self_attention_mask,
    masked_softmax,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
    to_torch_attn_mask,
    to_torch_multihead,
)
from attention_course.dates import DateTask
from attention_course.devices import best_device, seed_everything
from attention_course.memory import attention_score_bytes, format_bytes
from attention_course.plotting import plot_attention
from attention_course.positions import PositionalEncoding, apply_rotary, sinusoidal_positional_encoding
from attention_course.toy import FOUR_WORDS, four_word_example
from attention_course.training import (
    LengthBucket,
    accuracy_by_length,
    epoch_batches,
    exact_match,
    greedy_decode_rnn,
    plot_loss_curve,
    sequence_cross_entropy,
    to_device,
    train,
)

__all__ = [
    "MultiHeadAttention",
    "PositionalEncoding",
    "apply_rotary",
    "causal_mask",
    "decoder_self_attention_mask",
    "masked_softmax",
    "merge_heads",
    "padding_mask",
    "scaled_dot_product_attention",
    "split_heads",
    "to_torch_attn_mask",
    "to_torch_multihead",
    "DateTask",
    "FOUR_WORDS",
    "LengthBucket",
    "accuracy_by_length",
    "attention_score_bytes",
    "best_device",
    "epoch_batches",
    "exact_match",
    "format_bytes",
    "four_word_example",
    "greedy_decode_rnn",
    "plot_attention",
    "plot_loss_curve",
    "seed_everything",
    "sinusoidal_positional_encoding",
    "sequence_cross_entropy",
    "to_device",
    "train",
]
