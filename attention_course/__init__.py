"""Shared helpers for the course *Attention: from Bahdanau to Transformers*.

Chapters and exercises import from here what is not the subject of the lesson
itself: toy data, the date-translation task, plotting, device and seeding
utilities. The graded functions are never here; students write those.
"""

from attention_course.dates import DateTask
from attention_course.devices import best_device, seed_everything
from attention_course.memory import attention_score_bytes, format_bytes
from attention_course.plotting import plot_attention
from attention_course.toy import FOUR_WORDS, four_word_example

__all__ = [
    "DateTask",
    "FOUR_WORDS",
    "attention_score_bytes",
    "best_device",
    "format_bytes",
    "four_word_example",
    "plot_attention",
    "seed_everything",
]
