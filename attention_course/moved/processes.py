"""``attention_course.processes``, the earlier name of :mod:`attention_course.trainer.processes`."""

from attention_course.moved import alias
from attention_course.trainer import processes

alias(__name__, processes)
