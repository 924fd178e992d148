"""Shared helpers for the course *Attention: from Bahdanau to Transformers*.

Chapters and exercises import from here what is not the subject of the lesson
itself: toy data, the date-translation task, plotting, device and seeding
utilities, a training loop and metrics, and the conversions between the course's
modules and PyTorch's built-ins. What the exercises ask students to write is not
here: it is in ``attention_course.solutions`` (one module per assignment), which
holds a chapter's reference solutions only once they are released.

Each name is imported on first use, so that importing one module of this package (the grader and
its sandbox import ``attention_course.notebooks``) imports no torch for it.
"""

from attention_course import lazy

_HOMES = {  # name -> the module that defines it
    "DateTask": "attention_course.dates",
    "best_device": "attention_course.devices",
    "seed_everything": "attention_course.devices",
    "to_torch_attn_mask": "attention_course.interop",
    "to_torch_multihead": "attention_course.interop",
    "attention_score_bytes": "attention_course.memory",
    "format_bytes": "attention_course.memory",
    "AttentionMaps": "attention_course.plotting",
    "plot_attention": "attention_course.plotting",
    "show_figure": "attention_course.plotting",
    "FOUR_WORDS": "attention_course.toy",
    "four_word_example": "attention_course.toy",
    **dict.fromkeys(
        (
            "LengthBucket",
            "accuracy_by_length",
            "epoch_batches",
            "exact_match",
            "greedy_decode_rnn",
            "plot_loss_curve",
            "sequence_cross_entropy",
            "to_device",
            "train",
        ),
        "attention_course.training",
    ),
}


__getattr__, __dir__ = lazy.exports(__name__, _HOMES)
__all__ = sorted(_HOMES)
