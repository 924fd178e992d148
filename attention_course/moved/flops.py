"""``attention_course.flops``, the earlier name of :mod:`attention_course.scale.flops`."""

from attention_course.moved import alias
from attention_course.scale import flops

alias(__name__, flops)
