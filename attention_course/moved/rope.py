"""``attention_course.rope``, the earlier name of :mod:`attention_course.models.rope`."""

from attention_course.models import rope
from attention_course.moved import alias

alias(__name__, rope)
