"""The course's trainer beside nanoGPT's ``train.py`` at nanoGPT's two shapes, in one run on one device.

    python -m benchmarks.nanogpt --nanogpt DIR                  # both shapes, both trainers
    python -m benchmarks.nanogpt --nanogpt DIR --shapes gpt2 --steps 200
    python -m benchmarks.nanogpt --ablation --shapes gpt2      # the course alone, without each speed-up in turn
    python -m benchmarks.nanogpt --nanogpt DIR --quick          # a tiny model for a few steps, on any device

``DIR`` is a checkout of nanoGPT (github.com/karpathy/nanoGPT), which the course does not ship: it is run as
it is, from a folder of this benchmark's own that links to its files and holds its ``shakespeare_char`` data,
written here from the same text as the course's in nanoGPT's format (one uint16 per character, the first 90%
to train on). Both train the same shape on tiny Shakespeare by character, in bfloat16 autocast and compiled:

- ``shakespeare_char``: nanoGPT's ``config/train_shakespeare_char.py`` (6 layers of width 384, 6 heads,
  windows of 256, batches of 64, dropout 0.2);
- ``gpt2``: GPT-2 small's layers (12 of width 768, 12 heads, windows of 1,024, batches of 16, dropout 0).

Each trainer logs every 10 steps after waiting for the device, so both are timed alike: the tokens of a
window of 10 steps over the wall-clock seconds between two logs, and the median of the second half of the
run's windows (compiling and warming up are over by then). Both models have no biases (nanoGPT's default
``bias=False``, the course's ``--no-bias``); nanoGPT's has GPT-2's learned positions where the course's adds
chapter 5's sinusoids. MFU counts both at the course's model FLOPs per token (6 per weight of a matrix product,
12 L d T for attention) over the device's dense bf16 peak. Each also reports its
validation loss after the fixed number of steps (nanoGPT's on its own ``eval_iters`` batches, the course's on
256 windows: estimates of the same quantity, not the same windows).

``--ablation`` trains the course's model at a shape once with every speed-up and once without each of them
(``make train``'s ``--without``): the effect of each, measured side by side; and once with biases, the
course's default model, which is not the same model and so no speed-up, to measure what its biases cost.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.figures import ROOT

PYTHON = sys.executable
LOG_EVERY = 10
# Each shape's settings, in the course's names: layers, width, heads, window, batch, dropout, peak learning rate,
# warm-up steps, and the steps after which the validation loss is compared.
SHAPES = {
    "shakespeare_char": {"layers": 6, "d_model": 384, "heads": 6, "block": 256, "batch": 64, "dropout": 0.2,
                         "lr": 1e-3, "warmup": 100, "steps": 1000},
    "gpt2": {"layers": 12, "d_model": 768, "heads": 12, "block": 1024, "batch": 16, "dropout": 0.0,
             "lr": 6e-4, "warmup": 100, "steps": 300},
}  # fmt: skip
NANOGPT_FILES = ("train.py", "model.py", "configurator.py", "config")
# nanoGPT prints "iter 120: loss 2.4410, time 12.31ms, mfu 8.10%" after reading the loss, and
# "step 300: train loss 1.9, val loss 2.0" at an evaluation.
ITER_LINE = re.compile(r"^iter (\d+): loss ([\d.]+)")
EVAL_LINE = re.compile(r"^step (\d+): train loss ([\d.]+), val loss ([\d.]+)")


def nanogpt_folder(nanogpt: Path, text: str, work: Path) -> Path:
    """A folder to run nanoGPT's train.py in: links to its files, and ``data/shakespeare_char`` written from
    ``text`` in the format that its ``prepare.py`` writes (train.bin, val.bin, meta.pkl)."""
    missing = [name for name in NANOGPT_FILES if not (nanogpt / name).exists()]
    if missing:
        raise SystemExit(f"{nanogpt} is not a nanoGPT checkout: it has no {', '.join(missing)}")
    work.mkdir(parents=True, exist_ok=True)
    for name in NANOGPT_FILES:
        (work / name).symlink_to((nanogpt / name).resolve())
    data = work / "data" / "shakespeare_char"
    data.mkdir(parents=True)
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    ids = np.array([index[c] for c in text], dtype=np.uint16)
    cut = int(0.9 * len(ids))
    ids[:cut].tofile(data / "train.bin")
    ids[cut:].tofile(data / "val.bin")
    with (data / "meta.pkl").open("wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": index}, f)
    return work


def timed_lines(command: list[str], cwd: Path, environment: dict, limit: float) -> tuple[list[tuple[float, str]], int]:
    """Run ``command``: each line of its output with the second it arrived at, and its exit status."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=environment, bufsize=1)  # fmt: skip
    lines = []
    for line in process.stdout:
        lines.append((time.perf_counter() - started, line.rstrip("\n")))
        if time.perf_counter() - started > limit:
            process.kill()
            break
    return lines, process.wait()


def steady(rates: list[float]) -> float | None:
    """The median rate of the second half of a run's windows."""
    return round(statistics.median(rates[len(rates) // 2 :]), 1) if rates else None


QUICK = {"layers": 2, "d_model": 64, "heads": 2, "block": 32, "batch": 4, "dropout": 0.0, "warmup": 2, "steps": 20}
# --quick runs in float32, not compiled, on the CPU where there is no GPU.
NANOGPT_QUICK = ["--compile=False", "--dtype=float32"]
COURSE_QUICK = ["--precision", "fp32"]


def run_nanogpt(folder: Path, shape: dict, steps: int, environment: dict, limit: float, quick: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="nanogpt-") as out:  # its checkpoint, not kept
        command = [
            PYTHON, "-u", "train.py", "config/train_shakespeare_char.py",
            f"--n_layer={shape['layers']}", f"--n_head={shape['heads']}", f"--n_embd={shape['d_model']}",
            f"--block_size={shape['block']}", f"--batch_size={shape['batch']}", f"--dropout={shape['dropout']}",
            f"--learning_rate={shape['lr']}", f"--warmup_iters={shape['warmup']}", f"--max_iters={steps}",
            f"--lr_decay_iters={steps}", f"--eval_interval={steps}", "--eval_iters=50", f"--log_interval={LOG_EVERY}",
            f"--out_dir={out}", *(NANOGPT_QUICK if quick else ["--compile=True", "--dtype=bfloat16"]),
        ]  # fmt: skip
        if quick:
            command.append(f"--device={'cuda' if _cuda() else 'cpu'}")
        lines, status = timed_lines(command, folder, environment, limit)
    tokens_per_step = shape["batch"] * shape["block"]
    logged = [(t, int(m.group(1))) for t, line in lines if (m := ITER_LINE.match(line))]
    rates = [
        (step - before) * tokens_per_step / (t - t_before)
        for (t_before, before), (t, step) in zip(logged, logged[1:])
        if step > before
    ]
    evaluations = [m for _, line in lines if (m := EVAL_LINE.match(line))]
    result = {"status": status, "steps": logged[-1][1] if logged else 0, "steady_tokens_per_second": steady(rates)}
    if evaluations and int(evaluations[-1].group(1)) == steps:
        result["val_loss"] = float(evaluations[-1].group(3))
    if status != 0:
        result["tail"] = "\n".join(line for _, line in lines[-30:])
    return result


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def course_command(
    shape: dict, steps: int, out: str, without: list[str], quick: bool, compiled: bool, biases: bool = False
) -> list[str]:
    command = [
        PYTHON, "-m", "attention_course.trainer", "--task", "chars", "--corpus", "shakespeare",
        "--layers", str(shape["layers"]), "--d-model", str(shape["d_model"]), "--heads", str(shape["heads"]),
        "--d-ff", str(4 * shape["d_model"]), "--dropout", str(shape["dropout"]), "--block-size", str(shape["block"]),
        "--batch-size", str(shape["batch"]), "--lr", str(shape["lr"]), "--warmup", str(shape["warmup"]),
        "--steps", str(steps), "--tie-weights", "--eval-examples", "256", "--log-every", str(LOG_EVERY),
        "--checkpoint-every", str(steps), "--precision", "bf16", "--compile", "--no-progress", "--out", out,
        "--bias" if biases else "--no-bias", *(["--without", *without] if without else []),
    ]  # fmt: skip
    if quick or not compiled:
        command = [part for part in command if part != "--compile"]
    if quick:
        command[command.index("--precision") : command.index("--precision") + 2] = COURSE_QUICK
    return command


def run_course(
    shape: dict,
    steps: int,
    environment: dict,
    limit: float,
    quick: bool,
    without=(),
    eager=False,
    mode="default",
    biases=False,
) -> dict:
    with tempfile.TemporaryDirectory(prefix="course-") as out:  # its run: the metrics read, the rest not kept
        command = course_command(shape, steps, out, list(without), quick, compiled=not eager, biases=biases)
        if "--compile" in command:
            command += ["--compile-mode", mode]
        lines, status = timed_lines(command, ROOT, environment, limit)
        metrics = Path(out) / "metrics.jsonl"
        logged = metrics.read_text().splitlines() if metrics.exists() else []
    rates = [json.loads(line)["tokens_per_second"] for line in logged]
    final = next((json.loads(line) for _, line in reversed(lines) if line.startswith("{")), {})
    result = {"status": status, "steps": final.get("steps"), "steady_tokens_per_second": steady(rates)}
    for key in ("val_loss", "flops_per_token", "peak_tflops", "parameters", "bias", "train_seconds", "wall_seconds"):
        result[key] = final.get(key)
    if status != 0:
        result["tail"] = "\n".join(line for _, line in lines[-30:])
    return result


def with_mfu(result: dict, flops_per_token: float | None, peak_tflops: float | None) -> dict:
    rate = result.get("steady_tokens_per_second")
    if rate and flops_per_token and peak_tflops:
        result["mfu"] = round(rate * flops_per_token / (peak_tflops * 1e12), 4)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nanogpt", type=Path, help="a checkout of nanoGPT (needed unless --ablation)")
    parser.add_argument("--shapes", nargs="+", choices=tuple(SHAPES), default=list(SHAPES))
    parser.add_argument("--steps", type=int, default=None, help="steps of every run (default: each shape's)")
    parser.add_argument("--ablation", action="store_true", help="the course alone, without each speed-up in turn")
    parser.add_argument("--limit", type=float, default=300, help="seconds that one training run may take")
    parser.add_argument("--quick", action="store_true", help="a tiny model for a few steps, uncompiled, in float32")
    parser.add_argument("--eager", action="store_true", help="the course's runs not compiled (an ablation's)")
    parser.add_argument(
        "--compile-mode", default="default", help="the course's torch.compile mode (make train's --compile-mode)"
    )
    args = parser.parse_args(argv)
    if not args.ablation and args.nanogpt is None:
        parser.error("--nanogpt DIR is needed to run nanoGPT beside the course (or give --ablation)")
    from attention_course.data.corpora import tiny_shakespeare
    from attention_course.trainer.command import SPEEDUPS

    text = tiny_shakespeare()
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    import torch

    figures = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU",
               "torch": torch.__version__, "shapes": {}}  # fmt: skip
    for name in args.shapes:
        shape = {**SHAPES[name], **(QUICK if args.quick else {})}
        steps = args.steps or shape["steps"]
        row = {"steps": steps, **{k: v for k, v in shape.items() if k != "steps"}}
        course = run_course(shape, steps, environment, args.limit, args.quick, eager=args.eager, mode=args.compile_mode)
        flops, peak = course.get("flops_per_token"), course.get("peak_tflops")
        row["course"] = with_mfu(course, flops, peak)
        print(f"{name}: course {json.dumps(row['course'])}", flush=True)
        if args.ablation:
            row["without"] = {}
            for speedup in SPEEDUPS:
                result = run_course(shape, steps, environment, args.limit, args.quick, [speedup], args.eager)
                result = with_mfu(result, flops, peak)
                row["without"][speedup] = result
                print(f"{name}: without {speedup} {json.dumps(result)}", flush=True)
            result = run_course(shape, steps, environment, args.limit, args.quick, eager=args.eager, biases=True)
            row["with_biases"] = with_mfu(result, flops, peak)
            print(f"{name}: with biases {json.dumps(row['with_biases'])}", flush=True)
        else:
            with tempfile.TemporaryDirectory(prefix="nanogpt-run-") as work:
                folder = nanogpt_folder(args.nanogpt, text, Path(work))
                nanogpt = run_nanogpt(folder, shape, steps, environment, args.limit, args.quick)
                row["nanogpt"] = with_mfu(nanogpt, flops, peak)
            print(f"{name}: nanoGPT {json.dumps(row['nanogpt'])}", flush=True)
            ours, theirs = row["course"]["steady_tokens_per_second"], row["nanogpt"]["steady_tokens_per_second"]
            row["ratio"] = round(ours / theirs, 3) if ours and theirs else None
        figures["shapes"][name] = row
    print(json.dumps(figures), flush=True)
    runs = [run for row in figures["shapes"].values() for run in runs_of(row)]
    return 1 if any(run.get("status") for run in runs) else 0


def runs_of(row: dict) -> list[dict]:
    """Every training run of a shape's row: the course's, nanoGPT's, and the ablation's."""
    return [row["course"], row.get("nanogpt", {}), row.get("with_biases", {}), *row.get("without", {}).values()]


if __name__ == "__main__":
    sys.exit(main())
