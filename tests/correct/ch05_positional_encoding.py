"""Correct answers to ch05_positional_encoding in other idioms than the reference's."""

from tests.correct import Answer

ANSWERS: list[Answer] = []
