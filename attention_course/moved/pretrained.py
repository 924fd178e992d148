"""``attention_course.pretrained``, the earlier name of :mod:`attention_course.published.pretrained`."""

from attention_course.moved import alias
from attention_course.published import pretrained

alias(__name__, pretrained)
