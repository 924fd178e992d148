"""``attention_course.tokenization``, the earlier name of :mod:`attention_course.data.tokenization`."""

from attention_course.data import tokenization
from attention_course.moved import alias

alias(__name__, tokenization)
