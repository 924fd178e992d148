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

:func:`time_on_gpu` times a student's forward pass compiled, on a CUDA GPU, beside PyTorch's FlashAttention and the
plain computation. The notebook's own process runs the interpreter, so the function's source and that of the kernels
and the rest it uses by name (:func:`module_source`) are written to a file that a process of its own imports
compiled and times::

    python -m attention_course.flash FILE [--device cpu] [--lengths 1024 2048] [--heads 16] [--head-dim 64]
"""

from __future__ import annotations

import math
import os
import sys

import torch

from attention_course import lazy

INTERPRET = "TRITON_INTERPRET"


def load_triton(interpret: bool | None = None):
    """``(triton, triton.language)``, imported in the interpreter (``interpret=True``), compiled for a GPU
    (``False``), or as ``TRITON_INTERPRET`` says (``None``: the interpreter where it says nothing).

    The choice is made when triton is first imported, and torch imports it too wherever it is installed (its
    compiler's modules, loaded by torch.compile or by a first operation on the "meta" device). A process that holds
    triton compiled is switched to the interpreter (:func:`_interpret_from_now_on`): a grader that graded other
    chapters first, a notebook that compiled something before. One that holds it interpreted cannot be switched
    back: a RuntimeError says so."""
    wanted = "1" if interpret else "0" if interpret is not None else os.environ.get(INTERPRET, "1")
    if "triton" not in sys.modules:
        os.environ[INTERPRET] = wanted
    try:
        import triton
        import triton.language as tl
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            "this chapter's kernels need Triton: `make venv` installs it on Linux (requirements.txt pins its "
            "version), and Colab's PyTorch comes with it; Triton has no wheels for macOS or Windows: work on Colab, "
            "in WSL or on a Linux machine"
        ) from exc
    compiled = _language_compiled()
    if wanted == "1" and compiled:
        _interpret_from_now_on()
    elif wanted == "0" and not compiled:
        raise RuntimeError(
            "triton was imported in its interpreter already in this process, and that holds until it ends: run "
            "compiled kernels in a process of their own (time_on_gpu does)"
        )
    return triton, tl


def _language_compiled() -> bool:
    """Whether this process's triton.language was built for compiled kernels: its functions written in Triton
    (``tl.sigmoid``, ``tl.zeros_like``, ...) are then JITFunctions, which only a compiled kernel can call."""
    from triton.runtime.jit import JITFunction

    return any(type(value) is JITFunction for value in vars(sys.modules["triton.language.standard"]).values())


def _interpret_from_now_on() -> None:
    """Run every kernel defined from now on in Triton's interpreter, in a process that imported triton compiled:
    the interpreter's switch set, and triton.language's own functions written in Triton made interpretable, as an
    import in the interpreter makes them."""
    import triton
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    triton.knobs.runtime.interpret = True
    for name, module in list(sys.modules.items()):
        if name == "triton.language" or name.startswith("triton.language."):
            for attribute, value in list(vars(module).items()):
                if type(value) is JITFunction:
                    setattr(module, attribute, InterpretedFunction(value.fn))


def _scores(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    """The scaled scores q kᵀ / √d, in ``q``'s dtype, -inf where ``causal`` hides a key."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:  # aligned bottom-right (FlashAttention >= 2.1): query i sees keys j <= i + Lk - Lq
        lq, lk = q.shape[-2], k.shape[-2]
        visible = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(diagonal=lk - lq)
        scores = scores.masked_fill(~visible, float("-inf"))
    return scores


def _weights(scores: torch.Tensor) -> torch.Tensor:
    """The softmax of each row of ``scores``, a row that sees no key (all -inf, a causal mask with more queries
    than keys) getting weights 0 and gradients 0, not NaN."""
    hidden = torch.isinf(scores).all(dim=-1, keepdim=True) & (scores < 0).all(dim=-1, keepdim=True)
    return torch.softmax(scores.masked_fill(hidden, 0.0), dim=-1).masked_fill(hidden, 0.0)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False):
    """``(output, lse)``: softmax(q kᵀ / √d) v and the log-sum-exp of each query's scaled scores, computed in
    float64 from the whole matrix of scores and returned in ``q``'s dtype (``lse`` in float32). With ``causal`` the
    mask is aligned bottom-right, so a query that sees no key (``Lq > Lk``) gets output 0 and lse -inf."""
    scores = _scores(q.double(), k.double(), causal)
    lse = torch.logsumexp(scores, dim=-1)
    output = (torch.exp(scores - lse[..., None]) @ v.double()).nan_to_num(0.0)  # a query that sees no key: 0
    return output.to(q.dtype), lse.float()


def attention_gradients(q, k, v, grad_output, causal: bool = False):
    """``(grad_q, grad_k, grad_v)`` of ``(output * grad_output).sum()``, where output is :func:`attention`'s (a query
    that sees no key has gradient 0)."""
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    scores = _scores(leaves[0], leaves[1], causal)
    output = _weights(scores) @ leaves[2]
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


# The timing moved to its own module; the exercise's notebooks import time_on_gpu from here.
__getattr__, _ = lazy.exports(__name__, {"time_on_gpu": "attention_course.flash_timing"})
