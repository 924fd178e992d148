"""The four-word example of the general attention mechanism.

Four "words" with 3-dimensional embeddings, and integer projection matrices
drawn with NumPy's legacy generator seeded with 42, in the order W_Q, W_K, W_V.
The example comes from S. Cristina's tutorial "The Attention Mechanism from
Scratch" (Machine Learning Mastery); chapter 2 works it through step by step.
"""

from __future__ import annotations

import numpy as np

FOUR_WORDS = np.array(
    [
        [1, 0, 0],
        [0, 1, 0],
        [1, 1, 0],
        [0, 0, 1],
    ]
)


def four_word_example(seed: int = 42) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return ``(words, W_Q, W_K, W_V)``: the embeddings and three 3x3 integer matrices.

    The matrices are drawn exactly as in the tutorial, so that the course
    reproduces its printed output: ``np.random.seed(seed)`` and then
    ``np.random.randint(3, size=(3, 3))`` three times. This resets NumPy's
    global generator, as the tutorial does.
    """
    np.random.seed(seed)
    w_q = np.random.randint(3, size=(3, 3))
    w_k = np.random.randint(3, size=(3, 3))
    w_v = np.random.randint(3, size=(3, 3))
    return FOUR_WORDS.copy(), w_q, w_k, w_v
