"""``attention_course.symbols``, the earlier name of :mod:`attention_course.data.symbols`."""

from attention_course.data import symbols
from attention_course.moved import alias

alias(__name__, symbols)
