"""What compiling costs a training run and when it pays back, measured side by side in one run on one device.

    python -m benchmarks.compile_cost                              # make train's defaults: the capstone
    python -m benchmarks.compile_cost --steps 300 --record         # and record it for chapter 8 and README.md
    python -m benchmarks.compile_cost -- --task chars --block-size 64   # make train's options after --

``make train`` (the date task's capstone unless the options after ``--`` say otherwise) runs six times, each in
a process of its own:

- ``fp32`` and ``bf16``: not compiled, in float32 and with bfloat16 autocast;
- ``compiled, cold`` and ``compiled, warm``: ``--compile`` (the whole step as one graph), in bfloat16 unless
  ``--precision`` says otherwise, first
  with empty compiler caches, then again with the caches that the first run filled, as a second run on the
  same machine finds them;
- ``by layers, cold`` and ``by layers, warm``: the same with ``--compile-regions`` (each layer compiled on its
  own, once for all the layers alike).

Each run has its own TorchInductor and Triton cache folders (``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``),
empty but for a warm run, which reuses its cold run's; no run reads what the machine compiled before. Reported
for each run: its seconds of training, its steady rate (the median tokens per second of the second half of its
logged windows) and its **overhead**, the seconds that the run took beyond what its steady rate would take
for its tokens (compiling, warming up, the first slow steps). A compiled run overtakes the float32 run after
``(its overhead - float32's) / (float32's seconds per step - its own)`` steps, if its steady rate is the
higher; printed as its **break-even** step.

``--compile-mode`` is ``torch.compile``'s mode for the compiled runs: ``reduce-overhead`` (CUDA graphs) on a
GPU and ``default`` elsewhere unless given.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import scrub
from benchmarks.figures import ROOT, record
from benchmarks.gpu import last_json, steady_rate

PYTHON = sys.executable
# name, the trainer's options (the compiled runs' precision added), and the run whose compiler caches it starts
# with (None: empty ones)
RUNS = (
    ("fp32", ["--precision", "fp32"], None),
    ("bf16", ["--precision", "bf16"], None),
    ("compiled, cold", ["--compile"], None),
    ("compiled, warm", ["--compile"], "compiled, cold"),
    ("by layers, cold", ["--compile", "--compile-regions"], None),
    ("by layers, warm", ["--compile", "--compile-regions"], "by layers, cold"),
)
BASELINE = "fp32"
COMPILED_RUNS = [name for name, options, _ in RUNS if "--compile" in options]  # those that may break even


def run_training(options: list[str], caches: Path, limit: float) -> dict:
    """One ``make train`` run with ``options`` and the compiler caches in ``caches``: its final figures, its steady
    rate and its exit status (with the end of its output where it failed)."""
    with tempfile.TemporaryDirectory(prefix="compile-cost-") as out:
        return _run_training(options, caches, Path(out), limit)


def _run_training(options: list[str], caches: Path, out: Path, limit: float) -> dict:
    environment = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
        "TRITON_CACHE_DIR": str(caches / "triton"),
        "PYTHONUNBUFFERED": "1",
    }
    command = [PYTHON, "-m", "attention_course.trainer", "--no-progress", *options, "--out", str(out)]
    try:
        done = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=limit)
        status, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as stopped:
        status, output = "timeout", (stopped.stdout or b"").decode(errors="replace")
    final = last_json(output) if status == 0 else None
    result = {"status": status}
    if final:
        for key in ("steps", "train_seconds", "wall_seconds", "tokens_per_second", "parameters", "device"):
            result[key] = final.get(key)
        result["quality"] = final.get("exact_match", final.get("val_loss"))
    if (out / "metrics.jsonl").is_file():
        result["steady_tokens_per_second"] = steady_rate(out / "metrics.jsonl")
    if status != 0:
        result["tail"] = output[-2000:]
    return result


def with_overhead(result: dict) -> dict:
    """``result`` with its overhead: its seconds of training less its tokens over its steady rate."""
    seconds, rate, steady = (result.get(k) for k in ("train_seconds", "tokens_per_second", "steady_tokens_per_second"))
    if seconds and rate and steady:
        result["overhead_seconds"] = round(seconds - seconds * rate / steady, 2)
    return result


def break_even_step(run: dict, baseline: dict) -> int | None:
    """The step after which ``run`` has trained for less time than ``baseline`` (both at their steady rates
    after their overheads), or None where its steady rate is not the higher."""
    try:
        tokens_per_step = run["train_seconds"] * run["tokens_per_second"] / run["steps"]
        behind = run["overhead_seconds"] - baseline["overhead_seconds"]
        gained = (
            tokens_per_step / baseline["steady_tokens_per_second"] - tokens_per_step / run["steady_tokens_per_second"]
        )
    except (KeyError, TypeError, ZeroDivisionError):
        return None
    if gained <= 0:
        return None
    return round(max(behind, 0.0) / gained)


def table(figures: dict) -> str:
    """The runs, a line each."""
    lines = [f"{'run':16} {'train s':>8} {'steady tok/s':>13} {'overhead s':>11} {'break-even step':>16}"]
    for run in figures["runs"]:
        name = run["name"]
        if run.get("status") != 0:
            lines.append(f"{name:16} failed ({run.get('status')})")
            continue
        even = figures["break_even"].get(name)
        shown = "-" if name not in figures["break_even"] else ("never" if even is None else f"{even:,}")
        lines.append(
            f"{name:16} {run['train_seconds']:8.1f} {run['steady_tokens_per_second']:13,.0f} "
            f"{run.get('overhead_seconds', float('nan')):11.1f} {shown:>16}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, trainer = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=None, help="steps of every run (default: make train's)")
    parser.add_argument("--compile-mode", default=None, help="torch.compile's mode for the compiled runs")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="bf16", help="the compiled runs' precision")
    parser.add_argument("--limit", type=float, default=900, help="seconds that one run may take")
    parser.add_argument("--record", action="store_true", help="record the figures as compile-cost")
    args = parser.parse_args(ours)
    if args.steps is not None and args.steps <= 0:
        parser.error(f"--steps must be positive, got {args.steps}")
    import torch

    cuda = torch.cuda.is_available()
    mode = args.compile_mode or ("reduce-overhead" if cuda else "default")
    common = [*trainer, *(["--steps", str(args.steps)] if args.steps else [])]
    figures = {
        "device": torch.cuda.get_device_name() if cuda else "CPU",
        "torch": torch.__version__,
        "options": " ".join(common),
        "compile_mode": mode,
        "compiled_precision": args.precision,
        "runs": [],  # in the order of RUNS (a list: the record's keys are sorted)
    }
    caches: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="compile-caches-") as folder:
        for name, options, warm_from in RUNS:
            caches[name] = caches[warm_from] if warm_from else Path(folder) / name.replace(", ", "-").replace(" ", "-")
            compiled = ["--compile-mode", mode, "--precision", args.precision] if "--compile" in options else []
            started = time.perf_counter()
            result = with_overhead(run_training([*common, *options, *compiled], caches[name], args.limit))
            figures["runs"].append({"name": name, **result})
            print(f"{name}: {json.dumps(result)} ({time.perf_counter() - started:.0f} s)", flush=True)
    baseline = next(run for run in figures["runs"] if run["name"] == BASELINE)
    figures["break_even"] = {run["name"]: break_even_step(run, baseline) for run in figures["runs"]
                             if run["name"] in COMPILED_RUNS}  # fmt: skip
    print(table(figures))
    print(json.dumps(figures), flush=True)
    failed = [run["name"] for run in figures["runs"] if run.get("status") != 0]
    if failed:
        print(f"failed: {', '.join(failed)}: nothing recorded" if args.record else f"failed: {', '.join(failed)}")
        return 1
    if args.record:
        record("compile-cost", scrub.shown_command("python -m benchmarks.compile_cost", argv), figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
