"""Chapter 11's sweep (benchmarks/flash_sweep.py, attention_course/kernels/sweep.py), tried on the CPU: its
configurations, the FLOPs and TFLOP/s it reports, the peaks it knows, its rows with a stand-in for do_bench (the
reference kernels run in Triton's interpreter), the record's table on the page or the page's sentence before one, and
the command without a GPU."""

from __future__ import annotations

import json
import types
from unittest import mock

import pytest
import torch

from attention_course.kernels import interpreter, sweep
from benchmarks import flash_sweep, gpu
from benchmarks.figures import ROOT
from benchmarks.replicate import code_cells


@pytest.fixture(scope="module")
def kernels():
    """The reference kernels, in Triton's interpreter."""
    interpreter.load_triton(interpret=True)
    from attention_course.solutions import ch11_flash_attention

    return ch11_flash_attention


def test_the_sweep_covers_every_length_head_size_dtype_and_mask_at_flashattention_2s_shape():
    plan = sweep.configurations()
    assert len(plan) == 5 * 2 * 2 * 2 == len({tuple(c.values()) for c in plan})
    assert {c["length"] for c in plan} == {1024, 2048, 4096, 8192, 16384}
    assert {c["head_size"] for c in plan} == {64, 128} and {c["causal"] for c in plan} == {False, True}
    assert {c["dtype"] for c in plan} == {"float16", "bfloat16"}
    assert all(c["batch"] * c["length"] == 16384 and c["heads"] * c["head_size"] == 2048 for c in plan)
    [huge] = sweep.configurations([32768], [4096], ["float16"], [True])
    assert (huge["batch"], huge["heads"]) == (1, 1)  # one sequence and one head at least
    bad_arguments = {"lengths": {"lengths": [0]}, "head_sizes": {"head_sizes": []}, "dtypes": {"dtypes": ["fp32"]}}
    for name, bad in bad_arguments.items():
        with pytest.raises(ValueError, match=name):
            sweep.configurations(**bad)


def test_flops_are_four_l_squared_d_a_head_halved_when_causal_and_three_and_a_half_times_with_the_backward():
    full = {"batch": 2, "heads": 3, "length": 1024, "head_size": 64, "causal": False}
    assert sweep.pass_flops(full, "forward") == 4 * 2 * 3 * 1024**2 * 64
    assert sweep.pass_flops({**full, "causal": True}, "forward") == 2 * 2 * 3 * 1024**2 * 64
    assert sweep.pass_flops(full, "forward_backward") == 3.5 * sweep.pass_flops(full, "forward")
    assert sweep.tflops(3e12, 1000.0) == 3.0 and sweep.tflops(1e9, 1e-3) == 1000.0
    with pytest.raises(ValueError, match="milliseconds"):
        sweep.tflops(1e9, 0.0)
    with pytest.raises(ValueError, match="which"):
        sweep.pass_flops(full, "backward")


def test_the_peak_is_known_by_the_gpus_name_or_not_at_all():
    assert flash_sweep.peak_tflops("NVIDIA H200") == pytest.approx(989.5)
    assert flash_sweep.peak_tflops("NVIDIA H100 80GB HBM3") == pytest.approx(989.5)
    assert flash_sweep.peak_tflops("NVIDIA A100-SXM4-80GB") == pytest.approx(312)
    assert flash_sweep.peak_tflops("NVIDIA H100") is None and flash_sweep.peak_tflops("Some GPU") is None


def two_stage_kernels(reference, calls):
    """The reference kernels as a module whose launchers take ``two_stage=`` (the hook of the tutorial's loop)."""

    def forward(q, k, v, causal=False, block_q=16, block_k=16, two_stage=True):
        calls.append(("forward", two_stage))
        return reference.flash_attention_forward(q, k, v, causal, block_q, block_k)

    def backward(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
        calls.append(("backward", causal))
        return reference.flash_attention_backward(q, k, v, output, lse, grad_output, causal, block_q, block_k)

    return types.SimpleNamespace(flash_attention_forward=forward, flash_attention_backward=backward)


def tiny(causal):
    return {**sweep.configurations([32], [16], ["float16"], [causal])[0], "batch": 1, "heads": 2}


@pytest.mark.parametrize("two_stages", [False, True])
def test_a_sweep_with_a_stand_in_timer_gives_each_pass_its_tflops_and_share_of_the_peak(kernels, two_stages):
    calls, timed = [], []

    def timer(fn, inputs):  # runs the call once, as do_bench would many times, and says 2 ms
        fn()
        timed.append(fn)
        assert all(t.requires_grad for t in inputs)
        return 2.0

    used = two_stage_kernels(kernels, calls) if two_stages else kernels
    plan = [tiny(False), tiny(True)]
    rows, not_reached = flash_sweep.run(plan, sweep.IMPLEMENTATIONS, timer, torch.device("cpu"), 100.0, used)
    assert not_reached == 0 and len(rows) == len(timed)
    made = {(r["implementation"], r["pass"], r["causal"]) for r in rows}
    ours = {(name, p, c) for name in ("kernel", "flash", "math") for p in sweep.PASSES for c in (False, True)}
    one_loop = {("kernel_one_loop", p, True) for p in sweep.PASSES} if two_stages else set()
    assert made == ours | one_loop  # one loop: causal rows only, and only where the kernels have two stages
    for row in rows:
        if row["implementation"] == "flash" and "error" in row:  # PyTorch's FlashAttention may refuse the CPU
            assert row["error"] == "not available"
            continue
        want = sweep.pass_flops(row, row["pass"]) / 2e-3 / 1e12
        assert row["ms"] == 2.0 and row["tflops"] == pytest.approx(want, abs=0.01)
        assert row["peak_fraction"] == pytest.approx(row["tflops"] / 100, abs=1e-4)
    if two_stages:  # the kernel row asks for the two stages, the one-loop row for one; the backward, without the
        assert {("forward", False), ("forward", True)} <= set(calls)  # keyword, is called without it
        assert {("backward", False), ("backward", True)} <= set(calls)
    assert json.loads(json.dumps(rows)) == rows  # the record's rows: plain JSON


def test_a_row_that_runs_out_of_memory_or_is_refused_says_so_and_the_budget_stops_the_sweep():
    configuration = tiny(True)
    inputs = flash_sweep.make_inputs(configuration, torch.device("cpu"))

    def failing(error):
        def timer(fn, inputs):
            raise error

        return timer

    def measured(error):
        return flash_sweep.measure(configuration, "math", "forward", inputs, failing(error), None)

    assert measured(torch.OutOfMemoryError("CUDA out of memory"))["error"] == "out of memory"
    assert measured(RuntimeError("No available kernel"))["error"] == "not available"
    assert measured(KeyError("shared memory"))["error"] == "failed: KeyError"
    longer = {**configuration, "length": 4096, "head_size": 128}  # timed without running: its FLOPs alone count
    row = flash_sweep.measure(longer, "math", "forward", inputs, lambda fn, inputs: 4.0, None)
    assert row["tflops"] == round(2 * 2 * 4096**2 * 128 / 4e-3 / 1e12, 2)
    assert "peak_fraction" not in row  # a GPU whose peak is not known: TFLOP/s alone
    ticks = iter(range(100))
    rows, not_reached = flash_sweep.run([tiny(False)] * 3, ["math"], lambda fn, inputs: 1.0, torch.device("cpu"),
                                        None, budget=2.5, clock=lambda: next(ticks))  # fmt: skip
    assert (len(rows), not_reached) == (4, 1)


def result(peak=989.5, one_loop=True):
    """A recorded sweep as benchmarks.flash_sweep prints it, at two lengths."""
    rows = []
    for length in (1024, 2048):
        for name in ("kernel", "flash", "math", *(["kernel_one_loop"] if one_loop else [])):
            for which in sweep.PASSES:
                configuration = {**sweep.configurations([length], [64], ["bfloat16"], [True])[0]}
                row = {**configuration, "implementation": name, "pass": which}
                if name == "math" and length == 2048:
                    row["error"] = "out of memory"
                else:
                    row.update(ms=1.0, tflops=312.0, **({"peak_fraction": 312 / peak} if peak else {}))
                rows.append(row)
    return {"device": "NVIDIA H200", "peak_tflops": peak, "rows": rows, "not_reached": 0}


def test_the_table_gives_tflops_and_the_share_of_the_peak_for_each_pass_and_implementation():
    table = sweep.sweep_table(result())
    lines = table.splitlines()
    assert lines[0] == (
        "| dtype | d | mask | L | forward: kernel | forward: one loop | forward: flash | forward: math "
        "| fwd+bwd: kernel | fwd+bwd: one loop | fwd+bwd: flash | fwd+bwd: math |"
    )
    assert len(lines) == 2 + 2
    assert lines[2] == "| bfloat16 | 64 | causal | 1,024 |" + " 312 (32%) |" * 8
    assert lines[3].count("out of memory") == 2
    plain = sweep.sweep_table(result(peak=None, one_loop=False))
    assert "one loop" not in plain and "%" not in plain and "| 312 |" in plain
    summary = sweep.sweep_summary(result(), day="2026-11-30")
    assert summary.startswith("Measured on one NVIDIA H200 (2026-11-30)") and "990 TFLOP/s" in summary
    assert summary.endswith(table) and "its peak not known" in sweep.sweep_summary(result(peak=None))


def page_shows(record: dict, tmp_path) -> tuple[str, list[str]]:
    """What chapter 11's sweep cells display, the record (figures.json) being ``record``: the text, and the alt text
    of each figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    (tmp_path / "benchmarks").mkdir(exist_ok=True)
    (tmp_path / "benchmarks" / "figures.json").write_text(json.dumps(record))
    page = (ROOT / "book" / "ch11_flash_attention.md").read_text()
    cells = [code for code in code_cells(page) if "sweep_summary(" in code or "SWEEP_NAMES.items()" in code]
    assert len(cells) == 2, "chapter 11's cells of the sweep: its summary and its figure"
    shown, figures = [], []

    def show_figure(fig, name, alt, caption):
        figures.append(alt)
        plt.close(fig)

    namespace = {"display": shown.append, "Markdown": str, "plt": plt}
    namespace["show_figure"] = show_figure
    with mock.patch("attention_course.records.course_repository", return_value=tmp_path):
        for cell in cells:
            exec(compile(cell, "ch11_flash_attention.md", "exec"), namespace)  # the course's own page
    [text] = shown
    return text, figures


def test_the_page_shows_the_recorded_sweep_or_a_readers_sentence_before_one(tmp_path):
    recorded = {"gpu": {"day": "2026-11-30", "figures": {"steps": {"flash-sweep": {"status": 0, "result": result()}}}}}
    text, figures = page_shows(recorded, tmp_path)
    assert text == sweep.sweep_summary(result(), day="2026-11-30")
    assert len(figures) == 1 and "NVIDIA H200 in bfloat16, heads of 64 features, causal" in figures[0]
    empty_steps = ({}, {"steps": {}}, {"steps": {"flash-sweep": {}}})
    for before in ({"gpu": {"figures": figures}} for figures in empty_steps):
        assert page_shows(before, tmp_path) == (sweep.NOT_MEASURED, [])
    for word in ("make", "figures.json", "bench-gpu", "benchmarks", "record"):
        assert word not in sweep.NOT_MEASURED


def test_without_a_cuda_gpu_the_commands_say_so_and_measure_nothing(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    recorded = []
    monkeypatch.setattr(gpu, "record", lambda *args, **kwargs: recorded.append(args))
    assert flash_sweep.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    assert gpu.main([]) == 2 and not recorded
    assert "measures on a CUDA GPU, and this machine has none" in capsys.readouterr().err
    assert "flash-sweep" not in {name for name, _, _ in gpu.steps(True, "cpu")}
    assert "flash-sweep" in {name for name, _, _ in gpu.steps(False, "cuda")}
