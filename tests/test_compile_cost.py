"""benchmarks.compile_cost: the overhead and break-even step of each run, from figures a run prints."""

from __future__ import annotations

import json

import pytest

from benchmarks import compile_cost


def run(train_seconds, tokens_per_second, steady, steps=100):
    figures = {"status": 0, "steps": steps, "train_seconds": train_seconds, "tokens_per_second": tokens_per_second}
    return compile_cost.with_overhead({**figures, "steady_tokens_per_second": steady})


def test_the_overhead_is_the_time_beyond_the_steady_rate():
    # 10,000 tokens in 12 s, at a steady 1,000 tokens/s: 10 s of steady training, 2 s of overhead
    assert run(12.0, 10_000 / 12, 1000)["overhead_seconds"] == pytest.approx(2.0)
    assert "overhead_seconds" not in compile_cost.with_overhead({"status": 1})


def test_a_compiled_run_breaks_even_where_its_faster_steps_have_paid_its_overhead():
    fp32 = run(11.0, 10_000 / 11, 1000)  # 100 tokens a step: 0.1 s a step, 1 s of overhead
    compiled = run(25.0, 10_000 / 25, 4000)  # 0.025 s a step, 22.5 s of overhead
    # 21.5 s behind, 0.075 s gained a step: ahead after 287 steps
    assert compile_cost.break_even_step(compiled, fp32) == 287
    slower = run(30.0, 10_000 / 30, 900)
    assert compile_cost.break_even_step(slower, fp32) is None  # never: its steps are slower
    ahead = run(3.0, 10_000 / 3, 4000)  # 0.5 s of overhead, less than float32's
    assert compile_cost.break_even_step(ahead, fp32) == 0  # ahead from the start
    assert compile_cost.break_even_step({"status": "timeout"}, fp32) is None


def test_each_run_has_caches_of_its_own_but_a_warm_one_its_cold_runs(monkeypatch, capsys):
    seen = []

    def fake(options, caches, limit):
        seen.append((options, caches))
        compiled = "--compile" in options
        return {"status": 0, "steps": 100, "train_seconds": 25.0 if compiled else 11.0,
                "tokens_per_second": 400.0 if compiled else 10_000 / 11,
                "steady_tokens_per_second": 4000.0 if compiled else 1000.0}  # fmt: skip

    monkeypatch.setattr(compile_cost, "run_training", fake)
    assert compile_cost.main(["--steps", "100", "--", "--batch-size", "32"]) == 0
    caches = [folder for _, folder in seen]
    names = [name for name, _, _ in compile_cost.RUNS]
    assert len(set(caches)) == 4  # fp32, bf16, each cold run: empty; each warm run: its cold run's
    assert caches[names.index("compiled, warm")] == caches[names.index("compiled, cold")]
    assert caches[names.index("by layers, warm")] == caches[names.index("by layers, cold")]
    for options, _ in seen:
        assert options[:4] == ["--batch-size", "32", "--steps", "100"]
        if "--compile" in options:  # in bfloat16 unless --precision says otherwise
            assert options[-4:] == ["--compile-mode", "default", "--precision", "bf16"]
        else:
            assert "--compile-mode" not in options
    output = capsys.readouterr().out
    figures = json.loads(output.strip().splitlines()[-1])
    assert figures["break_even"]["compiled, cold"] == 287 and figures["compile_mode"] == "default"
    assert [run["name"] for run in figures["runs"]] == names  # a list, in order: a record's keys are sorted
    assert "compiled, cold" in output and "287" in output


def test_a_failed_run_fails_the_benchmark_and_records_nothing(monkeypatch, capsys):
    monkeypatch.setattr(compile_cost, "run_training", lambda options, caches, limit: {"status": 1, "tail": "boom"})
    monkeypatch.setattr(compile_cost, "record", lambda *a, **k: pytest.fail("recorded a failed run"))
    assert compile_cost.main(["--record"]) == 1
    assert "nothing recorded" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        compile_cost.main(["--steps", "0"])
