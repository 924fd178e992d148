"""``attention_course.batching``, the earlier name of :mod:`attention_course.published.batching`."""

from attention_course.moved import alias
from attention_course.published import batching

alias(__name__, batching)
