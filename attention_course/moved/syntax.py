"""``attention_course.syntax``, the earlier name of :mod:`attention_course.tooling.syntax`."""

from attention_course.moved import alias
from attention_course.tooling import syntax

alias(__name__, syntax)
