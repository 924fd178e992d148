"""``attention_course.scaling``, the earlier name of :mod:`attention_course.scale.scaling`."""

from attention_course.moved import alias
from attention_course.scale import scaling

alias(__name__, scaling)
