"""``attention_course.report``, the earlier name of :mod:`attention_course.trainer.report`."""

from attention_course.moved import alias
from attention_course.trainer import report

alias(__name__, report)
