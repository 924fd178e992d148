"""``attention_course.corpora``, the earlier name of :mod:`attention_course.data.corpora`.

``python -m attention_course.corpora`` runs ``python -m attention_course.data.corpora``."""

from attention_course.moved import alias, run_as_main

if __name__ == "__main__":
    run_as_main("attention_course.data.corpora")
else:
    from attention_course.data import corpora

    alias(__name__, corpora)
