"""Shared helpers for the course *Attention: from Bahdanau to Transformers*.

Chapters and exercises import from here what is not the subject of the lesson itself. The package's root holds what
every chapter shares: these names (devices and seeds, figures, the date task, the small models' training loop and
metrics, the conversions to PyTorch's built-ins), ``devices``, ``plotting`` and ``solutions`` (the reference
solutions, one module per assignment, each only once its chapter is released). The rest is in folders, by whom it
serves (ARCHITECTURE.md): ``data/`` the tasks, ``models/`` the course's models, ``basics/`` chapters 1 to 6,
``scale/`` chapters 7 and 8, ``published/`` chapter 9's checkpoints, ``interpret/`` chapter 10, ``kernels/`` chapter
11, ``trainer/`` ``make train``, and ``tooling/`` what the grader and the site read the notebooks with.

Each name is imported on first use, so that importing one module of this package (the grader and its sandbox import
``attention_course.tooling.notebooks``) imports no torch for it. The modules' earlier names
(``attention_course.model``, ...), which earlier terms' notebooks import, are found in ``moved/``, on the package's
path after its own folder.
"""

from pathlib import Path

from attention_course.tooling import lazy

__path__.append(str(Path(__file__).with_name("moved")))  # the modules' earlier names, after the package's own

_HOMES = {  # name -> the module that defines it
    "DateTask": "attention_course.data.dates",
    "best_device": "attention_course.devices",
    "seed_everything": "attention_course.devices",
    "to_torch_attn_mask": "attention_course.models.interop",
    "to_torch_multihead": "attention_course.models.interop",
    "attention_score_bytes": "attention_course.scale.memory",
    "format_bytes": "attention_course.scale.memory",
    "AttentionMaps": "attention_course.plotting",
    "plot_attention": "attention_course.plotting",
    "show_figure": "attention_course.plotting",
    "FOUR_WORDS": "attention_course.data.toy",
    "four_word_example": "attention_course.data.toy",
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
        "attention_course.basics.training",
    ),
}


__getattr__, __dir__ = lazy.exports(__name__, _HOMES)
__all__ = sorted(_HOMES)
