"""Where the milliseconds of a ``make train`` step go: ``torch.profiler`` over a few steps of the trainer's own loop.

    python -m benchmarks.profile_step -- --task chars --corpus shakespeare --layers 12 --d-model 768 ...
    python -m benchmarks.profile_step --steps 5 -- --without is-causal fused-qkv fused-adamw tf32 device-batches

Everything after ``--`` is ``make train``'s options (``python -m attention_course.trainer --help``). The run
is built as the trainer builds it, takes ``--warmup-steps`` steps (compiling, if asked, and warming up), then
``--steps`` steps under the profiler. Printed: the wall-clock milliseconds of a step, the host's milliseconds
in the operators it launches, and the device's milliseconds in its kernels, with the operators that take the
most device time; last, one JSON line of the figures: the device's time by kind of kernel (matrix products,
attention, optimizer, the rest) and the host's time in each part of the step (``attention_course.trainer.steps.PHASES``:
making the batch, the forward pass, the backward pass, clipping, the optimizer's step), what a step costs
the host whatever the device.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from attention_course.trainer.checkpoints import Progress
from attention_course.trainer.command import allow_tf32, build, check_options, parse_args
from attention_course.trainer.processes import Processes, synchronize
from attention_course.trainer.steps import PHASES, train_step

# The kind of each kernel, by words in its operator's or kernel's name (the first that matches).
KINDS = (
    ("attention", ("flash", "attention", "fmha", "sdpa", "efficient")),
    ("optimizer", ("adam", "foreach", "multi_tensor")),
    ("matrix products", ("gemm", "matmul", "mm", "linear", "cutlass", "sm90", "nvjet")),
)


def kind_of(name: str) -> str:
    lowered = name.lower()
    return next((kind for kind, words in KINDS if any(word in lowered for word in words)), "other")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, trainer_args = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--steps", type=int, default=5, help="steps under the profiler")
    parser.add_argument("--rows", type=int, default=12, help="operators listed")
    options = parser.parse_args(ours)
    args = parse_args([*trainer_args, "--no-progress", "--steps", str(options.warmup_steps + options.steps)])
    procs = Processes(args.device)
    check_options(args, procs)
    allow_tf32(args, procs.device)
    run, progress = build(args, procs)
    progress = Progress()
    run.model.train()
    for _ in range(options.warmup_steps):
        train_step(run, progress)
        progress.step += 1
    synchronize(run.device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if run.device.type == "cuda" else [])
    started = time.perf_counter()
    with profile(activities=activities) as prof:
        for _ in range(options.steps):
            train_step(run, progress)
            progress.step += 1
        synchronize(run.device)
    step_ms = (time.perf_counter() - started) * 1e3 / options.steps
    events = prof.key_averages()
    device_time = "device_time_total" if hasattr(events[0], "device_time_total") else "cuda_time_total"
    print(events.table(sort_by=device_time if run.device.type == "cuda" else "cpu_time_total", row_limit=options.rows))
    kinds: dict[str, float] = {}
    device_ms = 0.0
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            ms = event.device_time / 1e3 if hasattr(event, "device_time") else event.cuda_time / 1e3
            kinds[kind_of(event.name)] = kinds.get(kind_of(event.name), 0.0) + ms / options.steps
            device_ms += ms / options.steps
    host_ms = sum(e.self_cpu_time_total for e in events) / 1e3 / options.steps
    by_phase = {e.key.removeprefix("step: "): e.cpu_time_total / 1e3 / options.steps for e in events
                if e.key.startswith("step: ")}  # fmt: skip
    figures = {
        "device": torch.cuda.get_device_name() if run.device.type == "cuda" else "CPU",
        "step_ms": round(step_ms, 3),
        "host_ms": round(host_ms, 3),
        "device_ms": round(device_ms, 3),
        "device_ms_by_kind": {k: round(v, 3) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])},
        "host_ms_by_phase": {name: round(by_phase.get(name, 0.0), 3) for name in PHASES},
        "options": " ".join(trainer_args),
    }
    print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
