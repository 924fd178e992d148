"""``attention_course.training``, the earlier name of :mod:`attention_course.basics.training`."""

from attention_course.basics import training
from attention_course.moved import alias

alias(__name__, training)
