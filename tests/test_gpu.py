"""benchmarks/attention.py and benchmarks/gpu.py: chapter 8's measurements on a GPU, tried here on the tests' device."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks import attention, figures, gpu


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_every_implementation_computes_the_courses_causal_attention(device, dtype):
    generator = torch.Generator(device=device).manual_seed(1)
    q, k, v = torch.randn(3, 1, 2, 40, 16, device=device, generator=generator).to(attention.DTYPES[dtype]).unbind(0)
    reference = attention.attend("course", q.double(), k.double(), v.double())
    tolerance = 1e-5 if dtype == "fp32" else 3e-2
    ran = []
    for implementation in attention.IMPLEMENTATIONS:
        try:
            out = attention.attend(implementation, q, k, v)
        except RuntimeError:  # a back end that does not take this dtype or device
            continue
        ran.append(implementation)
        torch.testing.assert_close(out.double(), reference, atol=tolerance, rtol=tolerance, msg=implementation)
    assert {"course", "math"} <= set(ran)


def test_a_row_times_forward_and_backward_or_says_why_not(device):
    row = attention.measure("math", 32, "fp32", torch.device(device), heads=2, head_size=8, repeats=1)
    assert row["forward_ms"] > 0 and row["forward_backward_ms"] > 0
    assert ("peak_mib" in row) == (torch.device(device).type == "cuda")
    flash = attention.measure("flash", 32, "fp32", torch.device(device), heads=2, head_size=8, repeats=1)
    assert "forward_ms" in flash or flash["error"] == "not available"


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
    assert name == "gpu" and command.startswith("python -m benchmarks.gpu, then python -m benchmarks.gpu --record")
    assert kwargs == {"commit": "bbb", "measured": {"day": "2026-11-26", "machine": "1 × H200"}}
    steps = figures["steps"]
    assert steps["shakespeare"]["result"]["steps"] == 5000 and steps["shakespeare"]["commit"] == "aaa"
    assert steps["generate"]["commit"] == "aaa" and steps["attention"]["result"]["rows"] == []  # its own, finished
    assert "commit" not in steps["tests"] and "pretrained" not in steps  # unfinished in both runs
    (tmp_path / "gpu.json").write_text(json.dumps({"device": "H100", "steps": before}))
    with pytest.raises(SystemExit, match="measured on H100, not H200"):
        gpu.main(["--record", str(tmp_path / "record.json"), "--fill-from", str(tmp_path / "gpu.json"), "aaa"])
