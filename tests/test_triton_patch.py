"""Triton's interpreter patched once a launch (attention_course.kernels.interpreter): a launch patches
triton.language and puts it back, as Triton does; the calls of functions written in Triton inside it (``tl.sum``,
``tl.max``, a kernel's own helpers) no longer patch it again, and compute what they did."""

from __future__ import annotations

import linecache
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attention_course.kernels import interpreter

ROOT = Path(__file__).resolve().parent.parent

KERNELS = """
@triton.jit
def halved(x):
    return x * 0.5


@triton.jit
def row_stats(x_ptr, out_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    total = tl.zeros((N,), tl.float32)
    for start in range(0, 4 * N, N):
        x = tl.load(x_ptr + row * 4 * N + start + tl.arange(0, N))
        total = total + halved(x - tl.max(x, axis=0)) + tl.sum(x, axis=0)
    tl.store(out_ptr + row * N + tl.arange(0, N), total)
"""


def test_a_launch_patches_the_language_once_computes_the_same_and_puts_it_back(monkeypatch):
    triton, tl = interpreter.load_triton(interpret=True)
    from triton.runtime import interpreter as triton_interpreter

    filename = "<cell row_stats>"  # as a notebook's cell: the interpreter reads the kernels' source
    linecache.cache[filename] = (len(KERNELS), None, KERNELS.splitlines(keepends=True), filename)
    namespace = {"triton": triton, "tl": tl, "__name__": "__main__"}
    exec(compile(KERNELS, filename, "exec"), namespace)  # noqa: S102 (the test's own code)
    row_stats = namespace["row_stats"]

    x = torch.randn(3, 4, 16, generator=torch.Generator().manual_seed(0))
    want = ((x - x.amax(-1, keepdim=True)) * 0.5 + x.sum(-1, keepdim=True)).sum(1)
    out = torch.empty(3, 16)
    row_stats[(3,)](x, out, N=16)  # the first launch in a process may patch triton.language.core for good
    torch.testing.assert_close(out, want)

    patches = []
    patch_core = triton_interpreter._patch_lang_core
    monkeypatch.setattr(triton_interpreter, "_patch_lang_core", lambda *a: (patches.append(a), patch_core(*a))[1])
    out = torch.empty(3, 16)
    row_stats[(3,)](x, out, N=16)
    torch.testing.assert_close(out, want)  # 3 programs x 4 blocks x 3 calls of functions written in Triton
    assert len(patches) == 1, f"{len(patches)} patches of triton.language in one launch"
    # put back as Triton puts it back: tl's builtins, the tensor's methods and the dtypes
    assert tl.core.is_builtin(tl.arange) and tl.core.is_builtin(tl.tensor.__add__)
    assert tl.core.dtype.to_ir.__name__ != "_new_to_ir"
    installed = triton_interpreter._patch_lang
    interpreter.load_triton(interpret=True)  # once a process: no second layer
    assert triton_interpreter._patch_lang is installed and installed._once


def test_the_numpy_dtype_of_each_triton_dtype_is_the_interpreters_own():
    triton, tl = interpreter.load_triton(interpret=True)
    from triton.runtime import interpreter as triton_interpreter

    once, own = triton_interpreter._get_np_dtype, triton_interpreter._get_np_dtype.original
    scalars = [tl.int1, tl.float16, tl.bfloat16, tl.float32, tl.float64, tl.int8, tl.uint8, tl.int16, tl.uint16]
    scalars += [tl.int32, tl.uint32, tl.int64, tl.uint64, tl.float8e5, tl.float8e5b16, tl.float8e4nv, tl.float8e4b8]
    scalars += [tl.float8e4b15]
    for scalar in scalars:
        for dtype in (scalar, tl.block_type(scalar, [16, 4]), tl.pointer_type(scalar)):
            assert once(dtype) == own(dtype) and once(dtype) == own(dtype), dtype  # found, then remembered
        pointers = tl.block_type(tl.pointer_type(scalar), [8])
        assert once(pointers) == own(pointers) == own(tl.pointer_type(tl.int8))
    for unknown in (tl.void, tl.block_type(tl.void, [2])):  # no NumPy dtype: the interpreter's own error
        with pytest.raises(KeyError):
            own(unknown)
        with pytest.raises(KeyError):
            once(unknown)


def test_another_triton_runs_as_triton_made_it():
    """Colab's own Triton, or a new pin, until checked: its interpreter's private functions are left alone."""
    script = (
        "import triton\n"
        "triton.__version__ = '3.6.0'\n"
        "from attention_course.kernels.interpreter import load_triton\n"
        "load_triton(interpret=True)\n"
        "from triton.runtime import interpreter\n"
        "assert not hasattr(interpreter._patch_lang, '_once') and not hasattr(interpreter._get_np_dtype, 'original')\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
