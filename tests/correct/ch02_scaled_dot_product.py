"""Correct answers to ch02_scaled_dot_product in other idioms than the reference's."""

from tests.correct import Answer

ANSWERS: list[Answer] = []
