"""``attention_course.flash_timing``, the earlier name of :mod:`attention_course.kernels.timing`.

``python -m attention_course.flash_timing`` runs ``python -m attention_course.kernels.timing``."""

from attention_course.moved import alias, run_as_main

if __name__ == "__main__":
    run_as_main("attention_course.kernels.timing")
else:
    from attention_course.kernels import timing

    alias(__name__, timing)
