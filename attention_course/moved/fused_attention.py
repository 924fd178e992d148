"""``attention_course.fused_attention``, the earlier name of :mod:`attention_course.models.fused_attention`."""

from attention_course.models import fused_attention
from attention_course.moved import alias

alias(__name__, fused_attention)
