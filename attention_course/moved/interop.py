"""``attention_course.interop``, the earlier name of :mod:`attention_course.models.interop`."""

from attention_course.models import interop
from attention_course.moved import alias

alias(__name__, interop)
