"""``attention_course.loop``, the earlier name of :mod:`attention_course.trainer.steps`."""

from attention_course.moved import alias
from attention_course.trainer import steps

alias(__name__, steps)
