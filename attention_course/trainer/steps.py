"""The steps of a ``make train`` run, each on this process's share of the global batch, with its logs and checkpoints.

Every ``--log-every`` steps it logs the loss and the throughput (``metrics.jsonl`` and the progress bar);
every ``--checkpoint-every`` steps, the validation loss and a checkpoint.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import warnings
from dataclasses import dataclass

import torch
from tqdm import tqdm

from attention_course.basics.schedule import learning_rate
from attention_course.basics.training import progress_file
from attention_course.trainer.checkpoints import Progress, save_checkpoint
from attention_course.trainer.processes import Processes, global_indices, synchronize
from attention_course.trainer.tasks import DatesTask, LanguageModelTask


@dataclass
class Run:
    """What a run trains with: its options, its processes, the task, the model (as built, for checkpoints,
    evaluation and FLOPs; as trained, data-parallel where there are several processes), the step's loss
    (:class:`StepLoss`, compiled with --compile), the optimizer and its learning-rate schedule, and the
    precision."""

    args: argparse.Namespace
    procs: Processes
    task: DatesTask | LanguageModelTask
    raw_model: torch.nn.Module
    model: torch.nn.Module
    step_loss: torch.nn.Module
    optimizer: torch.optim.Optimizer
    schedule: torch.optim.lr_scheduler.LRScheduler
    autocast: contextlib.AbstractContextManager
    scaler: torch.amp.GradScaler

    @property
    def device(self) -> torch.device:
        return self.procs.device


class StepLoss(torch.nn.Module):
    """A training step's loss: the task's loss of the model on a batch, as one module, so that --compile
    compiles the loss with the model (the output layer and the cross-entropy in the same kernels)."""

    def __init__(self, task, model: torch.nn.Module):
        super().__init__()
        self.task, self.model = task, model

    def forward(self, b: dict, label_smoothing: float) -> torch.Tensor:
        return self.task.loss(self.model, b, label_smoothing)


def train(run: Run, progress: Progress, metrics) -> None:
    """Train up to the last step (--steps, or --stop-after), or until --time-budget is spent; every
    --log-every steps (and at the last) log the window since the previous log (:func:`log_window`)."""
    args, procs = run.args, run.procs
    shown = not args.no_progress and procs.main
    bar = tqdm(
        total=args.steps,
        initial=progress.step,
        desc=f"{run.task.name} on {run.device.type}",
        file=progress_file(sys.stderr) if shown else sys.stderr,
        disable=not shown,
        mininterval=1.0,
        dynamic_ncols=True,
    )
    window_tokens, window_start = 0, time.perf_counter()
    run.model.train()
    last_step = min(args.steps, args.stop_after or args.steps)
    while progress.step < last_step:
        if (
            args.time_budget is not None
            and progress.train_seconds + (time.perf_counter() - window_start) >= args.time_budget
        ):
            break
        loss, step_tokens = train_step(run, progress)
        progress.step += 1
        window_tokens += step_tokens * procs.world
        progress.run_tokens += step_tokens
        if progress.step % args.log_every == 0 or progress.step == last_step:
            log_window(run, progress, loss, window_tokens, window_start, metrics, bar)
            window_tokens, window_start = 0, time.perf_counter()
    bar.close()
    if window_tokens:
        synchronize(run.device)
        progress.train_seconds += time.perf_counter() - window_start
        progress.tokens += window_tokens


def train_step(run: Run, progress: Progress) -> tuple[torch.Tensor, int]:
    """One optimizer step on this process's share of the step's global batch: its loss and tokens."""
    args, procs = run.args, run.procs
    share = args.batch_size // procs.world
    indices = global_indices(progress.step, args, len(run.task.train_examples))[
        procs.rank * share : (procs.rank + 1) * share
    ]
    # The batch is gathered on the device; its tokens and FLOPs are counted on the host, which never waits for
    # the device inside a window of steps (only log_window does, to read its clock and loss).
    with phase("batch"):
        b, step_tokens, flops = run.task.step_batch(run.raw_model, indices, run.device)
    progress.run_flops += flops
    if args.compile and args.compile_mode == "reduce-overhead":
        torch.compiler.cudagraph_mark_step_begin()  # a new step: the last one's CUDA-graph outputs may be reused
    with phase("forward"), run.autocast:
        loss = run.step_loss(b, args.label_smoothing)
    with phase("backward"):
        run.optimizer.zero_grad(set_to_none=True)
        run.scaler.scale(loss).backward()
    with phase("clip"):
        if args.clip > 0:
            run.scaler.unscale_(run.optimizer)
            torch.nn.utils.clip_grad_norm_(run.model.parameters(), args.clip)
    with phase("optimizer"):
        run.scaler.step(run.optimizer)  # skipped where fp16's scaled gradients overflowed
        run.scaler.update()
        with warnings.catch_warnings():  # a skipped first step is no mistake of order: LambdaLR need not say so
            warnings.filterwarnings("ignore", r"Detected call of `lr_scheduler\.step\(\)` before `optimizer\.step\(\)`")
            run.schedule.step()  # the next step's learning rate
    return loss, step_tokens


PHASES = ("batch", "forward", "backward", "clip", "optimizer")


def phase(name: str) -> torch.profiler.record_function:
    """A part of a step, one of :data:`PHASES`, named for ``torch.profiler`` (benchmarks/profile_step.py gives the
    host's milliseconds in each); a few microseconds where no profiler runs."""
    return torch.profiler.record_function(f"step: {name}")


def log_window(run: Run, progress: Progress, loss, window_tokens: int, window_start: float, metrics, bar) -> None:
    """The end of a window of steps: its time and tokens counted, its loss (averaged over the processes) and
    throughput recorded, written to metrics.jsonl and shown; every --checkpoint-every steps, the validation
    loss and a checkpoint."""
    args, procs = run.args, run.procs
    synchronize(run.device)
    now = time.perf_counter()
    progress.train_seconds += now - window_start
    progress.tokens += window_tokens
    rate = window_tokens / max(now - window_start, 1e-9)
    mean_loss = procs.mean(loss.item())
    record = {
        "step": progress.step,
        "loss": mean_loss,
        "lr": learning_rate(progress.step - 1, args),
        "tokens_per_second": rate,
    }
    progress.history.append(record)
    if procs.main:
        metrics.write(json.dumps(record) + "\n")
        metrics.flush()
        bar.set_postfix(loss=f"{mean_loss:.3f}", tok_s=f"{rate:,.0f}")
    bar.update(progress.step - bar.n)
    if progress.step % args.checkpoint_every == 0 and procs.main:
        run.raw_model.eval()
        with uncompiled():
            val_loss = run.task.validation_loss(run.raw_model, run.device)
        progress.validation.append({"step": progress.step, "val_loss": val_loss})
        run.raw_model.train()
        checkpoint(run, progress)
    procs.barrier()


def uncompiled():
    """A context in which the model runs as written, not compiled: for evaluation, whose shapes and eval mode
    differ from the training step's, for which --compile-regions compiled the model's own layers."""
    return torch.compiler.set_stance("force_eager")


def checkpoint(run: Run, progress: Progress) -> None:
    """Save the run to --out/checkpoint.pt."""
    save_checkpoint(
        run.args.out / "checkpoint.pt",
        run.raw_model,
        run.optimizer,
        progress.step,
        run.args,
        progress.history,
        progress.validation,
        progress.tokens,
        progress.train_seconds,
    )
