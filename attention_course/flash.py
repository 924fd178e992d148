"""Chapter 11's kernels: Triton, and the attention that a FlashAttention kernel must reproduce.

Triton compiles a kernel for a GPU; its interpreter runs the same kernel on CPU tensors, one program after another
with NumPy. Which of the two a process uses is fixed when ``triton`` is first imported (``TRITON_INTERPRET``), so
:func:`load_triton` imports it: in the interpreter unless the process asked for compiled kernels
(``TRITON_INTERPRET=0``, as :mod:`benchmarks.attention` does on a GPU). The exercise's tests, the grader and the book
run the kernels in the interpreter, on the CPU, wherever they run.

:func:`attention` and :func:`attention_gradients` compute what the kernels compute, the plain way: the whole matrix
of scores at once, in float64. The checks compare a student's kernels with them through the exercise's own
signatures (:func:`output_of`, :func:`lse_of`, :func:`grad_q_of`, ...), which take the block sizes that a kernel's
result does not depend on.
"""

from __future__ import annotations

import math
import os
import sys

import torch

INTERPRET = "TRITON_INTERPRET"


def load_triton(interpret: bool | None = None):
    """``(triton, triton.language)``, imported in the interpreter (``interpret=True``), compiled for a GPU
    (``False``), or as ``TRITON_INTERPRET`` says (``None``: the interpreter where it says nothing).

    The choice holds for the whole process: a RuntimeError where triton was already imported the other way."""
    wanted = "1" if interpret else "0" if interpret is not None else os.environ.get(INTERPRET, "1")
    if "triton" in sys.modules:
        import triton

        now = "1" if triton.knobs.runtime.interpret else "0"
        if now != wanted:
            running = "in its interpreter" if now == "1" else "compiled for a GPU"
            raise RuntimeError(
                f"triton was imported {running} already in this process, and the choice holds until it ends: "
                "restart the kernel (or the process) and run this first"
            )
    else:
        os.environ[INTERPRET] = wanted
    try:
        import triton
        import triton.language as tl
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            "this chapter's kernels need Triton: `make venv` installs it (requirements.txt pins its version); on "
            "Colab it comes with PyTorch"
        ) from exc
    return triton, tl


def _scores(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:  # query i sees keys j <= i, counted from the first of each (SDPA's is_causal)
        visible = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~visible, float("-inf"))
    return scores


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False):
    """``(output, lse)``: softmax(q kᵀ / √d) v and the log-sum-exp of each query's scaled scores, computed in
    float64 from the whole matrix of scores and returned in ``q``'s dtype (``lse`` in float32)."""
    scores = _scores(q, k, causal)
    lse = torch.logsumexp(scores, dim=-1)
    output = torch.exp(scores - lse[..., None]) @ v.double()
    return output.to(q.dtype), lse.float()


def attention_gradients(q, k, v, grad_output, causal: bool = False):
    """``(grad_q, grad_k, grad_v)`` of ``(output * grad_output).sum()``, where output is :func:`attention`'s."""
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    scores = _scores(leaves[0], leaves[1], causal)
    output = torch.softmax(scores, dim=-1) @ leaves[2]
    grads = torch.autograd.grad(output, leaves, grad_output.double())
    return tuple(g.to(t.dtype) for g, t in zip(grads, (q, k, v)))


# The exercise's signatures, for the checks that compare a kernel with the plain computation (the block sizes do not
# change what a kernel computes).
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


def time_on_gpu(forward, lengths=(1024, 2048, 4096, 8192), heads: int = 16, head_dim: int = 64) -> None:
    """Time ``forward`` (the exercise's ``flash_attention_forward``) compiled on a GPU, beside PyTorch's
    FlashAttention and the plain computation, causal, in float32, by length; print a table. Without a CUDA GPU, say
    so and return."""
    if not torch.cuda.is_available():
        print("No CUDA GPU here: on one (Colab's included), this runs your kernel compiled, in a process of its own.")
        return
    raise NotImplementedError
