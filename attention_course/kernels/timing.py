"""Chapter 11's timing: a student's forward kernel compiled on a GPU, beside PyTorch's kernels.

PyTorch's fused kernels and the plain computation are timed beside it. The notebook's own process runs Triton's
interpreter (:func:`attention_course.kernels.interpreter.load_triton`), and that holds until it ends, so
:func:`time_on_gpu` writes the source of the student's function, of its kernels and of the rest it uses by name
(:func:`module_source`) to a file that a process of its own imports compiled and times::

    python -m attention_course.kernels.timing FILE [--device cpu] [--lengths 1024 2048] [--heads 16] [--head-dim 64]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import inspect
import math
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import types
import warnings
from pathlib import Path

import torch

from attention_course.kernels.interpreter import INTERPRET, load_triton

LENGTHS = (1024, 2048, 4096, 8192)
MODULE_HEADER = (
    '"""{name} and what it uses by name, written by attention_course.kernels.timing.module_source, to be timed."""\n'
    "\n"
    "import math\n"
    "\n"
    "import torch\n"
    "import triton\n"
    "import triton.language as tl\n"
)
HEADER_IMPORTS = frozenset({"import math", "import torch", "import triton", "import triton.language as tl"})


def _kernel_function(value):
    """The Python function under a Triton kernel (``@triton.jit``, compiled or interpreted, and any autotuner or
    heuristics around it), or None where ``value`` is no kernel (or no triton was imported)."""
    triton = sys.modules.get("triton")
    if triton is None or not isinstance(value, triton.runtime.KernelInterface):
        return None
    while isinstance(value, triton.runtime.KernelInterface):
        value = value.fn
    return value


def _names(code: types.CodeType) -> list[str]:
    """The names that ``code`` looks up, globals and attributes alike, with those of the comprehensions, lambdas and
    functions inside it, in the order they first appear."""
    names = list(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names += _names(constant)
    return list(dict.fromkeys(names))


def _literal(value) -> bool:
    """Whether ``repr(value)`` is the Python literal that gives ``value`` back."""
    if isinstance(value, tuple):
        return all(_literal(item) for item in value)
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (bool, int, str))


def _source(function) -> str:
    try:
        return textwrap.dedent(inspect.getsource(function)).strip() + "\n"
    except (OSError, TypeError) as exc:
        raise ValueError(
            f"cannot read the source of {function.__qualname__}: define it with `def` in a notebook cell or a file"
        ) from exc


def module_source(forward) -> str:
    """The source of a module that defines ``forward`` (the exercise's ``flash_attention_forward``) as its own
    module does: the function, and what it uses by name from that module's globals, followed from each function
    included: the Triton kernels it launches (each with its decorators, and the kernels those call), the other
    functions defined beside it, its modules (imported again), the functions and classes it imported from elsewhere
    (imported again from there) and its constants (ints, floats, strings, ``tl.constexpr``). A global of another
    kind is left out: where the code needs it, importing or calling the module fails with a NameError."""
    if not inspect.isfunction(forward) or forward.__name__ == "<lambda>":
        raise TypeError(f"forward must be a function defined with `def`, got {forward!r}")
    imports, constants, definitions = [], [], {}
    defined = {forward.__name__}
    todo = [forward]
    while todo:
        function = todo.pop(0)
        definitions[function] = _source(function)
        scope = function.__globals__
        for name in _names(function.__code__):
            if name in defined or name not in scope:
                continue
            value = scope[name]
            kernel = _kernel_function(value)
            if kernel is not None or (inspect.isfunction(value) and value.__module__ == forward.__module__):
                defined.add(name)
                if (kernel or value) not in definitions:
                    todo.append(kernel or value)
            elif inspect.ismodule(value):
                defined.add(name)
                module = value.__name__
                parent, _, last = module.rpartition(".")
                if module == name:
                    imports.append(f"import {module}")
                elif last == name:
                    imports.append(f"from {parent} import {name}")
                else:
                    imports.append(f"import {module} as {name}")
            elif inspect.isfunction(value) or inspect.isclass(value) or inspect.isbuiltin(value):
                if getattr(value, "__module__", None) in (None, "__main__"):
                    continue
                defined.add(name)
                qualname = value.__qualname__
                alias = "" if qualname == name else f" as {name}"
                if "." not in qualname and "<" not in qualname:
                    imports.append(f"from {value.__module__} import {qualname}{alias}")
            elif _literal(value):
                defined.add(name)
                constants.append(f"{name} = {value!r}")
            elif type(value).__name__ == "constexpr" and _literal(getattr(value, "value", object())):
                defined.add(name)
                constants.append(f"{name} = tl.constexpr({value.value!r})")
    imports = [line for line in dict.fromkeys(imports) if line not in HEADER_IMPORTS]
    parts = [MODULE_HEADER.format(name=forward.__name__) + "".join(f"{line}\n" for line in imports)]
    if constants:
        parts.append("".join(f"{line}\n" for line in constants))
    # Each function after those it uses (a decorator's arguments are read as the module is imported), the forward last.
    parts += list(reversed(definitions.values()))
    return "\n\n".join(parts)


def run_timing(
    forward,
    device: str = "cuda",
    lengths=LENGTHS,
    heads: int = 16,
    head_dim: int = 64,
    block_q: int = 64,
    block_k: int = 64,
    timeout: float | None = None,
) -> str:
    """The table of :func:`time_on_gpu`, from a process of its own: ``forward``'s module (:func:`module_source`)
    written to a temporary folder and timed by ``python -m attention_course.kernels.timing``, its kernels compiled for
    the GPU (``device="cuda"``) or run in Triton's interpreter (``"cpu"``: tiny sizes, to try it without a GPU). A
    RuntimeError, with what the process wrote, where it fails."""
    if device not in ("cuda", "cpu"):
        raise ValueError(f"device must be 'cuda' or 'cpu', got {device!r}")
    source = module_source(forward)
    with tempfile.TemporaryDirectory(prefix="flash-timing-") as folder:
        path = Path(folder) / "timed_kernels.py"
        path.write_text(source)
        command = [sys.executable, "-m", "attention_course.kernels.timing", str(path), "--forward", forward.__name__]
        command += ["--device", device, "--lengths", *map(str, lengths), "--heads", str(heads)]
        command += ["--head-dim", str(head_dim), "--block-q", str(block_q), "--block-k", str(block_k)]
        environment = {**os.environ, INTERPRET: "1" if device == "cpu" else "0"}
        done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"timing {forward.__name__} failed (exit status {done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout


def time_on_gpu(
    forward,
    lengths=LENGTHS,
    heads: int = 16,
    head_dim: int = 64,
    block_q: int = 64,
    block_k: int = 64,
) -> None:
    """Time ``forward`` (the exercise's ``flash_attention_forward``) compiled by Triton on a CUDA GPU, beside PyTorch's
    FlashAttention and the plain computation, causal, by length, and print a table. Your kernel runs in float32 and
    in bfloat16 with blocks of ``block_q`` queries and ``block_k`` keys; PyTorch's FlashAttention takes no float32, so
    it runs in bfloat16 (beside yours in bfloat16), its memory-efficient kernel in float32 (beside yours in float32);
    the plain computation in float32. The kernel is compiled and timed in a process of its own (this one
    runs Triton's interpreter), from the source of ``forward`` and of what it uses (:func:`module_source`). Without a
    CUDA GPU, say so and return."""
    if not torch.cuda.is_available():
        print("No CUDA GPU here: on one (Colab's included), this runs your kernel compiled, in a process of its own.")
        return
    print(run_timing(forward, "cuda", lengths, heads, head_dim, block_q, block_k), end="")


def plain_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention as the chapters first compute it, in ``q``'s dtype: the whole matrix of scores, masked,
    softmax, then the values."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    visible = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
    return torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1) @ v


def _milliseconds(step, device: torch.device) -> float:
    """The median time of ``step()``: ``triton.testing.do_bench`` on a GPU; on the CPU, the wall time of three runs
    after one that is not timed."""
    if device.type == "cuda":
        import triton.testing

        return float(triton.testing.do_bench(step, return_mode="median"))
    step()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def _cell(step, device: torch.device, notes: list[str], what: str) -> str:
    """A table cell: the milliseconds of ``step``, or why it did not run (its message added to ``notes``)."""
    try:
        return f"{_milliseconds(step, device):.3f}"
    except torch.OutOfMemoryError:
        return "out of memory"
    except Exception as error:  # a kernel that does not compile or run; a back end that refuses this GPU
        first = (str(error).strip().splitlines() or [""])[0]
        notes.append(f"{what}: {type(error).__name__}: {first}")
        return "failed"
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()


def timing_table(forward, device: torch.device, lengths, heads: int, head_dim: int, block_q: int, block_k: int) -> str:
    """Causal attention by length: ``forward`` in float32 and in bfloat16, SDPA's memory-efficient kernel (float32)
    and FlashAttention (bfloat16), the plain computation (float32), in milliseconds, and the largest difference
    between the outputs of ``forward`` in float32 and the plain one. Each dtype has a fused kernel of PyTorch's beside
    it: yours in bfloat16 against flash is the like-for-like comparison that FlashAttention-2's own figures make."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if device.type == "cuda":
        where, how = torch.cuda.get_device_name(device), "triton.testing.do_bench"
        run = "compiled by Triton, in float32 (tl.dot multiplies float32 in TF32 on a recent GPU) and in bfloat16"
    else:
        where, how = "the CPU", "the wall time of 3 runs"
        run = "in Triton's interpreter, in float32 and in bfloat16 (whose tl.dot it gets wrong: times only)"
    lines = [
        f"Causal attention on {where}: 1 sequence, {heads} head{'s' * (heads != 1)} of size {head_dim}; median "
        f"milliseconds ({how}).",
        f"  yours: {forward.__name__} {run}, block_q={block_q}, block_k={block_k}",
        "  flash: F.scaled_dot_product_attention(..., is_causal=True) held to SDPBackend.FLASH_ATTENTION, bfloat16 "
        "(it takes no float32): compare it with yours in bfloat16; beside yours in float32 it measures another "
        "dtype as much as another kernel",
        "  efficient: the same, held to SDPBackend.EFFICIENT_ATTENTION, float32: a fused kernel in float32, to "
        "compare with yours in float32",
        "  plain: softmax(q kᵀ / √d, masked) v in PyTorch, float32, the whole matrix of scores at once",
        "  |Δ|: the largest difference between your output and the plain one",
        "",
        f"{'length':>8} {'yours (fp32)':>14} {'yours (bf16)':>14} {'efficient (fp32)':>17} {'plain (fp32)':>14} "
        f"{'flash (bf16)':>14} {'|Δ|':>10}",
    ]
    notes: list[str] = []
    generator = torch.Generator(device=device).manual_seed(0)
    for length in lengths:
        q, k, v = torch.randn(3, 1, heads, length, head_dim, device=device, generator=generator).unbind(0)
        low = [t.to(torch.bfloat16) for t in (q, k, v)]

        def yours(q=q, k=k, v=v):
            return forward(q, k, v, causal=True, block_q=block_q, block_k=block_k)

        def flash(low=low):
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION), warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # why it refuses: the error says it
                return F.scaled_dot_product_attention(*low, is_causal=True)

        def efficient(q=q, k=k, v=v):
            with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def plain(q=q, k=k, v=v):
            return plain_causal_attention(q, k, v)

        cells = [
            _cell(yours, device, notes, f"yours at length {length}"),
            _cell(functools.partial(yours, *low), device, notes, f"yours in bfloat16 at length {length}"),
            _cell(efficient, device, notes, f"efficient at length {length}"),
            _cell(plain, device, notes, f"plain at length {length}"),
            _cell(flash, device, notes, f"flash at length {length}"),
        ]
        difference = "-"
        if "." in cells[0] and "." in cells[3]:  # both ran
            with contextlib.suppress(torch.OutOfMemoryError):
                difference = f"{(yours()[0] - plain()).abs().max().item():.1e}"
        lines.append(
            f"{length:>8} {cells[0]:>14} {cells[1]:>14} {cells[2]:>17} {cells[3]:>14} {cells[4]:>14} {difference:>10}"
        )
        del q, k, v, low
        if device.type == "cuda":
            torch.cuda.empty_cache()
    lines += ["", *dict.fromkeys(notes)] if notes else []
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    """``python -m attention_course.kernels.timing FILE``: time the forward function that FILE defines
    (:func:`module_source` writes it), and print the table."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("module", type=Path, help="a file that defines the forward function and its kernels")
    parser.add_argument("--forward", default="flash_attention_forward", help="its name in the file")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: in Triton's interpreter")
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--block-q", type=int, default=64)
    parser.add_argument("--block-k", type=int, default=64)
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA GPU here (--device cpu runs the kernel in Triton's interpreter)")
    load_triton(interpret=args.device == "cpu")  # before the file imports triton
    spec = importlib.util.spec_from_file_location("timed_kernels", args.module)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    forward = getattr(module, args.forward)
    device = torch.device(args.device)
    print(timing_table(forward, device, args.lengths, args.heads, args.head_dim, args.block_q, args.block_k), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
