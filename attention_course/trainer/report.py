"""The end of a ``make train`` run: the final evaluation and checkpoint, the loss curve and the final metrics.

The metrics are written to ``--out/final.json``: the task's scores, the throughput, the model FLOPs per
token and the model FLOPs utilisation (where the device's peak is known), and the options that set them.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from attention_course.scale.flops import mfu, peak_flops
from attention_course.trainer.checkpoints import Progress
from attention_course.trainer.steps import Run, checkpoint, uncompiled


def plot_losses(history: list[dict], validation: list[dict], path: Path) -> None:
    from matplotlib.figure import Figure  # not pyplot: leaves the caller's backend and figures alone

    fig = Figure(figsize=(6, 3.5))
    ax = fig.subplots()
    ax.plot([h["step"] for h in history], [h["loss"] for h in history], label="training loss")
    if validation:
        ax.plot([v["step"] for v in validation], [v["val_loss"] for v in validation], "o-", label="validation loss")
    ax.set(xlabel="step", ylabel="cross-entropy", yscale="log", title="training")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def report(run: Run, progress: Progress, started: float) -> dict:
    """The final evaluation, checkpoint and loss curve, and the run's final metrics (written to final.json)."""
    args, raw_model, device = run.args, run.raw_model, run.device
    raw_model.eval()
    with uncompiled():
        result = run.task.evaluate(raw_model, device)
    progress.validation.append({"step": progress.step, "val_loss": result["val_loss"]})
    checkpoint(run, progress)
    plot_losses(progress.history, progress.validation, args.out / "loss_curve.png")
    rate = progress.tokens / max(progress.train_seconds, 1e-9)
    flops_per_token = progress.run_flops / progress.run_tokens if progress.run_tokens else None
    peak, peak_source = peak_flops(device, args.peak_tflops)
    utilisation = mfu(rate * flops_per_token, peak, run.procs.world) if flops_per_token else None
    if utilisation is None and not progress.run_tokens:
        peak_source = "no training step in this run: no FLOPs per token"
    result = {
        "task": run.task.name,
        "device": str(device),
        "processes": run.procs.world,
        "steps": progress.step,
        **result,
        "tokens_per_second": round(rate, 1),
        "train_seconds": round(progress.train_seconds, 2),
        "wall_seconds": round(time.perf_counter() - started, 2),
        "parameters": sum(p.numel() for p in raw_model.parameters()),
        "flops_per_token": round(flops_per_token, 1) if flops_per_token else None,
        "mfu": float(f"{utilisation:.3g}") if utilisation is not None else None,  # small models: 0.0001 is not 0
        "peak_tflops": peak / 1e12 if peak is not None else None,
        "peak_source": peak_source,
        "precision": args.precision,
        "compile": args.compile,
        "compile_mode": args.compile_mode if args.compile else None,
        "compile_regions": args.compile and args.compile_regions,
        "without": list(args.without),
        "attention": args.attention,
        "tie_weights": args.tie_weights,
        "bias": args.bias,
        "out": str(args.out),
    }
    if utilisation is None:
        print(f"no model FLOPs utilisation: {peak_source}", file=sys.stderr)
    (args.out / "final.json").write_text(json.dumps(result, indent=1) + "\n")
    return result
