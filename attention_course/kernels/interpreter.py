"""Triton for chapter 11's kernels: imported in its interpreter (kernels on CPU tensors) or compiled for a GPU.

Triton compiles a kernel for a GPU; its interpreter runs the same kernel on CPU tensors, one program after another
with NumPy. Which of the two a process uses is fixed when ``triton`` is first imported (``TRITON_INTERPRET``), so
:func:`load_triton` imports it: in the interpreter unless the process asked for compiled kernels
(``TRITON_INTERPRET=0``, as :mod:`benchmarks.attention` does on a GPU). The exercise's tests, the grader and the book
run the kernels in the interpreter, on the CPU, wherever they run.
"""

from __future__ import annotations

import os
import sys

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
