"""``attention_course.model``, the earlier name of :mod:`attention_course.models.transformer`."""

from attention_course.models import transformer
from attention_course.moved import alias

alias(__name__, transformer)
