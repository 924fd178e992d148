"""Shared helpers for the course *Attention: from Bahdanau to Transformers*.

Chapters and exercises import from here what is not the subject of the lesson
itself: toy data, the date-translation task, plotting, device and seeding
utilities, a training loop and metrics, and the conversions between the course's
modules and PyTorch's built-ins. What the exercises ask students to write is not
here: it is in ``attention_course.solutions`` (one module per assignment), which
holds a chapter's reference solutions only once they are released.
"""

from attention_course.dates import DateTask
from attention_course.devices import best_device, seed_everything
from attention_course.interop import to_torch_attn_mask, to_torch_multihead
from attention_course.memory import attention_score_bytes, format_bytes
from attention_course.plotting import plot_attention, show_figure
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
    "show_figure",
    "plot_loss_curve",
    "seed_everything",
    "sequence_cross_entropy",
    "to_device",
    "train",
]
