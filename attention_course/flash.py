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

import argparse
import contextlib
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


def _weights(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weights, lse)``: the softmax of each row of ``scores`` and its log-sum-exp, a row that sees no key (all
    -inf, a causal mask with more queries than keys) getting weights 0 and lse -inf, and gradients 0, not NaN."""
    top = scores.amax(dim=-1, keepdim=True).detach()
    top = top.masked_fill(torch.isinf(top), 0.0)
    exps = torch.exp(scores - top)
    total = exps.sum(dim=-1, keepdim=True)
    weights = exps / total.masked_fill(total == 0, 1.0)
    return weights, (torch.log(total) + top).squeeze(-1)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False):
    """``(output, lse)``: softmax(q kᵀ / √d) v and the log-sum-exp of each query's scaled scores, computed in
    float64 from the whole matrix of scores and returned in ``q``'s dtype (``lse`` in float32). With ``causal`` the
    mask is aligned bottom-right, so a query that sees no key (``Lq > Lk``) gets output 0 and lse -inf."""
    weights, lse = _weights(_scores(q.double(), k.double(), causal))
    output = weights @ v.double()
    return output.to(q.dtype), lse.float()


def attention_gradients(q, k, v, grad_output, causal: bool = False):
    """``(grad_q, grad_k, grad_v)`` of ``(output * grad_output).sum()``, where output is :func:`attention`'s (a query
    that sees no key has gradient 0)."""
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    weights, _ = _weights(_scores(leaves[0], leaves[1], causal))
    output = weights @ leaves[2]
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


# Timing a student's kernel compiled. The notebook's process runs triton in its interpreter, and that holds until it
# ends: the kernel is timed in a process of its own (`python -m attention_course.flash`), which imports the kernel's
# source from a file that module_source writes.
LENGTHS = (1024, 2048, 4096, 8192)
MODULE_HEADER = (
    '"""{name} and what it uses by name, written by attention_course.flash.module_source to be timed compiled."""\n'
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
    written to a temporary folder and timed by ``python -m attention_course.flash``, its kernels compiled for the GPU
    (``device="cuda"``) or run in Triton's interpreter (``"cpu"``: tiny sizes, to try it without a GPU). A
    RuntimeError, with what the process wrote, where it fails."""
    if device not in ("cuda", "cpu"):
        raise ValueError(f"device must be 'cuda' or 'cpu', got {device!r}")
    source = module_source(forward)
    with tempfile.TemporaryDirectory(prefix="flash-timing-") as folder:
        path = Path(folder) / "timed_kernels.py"
        path.write_text(source)
        command = [sys.executable, "-m", "attention_course.flash", str(path), "--forward", forward.__name__]
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
    return torch.softmax(_scores(q, k, causal=True), dim=-1) @ v


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

        def yours_low(low=low):
            return forward(*low, causal=True, block_q=block_q, block_k=block_k)

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
            _cell(yours_low, device, notes, f"yours in bfloat16 at length {length}"),
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
    """``python -m attention_course.flash FILE``: time the forward function that FILE defines (:func:`module_source`
    writes it), and print the table."""
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
