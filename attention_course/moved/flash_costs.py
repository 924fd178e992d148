"""``attention_course.flash_costs``, the earlier name of :mod:`attention_course.kernels.costs`."""

from attention_course.kernels import costs
from attention_course.moved import alias

alias(__name__, costs)
