"""``attention_course.checkpoint_layouts``, the earlier name of :mod:`attention_course.published.layouts`."""

from attention_course.moved import alias
from attention_course.published import layouts

alias(__name__, layouts)
