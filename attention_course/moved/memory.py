"""``attention_course.memory``, the earlier name of :mod:`attention_course.scale.memory`."""

from attention_course.moved import alias
from attention_course.scale import memory

alias(__name__, memory)
