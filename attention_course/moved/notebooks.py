"""``attention_course.notebooks``, the earlier name of :mod:`attention_course.tooling.notebooks`."""

from attention_course.moved import alias
from attention_course.tooling import notebooks

alias(__name__, notebooks)
