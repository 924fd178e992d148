"""``attention_course.lazy``, the earlier name of :mod:`attention_course.tooling.lazy`."""

from attention_course.moved import alias
from attention_course.tooling import lazy

alias(__name__, lazy)
