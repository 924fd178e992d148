"""``attention_course.speculative``, the earlier name of :mod:`attention_course.published.speculative`."""

from attention_course.moved import alias
from attention_course.published import speculative

alias(__name__, speculative)
