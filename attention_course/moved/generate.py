"""``attention_course.generate``, the earlier name of :mod:`attention_course.published.generate`.

``python -m attention_course.generate`` runs ``python -m attention_course.published.generate``."""

from attention_course.moved import alias, run_as_main

if __name__ == "__main__":
    run_as_main("attention_course.published.generate")
else:
    from attention_course.published import generate

    alias(__name__, generate)
