"""Causal self-attention by sequence length: the course's own computation against PyTorch's fused kernels.

For each length, each precision and each implementation, the time of a forward pass, of a forward and
backward pass, and (on a GPU) the peak memory that the forward and backward pass allocated beyond their
inputs. The implementations:

- ``course``: chapter 2's ``scaled_dot_product_attention`` with chapter 4's causal mask, which builds the
  whole matrix of scores and of weights, as the chapters teach it;
- ``math``, ``efficient``, ``flash``: ``F.scaled_dot_product_attention`` with ``is_causal=True``, held to
  one of its back ends by ``sdpa_kernel`` (the plain computation in PyTorch's own operations, the
  memory-efficient kernel, FlashAttention). A back end that refuses the dtype or the device is recorded as
  such; one that runs out of memory, likewise;
- ``triton``: chapter 11's reference kernels (``attention_course.solutions.ch11_flash_attention``), compiled by
  Triton, forward and backward (``flash_attention_forward`` and ``flash_attention_backward`` in an autograd
  function), in blocks of :data:`TRITON_BLOCK` queries and keys. This process imports triton compiled
  (``TRITON_INTERPRET=0``, :func:`attention_course.kernels.interpreter.load_triton`) before anything else imports it.
  The kernels run on a CUDA GPU only (another device is recorded as not available), in each dtype: float32 (their
  ``tl.dot`` in TF32, Triton's default on a recent GPU) and bfloat16 (16-bit tiles on the tensor cores, sums in
  float32). ``benchmarks.flash_sweep`` times them in both 16-bit dtypes, by head size and mask, in TFLOP/s.

    python -m benchmarks.attention                          # the best device, its default lengths
    python -m benchmarks.attention --device cpu --lengths 128 256 512 --heads 4
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from attention_course import best_device
from attention_course.kernels.interpreter import load_triton
from attention_course.solutions.ch02_scaled_dot_product import scaled_dot_product_attention
from attention_course.solutions.ch04_masking import causal_mask
from attention_course.trainer.processes import synchronize

BACKENDS = {"math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
IMPLEMENTATIONS = ("course", *BACKENDS, "triton")
TRITON_BLOCK = 64  # block_q and block_k of the course's Triton kernels
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
GPU_LENGTHS = (512, 1024, 2048, 4096, 8192, 16384, 32768)
CPU_LENGTHS = (128, 256, 512, 1024)


def triton_kernels():
    """Chapter 11's reference kernels, compiled for a GPU: triton imported with ``TRITON_INTERPRET=0``. A
    RuntimeError where this process imported it in its interpreter already, or has no triton."""
    try:
        load_triton(interpret=False)
    except ModuleNotFoundError as error:
        raise RuntimeError(str(error)) from error
    from attention_course.solutions import ch11_flash_attention

    return ch11_flash_attention


class TritonAttention(torch.autograd.Function):
    """Causal attention by chapter 11's kernels (``kernels``, the module that holds them): the forward kernel, and
    the backward kernels from what it saved (its output and log-sum-exps)."""

    @staticmethod
    def forward(ctx, kernels, q, k, v):
        output, lse = kernels.flash_attention_forward(q, k, v, causal=True, block_q=TRITON_BLOCK, block_k=TRITON_BLOCK)
        ctx.kernels = kernels
        ctx.save_for_backward(q, k, v, output, lse)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        q, k, v, output, lse = ctx.saved_tensors
        grads = ctx.kernels.flash_attention_backward(
            q, k, v, output, lse, grad_output.contiguous(), causal=True, block_q=TRITON_BLOCK, block_k=TRITON_BLOCK
        )
        return None, *grads


def attend(implementation: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal self-attention of ``q``, ``k``, ``v`` (batch, heads, length, head size) by ``implementation``."""
    if implementation == "course":
        return scaled_dot_product_attention(q, k, v, causal_mask(q.size(-2), device=q.device))[0]
    if implementation == "triton":
        if q.device.type != "cuda":
            raise RuntimeError("the course's Triton kernels run compiled on a CUDA GPU")
        return TritonAttention.apply(triton_kernels(), q, k, v)
    with sdpa_kernel(BACKENDS[implementation]), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # why a back end refuses: the row says "not available"
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _seconds(step, device: torch.device, repeats: int) -> float:
    """The median wall time of ``step()`` over ``repeats`` runs, after one run that is not timed."""
    step()
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        step()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(implementation: str, length: int, dtype: str, device: torch.device, heads: int, head_size: int,
            repeats: int) -> dict:  # fmt: skip
    """One row: milliseconds of the forward pass and of forward and backward, and the peak memory (MiB, GPU
    only) of the forward and backward pass beyond its inputs; or the reason it could not run."""
    row = {"implementation": implementation, "length": length, "dtype": dtype}
    if device.type == "cuda":
        torch.cuda.empty_cache()  # what the rows before this one left cached
    generator = torch.Generator(device=device).manual_seed(0)
    shape = (1, heads, length, head_size)
    q, k, v = (torch.randn(shape, device=device, dtype=DTYPES[dtype], generator=generator) for _ in range(3))
    grad = torch.randn(shape, device=device, dtype=DTYPES[dtype], generator=generator)
    leaves = [t.requires_grad_() for t in (q, k, v)]

    def forward():
        with torch.no_grad():
            attend(implementation, q, k, v)

    def forward_backward():
        torch.autograd.backward(attend(implementation, q, k, v), grad)
        for leaf in leaves:
            leaf.grad = None

    try:
        timed = {"forward_ms": round(1e3 * _seconds(forward, device, repeats), 4)}
        if device.type == "cuda":
            synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            base = torch.cuda.memory_allocated(device)
            forward_backward()
            synchronize(device)
            timed["peak_mib"] = round((torch.cuda.max_memory_allocated(device) - base) / 2**20, 1)
        timed["forward_backward_ms"] = round(1e3 * _seconds(forward_backward, device, repeats), 4)
    except Exception as error:  # torch.OutOfMemoryError too; or a back end that refuses this dtype or device
        if not isinstance(error, RuntimeError) and implementation != "triton":  # Triton's own: a kernel that
            raise  # does not compile for this GPU (OutOfResources, CompilationError)
        out_of_memory = isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error)
        return {**row, "error": "out of memory" if out_of_memory else "not available"}
    return {**row, **timed}


def run(device: torch.device, lengths, dtypes, implementations, heads: int, head_size: int, repeats: int) -> dict:
    rows = []
    for dtype in dtypes:
        for length in lengths:
            for implementation in implementations:
                row = measure(implementation, length, dtype, device, heads, head_size, repeats)
                rows.append(row)
                shown = row.get("error") or (
                    f"forward {row['forward_ms']:9.3f} ms, forward+backward {row['forward_backward_ms']:9.3f} ms"
                    + (f", peak {row['peak_mib']:10,.1f} MiB" if "peak_mib" in row else "")
                )
                print(f"{dtype} L={length:6d} {implementation:9s} {shown}", flush=True)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    return {
        "device": name,
        "torch": torch.__version__,
        "batch": 1,
        "heads": heads,
        "head_size": head_size,
        "triton_block": TRITON_BLOCK,
        "repeats": repeats,
        "rows": rows,
    }


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default=None, help="cuda, mps or cpu (default: the best available)")
    p.add_argument("--lengths", type=int, nargs="+", default=None, help=f"(GPU: {GPU_LENGTHS}; CPU: {CPU_LENGTHS})")
    p.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES), default=["fp32", "bf16"])
    p.add_argument("--implementations", nargs="+", choices=IMPLEMENTATIONS, default=list(IMPLEMENTATIONS))
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--head-size", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5, help="timed runs per row (the median is kept)")
    args = p.parse_args(argv)
    for name in ("heads", "head_size", "repeats"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.lengths is not None and min(args.lengths) <= 0:
        p.error(f"--lengths must be positive, got {args.lengths}")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = torch.device(args.device) if args.device else best_device()
    lengths = args.lengths or (GPU_LENGTHS if device.type == "cuda" else CPU_LENGTHS)
    if device.type == "cuda" and "triton" in args.implementations and "triton" not in sys.modules:
        # Compiled kernels: TRITON_INTERPRET=0 before anything imports triton (the choice holds for the process).
        # Without triton, its rows say "not available".
        with contextlib.suppress(ModuleNotFoundError):
            load_triton(interpret=False)
    result = run(device, lengths, args.dtypes, args.implementations, args.heads, args.head_size, args.repeats)
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
