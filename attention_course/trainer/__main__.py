"""``python -m attention_course.trainer``: ``make train``'s command (:mod:`attention_course.trainer.command`)."""

from attention_course.trainer.command import main

if __name__ == "__main__":
    main()
