"""``attention_course.tasks``, the earlier name of :mod:`attention_course.trainer.tasks`."""

from attention_course.moved import alias
from attention_course.trainer import tasks

alias(__name__, tasks)
