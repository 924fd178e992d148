"""Correct answers to ch06_transformer in other idioms than the reference's."""

from tests.correct import Answer

ANSWERS: list[Answer] = []
