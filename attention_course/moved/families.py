"""``attention_course.families``, the earlier name of :mod:`attention_course.basics.families`."""

from attention_course.basics import families
from attention_course.moved import alias

alias(__name__, families)
