"""Chapter 11's plain attention called with the exercise's signatures, which the checks compare a kernel with.

``flash_attention_forward`` and ``flash_attention_backward`` take block sizes that do not change what a kernel
computes; each function here takes them too, and returns one of their outputs, from
:mod:`attention_course.kernels.plain`.
"""

from __future__ import annotations

from attention_course.kernels.plain import attention, attention_gradients


def output_of(q, k, v, causal=False, block_q=16, block_k=16):
    """:func:`attention`'s output, called as ``flash_attention_forward``."""
    return attention(q, k, v, causal)[0]


def lse_of(q, k, v, causal=False, block_q=16, block_k=16):
    """:func:`attention`'s log-sum-exp, called as ``flash_attention_forward``."""
    return attention(q, k, v, causal)[1]


def grad_q_of(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
    """:func:`attention_gradients`' gradient of the queries, called as ``flash_attention_backward``."""
    return attention_gradients(q, k, v, grad_output, causal)[0]


def grad_k_of(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
    """The gradient of the keys, called as ``flash_attention_backward``."""
    return attention_gradients(q, k, v, grad_output, causal)[1]


def grad_v_of(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
    """The gradient of the values, called as ``flash_attention_backward``."""
    return attention_gradients(q, k, v, grad_output, causal)[2]
