"""Correct answers to ch04_masking in other idioms than the reference's."""

from tests.correct import Answer

ANSWERS: list[Answer] = []
