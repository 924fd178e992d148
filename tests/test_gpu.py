"""benchmarks/attention.py and benchmarks/gpu.py: chapter 8's measurements on a GPU, tried here on the tests' device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from attention_course.trainer.command import parse_args
from benchmarks import attention, figures, gpu


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_every_implementation_computes_the_courses_causal_attention(device, dtype):
    generator = torch.Generator(device=device).manual_seed(1)
    q, k, v = torch.randn(3, 1, 2, 40, 16, device=device, generator=generator).to(attention.DTYPES[dtype]).unbind(0)
    reference = attention.attend("course", q.double(), k.double(), v.double())
    ran = []
    for implementation in attention.IMPLEMENTATIONS:
        try:
            out = attention.attend(implementation, q, k, v)
        except RuntimeError:  # a back end that does not take this dtype or device; triton, but on a GPU
            continue
        ran.append(implementation)
        # Triton's tl.dot multiplies float32 in TF32 (10 bits of mantissa) by default
        tolerance = 3e-2 if dtype == "bf16" else 1e-2 if implementation == "triton" else 1e-5
        torch.testing.assert_close(out.double(), reference, atol=tolerance, rtol=tolerance, msg=implementation)
    assert {"course", "math"} <= set(ran)
    assert ("triton" in ran) == (torch.device(device).type == "cuda")  # in float32 and bfloat16 alike


def test_a_row_times_forward_and_backward_or_says_why_not(device):
    row = attention.measure("math", 32, "fp32", torch.device(device), heads=2, head_size=8, repeats=1)
    assert row["forward_ms"] > 0 and row["forward_backward_ms"] > 0
    assert ("peak_mib" in row) == (torch.device(device).type == "cuda")
    flash = attention.measure("flash", 32, "fp32", torch.device(device), heads=2, head_size=8, repeats=1)
    assert "forward_ms" in flash or flash["error"] == "not available"


def test_chapter_11s_timing_runs_the_kernel_in_a_process_of_its_own(device):
    """attention_course.kernels.timing.time_on_gpu's table, as a notebook gets it (its own triton in the interpreter):
    the reference forward in a process of its own, in float32 and bfloat16, compiled on a GPU (in the interpreter on the
    CPU, at tiny sizes), beside SDPA's memory-efficient kernel in float32, the plain computation and SDPA's
    FlashAttention in bfloat16."""
    lengths = (256, 1000) if torch.device(device).type == "cuda" else (32, 50)
    where = "cuda" if torch.device(device).type == "cuda" else "cpu"
    script = (
        "from attention_course.kernels.timing import run_timing\n"
        "from attention_course.solutions import ch11_flash_attention as kernels\n"
        f"print(run_timing(kernels.flash_attention_forward, {where!r}, {lengths!r}, 2, 16 if {where!r} == 'cpu' "
        "else 64, block_q=16, block_k=16, timeout=300))\n"
    )
    environment = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment, timeout=400)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.split()[:1] in ([str(n)] for n in lengths)]
    assert len(rows) == 2, done.stdout
    for _, yours, yours_bf16, efficient, plain, _, difference in rows:  # "failed" where a kernel does not run
        assert float(yours) > 0 and float(plain) > 0 and float(difference) < 1e-2, done.stdout
        if where == "cuda":  # the fused kernels of PyTorch's beside yours, like for like: float32, and bfloat16
            assert float(efficient) > 0 and float(yours_bf16) > 0, done.stdout


def test_chapter_11s_sweep_runs_compiled_on_a_cuda_gpu_and_says_it_needs_one_elsewhere(device):
    """python -m benchmarks.flash_sweep at one small configuration: on a CUDA GPU, a row of TFLOP/s for each
    implementation and pass (the reference kernels compiled, in a process of its own); elsewhere, exit status 2 and
    one sentence, no traceback."""
    command = [sys.executable, "-m", "benchmarks.flash_sweep", "--lengths", "512", "--head-sizes", "64"]
    command += ["--dtypes", "bfloat16", "--masks", "causal"]
    environment = {**os.environ, **({} if torch.device(device).type == "cuda" else {"CUDA_VISIBLE_DEVICES": ""})}
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=300)
    if torch.device(device).type != "cuda":
        assert done.returncode == 2 and "needs a CUDA GPU" in done.stderr and "Traceback" not in done.stderr
        return
    assert done.returncode == 0, done.stderr
    rows = gpu.last_json(done.stdout)["rows"]
    timed = {(row["implementation"], row["pass"]) for row in rows if row.get("tflops", 0) > 0}
    assert {(name, p) for name in ("kernel", "flash", "math") for p in ("forward", "forward_backward")} <= timed, rows


def test_the_attention_benchmark_refuses_bad_sizes(capsys):
    for bad, message in ((["--heads", "0"], "--heads must be positive"), (["--lengths", "0"], "--lengths must be")):
        with pytest.raises(SystemExit):
            attention.parse_args(bad)
        assert message in capsys.readouterr().err


def test_pytests_summary_is_read_with_the_failed_tests():
    output = "FAILED tests/test_x.py::test_a - AssertionError: no\n=== 1 failed, 40 passed, 2 skipped in 20.1s ===\n"
    assert gpu.pytest_summary(output) == {
        "counts": {"failed": 1, "passed": 40, "skipped": 2},
        "failed": ["tests/test_x.py::test_a"],
    }
    assert gpu.pytest_summary("12 passed in 3.0s")["counts"] == {"passed": 12}
    assert gpu.last_json('progress\n{"a": 1}\n[W1126 warning]\n') == {"a": 1} and gpu.last_json("no figures") is None


@pytest.mark.slow  # two benchmarks run end to end
def test_a_quick_run_writes_each_steps_figures_and_records_nothing(tmp_path, monkeypatch):
    recorded = []
    monkeypatch.setattr(gpu, "record", lambda *args, **kwargs: recorded.append(args))
    status = gpu.main(["--quick", "--only", "attention", "generate", "--out", str(tmp_path)])
    written = json.loads((tmp_path / "gpu.json").read_text())
    assert status == 0 and not recorded and set(written["steps"]) == {"attention", "generate"}
    rows = written["steps"]["attention"]["result"]["rows"]
    assert {row["implementation"] for row in rows} == set(attention.IMPLEMENTATIONS)
    log = (tmp_path / "steps.log").read_text()
    assert log.startswith("== attention: python -m benchmarks.attention") and "== generate: " in log
    with pytest.raises(SystemExit):
        gpu.main(["--quick", "--only", "nonsense"])


def test_the_record_is_rendered_whatever_steps_finished():
    entry = {
        "command": "python -m benchmarks.gpu",
        "day": "2026-11-26",
        "commit": "abc1234",
        "machine": "16 cores, 1 × NVIDIA H200",
        "figures": {
            "device": "NVIDIA H200",
            "torch": "2.11.0",
            "steps": {
                "tests": {"status": 1, "result": {"counts": {"passed": 40, "failed": 1}, "failed": ["t"]}},
                "train-bf16": {
                    "status": 0,
                    "result": {
                        "steps": 1500,
                        "tokens_per_second": 1e6,
                        "mfu": 0.000123,
                        "exact_match": 0.99,
                        "wall_seconds": 30.0,
                    },
                },  # fmt: skip
                "shakespeare": {"status": "timeout", "result": None},
            },
        },
    }
    text = figures.RENDER["gpu"](entry)
    assert "40 passed, 1 failed" in text
    assert "| train-bf16 | 1,500 | 1,000,000 |  | 0.012% | 99.0% exact match | 30 s |" in text
    assert "| shakespeare | did not finish |" in text and "| train-fp32 | did not finish |" in text


def test_a_gpu_machines_record_is_kept_with_its_unfinished_steps_from_an_earlier_run(tmp_path, monkeypatch):
    recorded = []
    monkeypatch.setattr(gpu, "record", lambda *args, **kwargs: recorded.append((args, kwargs)))
    lm = "python -m attention_course.trainer --steps 5000 --time-budget 49"
    now = {
        "tests": {"command": "pytest", "status": 0, "result": {"counts": {"passed": 3}}},
        "shakespeare": {"command": lm, "status": 0, "result": {"steps": 2190}},  # stopped by its time limit
        "generate": {"status": "skipped: no time left"},
        "attention": {"command": "a", "status": 0, "result": {"rows": []}},
    }
    before = {
        "shakespeare": {"command": lm, "status": 0, "result": {"steps": 5000}},
        "generate": {"command": "g", "status": 0, "result": {"new_tokens": {}}},
        "attention": {"command": "a", "status": 0, "result": {"rows": ["earlier"]}},
        "pretrained": {"command": "p", "status": "timeout", "result": None},
    }
    entry = {"command": "python -m benchmarks.gpu", "day": "2026-11-26", "commit": "bbb", "machine": "1 × H200"}
    (tmp_path / "record.json").write_text(json.dumps({**entry, "figures": {"device": "H200", "steps": now}}))
    (tmp_path / "gpu.json").write_text(json.dumps({"device": "H200", "steps": before}))
    assert gpu.main(["--record", str(tmp_path / "record.json"), "--fill-from", str(tmp_path / "gpu.json"), "aaa"]) == 0
    (name, command, figures), kwargs = recorded[0]
    assert name == "gpu" and command.startswith(
        "python -m benchmarks.gpu, then python -m benchmarks.gpu --record record.json"
    )
    assert kwargs == {"commit": "bbb", "measured": {"day": "2026-11-26", "machine": "1 × H200"}}
    steps = figures["steps"]
    assert steps["shakespeare"]["result"]["steps"] == 5000 and steps["shakespeare"]["commit"] == "aaa"
    assert steps["generate"]["commit"] == "aaa" and steps["attention"]["result"]["rows"] == []  # its own, finished
    assert "commit" not in steps["tests"] and "pretrained" not in steps  # unfinished in both runs
    (tmp_path / "gpu.json").write_text(json.dumps({"device": "H100", "steps": before}))
    with pytest.raises(SystemExit, match="measured on H100, not H200"):
        gpu.main(["--record", str(tmp_path / "record.json"), "--fill-from", str(tmp_path / "gpu.json"), "aaa"])


def test_a_record_names_no_machines_paths_and_takes_steps_run_on_their_own(tmp_path, monkeypatch):
    recorded = []
    monkeypatch.setattr(gpu, "record", lambda *args, **kwargs: recorded.append((args, kwargs)))
    monkeypatch.setattr(gpu, "load", lambda: {"gpu": {"commit": "old", "figures": {"device": "H200", "steps": {
        "generate": {"command": "g", "status": 0, "result": {"rate": 1}},
        "pretrained": {"command": "p", "status": 0, "result": {"rate": 2}, "commit": "older"},
    }}}})  # fmt: skip
    train = "python -m attention_course.trainer --precision fp32 --out /tmp/train-fp32-x1y2"
    now = {"train-fp32": {"command": train, "status": 0, "result": {"steps": 3, "out": "/tmp/train-fp32-x1y2"}}}
    entry = {"command": "python -m benchmarks.gpu --out /root/out --nanogpt /home/me/nanoGPT --deadline 9",
             "day": "2026-11-27", "commit": "bbb", "machine": "1 × H200"}  # fmt: skip
    (tmp_path / "record.json").write_text(json.dumps({**entry, "figures": {"device": "H200", "steps": now}}))
    (tmp_path / "side.log").write_text('warming up\n{"shapes": {"gpt2": {"ratio": 1.1}}}\n')
    side_by_side = "python -m benchmarks.nanogpt --nanogpt NANOGPT"
    argv = ["--record", str(tmp_path / "record.json"), "--keep-recorded",
            "--step", "nanogpt", str(tmp_path / "side.log"), "ccc", side_by_side]  # fmt: skip
    assert gpu.main(argv) == 0
    (name, command, figures_), _ = recorded[0]
    assert "/root" not in command and "/home" not in command and str(tmp_path) not in command
    assert command.startswith("python -m benchmarks.gpu --out OUT --nanogpt NANOGPT --deadline 9, then ")
    steps = figures_["steps"]
    assert steps["train-fp32"]["command"].endswith("--out OUT") and "out" not in steps["train-fp32"]["result"]
    assert steps["nanogpt"] == {"command": "python -m benchmarks.nanogpt --nanogpt NANOGPT", "status": 0,
                                "result": {"shapes": {"gpt2": {"ratio": 1.1}}}, "commit": "ccc"}  # fmt: skip
    assert steps["generate"]["commit"] == "old" and steps["pretrained"]["commit"] == "older"  # each its own
    (tmp_path / "empty.log").write_text("no figures\n")
    with pytest.raises(SystemExit, match="no JSON figures"):
        gpu.main(["--record", str(tmp_path / "record.json"), "--step", "x", str(tmp_path / "empty.log"), "c", "x"])


FAKE_NANOGPT = """
import pickle, sys, time
import numpy as np
meta = pickle.load(open("data/shakespeare_char/meta.pkl", "rb"))
train = np.fromfile("data/shakespeare_char/train.bin", dtype=np.uint16)
assert meta["vocab_size"] == len(meta["itos"]) and train.max() < meta["vocab_size"]
options = dict(arg[2:].split("=", 1) for arg in sys.argv[2:])
steps = int(options["max_iters"])
print("step 0: train loss 4.2000, val loss 4.2100")
for step in range(0, steps + 1, 10):
    time.sleep(0.02 if step < steps // 2 else 0.01)  # a slower first half: compiling and warming up
    print(f"iter {step}: loss 2.0000, time 10.00ms, mfu 5.00%", flush=True)
print(f"step {steps}: train loss 1.9000, val loss 2.0500")
open(options["out_dir"] + "/ckpt.pt", "w").write("weights")  # where the real one saves its checkpoint
"""


@pytest.fixture
def temporary(tmp_path, monkeypatch):
    """An empty folder that the tempfile module makes its folders in, for this test."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_nanogpt_runs_from_a_folder_of_its_own_and_is_timed_between_its_logs(tmp_path, temporary):
    from benchmarks import nanogpt

    checkout = tmp_path / "nanoGPT"
    (checkout / "config").mkdir(parents=True)
    (checkout / "train.py").write_text(FAKE_NANOGPT)
    for name in ("model.py", "configurator.py", "config/train_shakespeare_char.py"):
        (checkout / name).write_text("")
    text = "To be, or not to be: that is the question.\n" * 50
    folder = nanogpt.nanogpt_folder(checkout, text, tmp_path / "work")
    shape = {**nanogpt.SHAPES["shakespeare_char"], "batch": 4, "block": 8}
    result = nanogpt.run_nanogpt(folder, shape, 200, {}, limit=60, quick=False)
    assert result["status"] == 0 and result["steps"] == 200 and result["val_loss"] == 2.05
    # 10 steps of 32 tokens between logs 0.01 s apart in the second half: about 32,000 tokens/s, not the first
    # half's 16,000
    assert 20_000 < result["steady_tokens_per_second"] < 33_000
    with pytest.raises(SystemExit, match="not a nanoGPT checkout"):
        nanogpt.nanogpt_folder(tmp_path / "elsewhere", text, tmp_path / "work2")
    assert not list(temporary.iterdir()), "nanoGPT's checkpoint folder was left in TMPDIR"


def test_the_courses_run_beside_nanogpt_is_read_and_leaves_no_folder(temporary, monkeypatch):
    from benchmarks import nanogpt

    def trained(command, cwd, environment, limit):
        out = Path(command[command.index("--out") + 1])
        rates = [1000.0, 3000.0, 4000.0, 5000.0]
        (out / "metrics.jsonl").write_text("".join(json.dumps({"tokens_per_second": r}) + "\n" for r in rates))
        (out / "checkpoint.pt").write_text("weights")
        return [(1.0, json.dumps({"steps": 20, "val_loss": 1.5}))], 0

    monkeypatch.setattr(nanogpt, "timed_lines", trained)
    result = nanogpt.run_course(nanogpt.SHAPES["gpt2"], 20, {}, limit=60, quick=True)
    assert result["status"] == 0 and result["steps"] == 20 and result["steady_tokens_per_second"] == 4500.0
    assert not list(temporary.iterdir()), "the course's run folder was left in TMPDIR"


def test_a_training_steps_run_folder_is_read_then_removed(tmp_path, temporary, monkeypatch):
    def run_step(name, command, limit, logs, environment):
        out = Path(command[command.index("--out") + 1])
        (out / "metrics.jsonl").write_text(json.dumps({"tokens_per_second": 2000.0}) + "\n")
        (out / "checkpoint.pt").write_text("weights")
        return {"command": "x", "seconds": 1.0, "status": 0, "result": {"steps": 20}}

    monkeypatch.setattr(gpu, "steps", lambda quick, device, nanogpt=None: [("train-fp32", [*gpu.TRAINER], 60)])
    monkeypatch.setattr(gpu, "run_step", run_step)
    assert gpu.main(["--quick", "--out", str(tmp_path / "out")]) == 0
    written = json.loads((tmp_path / "out" / "gpu.json").read_text())
    assert written["steps"]["train-fp32"]["result"]["steady_tokens_per_second"] == 2000.0
    assert not list(temporary.iterdir()), "the training step's run folder was left in TMPDIR"


def test_the_course_trains_nanogpts_model_beside_it_and_its_own_in_the_ablation():
    """nanoGPT's default model has no biases: beside it the course trains the same (--no-bias); the ablation's
    extra run has the biases of make train's default model, and its status counts as every other run's."""
    from benchmarks import nanogpt

    shape = nanogpt.SHAPES["gpt2"]
    beside = nanogpt.course_command(shape, 10, "OUT", [], quick=False, compiled=True)
    assert "--no-bias" in beside and "--bias" not in beside and "--compile" in beside
    own = nanogpt.course_command(shape, 10, "OUT", ["tf32"], quick=True, compiled=True, biases=True)
    assert "--bias" in own and "--no-bias" not in own and own[-2:] == ["--without", "tf32"]
    assert beside[1:3] == ["-m", "attention_course.trainer"]
    parse_args(beside[3:])  # options that make train takes
    row = {"course": {"status": 0}, "with_biases": {"status": 1}, "without": {"tf32": {"status": 0}}}
    assert [run.get("status") for run in nanogpt.runs_of(row)] == [0, None, 1, 0]  # nanoGPT's: not run


def test_the_profile_gives_the_hosts_time_in_each_part_of_a_step(capsys):
    from attention_course.trainer.steps import PHASES
    from benchmarks import profile_step

    tiny = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch-size", "4"]
    assert profile_step.main(["--warmup-steps", "1", "--steps", "2", "--", *tiny, "--device", "cpu"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert list(figures["host_ms_by_phase"]) == list(PHASES)
    assert all(ms > 0 for ms in figures["host_ms_by_phase"].values())
    assert sum(figures["host_ms_by_phase"].values()) < figures["step_ms"]
