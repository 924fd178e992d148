"""``attention_course.toy``, the earlier name of :mod:`attention_course.data.toy`."""

from attention_course.data import toy
from attention_course.moved import alias

alias(__name__, toy)
