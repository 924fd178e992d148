"""Correct answers to ch03_multi_head in other idioms than the reference's."""

from tests.correct import Answer

ANSWERS: list[Answer] = []
