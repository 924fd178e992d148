"""Correct answers to ch01_bahdanau in other idioms than the reference's."""

from tests.correct import Answer

ANSWERS: list[Answer] = []
