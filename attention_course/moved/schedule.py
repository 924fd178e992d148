"""``attention_course.schedule``, the earlier name of :mod:`attention_course.basics.schedule`."""

from attention_course.basics import schedule
from attention_course.moved import alias

alias(__name__, schedule)
