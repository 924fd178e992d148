"""``attention_course.mla``, the earlier name of :mod:`attention_course.scale.mla`."""

from attention_course.moved import alias
from attention_course.scale import mla

alias(__name__, mla)
