"""benchmarks.replicate repeats the book's one-seed experiments from the pages' own code, and the
chapters plot its records: the pages' cells are found and run, the records match the pages' code,
and the tables of the instructor guide are written from them."""

from __future__ import annotations

import subprocess

import pytest
import torch

from benchmarks import figures, replicate

PAGE = """\
# A page

```python
not_a_cell = 1
```

```{code-cell} ipython3
%matplotlib inline
import math
```

```{code-cell} ipython3
---
mystnb:
  figure:
    name: a-figure
---
WIDTH = 3
```

```{code-cell} ipython3
:tags: [remove-cell]
def area(side):
    return side * side
```
"""


def test_a_pages_code_cells_are_read_without_their_options_and_magics():
    assert replicate.code_cells(PAGE) == ["import math", "WIDTH = 3", "def area(side):\n    return side * side"]


def test_the_names_a_cell_defines_are_its_functions_classes_assignments_and_imports():
    code = "import torch.nn as nn\nfrom x import y\nA, B = 1, 2\nC = 3\ndef f(): pass\nclass K: pass\nprint(A)"
    assert replicate._defined(code) == {"nn", "y", "A", "B", "C", "f", "K"}


def test_chapter_1s_models_come_from_its_own_cells_and_train():
    threads = torch.get_num_threads()  # the chapter's first cell sets one thread on a CPU
    try:
        runs = replicate._bottleneck_width(16, seeds=1, steps=2, batch_size=8, test_size=200)
    finally:
        torch.set_num_threads(threads)
    assert [(run["width"], run["attention"], run["seed"]) for run in runs] == [(16, False, 0), (16, True, 0)]
    for run in runs:
        assert len(run["per_symbol"]) == len(run["exact"]) == 7  # buckets 4-7, ..., 28-31
        assert all(0 <= a <= 1 for a in run["per_symbol"] + run["exact"])
    assert runs[1]["parameters"] > runs[0]["parameters"]  # the attention module's weights


def test_a_name_that_no_cell_defines_is_an_error():
    with pytest.raises(LookupError, match="defines no NoSuchModel"):
        replicate.chapter_namespace("ch02_scaled_dot_product.md", {"NoSuchModel"})
    with pytest.raises(LookupError, match="assigns no literal to NO_SUCH"):
        replicate.chapter_constant("ch06_transformer.md", "NO_SUCH")


def test_the_records_the_chapters_plot_are_of_the_pages_current_experiments():
    records = figures.load()
    sweep = records["replicate-bottleneck"]["figures"]
    assert sorted({run["width"] for run in sweep["runs"]}) == list(replicate.BOTTLENECK_WIDTHS)
    assert len(sweep["buckets"]) == len(sweep["runs"][0]["per_symbol"])
    gqa = records["replicate-gqa"]["figures"]
    assert sorted({run["kv_heads"] for run in gqa["runs"]}, reverse=True) == list(replicate.GQA_KV_HEADS)
    tying = records["replicate-tying"]["figures"]
    recorded = [argument for argument in tying["arguments"] if argument != "--no-progress"]  # the bar hidden: no option
    assert recorded == replicate.chapter_constant("ch06_transformer.md", "TRAIN_ARGS"), (
        "chapter 6's TRAIN_ARGS changed: run `python -m benchmarks.replicate tying` again"
    )
    for name in ("replicate-bottleneck", "replicate-gqa", "replicate-tying"):
        seeds = [run["seed"] for run in records[name]["figures"]["runs"]]
        assert len(set(seeds)) >= 5, f"{name}: fewer than five seeds"


def _entry(runs: list[dict], **figures_) -> dict:
    return {
        "command": "python -m benchmarks.replicate x",
        "day": "2026-11-25",
        "commit": "abc1234",
        "machine": "a GPU",
        "figures": {"device": "NVIDIA H100", "runs": runs, **figures_},
    }


def test_the_tables_give_the_mean_and_range_over_seeds():
    runs = [
        {"width": 32, "attention": a, "seed": s, "parameters": 100 + a, "per_symbol": [p, p / 2]}
        for a in (False, True)
        for s, p in enumerate([0.5, 0.7] if not a else [0.9, 1.0])
    ]
    entry = _entry(runs, steps=600, batch_size=64, test_strings=1000, buckets=[[4, 7], [28, 31]])
    text = figures.RENDER["replicate-bottleneck"](entry)
    assert "| 32 | no attention | 100 | 0.600 (0.500-0.700) | 0.300 (0.250-0.350) |" in text
    assert "| 32 | attention | 101 | 0.950 (0.900-1.000) | 0.475 (0.450-0.500) |" in text
    gqa = [{"steps": 200, "kv_heads": 2, "seed": s, "test_loss": 0.1 * (s + 1), "exact_match": 0.5} for s in (0, 1)]
    text = figures.RENDER["replicate-gqa"](_entry(gqa, batch_size=64, test_dates=500))
    assert "| 200 | 2 | 0.1500 (0.1000-0.2000) | 50.0% (50.0%-50.0%) |" in text
    tying = [{"tied": t, "seed": 0, "parameters": 10, "exact_match": 1.0, "val_loss": 0.1} for t in (False, True)]
    text = figures.RENDER["replicate-tying"](_entry(tying, arguments=["--steps", "5"]))
    assert "`--steps 5`" in text and "| tied | 10 | 100.0% | 0.1000 |" in text


def test_every_experiment_has_a_table_before_it_runs():
    experiments = ("bottleneck", "gqa", "tying", "families")
    assert all(f"replicate-{name}" in figures.RENDER for name in experiments)
    families = [
        {"family": f, "steps": 300, "seed": s, "exact_match": 0.25 * (s + 1), "final_loss": 0.5}
        for f in ("decoder-only", "prefix-LM")
        for s in (0, 1)
    ]
    text = figures.RENDER["replicate-families"](_entry(families))
    assert "| 300 | decoder-only | 37.5% (25.0%-50.0%) | 0.5000 (0.5000-0.5000) |" in text
    assert text.index("decoder-only") < text.index("prefix-LM")  # the families in the order they ran


def test_an_experiment_without_a_table_is_refused_before_it_trains(monkeypatch, capsys):
    monkeypatch.delitem(figures.RENDER, "replicate-gqa")
    monkeypatch.setattr(replicate, "RENDER", figures.RENDER)
    monkeypatch.setattr(replicate, "gqa", lambda *args: pytest.fail("trained before the check"))
    with pytest.raises(SystemExit):
        replicate.main(["gqa"])
    assert "no table for replicate-gqa" in capsys.readouterr().err


def test_the_machine_names_its_gpu_or_says_there_is_none(monkeypatch):
    def no_smi(*args, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(figures.subprocess, "run", no_smi)
    assert figures._gpu() == "no GPU"

    def one_h100(*args, **kwargs):
        return subprocess.CompletedProcess(args, 0, stdout="NVIDIA H100 80GB HBM3\n", stderr="")

    monkeypatch.setattr(figures.subprocess, "run", one_h100)
    assert figures._gpu() == "1 × NVIDIA H100 80GB HBM3"
