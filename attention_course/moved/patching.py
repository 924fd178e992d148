"""``attention_course.patching``, the earlier name of :mod:`attention_course.interpret.patching`."""

from attention_course.interpret import patching
from attention_course.moved import alias

alias(__name__, patching)
