"""Chapter 11's sweep on a GPU: the course's reference kernels against PyTorch's FlashAttention and plain attention.

    python -m benchmarks.flash_sweep                      # every configuration (a CUDA GPU only)
    python -m benchmarks.flash_sweep --lengths 1024 4096 --head-sizes 64 --dtypes bfloat16 --budget 120

For each length, head size, 16-bit dtype and mask (causal or not: :func:`attention_course.kernels.sweep.configurations`,
FlashAttention-2's benchmark shape of 16,384 tokens a batch and a model 2,048 wide), the time of a forward pass and of
a forward and backward pass by

- ``kernel``: chapter 11's reference kernels (``attention_course.solutions.ch11_flash_attention``), compiled by
  Triton (``TRITON_INTERPRET=0``), in an autograd function (:class:`KernelAttention`), blocks of :data:`BLOCK`
  queries and keys;
- ``kernel_one_loop``: the same, causal rows only, with the causal loop in one stage, where the reference's launchers
  take ``two_stage=`` (:data:`TWO_STAGE`: the tutorial's two stages, the blocks below the diagonal unmasked, then the
  diagonal): the reference's default beside it shows what the two stages save. Kernels without it: no such rows;
- ``flash``, ``math``: ``F.scaled_dot_product_attention`` held by ``sdpa_kernel`` to PyTorch's FlashAttention and to
  its plain computation.

Each time is the median of ``triton.testing.do_bench`` (:data:`TIMER`: it warms up, empties the L2 cache before each
run, and repeats for a set time; its default return is the mean). TFLOP/s by FlashAttention-2's count
(:data:`attention_course.kernels.sweep.FLOP_COUNT`), and the share of the GPU's dense 16-bit peak, where
:data:`attention_course.scale.flops.PEAK_BF16_FLOPS` knows the GPU by name (its float16 peak is the same). A row that
runs out of memory or does not run says so. ``make bench-gpu`` runs this as its step ``flash-sweep`` and records it
in ``benchmarks/figures.json`` (``gpu``), which chapter 11 reads.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from attention_course.kernels import sweep
from attention_course.kernels.interpreter import load_triton
from attention_course.scale.flops import PEAK_BF16_FLOPS

BLOCK = 64  # block_q and block_k of the course's kernels
TWO_STAGE = "two_stage"  # the launchers' keyword that chooses the two-stage causal loop, where they have one
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH}
WARMUP_MS, REPEAT_MS = 25, 100
TIMER = f"triton.testing.do_bench(fn, warmup={WARMUP_MS}, rep={REPEAT_MS}, grad_to_none=inputs, return_mode='median')"
NEEDS_CUDA = (
    "benchmarks.flash_sweep times compiled Triton kernels and PyTorch's FlashAttention: it needs a CUDA GPU, and "
    "this machine has none (torch.cuda.is_available() is False). Nothing was measured."
)


def peak_tflops(device_name: str) -> float | None:
    """The dense 16-bit tensor-core peak of a GPU known by its exact name, in TFLOP/s; None for one not known."""
    peak = PEAK_BF16_FLOPS.get(device_name)
    return None if peak is None else peak / 1e12


def median_time(fn, inputs) -> float:
    """Milliseconds of ``fn()``: the median of ``triton.testing.do_bench`` (:data:`TIMER`)."""
    from triton.testing import do_bench

    return do_bench(fn, warmup=WARMUP_MS, rep=REPEAT_MS, grad_to_none=inputs, return_mode="median")


class KernelAttention(torch.autograd.Function):
    """Attention by chapter 11's kernels (``kernels``, the module that holds them, called with the keywords
    ``options``): the forward kernel, and the backward kernels from what it saved (its output and log-sum-exps)."""

    @staticmethod
    def forward(ctx, kernels, options, q, k, v):
        output, lse = kernels.flash_attention_forward(q, k, v, **options)
        ctx.kernels, ctx.options = kernels, options
        ctx.save_for_backward(q, k, v, output, lse)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        q, k, v, output, lse = ctx.saved_tensors
        backward = ctx.kernels.flash_attention_backward
        options = {key: value for key, value in ctx.options.items() if _takes(backward, key)}
        grads = backward(q, k, v, output, lse, grad_output.contiguous(), **options)
        return None, None, *grads


def _takes(function, keyword: str) -> bool:
    return keyword in inspect.signature(function).parameters


def has_two_stages(kernels) -> bool:
    """Whether the reference's forward launcher chooses between the two-stage causal loop and one loop."""
    return _takes(kernels.flash_attention_forward, TWO_STAGE)


def implementations_for(configuration: dict, implementations, two_stages: bool) -> list[str]:
    """The implementations timed at one configuration: ``kernel_one_loop`` only under a causal mask, and only where
    the kernels have two stages to compare it with."""
    return [name for name in implementations if name != "kernel_one_loop" or (configuration["causal"] and two_stages)]


def attend(implementation: str, q, k, v, causal: bool, kernels=None, block: int = BLOCK):
    """Attention of ``q``, ``k``, ``v`` (batch, heads, length, head size) by ``implementation``."""
    if implementation in ("kernel", "kernel_one_loop"):
        options = {"causal": causal, "block_q": block, "block_k": block}
        if has_two_stages(kernels):  # said, not left to the launcher's default
            options[TWO_STAGE] = implementation == "kernel"
        return KernelAttention.apply(kernels, options, q, k, v)
    with sdpa_kernel(BACKENDS[implementation]), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # why a back end refuses: the row says "not available"
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def measure(configuration: dict, implementation: str, which: str, inputs, timer, peak, kernels=None) -> dict:
    """One row: the configuration, the implementation and the pass, its milliseconds, TFLOP/s and share of ``peak``
    (TFLOP/s; none where it is None); or why it did not run."""
    row = {**configuration, "implementation": implementation, "pass": which}
    q, k, v, grad = inputs

    def forward():
        with torch.no_grad():
            attend(implementation, q, k, v, configuration["causal"], kernels)

    def forward_backward():
        attend(implementation, q, k, v, configuration["causal"], kernels).backward(grad)

    try:
        milliseconds = timer(forward if which == "forward" else forward_backward, [q, k, v])
    except Exception as error:  # an out-of-memory error; a back end that refuses; a kernel that does not compile
        if q.is_cuda:
            torch.cuda.empty_cache()
        out_of_memory = isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error)
        if out_of_memory or isinstance(error, RuntimeError):
            return {**row, "error": "out of memory" if out_of_memory else "not available"}
        return {**row, "error": f"failed: {type(error).__name__}"}
    speed = sweep.tflops(sweep.pass_flops(configuration, which), milliseconds)
    row.update(ms=round(milliseconds, 4), tflops=round(speed, 2))
    if peak:
        row["peak_fraction"] = round(speed / peak, 4)
    return row


def make_inputs(configuration: dict, device: torch.device):
    """q, k, v (that take gradients) and a gradient of the output, of one configuration's shape and dtype."""
    shape = (configuration["batch"], configuration["heads"], configuration["length"], configuration["head_size"])
    generator = torch.Generator(device=device).manual_seed(0)
    dtype = DTYPES[configuration["dtype"]]
    q, k, v, grad = (torch.randn(shape, device=device, dtype=dtype, generator=generator) for _ in range(4))
    return q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), grad


def run(configurations, implementations, timer, device, peak, kernels=None, budget=None, clock=time.perf_counter):
    """The rows of every configuration, each implementation and pass, until ``budget`` seconds have gone (the
    configurations not reached then are counted, not timed)."""
    two_stages = kernels is not None and has_two_stages(kernels)
    started, rows, not_reached = clock(), [], 0
    for configuration in configurations:
        if budget is not None and clock() - started > budget:
            not_reached += 1
            continue
        inputs = make_inputs(configuration, device)
        for implementation in implementations_for(configuration, implementations, two_stages):
            for which in sweep.PASSES:
                row = measure(configuration, implementation, which, inputs, timer, peak, kernels)
                rows.append(row)
                shown = row.get("error") or f"{row['ms']:9.3f} ms {row['tflops']:7.1f} TFLOP/s"
                shape = "{dtype:8s} d={head_size:3d} causal={causal!s:5s} L={length:6d}".format(**configuration)
                print(f"{shape} {implementation:15s} {which:16s} {shown}", flush=True)
        del inputs
    return rows, not_reached


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", type=int, nargs="+", default=list(sweep.LENGTHS))
    p.add_argument("--head-sizes", type=int, nargs="+", default=list(sweep.HEAD_SIZES))
    p.add_argument("--dtypes", nargs="+", choices=sweep.DTYPES, default=list(sweep.DTYPES))
    p.add_argument("--masks", nargs="+", choices=("none", "causal"), default=["none", "causal"])
    p.add_argument("--implementations", nargs="+", choices=sweep.IMPLEMENTATIONS, default=list(sweep.IMPLEMENTATIONS))
    p.add_argument("--budget", type=float, default=None, help="seconds: start no configuration after these")
    args = p.parse_args(argv)
    for name in ("lengths", "head_sizes"):
        if min(getattr(args, name)) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.budget is not None and args.budget <= 0:
        p.error(f"--budget must be positive, got {args.budget}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print(NEEDS_CUDA, file=sys.stderr)
        return 2
    try:
        triton, _ = load_triton(interpret=False)  # compiled: before anything else imports triton
    except (ModuleNotFoundError, RuntimeError) as error:
        print(f"benchmarks.flash_sweep needs Triton compiled for the GPU: {error}", file=sys.stderr)
        return 2
    from attention_course.solutions import ch11_flash_attention as kernels

    masks = [mask == "causal" for mask in args.masks]
    configurations = sweep.configurations(args.lengths, args.head_sizes, args.dtypes, masks)
    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    peak = peak_tflops(name)
    rows, not_reached = run(configurations, args.implementations, median_time, device, peak, kernels, args.budget)
    result = {
        "device": name,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "peak_tflops": peak,
        "timer": TIMER,
        "flop_count": sweep.FLOP_COUNT,
        "block": BLOCK,
        "two_stages": has_two_stages(kernels),
        "not_reached": not_reached,
        "rows": rows,
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
