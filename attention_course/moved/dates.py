"""``attention_course.dates``, the earlier name of :mod:`attention_course.data.dates`."""

from attention_course.data import dates
from attention_course.moved import alias

alias(__name__, dates)
