"""``attention_course.layers``, the earlier name of :mod:`attention_course.models.layers`."""

from attention_course.models import layers
from attention_course.moved import alias

alias(__name__, layers)
