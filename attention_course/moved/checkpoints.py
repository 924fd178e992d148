"""``attention_course.checkpoints``, the earlier name of :mod:`attention_course.trainer.checkpoints`."""

from attention_course.moved import alias
from attention_course.trainer import checkpoints

alias(__name__, checkpoints)
