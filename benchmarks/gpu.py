"""Chapter 8's measurements on a GPU, in one command: what the page cannot measure while it is built on a CPU.

    python -m benchmarks.gpu                     # every step on the best device; records "gpu" in figures.json
    python -m benchmarks.gpu --out DIR           # also write the record and each step's log into DIR
    python -m benchmarks.gpu --nanogpt DIR       # with nanoGPT's trainer beside the course's (a checkout of it)
    python -m benchmarks.gpu --quick             # a few steps of each, on any device: records nothing
    python -m benchmarks.gpu --record DIR/record.json --fill-from EARLIER/gpu.json COMMIT
                                                 # here: keep what a GPU machine recorded, with the steps
                                                 # that it did not finish taken from an earlier run
                                                 # (--step NAME OUTPUT COMMIT COMMAND: a program run on its
                                                 # own; --keep-recorded: the rest from figures.json's entry)

The steps, each a program of the course run in a process of its own with a time limit, so that one that
fails or runs out of time leaves the others' figures:

- ``nanogpt`` (given ``--nanogpt DIR``, a checkout of nanoGPT): ``benchmarks.nanogpt``, the course's trainer
  beside nanoGPT's at its two shapes;
- ``train-fp32``, ``train-bf16``, ``train-bf16-compile``: ``make train`` on the dates task with its
  defaults, in float32, with bfloat16 autocast, and with bfloat16 and ``torch.compile`` replaying CUDA
  graphs (``--compile-mode reduce-overhead``);
- ``compile-cost``: ``benchmarks.compile_cost``, the capstone in float32 and bfloat16 not compiled and compiled
  (the whole step and by layers, each from empty compiler caches and again warm): what compiling costs a run
  and the step from which it is ahead of float32;
- ``ablation``: the GPT-2-sized language model, not compiled, with every speed-up and without each
  (``benchmarks.nanogpt --ablation``), and with biases (``make train``'s default model);
- ``profile-before``, ``profile-after``: ``benchmarks.profile_step`` on that model without any speed-up
  and with all of them;
- ``tests``: the tests that compute on a device (:data:`DEVICE_TESTS`), on this one;
- ``attention``: ``benchmarks.attention``, the course's attention against the fused kernels by length, chapter
  11's Triton kernels among them (compiled: that process imports triton with ``TRITON_INTERPRET=0``);
- ``flash-sweep`` (on a CUDA GPU): ``benchmarks.flash_sweep``, chapter 11's sweep: the course's reference kernels,
  PyTorch's FlashAttention and its plain computation by length, head size, 16-bit dtype and mask, forward and
  forward+backward, timed by ``triton.testing.do_bench`` (its median), in TFLOP/s and as a share of the GPU's peak;
- ``shakespeare``: the character language model at nanoGPT's shakespeare_char settings (its README reports a
  validation loss of 1.4697), its training stopped after its time limit less the time to start and evaluate;
- ``transformer-fp32``, ``transformer-bf16``: ``make bench-transformer`` at the page's GPU sizes;
- ``generate``, ``pretrained``: ``make bench-generate`` and ``make bench-pretrained`` on this device.

Chapter 8 plots and tabulates the record (``benchmarks/figures.json``, ``gpu``); chapter 11 shows its
``attention`` and ``flash-sweep`` steps. Without a CUDA GPU the command says so and measures nothing (``--quick``
runs anywhere, and records nothing).

A GPU machine whose Python lacks the notebook tools (nbformat, nbgrader) cannot build the solution modules
from the instructor notebooks: write them here first, ``attention_course.solutions.module_source(name)`` into
``attention_course/solutions/<name>.py`` of the copy that goes there, as the students' repository has them. A
machine that reaches no network needs the tiny-Shakespeare text in ``$ATTENTION_COURSE_CACHE``
(``attention_course.data.corpora``, checked against its SHA-256).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attention_course.trainer.command import SPEEDUPS
from benchmarks import scrub
from benchmarks.figures import ROOT, load, record
from benchmarks.replicate import chapter_constant

# The test files whose tests compute on the device that $COURSE_TEST_DEVICE names (tests/support/devices.py).
DEVICE_TESTS = (
    "tests/test_training.py",
    "tests/test_train.py",
    "tests/test_generate.py",
    "tests/test_pretrained.py",
    "tests/test_attention_course.py",
    "tests/test_gpu.py",
)
PYTHON = sys.executable
TRAINER = [PYTHON, "-m", "attention_course.trainer", "--no-progress"]
# nanoGPT's config/train_shakespeare_char.py, in the trainer's options: 6 layers of width 384 with 6 heads,
# windows of 256 characters, batches of 64, dropout 0.2, peak learning rate 1e-3 after 100 warm-up steps,
# 5,000 steps, the output layer tied to the embedding.
SHAKESPEARE = [
    "--task", "chars", "--corpus", "shakespeare", "--layers", "6", "--d-model", "384", "--heads", "6",
    "--d-ff", "1536", "--dropout", "0.2", "--block-size", "256", "--batch-size", "64", "--lr", "1e-3",
    "--warmup", "100", "--steps", "5000", "--tie-weights", "--eval-examples", "256", "--log-every", "250",
    "--checkpoint-every", "5000", "--precision", "bf16", "--compile",
]  # fmt: skip
# A few small steps of the same model, in float32 and not compiled (each takes minutes on a CPU).
QUICK_SHAKESPEARE = [
    *SHAKESPEARE[: SHAKESPEARE.index("--compile")],
    *("--steps", "4", "--warmup", "2", "--eval-examples", "8", "--batch-size", "4", "--precision", "fp32"),
]
NEEDS_CUDA = (
    "make bench-gpu (python -m benchmarks.gpu) measures on a CUDA GPU, and this machine has none "
    "(torch.cuda.is_available() is False): nothing was measured or recorded. On a machine with an NVIDIA GPU it "
    "records the measurements; --quick runs a few steps of each program on any device and records nothing."
)
LM_RESERVE = 45  # seconds of a language-model run outside its training steps: start, compiling, evaluation
SWEEP_RESERVE = 80  # seconds of chapter 11's sweep outside its budget: start, and the last configuration begun


# The shape of the ablation and of the profiles: GPT-2 small's layers, where attention costs the most.
GPT2_SHAPE = [
    "--task", "chars", "--corpus", "shakespeare", "--layers", "12", "--d-model", "768", "--heads", "12",
    "--d-ff", "3072", "--dropout", "0", "--block-size", "1024", "--batch-size", "16", "--tie-weights",
    "--precision", "bf16",
]  # fmt: skip


def steps(quick: bool, device: str, nanogpt: Path | None = None) -> list[tuple[str, list[str], float]]:
    """(name, command, time limit in seconds) of each step, in the order they run; nanoGPT's beside the
    course's where a checkout of it is given."""
    train = ["--steps", "20", "--warmup", "2", "--eval-examples", "40"] if quick else []
    tests = [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE", *DEVICE_TESTS]
    if quick:
        tests += ["-k", "to_device or best_device or dtype_and_device"]
        transformer = ["--steps", "2", "--rounds", "1", "--batch-size", "16", "--d-model", "32", "--d-ff", "64"]
    else:  # the sizes at which chapter 8 runs benchmarks/transformer.py on a GPU, less its --device
        large = chapter_constant("ch08_training_fast.md", "LARGE")
        transformer = large[: large.index("--device")] + large[large.index("--device") + 2 :]
        tests += ["-n", "16"] if _has_xdist() else []
    bench_transformer = [PYTHON, "-m", "benchmarks.transformer", "--device", device, *transformer]
    attention = ["--lengths", "64", "128", "--repeats", "1", "--heads", "2"] if quick else []
    pretrained = ["--models", "gpt2", "--tokens", "4", "--rounds", "1"] if quick else []
    sweep = ["--lengths", "1024", "2048", "--head-sizes", "64"] if quick else []  # chapter 11's, given --budget by main
    side_by_side = [PYTHON, "-m", "benchmarks.nanogpt", "--nanogpt", str(nanogpt)]
    side_by_side += ["--quick"] if quick else ["--compile-mode", "reduce-overhead"]  # the course's fastest
    ablation = [PYTHON, "-m", "benchmarks.nanogpt", "--ablation", "--eager", "--shapes", "gpt2"]
    ablation += ["--quick"] if quick else ["--steps", "60"]
    compile_cost = [PYTHON, "-m", "benchmarks.compile_cost"]
    compile_cost += ["--steps", "20", "--", "--batch-size", "16", "--eval-examples", "20"] if quick else []
    profile = [PYTHON, "-m", "benchmarks.profile_step", *(["--warmup-steps", "1", "--steps", "1"] if quick else [])]
    tiny = ["--layers", "1", "--d-model", "64", "--heads", "2", "--block-size", "32"]
    shape = [*GPT2_SHAPE, *(tiny if quick else [])]
    all_off = ["--without", *SPEEDUPS]
    return [
        *([("nanogpt", side_by_side, 420)] if nanogpt else []),
        ("train-fp32", [*TRAINER, "--precision", "fp32", *train], 150),
        ("train-bf16", [*TRAINER, "--precision", "bf16", *train], 150),
        (
            "train-bf16-compile",
            [*TRAINER, "--precision", "bf16", "--compile", "--compile-mode", "reduce-overhead", *train],
            300,
        ),  # fmt: skip
        ("compile-cost", compile_cost, 480),
        ("ablation", ablation, 300),
        ("profile-before", [*profile, "--", *shape, *all_off], 120),
        ("profile-after", [*profile, "--", *shape], 120),
        ("tests", tests, 240),
        ("attention", [PYTHON, "-m", "benchmarks.attention", "--device", device, *attention], 150),
        *([("flash-sweep", [PYTHON, "-m", "benchmarks.flash_sweep", *sweep], 480)] if device == "cuda" else []),
        ("shakespeare", [*TRAINER, *(QUICK_SHAKESPEARE if quick else SHAKESPEARE)], 240),
        ("transformer-fp32", bench_transformer, 120),
        ("transformer-bf16", [*bench_transformer, "--precision", "bf16"], 120),
        ("generate", [PYTHON, "-m", "benchmarks.generate", "--device", device, *(["--quick"] if quick else [])], 150),
        ("pretrained", [PYTHON, "-m", "benchmarks.pretrained", "--device", device, *pretrained], 240),
    ]


def _has_xdist() -> bool:
    import importlib.util

    return importlib.util.find_spec("xdist") is not None


def last_json(output: str):
    """The last line of a program's output that is JSON (the programs print their figures last)."""
    for line in reversed(output.splitlines()):
        if line.startswith(("{", "[")):
            try:
                return json.loads(line)
            except json.JSONDecodeError:  # a warning such as "[W1126 ...]" on the way
                continue
    return None


def pytest_summary(output: str) -> dict:
    """The counts of pytest's summary line (``3 failed, 40 passed in 20.1s``) and the tests that failed."""
    counts = {}
    for line in reversed(output.splitlines()):
        found = re.findall(r"(\d+) (passed|failed|errors?|skipped|deselected)", line)
        if found and " in " in line:
            counts = {what.rstrip("s") if what != "passed" else what: int(n) for n, what in found}
            break
    failed = [
        line.split(" ", 1)[1].split(" - ")[0] for line in output.splitlines() if line.startswith(("FAILED ", "ERROR "))
    ]
    return {"counts": counts, "failed": failed}


def steady_rate(metrics: Path) -> float | None:
    """The median tokens per second of the second half of a training run's windows (metrics.jsonl): its speed
    once compiling and warming up are over, which the run's overall rate includes."""
    rates = [json.loads(line)["tokens_per_second"] for line in metrics.read_text().splitlines() if line.strip()]
    return round(statistics.median(rates[len(rates) // 2 :]), 1) if rates else None


def run_step(name: str, command: list[str], limit: float, logs: Path, environment: dict) -> dict:
    """Run one step; its figures (the JSON it printed last), seconds and exit status, or how it failed."""
    started = time.perf_counter()
    shown = " ".join("python" if part == PYTHON else part for part in command)
    print(f"== {name}: {shown} (limit {limit:.0f} s)", flush=True)
    # A process group of its own: on its time limit the step is ended with every process it started (pytest's
    # workers, torch.compile's), which would otherwise hold its output open.
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=environment, start_new_session=True)  # fmt: skip
    try:
        output, _ = process.communicate(timeout=limit)
        status = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        status = "timeout"
    seconds = round(time.perf_counter() - started, 1)
    with (logs / "steps.log").open("a") as log:  # one file: a GPU machine gives back few
        log.write(f"== {name}: {shown}\n{output}\n")
    step = {"command": shown, "seconds": seconds, "status": status}
    step["result"] = pytest_summary(output) if name == "tests" else last_json(output)
    if status != 0:
        step["tail"] = output[-2000:]
    print(f"   {name}: status {status} in {seconds} s", flush=True)
    return step


def finished(step: dict | None) -> bool:
    """Whether a step ran to its end: exit status 0 and, for a training run given a time limit, all its steps."""
    if not step or step.get("status") != 0 or step.get("result") is None:
        return False
    words = step["command"].split()
    if "--time-budget" in words:
        planned = [int(value) for option, value in zip(words, words[1:]) if option == "--steps"][-1]  # the last wins
        return step["result"].get("steps") == planned
    return True


def shown_command(argv: list[str]) -> str:
    """``python -m benchmarks.gpu`` with ``argv`` as a record shows it (:func:`benchmarks.scrub.shown_command`:
    ``--out OUT``, ``--nanogpt NANOGPT``, a file by its name alone), so that no machine's paths are recorded."""
    return scrub.shown_command("python -m benchmarks.gpu", argv)


def scrubbed(step: dict) -> dict:
    """A step as recorded: the folder that its training run wrote to (a temporary folder of the machine that
    ran it) named ``OUT`` in its command, and left out of its result; any other machine's path scrubbed as
    every record's is (:func:`benchmarks.scrub.scrubbed`)."""
    step = dict(step)
    if isinstance(step.get("result"), dict):
        step["result"] = {key: value for key, value in step["result"].items() if key != "out"}
    return scrub.scrubbed(step)


def step_from_output(output: Path, commit: str, command: str) -> dict:
    """A step's record from a program's output that was run on its own (the JSON line it printed last), or, from
    ``GPU_JSON:STEP``, from a step of another run (say, one measured before a change)."""
    if ":" in output.name:
        file, step = str(output).rsplit(":", 1)
        result = json.loads(Path(file).read_text())["steps"][step].get("result")
    else:
        result = last_json(output.read_text())
    if result is None:
        raise SystemExit(f"{output} holds no JSON figures")
    return {"command": command, "status": 0, "result": result, "commit": commit}


def record_measured(
    path: Path,
    earlier: list[tuple[Path, str]],
    argv: list[str],
    steps_run: list[tuple[str, Path, str, str]] = (),
    keep_recorded: bool = False,
) -> dict:
    """Record the entry that a GPU machine wrote (``--out``'s record.json) in benchmarks/figures.json, with
    the steps of programs run on their own (``steps_run``: name, output, commit, command), then each step that
    it did not finish taken from earlier runs' gpu.json in turn (marked with that run's commit), and, with
    ``keep_recorded``, from the entry recorded now (each step with the commit it was measured at)."""
    entry = json.loads(path.read_text())
    figures = entry["figures"]
    for name, output, commit, command in steps_run:
        figures["steps"][name] = step_from_output(output, commit, command)
    sources = [(json.loads(gpu_json.read_text()), str(gpu_json), commit) for gpu_json, commit in earlier]
    if keep_recorded and "gpu" in load():
        recorded = load()["gpu"]
        sources.append((recorded["figures"], "the recorded entry", recorded["commit"]))
    for before, where, commit in sources:
        if before["device"] != figures["device"]:
            raise SystemExit(f"{where} was measured on {before['device']}, not {figures['device']}")
        for name, step in before["steps"].items():
            if not finished(figures["steps"].get(name)) and finished(step):
                figures["steps"][name] = {"commit": commit, **step}  # a step recorded with its own keeps it
    figures["steps"] = {name: scrubbed(step) for name, step in figures["steps"].items()}
    for step in figures["steps"].values():
        if step.get("commit") == entry["commit"]:  # measured at the record's own commit: nothing to mark
            del step["commit"]
    command = f"{shown_command(entry['command'].split()[3:])}, then {shown_command(argv)}"
    measured = {"day": entry["day"], "machine": entry["machine"]}
    return record("gpu", command, figures, commit=entry["commit"], measured=measured)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few steps of each program; records nothing")
    parser.add_argument("--out", type=Path, default=None, help="also write the record and the logs here")
    parser.add_argument("--only", nargs="+", default=None, help="run these steps only (by name)")
    parser.add_argument("--nanogpt", type=Path, default=None, help="a checkout of nanoGPT, to train beside it")
    parser.add_argument("--deadline", type=float, default=None, help="seconds for all the steps together")
    parser.add_argument("--commit", default=None, help="the commit measured (default: git's, where there is one)")
    parser.add_argument("--record", type=Path, default=None, help="record this record.json of a GPU machine's run")
    parser.add_argument(
        "--fill-from",
        nargs=2,
        action="append",
        metavar=("GPU_JSON", "COMMIT"),
        default=[],
        help="with --record: an earlier run's gpu.json, and its commit, for the steps not finished (repeatable: "
        "the first that finished a step gives it)",
    )
    parser.add_argument(
        "--step",
        nargs=4,
        action="append",
        metavar=("NAME", "OUTPUT", "COMMIT", "COMMAND"),
        default=[],
        help="with --record: the step NAME from the output of COMMAND, run on its own at COMMIT (OUTPUT: a file "
        "of its output, or GPU_JSON:STEP for a step of another run)",
    )
    parser.add_argument(
        "--keep-recorded",
        action="store_true",
        help="with --record: the steps finished by no other run from the entry that figures.json holds now",
    )
    args = parser.parse_args(argv)
    if args.record:
        earlier = [(Path(gpu_json), commit) for gpu_json, commit in args.fill_from]
        steps_run = [(name, Path(output), commit, command) for name, output, commit, command in args.step]
        shown = argv if argv is not None else sys.argv[1:]
        record_measured(args.record, earlier, shown, steps_run, args.keep_recorded)
        return 0
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device != "cuda" and not args.quick:
        print(NEEDS_CUDA, file=sys.stderr)
        return 2
    plan = steps(args.quick, device, args.nanogpt)
    unknown = set(args.only or ()) - {name for name, _, _ in plan}
    if unknown:
        parser.error(f"no step named {', '.join(sorted(unknown))}; the steps: {', '.join(n for n, _, _ in plan)}")
    started = time.perf_counter()
    logs = args.out or Path(tempfile.mkdtemp(prefix="gpu-"))
    logs.mkdir(parents=True, exist_ok=True)
    figures = {"device": torch.cuda.get_device_name() if device == "cuda" else "CPU", "torch": torch.__version__}
    figures["steps"] = {}
    environment = {**os.environ, "COURSE_TEST_DEVICE": device, "PYTHONUNBUFFERED": "1"}
    for name, command, limit in plan:
        if args.only and name not in args.only:
            continue
        left = None if args.deadline is None else args.deadline - (time.perf_counter() - started)
        if left is not None and left < 20:
            figures["steps"][name] = {"status": "skipped: no time left"}
            continue
        if left is not None:
            limit = min(limit, left)
        with tempfile.TemporaryDirectory(prefix=f"{name}-") as folder:  # a training step's run, read then removed
            out = Path(folder)
            if command[:3] == TRAINER[:3]:
                command = [*command, "--out", str(out)]
                if name == "shakespeare" and not args.quick:
                    command += ["--time-budget", str(max(30, round(limit - LM_RESERVE)))]
            if name == "flash-sweep":  # configurations started within its limit, less the time of the longest one
                command = [*command, "--budget", str(max(20, round(limit - SWEEP_RESERVE)))]
            figures["steps"][name] = run_step(name, command, limit, logs, environment)
            if (out / "metrics.jsonl").is_file() and figures["steps"][name]["result"]:
                figures["steps"][name]["result"]["steady_tokens_per_second"] = steady_rate(out / "metrics.jsonl")
        (logs / "gpu.json").write_text(json.dumps(figures, indent=1) + "\n")
    figures["seconds"] = round(time.perf_counter() - started, 1)
    (logs / "gpu.json").write_text(json.dumps(figures, indent=1) + "\n")
    if not args.quick:
        figures["steps"] = {name: scrubbed(step) for name, step in figures["steps"].items()}
        entry = record("gpu", shown_command(argv if argv is not None else sys.argv[1:]), figures, commit=args.commit)
        (logs / "record.json").write_text(json.dumps(entry, indent=1) + "\n")
    failed = [name for name, step in figures["steps"].items() if step.get("status") != 0]
    print(f"done in {figures['seconds']} s; " + (f"failed: {', '.join(failed)}" if failed else "every step passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
