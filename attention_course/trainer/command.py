"""Train the course's Transformer: ``make train ARGS="..."`` or ``python -m attention_course.trainer``.

Three tasks:

- ``dates`` (the default): the encoder-decoder translates dates written in many
  formats into ISO dates; scored by exact match of greedy decoding on the test split.
- ``chars``: a decoder-only character language model, on the course's own text by
  default (no download), on tiny Shakespeare (``--corpus shakespeare``, downloaded
  once and checked), or on any text file (``--text PATH``); scored by validation loss.
- ``lm``: the same GPT-style model and texts, on the tokens of a byte-level BPE
  tokenizer of ``--vocab-size`` tokens trained on the training text (saved as
  ``tokenizer.json``). Both language models also report their validation loss in
  bits per byte of text, which compares them whatever their tokens.

It runs on the best device there is (cuda, then mps, then cpu), shows a progress
bar with the loss and the throughput, writes checkpoints, ``metrics.jsonl`` and
``loss_curve.png`` to ``--out``, and ends by printing one JSON line of final
metrics. Under ``torchrun --nproc_per_node N`` it trains data-parallel: the
global batch is split between the processes, so N processes take the same steps
as one.

This module reads the command line and puts the run together; the other modules do each part:
:mod:`~attention_course.trainer.tasks`, :mod:`~attention_course.basics.schedule`,
:mod:`~attention_course.trainer.processes` (data parallelism), :mod:`~attention_course.trainer.steps` (the steps),
:mod:`~attention_course.scale.flops`, :mod:`~attention_course.trainer.checkpoints` and
:mod:`~attention_course.trainer.report` (the final metrics).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path

import torch

from attention_course.basics.schedule import SCHEDULES, scheduler
from attention_course.data import tokenization
from attention_course.trainer.checkpoints import Progress, resume
from attention_course.trainer.processes import Processes
from attention_course.trainer.report import report
from attention_course.trainer.steps import Run, StepLoss, train
from attention_course.trainer.tasks import TASKS

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs")
# What makes a step fast, each of which a run can go without (--without) to measure it: the look-ahead mask as
# the fused kernels' is_causal (FlashAttention takes no mask tensor), the query, key and value projections as
# one matrix product, AdamW's fused CUDA kernel, TF32 for float32 matrix products on CUDA, and batches
# gathered on the device.
SPEEDUPS = ("is-causal", "fused-qkv", "fused-adamw", "tf32", "device-batches")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m attention_course.trainer",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--task",
        choices=tuple(TASKS),
        default="dates",
        help="dates: translation to ISO dates; chars: a character language model; "
        "lm: a language model on byte-level BPE tokens",
    )
    p.add_argument(
        "--corpus", choices=("course", "shakespeare"), default="course", help="text of the chars and lm tasks"
    )
    p.add_argument("--text", type=Path, help="a text file for the chars and lm tasks (instead of --corpus)")
    p.add_argument(
        "--block-size",
        type=int,
        default=128,
        help="tokens (chars: characters) per training window of the chars and lm tasks",
    )
    p.add_argument(
        "--vocab-size",
        type=int,
        default=1024,
        help="tokens of the lm task's byte-level BPE tokenizer (the 256 bytes and its merges), "
        "trained on the training text",
    )
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2, help="layers of the encoder and of the decoder each")
    p.add_argument("--d-ff", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--norm", choices=("pre", "post"), default="pre", help="layer norm before or after each block")
    p.add_argument(
        "--bias",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="--no-bias: the chars and lm tasks' model without biases (attention, feed-forward network, layer "
        "norms, output layer), as nanoGPT's default bias=False",
    )
    p.add_argument(
        "--tie-weights",
        action="store_true",
        help="the output layer shares the (target) embedding's matrix, as in the paper (its section 3.4)",
    )
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--time-budget", type=float, default=None, help="stop training after this many seconds")
    p.add_argument(
        "--stop-after",
        type=int,
        default=None,
        help="stop after this step and save a checkpoint (the schedule still plans --steps); "
        "continue later with --resume",
    )
    p.add_argument("--batch-size", type=int, default=128, help="global batch, split between processes")
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    p.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default="cosine",
        help="warm-up then cosine decay, or the paper's warm-up then 1/sqrt(step)",
    )
    p.add_argument("--warmup", type=int, default=150, help="warm-up steps")
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0, help="gradient norm clipping (0: none)")
    p.add_argument(
        "--precision",
        choices=("fp32", "bf16", "fp16"),
        default="fp32",
        help="bf16/fp16: mixed precision with autocast (fp16 on cuda only)",
    )
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument(
        "--compile-mode",
        choices=COMPILE_MODES,
        default="default",
        help="torch.compile's mode, with --compile: reduce-overhead replays each step's kernels as a CUDA graph "
        "(on cuda; the dates task's batches have one shape for it)",
    )
    p.add_argument(
        "--compile-regions",
        action="store_true",
        help="with --compile: compile each layer on its own instead of the whole step (regional compilation): "
        "layers alike share one compiled graph, so compiling takes less time; the embeddings, the output layer "
        "and the loss run uncompiled",
    )
    p.add_argument(
        "--without",
        nargs="+",
        choices=SPEEDUPS,
        default=[],
        metavar="SPEEDUP",
        help=f"train without these speed-ups, to measure each ({', '.join(SPEEDUPS)})",
    )
    p.add_argument(
        "--attention",
        choices=("course", "fused"),
        default="fused",
        help="the course's attention, or F.scaled_dot_product_attention's fused kernels",
    )
    p.add_argument("--device", default=None, help="cuda, mps or cpu (default: the best available)")
    p.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="peak TFLOP/s of one device, for the model FLOPs utilisation "
        "(default: the dense bf16 peak of the GPU's data sheet, where the course knows its name)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("runs/train"), help="directory for checkpoints and metrics")
    p.add_argument("--resume", type=Path, default=None, help="a checkpoint to continue from")
    p.add_argument(
        "--eval-examples",
        type=int,
        default=2000,
        help="test dates scored (dates task), or validation windows (chars and lm tasks, at most 256)",
    )
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--checkpoint-every", type=int, default=500)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    for name in ("d_model", "heads", "layers", "d_ff", "steps", "batch_size", "block_size", "eval_examples"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.vocab_size <= tokenization.BYTES:
        p.error(
            f"--vocab-size must be at least {tokenization.BYTES + 1} (a token for each of the {tokenization.BYTES} "
            f"byte values and at least one merge), got {args.vocab_size}"
        )
    if args.compile_regions and not args.compile:
        p.error("--compile-regions says what --compile compiles: give --compile too")
    if not args.bias and args.task == "dates":
        p.error("--no-bias is an option of the chars and lm tasks' decoder-only model, not of the dates task")
    if args.d_model % args.heads:
        p.error(f"--heads ({args.heads}) must divide --d-model ({args.d_model})")
    if not 0 <= args.dropout < 1:
        p.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.peak_tflops is not None and args.peak_tflops <= 0:
        p.error(f"--peak-tflops must be positive, got {args.peak_tflops}")
    return args


def check_options(args: argparse.Namespace, procs: Processes) -> None:
    """Refuse options that these processes and this device cannot run."""
    if args.batch_size % procs.world:
        raise SystemExit(
            f"--batch-size ({args.batch_size}) must be divisible by the number of processes ({procs.world})"
        )
    if args.precision == "fp16" and procs.device.type != "cuda":
        raise SystemExit("--precision fp16 needs a cuda device; use bf16 on other devices")


def allow_tf32(args: argparse.Namespace, device: torch.device) -> None:
    """On cuda, unless --without tf32: float32 matrix products on the tensor cores in TF32 (10-bit mantissas,
    float32's range), for a run in float32 or the float32 parts of a mixed-precision one. A setting of this
    process, made by the program that trains (never on import)."""
    if device.type == "cuda" and "tf32" not in args.without:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def build(args: argparse.Namespace, procs: Processes) -> tuple[Run, Progress]:
    """The task, the model, its optimizer (seeded; from --resume's checkpoint where given) and learning-rate
    schedule, wrapped for data parallelism and compiled as the options say, and the progress so far."""
    device = procs.device
    torch.manual_seed(args.seed)
    task = TASKS[args.task](args)
    model = task.model(fused=args.attention == "fused").to(device)
    if "fused-qkv" in args.without:
        for module in model.modules():
            if hasattr(module, "fuse_projections"):
                module.fuse_projections = False
    fused = device.type == "cuda" and "fused-adamw" not in args.without  # one kernel for every parameter's update
    # fused None, not False: without the fused kernel, AdamW's default implementation (foreach where it can)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01, fused=True if fused else None
    )
    progress = Progress() if args.resume is None else resume(args.resume, model, optimizer, device, args)
    schedule = scheduler(optimizer, args.lr, args.steps, args.warmup, args.schedule, start=progress.step)
    raw_model = model
    if procs.world > 1:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    step_loss = StepLoss(task, model)
    if args.compile and args.compile_regions:
        for layer in layers(raw_model):
            layer.compile(mode=args.compile_mode)
    elif args.compile:
        step_loss = torch.compile(step_loss, mode=args.compile_mode)
    autocast = (
        torch.autocast(device.type, dtype=torch.bfloat16 if args.precision == "bf16" else torch.float16)
        if args.precision != "fp32"
        else contextlib.nullcontext()
    )
    scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "fp16")
    return Run(args, procs, task, raw_model, model, step_loss, optimizer, schedule, autocast, scaler), progress


def layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's layers (an encoder-decoder's encoder and decoder layers, a decoder-only model's layers): the
    regions that --compile-regions compiles, each of a kind compiled once for all of that kind."""
    stacks = [getattr(model, name) for name in ("encoder_layers", "decoder_layers", "layers") if hasattr(model, name)]
    return [layer for stack in stacks for layer in stack]


def main(argv=None) -> dict:
    args = parse_args(argv)
    started = time.perf_counter()
    procs = Processes(args.device)
    check_options(args, procs)
    allow_tf32(args, procs.device)
    run, progress = build(args, procs)
    if procs.main:
        args.out.mkdir(parents=True, exist_ok=True)
        run.task.save(args.out)
    metrics = (args.out / "metrics.jsonl").open("a") if procs.main else None
    train(run, progress, metrics)
    result = {}
    if procs.main:
        result = report(run, progress, started)
        metrics.close()
        print(json.dumps(result), flush=True)
    procs.barrier()
    procs.close()
    return result


if __name__ == "__main__":
    main()
