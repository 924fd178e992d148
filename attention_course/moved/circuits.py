"""``attention_course.circuits``, the earlier name of :mod:`attention_course.interpret.circuits`."""

from attention_course.interpret import circuits
from attention_course.moved import alias

alias(__name__, circuits)
