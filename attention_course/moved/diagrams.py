"""``attention_course.diagrams``, the earlier name of :mod:`attention_course.basics.diagrams`."""

from attention_course.basics import diagrams
from attention_course.moved import alias

alias(__name__, diagrams)
