"""While `make book` runs a long cell, its progress line says what the cell is doing: the last line the cell has
shown (course_site.progress.latest_line), a training loop's epoch or step, printed or in a display updated in place
(the course's ``train`` and its bar).

Proven with barriers, not clocks: each step of a page's loop waits until the build's progress line has named it,
which the test, reading the build's output as it comes, answers with a mark in the page's folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import nbformat

from attention_course.tooling.notebooks import COURSE_ROOT
from course_site import progress as book_progress
from tests.support.myst import HEADER

CONFIG = """\
title: Progress
only_build_toc_files: true
execute:
  execute_notebooks: cache
  cache: _build/.jupyter_cache
  timeout: 300
"""
WAIT = 120  # seconds a step waits for its mark at most, then fails the page (the build said nothing of it)
WAITS = f"""\
import pathlib, time


def wait_for(mark):
    deadline = time.monotonic() + {WAIT}
    while not pathlib.Path("marks", mark).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the build's progress never named {{mark}}")
        time.sleep(0.05)"""
PRINTS = """\
for epoch in range(1, 4):
    print(f"epoch {epoch}/3, loss {1 / epoch:.3f}")
    wait_for(f"epoch-{epoch}")"""
UPDATES = """\
from IPython.display import Pretty, display

shown = display(Pretty("step 0/3"), display_id=True)
for step in range(1, 4):
    shown.update(Pretty(f"step {step}/3 of the loop"))
    wait_for(f"step-{step}")"""
TRAINS = """\
import torch
from attention_course.basics.training import train

model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [torch.ones(4, 2)] * 3


def loss_fn(model, batch):
    wait_for("bar")  # the bar, drawn as training starts, named before the first step
    return model(batch).pow(2).mean()


losses = train(model, lambda: batches, loss_fn, optimizer, 3, "cpu", desc="tiny model")"""
# A progress line: the page, its cell, the time, and what the cell shows
LINE = re.compile(r"^\[book\] slow: cell (?P<cell>\d+)/4 \([^)]*\)(?:: (?P<doing>.*))?$")
MARKS = [
    (re.compile(r"^epoch (\d)/3, loss \d\.\d{3}$"), "epoch-{}"),
    (re.compile(r"^step (\d)/3 of the loop$"), "step-{}"),
    (re.compile(r"^tiny model: 0% 0/3 \[00:00<\?\]$"), "bar"),
]


def test_a_long_cells_progress_line_says_its_epoch_or_step(tmp_path):
    (tmp_path / "_config.yml").write_text(CONFIG)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: slow\n")
    (tmp_path / "intro.md").write_text("# Progress\n\nNo code here.\n")
    cells = "".join(f"\n```{{code-cell}} ipython3\n{cell}\n```\n" for cell in (WAITS, PRINTS, UPDATES, TRAINS))
    (tmp_path / "slow.md").write_text(f"{HEADER}\n# Slow\n{cells}")
    (tmp_path / "marks").mkdir()
    env = {**os.environ, "PYTHONPATH": str(COURSE_ROOT)}
    command = [sys.executable, "-m", "course_site.execute", "--jobs", "1", "--progress", "0.2"]
    errors = tmp_path / "stderr.txt"  # a file, not a pipe that nobody reads while the page runs
    with errors.open("w") as stderr:
        build = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
    said: list[tuple[int, str]] = []
    try:
        for line in build.stdout:
            match = LINE.match(line.rstrip("\n"))
            if not match:
                continue
            said.append((int(match["cell"]), match["doing"] or ""))
            for pattern, mark in MARKS:
                if found := pattern.match(match["doing"] or ""):
                    (tmp_path / "marks" / mark.format(*found.groups())).touch()
    finally:
        build.wait(timeout=600)
    assert build.returncode == 0, f"{said}\n{errors.read_text()[-3000:]}"
    named = {doing for _, doing in said}
    assert {"epoch 1/3, loss 1.000", "epoch 2/3, loss 0.500", "epoch 3/3, loss 0.333"} <= named, said
    assert {f"step {step}/3 of the loop" for step in (1, 2, 3)} <= named, said
    assert {cell for cell, doing in said if doing.startswith("epoch")} == {2}, said
    assert {cell for cell, doing in said if doing.startswith("tiny model")} == {4}, said
    assert not any(doing for cell, doing in said if cell == 1), said  # a cell that shows nothing: no ": ..."


def cell_with(*outputs):
    return nbformat.v4.new_code_cell("train(...)", outputs=list(outputs))


def test_the_line_said_is_the_cells_last_line_of_text_without_the_bar_and_cut_when_long():
    bar = "no attention:  46%|█████████████▊                | 230/500 [01:10<01:20, loss=0.4321]"
    shown = nbformat.v4.new_output("display_data", data={"text/plain": bar, "image/png": "iVBORw0KGgo="})
    printed = nbformat.v4.new_output("stream", name="stdout", text="epoch 1/20\nepoch 2/20\n\n")
    assert book_progress.latest_line(cell_with(printed, shown)) == (
        "no attention: 46% 230/500 [01:10<01:20, loss=0.4321]"
    )
    assert book_progress.latest_line(cell_with(shown, printed)) == "epoch 2/20"
    assert book_progress.latest_line(cell_with(printed, nbformat.v4.new_output("error", ename="E"))) == "epoch 2/20"
    table = nbformat.v4.new_output("stream", name="stdout", text="| model | loss |\n")
    assert book_progress.latest_line(cell_with(table)) == "| model | loss |"  # a table's pipes are no bar
    assert book_progress.latest_line(cell_with()) == "" and book_progress.latest_line(None) == ""
    long = nbformat.v4.new_output("stream", name="stdout", text="x" * 300)
    assert book_progress.latest_line(cell_with(long)) == "x" * 97 + "..."
    page = nbformat.v4.new_notebook(cells=[cell_with(shown) for _ in range(44)])
    progress = book_progress.Progress("ch01_bahdanau", page)
    progress.started -= 150
    progress.cell_started(cell=cell_with(printed, shown), cell_index=11)
    assert progress.line() == (
        "[book] ch01_bahdanau: cell 12/44 (2 min 30 s): no attention: 46% 230/500 [01:10<01:20, loss=0.4321]"
    )


QUIET_RUN = """\
import contextlib, io, sys
from attention_course.trainer.command import main

arguments = [
    "--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch-size", "8", "--steps", "6",
    "--warmup", "2", "--log-every", "3", "--checkpoint-every", "6", "--eval-examples", "8", "--device", "cpu",
    "--out", "run",
]
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    final = main(arguments)
print("trained", final["steps"], "steps")"""


def test_the_training_program_run_with_its_printing_left_out_still_shows_its_step_in_a_notebook(tmp_path):
    """Chapters 6, 9 and 10 run the training program with what it prints kept aside; its progress bar is a display
    of the kernel's, which no redirected stream catches, so the reader and the build's progress line see its step
    (on main it went to the redirected standard error, and the cell showed nothing until it ended)."""
    from nbclient import NotebookClient

    page = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(QUIET_RUN)])
    NotebookClient(page, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = page.cells[0].outputs
    shown = [book_progress.latest_line(nbformat.v4.new_code_cell("", outputs=[o])) for o in outputs]
    assert shown[-1] == "trained 6 steps", shown
    assert any(re.fullmatch(r"dates on cpu: 100% 6/6 \[.*loss=\d+\.\d{3}.*\]", line) for line in shown), shown
    assert not [o for o in outputs if o.output_type == "stream" and o.name == "stderr"], outputs
