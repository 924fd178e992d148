"""Triton for chapter 11's kernels: imported in its interpreter (kernels on CPU tensors) or compiled for a GPU.

Triton compiles a kernel for a GPU; its interpreter runs the same kernel on CPU tensors, one program after another
with NumPy. Which of the two a process uses is fixed when ``triton`` is first imported (``TRITON_INTERPRET``), so
:func:`load_triton` imports it: in the interpreter unless the process asked for compiled kernels
(``TRITON_INTERPRET=0``, as :mod:`benchmarks.attention` does on a GPU). The exercise's tests, the grader and the book
run the kernels in the interpreter, on the CPU, wherever they run. There, two of the interpreter's costs that change
nothing it computes are spared (:func:`_patch_language_once`): a fifth of chapter 11's grading.
"""

from __future__ import annotations

import inspect
import os
import sys

INTERPRET = "TRITON_INTERPRET"
# The Triton whose interpreter _patch_language_once was written against and checked with (requirements.txt's pin):
# another (Colab's own, a new pin) runs as Triton made it, until checked (tests/test_triton_patch.py fails then).
SPARED_TRITON = "3.7."


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
    if wanted == "1":
        if compiled:
            _interpret_from_now_on()
        _patch_language_once()
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


def _patch_language_once() -> None:
    """Spare the interpreter patching triton.language again at every call of a function written in Triton
    (``tl.sum``, ``tl.max``, a kernel's own ``@triton.jit`` helpers) inside a kernel: a launch already patched it.

    The interpreter runs a kernel with triton.language's functions replaced by its own (``_patch_lang``), and
    puts them back when the launch ends. It patches again at each call of such a function, in every program: that
    walk over the language's members was a fifth of chapter 11's grading (3,300 calls for 180 launches in the
    exercise's tests). The patch again changes nothing where everything it would patch is patched already: the
    language modules that the function sees, and the tensor methods and dtype that every patch sets (its patches
    are never put back). That call alone is skipped; a launch patches and restores as before, and a call that
    finds anything unpatched patches as before. Installed once a process (idempotent), and only for the Triton it
    was checked with (:data:`SPARED_TRITON`): these are the interpreter's private functions.

    The NumPy dtype of a Triton dtype (``_get_np_dtype``, called at nearly every operation: 145,000 times in those
    tests) is looked up once for each dtype, not found by building a table of twenty NumPy dtypes at each call."""
    import triton
    from triton.runtime import interpreter

    if not triton.__version__.startswith(SPARED_TRITON):
        return
    if getattr(interpreter._patch_lang, "_once", False):
        return
    patch = interpreter._patch_lang
    tl = interpreter.tl

    def patched(module) -> bool:  # what _patch_lang_core sets with the module's builtins, in one scope
        return getattr(getattr(module, "static_assert", None), "__name__", "") == "_new_static_assert"

    def patch_lang(fn):
        langs = [value for value in fn.__globals__.values() if inspect.ismodule(value) and value in [tl, tl.core]]
        shared = getattr(tl.core.dtype.to_ir, "__name__", "") == "_new_to_ir"  # set with the tensor's methods
        if langs and shared and all(patched(lang) for lang in langs):
            return interpreter._LangPatchScope()  # nothing to put back
        return patch(fn)

    patch_lang._once = True
    interpreter._patch_lang = patch_lang

    np_dtype, found = interpreter._get_np_dtype, {}

    def np_dtype_once(tt_dtype):
        scalar = tt_dtype.element_ty if isinstance(tt_dtype, tl.block_type) else tt_dtype
        if isinstance(scalar, tl.pointer_type):  # unhashable; an address, uint64
            return np_dtype(tt_dtype)
        if scalar not in found:
            found[scalar] = np_dtype(scalar)  # a block's dtype is its elements' (a KeyError for one it has none of)
        return found[scalar]

    np_dtype_once.original = np_dtype
    interpreter._get_np_dtype = np_dtype_once
