"""Chapter 11's sweep on a GPU: what it times, the FLOPs it credits each time with, and its table on the page.

The sweep (``benchmarks.flash_sweep``, run on a GPU by ``make bench-gpu``) times attention at each length, head size,
16-bit dtype and mask (:func:`configurations`) by the course's reference kernels, PyTorch's FlashAttention and its
plain computation, forward and forward+backward. A time becomes TFLOP/s by the count FlashAttention-2's benchmark
uses (:func:`pass_flops`): ``4·B·H·L²·d`` for the forward pass (two products of ``L × L × d`` multiply-adds a head),
half of it under a causal mask, and a backward pass of 2.5 times the forward (five products against two; the
recomputed scores not counted). The chapter shows the recorded rows as one table (:func:`sweep_summary`), or, before
any GPU has measured them, one sentence (:data:`NOT_MEASURED`).
"""

from __future__ import annotations

LENGTHS = (1024, 2048, 4096, 8192, 16384)
HEAD_SIZES = (64, 128)
DTYPES = ("float16", "bfloat16")
MASKS = (False, True)  # causal or not
# FlashAttention-2's benchmark shape: 16,384 tokens a batch (batch = TOKENS // length) and a model width of 2,048
# (heads = WIDTH // head size), so that every row does the same work per token.
TOKENS = 16384
WIDTH = 2048
PASSES = ("forward", "forward_backward")
BACKWARD_OVER_FORWARD = 2.5
# The course's kernels ("kernel"); the same with the causal loop in one stage, where the reference has two
# ("kernel_one_loop", causal rows only); PyTorch's FlashAttention ("flash") and plain computation ("math").
IMPLEMENTATIONS = ("kernel", "kernel_one_loop", "flash", "math")
NAMES = {
    "kernel": "course's kernel",
    "kernel_one_loop": "course's kernel, one loop",
    "flash": "PyTorch flash",
    "math": "PyTorch math",
}
FLOP_COUNT = (
    "forward: 4·B·H·L²·d (two products of L × L × d multiply-adds a head), halved under a causal mask; "
    "backward: 2.5 × forward (FlashAttention-2's count; the recomputed scores not counted); forward+backward: "
    "3.5 × forward"
)
NOT_MEASURED = (
    "These timings have not been measured for this edition yet; on a GPU, Part 3 of the exercise times your kernel."
)


def configurations(lengths=LENGTHS, head_sizes=HEAD_SIZES, dtypes=DTYPES, masks=MASKS) -> list[dict]:
    """The sweep's shapes, each a dict of ``dtype``, ``head_size``, ``causal``, ``length``, ``batch`` and ``heads``
    (FlashAttention-2's benchmark: :data:`TOKENS` tokens a batch, a model :data:`WIDTH` wide; at least one sequence
    and one head)."""
    for name, values in (("lengths", lengths), ("head_sizes", head_sizes)):
        if not values or any(not isinstance(v, int) or v <= 0 for v in values):
            raise ValueError(f"{name}: positive whole numbers, got {values!r}")
    unknown = [dtype for dtype in dtypes if dtype not in DTYPES]
    if not dtypes or unknown:
        raise ValueError(f"dtypes: some of {', '.join(DTYPES)}, got {list(dtypes)!r}")
    return [
        {"dtype": dtype, "head_size": d, "causal": causal, "length": length,
         "batch": max(1, TOKENS // length), "heads": max(1, WIDTH // d)}
        for dtype in dtypes for d in head_sizes for causal in masks for length in lengths
    ]  # fmt: skip


def forward_flops(batch: int, heads: int, length: int, head_size: int, causal: bool) -> float:
    """FLOPs credited to one forward pass: ``4·B·H·L²·d``, half of it under a causal mask."""
    return 4 * batch * heads * length**2 * head_size / (2 if causal else 1)


def pass_flops(configuration: dict, which: str) -> float:
    """FLOPs credited to the pass ``which`` (``"forward"`` or ``"forward_backward"``) of one configuration."""
    if which not in PASSES:
        raise ValueError(f"which: one of {', '.join(PASSES)}, got {which!r}")
    shape = {key: configuration[key] for key in ("batch", "heads", "length", "head_size", "causal")}
    forward = forward_flops(**shape)
    return forward if which == "forward" else forward * (1 + BACKWARD_OVER_FORWARD)


def tflops(flops: float, milliseconds: float) -> float:
    """TFLOP/s of ``flops`` done in ``milliseconds``."""
    if not milliseconds > 0:
        raise ValueError(f"milliseconds: a positive time, got {milliseconds!r}")
    return flops / (milliseconds * 1e-3) / 1e12


def _cell(row: dict | None) -> str:
    if row is None:
        return "–"
    if "tflops" not in row:
        return row.get("error", "–")
    fraction = row.get("peak_fraction")
    return f"{row['tflops']:.0f}" + (f" ({fraction:.0%})" if fraction is not None else "")


def sweep_table(result: dict) -> str:
    """The sweep's rows as one Markdown table: a line per dtype, head size, mask and length, a column per pass and
    implementation, each cell TFLOP/s and, where the GPU's peak is known, its share of the peak."""
    rows = result["rows"]
    found = {(r["implementation"], r["pass"], r["dtype"], r["head_size"], r["causal"], r["length"]): r for r in rows}
    names = [name for name in IMPLEMENTATIONS if any(r["implementation"] == name for r in rows)]
    shapes = sorted({(r["dtype"], r["head_size"], r["causal"], r["length"]) for r in rows})
    labels = {"forward": "forward", "forward_backward": "fwd+bwd"}
    short = {"kernel": "kernel", "kernel_one_loop": "one loop", "flash": "flash", "math": "math"}
    header = ["dtype", "d", "mask", "L"] + [f"{labels[p]}: {short[n]}" for p in PASSES for n in names]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * 4 + " ---: |" * (len(header) - 4)]
    for dtype, d, causal, length in shapes:
        cells = [dtype, str(d), "causal" if causal else "none", f"{length:,}"]
        cells += [_cell(found.get((n, p, dtype, d, causal, length))) for p in PASSES for n in names]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def sweep_summary(result: dict | None, day: str | None = None) -> str:
    """What the chapter shows of a recorded sweep (measured on ``day``): a sentence on where and how, and its table;
    or, where no GPU has recorded one (or none of its rows ran), :data:`NOT_MEASURED`."""
    if not result or not any("tflops" in row for row in result.get("rows", ())):
        return NOT_MEASURED
    peak = result.get("peak_tflops")
    share = f"in brackets, the share of its dense 16-bit peak of {peak:,.0f} TFLOP/s" if peak else "its peak not known"
    left = result.get("not_reached", 0)
    unfinished = f" {left} configurations were not reached in the time the sweep had." if left else ""
    return (
        f"Measured on one {result['device']}{f' ({day})' if day else ''}: TFLOP/s of each pass ({share}); batches of "
        f"{TOKENS:,} tokens, {WIDTH:,} features split into heads of d features. kernel: the course's reference "
        "kernels; one loop: the same with the causal loop in one stage; flash and math: PyTorch's FlashAttention "
        "and plain computation. Where a row did not run, why."
        f"{unfinished}\n\n" + sweep_table(result)
    )
