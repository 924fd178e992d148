r"""A class under attack, graded to the end: the attacks of issues 37 and 56, in chapters 2 to 7.

    make bench-attacks                                   # 20 students a chapter, JOBS 2
    make bench-attacks ARGS="--per-chapter 6 --jobs 1"
    make bench-attacks ARGS="--code /path/to/an/older/checkout --only attacked"

Each chapter's class is graded twice by the command that ``make grade`` runs (``python -m autograder.cli.grade``,
in a process of its own): once with every student honest (the reference answers), once with each of the
chapter's attacks made by one student of the class in place of an honest one. It prints, per chapter, the
grader's peak memory (its own process's largest resident set; the sandboxes are not the grader) and seconds for
both classes, and checks:

- every honest student gets full marks, in both classes;
- each attacker's attacked test cells score 0 (an attacker whose code is right gets full marks: the MathJax
  attacker, with a feedback page whose MathJax runs in its safe mode, and the one whose notebook moves the setup
  cell's metadata);
- the grader's peak memory grows by at most 10% over the honest class's;
- the attacked class takes at most the attackers' own time limits (:data:`TOTAL_SECONDS` each), divided by
  ``JOBS``, longer than the honest one.

The attacks: sizes handed to the grader's stand-ins as a NumPy int (ch04), a 0-d tensor (ch05) and a
one-element tensor (ch06), each asking the grader for a table or mask of gigabytes; stand-in calls queued all at
once, ahead of the grader's answers (ch03); a "ballast" that the notebook holds, frees during the memory-checked
call and takes back (ch07); a student's TeX that would make a ``javascript:`` link over the whole page, a live
link and student CSS through ``\mmlToken``'s attributes, and requests from ``\bbox`` and colours on the
feedback page (ch02); a softmax that records its inputs and prints them in its error (ch02); a speculative
decoder that raises the call-limited model's budget (ch06); and the setup cell's nbgrader metadata moved onto a
markdown cell at the end, which once made ``nbgrader autograde`` grade the notebook again, unbounded (ch03).
``--code`` grades with another checkout's grader (a git worktree of an older commit, in this environment): the
figures before a fix.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nbformat.v4 import new_markdown_cell

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.grading.classroom import fill, make_course, solution_bodies, submit
from tests.attacks import RECORDED_INPUTS

MEMORY_GROWTH = 0.10  # the grader's peak memory, attacked class over honest class
TOTAL_SECONDS = 600.0  # one submission's whole grading (autograder.grading.notebook.TOTAL_SECONDS)

# Finds the worker's serve() (its channel to the grader) from inside the student's code, as a forger would.
WORKER = """
def _serving():
    import sys
    frame = sys._getframe()
    while frame is not None and not (frame.f_code.co_name == "serve" and "grader" in frame.f_locals):
        frame = frame.f_back
    return frame.f_locals
"""

QUEUED_FORWARD = """
    def forward(self, query, key, value, mask=None):
        # Queues 400 calls of the grader's split_heads at once, ahead of any answer, then returns zeros.
        from autograder.sandbox import values, wire

        serving = _serving()
        asked = wire.StandInCall(
            "call", "split_heads", values.encode([query.detach(), self.num_heads]), values.encode({})
        )
        for _ in range(400):
            wire.send(serving["replies"], wire.Callback(serving["grader"].serving, asked))
        batch, length, _ = query.shape
        return torch.zeros_like(query), torch.zeros(batch, self.num_heads, length, key.size(1))
"""


def queued_callbacks() -> str:
    """The reference MultiHeadAttention with QUEUED_FORWARD for its forward."""
    reference = solution_bodies("ch03_multi_head")["MultiHeadAttention"]
    return WORKER + reference[: reference.index("    def forward(")] + QUEUED_FORWARD.lstrip("\n")


NUMPY_SIZE = '''
def decoder_self_attention_mask(tgt, pad_id):
    """Asks the grader's causal_mask for 30000 positions, as a NumPy int."""
    causal = causal_mask(np.int64(30000), device=tgt.device)[: tgt.size(1), : tgt.size(1)]
    keys = padding_mask(tgt, pad_id)
    return causal[None, None, :, :] & keys[:, None, None, :]
'''

ZERO_D_SIZE = '''
class PositionalEncoding(nn.Module):
    """Asks the grader's sinusoidal_positional_encoding for ten million positions, as a 0-d tensor."""

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        table = sinusoidal_positional_encoding(torch.tensor(10_000_000), d_model)
        self.register_buffer("pe", table[:max_len])

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)].to(x.dtype))
'''

ONE_ELEMENT_SIZE = '''
@torch.no_grad()
def greedy_decode(model, src, src_mask, bos_id, eos_id, max_len):
    """Asks the grader's causal_mask for 20000 positions, as a one-element tensor, at every step."""
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    for _ in range(max_len):
        steps = ys.size(1)
        mask = causal_mask(torch.tensor([20000]), device=src.device)[:steps, :steps]
        logits = model.decode(ys, memory, mask, src_mask)
        ys = torch.cat([ys, logits[:, -1].argmax(dim=-1)[:, None]], dim=1)
    return ys[:, 1:]
'''

BALLAST = '''
_ballast = torch.ones(2304 * 2**18)  # 2.25 GiB, held by the notebook


def online_softmax_attention(q, k, v, block_size, mask=None):
    """The whole score matrix, in the room the ballast leaves while it is freed."""
    global _ballast
    _ballast = None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    del scores
    output = torch.nan_to_num(weights, nan=0.0) @ v
    del weights
    _ballast = torch.ones(2304 * 2**18)
    return output
'''

MATHJAX_LINK = (
    r"My notes: $\href{javascript:alert(document.cookie)}{\style{position:fixed;top:0;left:0;width:100%;"
    r"height:100%;opacity:0.01}{\text{attention}}}$ is all you need."
)
MATHJAX_TOKENS = (
    r"My notes: $\mmlToken{mtext}[href='javascript:alert(document.domain)',mathsize='3em']{attention}$, "
    r"$\mmlToken{mi}[style='position:fixed;top:0;left:0;width:100%;height:100%']{x}$, "
    r"$\bbox[background:url(https://example.com/beacon)]{y}$ and "
    r"$\mmlToken{mi}[mathbackground='url(https://example.com/beacon)']{z}$."
)
SAFE_MATHJAX = "safeOptions: {allow: {URLs: 'none'"  # in the feedback page's MathJax configuration


def moved_setup(nb):
    """``nb`` with the setup cell's nbgrader metadata moved onto a markdown cell at the end."""
    setup = next(cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("grade_id") == "setup")
    notes = new_markdown_cell("My notes")
    notes.metadata["nbgrader"] = setup.metadata.pop("nbgrader")
    nb.cells.append(notes)
    return nb


def bug_code(assignment: str, name: str) -> str:
    """The code of the wrong answer ``name`` of ``tests/buggy``'s module of ``assignment``."""
    bugs = importlib.import_module(f"tests.buggy.{assignment}").BUGS
    return next(bug.code for bug in bugs if bug.name == name)


@dataclass(frozen=True)
class Attack:
    assignment: str
    what: str
    item: str | None  # the solution cell replaced (None: the code is the reference's)
    code: str | None
    cells: tuple[str, ...] | None = None  # the test cells it must lose (None: all of its item's, tests/buggy's map)
    markdown: str | None = None  # a markdown cell of the student's, added at the end
    reshape: Callable | None = None  # what the attacker does to the notebook's cells


ATTACKS = [
    Attack("ch02_scaled_dot_product", "a javascript: link in the student's TeX", None, None, markdown=MATHJAX_LINK),
    Attack("ch02_scaled_dot_product", "links, CSS and beacons in TeX's tokens", None, None, markdown=MATHJAX_TOKENS),
    # its first calls are right: the cells it loses depend on how many calls each makes, so none is required
    Attack("ch02_scaled_dot_product", "inputs recorded, printed in an error", "softmax", RECORDED_INPUTS, cells=()),
    Attack("ch03_multi_head", "400 stand-in calls queued at once", "MultiHeadAttention", queued_callbacks()),
    Attack("ch03_multi_head", "the setup cell's metadata moved", None, None, reshape=moved_setup),
    Attack("ch04_masking", "a size as a NumPy int", "decoder_self_attention_mask", NUMPY_SIZE),
    Attack("ch05_positional_encoding", "a size as a 0-d tensor", "PositionalEncoding", ZERO_D_SIZE),
    Attack("ch06_transformer", "a size as a one-element tensor", "greedy_decode", ONE_ELEMENT_SIZE),
    Attack(
        "ch06_transformer",
        "the call-limited model's budget raised",
        "speculative_decode",
        bug_code("ch06_transformer", "speculative_raises_call_budget"),
        cells=("test_speculative_calls",),
    ),
    Attack(
        "ch07_efficient_attention",
        "a ballast freed during the call",
        "online_softmax_attention",
        BALLAST,
        cells=("test_online_memory",),  # its values are right: only the memory test is lost
    ),
]


def zeroed_cells(attack: Attack) -> tuple[str, ...]:
    """The test cells the attacker must lose."""
    if attack.cells is not None or attack.item is None:
        return attack.cells or ()
    return tuple(importlib.import_module(f"tests.buggy.{attack.assignment}").TESTS[attack.item])


def attacker_notebook(attack: Attack):
    answers = {} if attack.item is None else {attack.item: attack.code}
    if attack.item is not None:
        assert attack.item in solution_bodies(attack.assignment), attack.item
    nb = fill(attack.assignment, answers)
    if attack.markdown is not None:
        nb.cells.append(new_markdown_cell(attack.markdown))
    return nb if attack.reshape is None else attack.reshape(nb)


def grade_class(folder: Path, attacks: list[Attack], students: int, attacked: bool, jobs: int, code: Path) -> dict:
    """Grade one chapter's class in a process of its own, ``attacks[i]`` made by student ``i`` where ``attacked``:
    its peak memory, seconds, grades (rows by student) and the attackers' feedback pages."""
    course = make_course(folder)
    assignment = attacks[0].assignment
    honest = fill(assignment)
    for i in range(students):
        nb = attacker_notebook(attacks[i]) if attacked and i < len(attacks) else honest
        submit(course, f"student{i:02d}", assignment, nb)
    measured = (
        "import resource, runpy, sys\n"
        "code = 0\n"
        "try:\n"
        "    runpy.run_module('autograder.cli.grade', run_name='__main__')\n"
        "except SystemExit as exit:\n"
        "    code = exit.code\n"
        "print('PEAK_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    argv = [assignment, "--root", str(course), "--jobs", str(jobs)]
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-c", measured, *argv],
        cwd=code,
        env={**os.environ, "PYTHONPATH": str(code)},
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - started
    peak = next((int(line.split()[1]) for line in run.stderr.splitlines() if line.startswith("PEAK_KB")), None)
    rows = {}
    grades = course / "grades" / f"{assignment}.csv"
    if grades.exists():
        with grades.open() as f:
            rows = {row["student"]: row for row in csv.DictReader(f)}
    pages = [sorted((course / "feedback" / f"student{i:02d}" / assignment).glob("*.html")) for i in range(students)]
    return {
        "exit": run.returncode,
        "peak_mb": None if peak is None else peak / 1024,
        "seconds": seconds,
        "rows": rows,
        "feedback": [page[0].read_text() if page else "" for page in pages],
        "tail": run.stderr[-1500:],
    }


def verdicts(attacks: list[Attack], graded: dict, attacked: bool, students: int, full: float | None) -> list[str]:
    """What is wrong with a class's grading (nothing: an empty list). Full marks are the honest students' score
    (the reference answers'; ``full``, from the honest class, where it was graded): the written answers await the
    instructor, and the CSV counts them in max_score."""
    problems = []
    rows = graded["rows"]
    if graded["exit"] != 0 or len(rows) != students:
        return [f"grading ended with exit {graded['exit']} and {len(rows)} of {students} grades: {graded['tail']}"]
    ordered = sorted(rows.items())
    if full is None:  # the honest students' best
        full = max(float(row["score"] or 0) for i, (_, row) in enumerate(ordered) if not attacked or i >= len(attacks))
    for i, (student, row) in enumerate(ordered):
        attack = attacks[i] if attacked and i < len(attacks) else None
        if attack is not None and attack.item is not None:
            kept = {cell: row[cell] for cell in zeroed_cells(attack) if float(row[cell] or 0) != 0}
            if kept:
                problems.append(f"the attacker ({attack.what}) kept points in {kept}")
        elif float(row["score"] or 0) != full:
            who = f" (attacker: {attack.what})" if attack else ""
            problems.append(f"{student}{who}: {row['score']}, not the reference's {full:g}")
        if attack is not None and attack.markdown is not None and SAFE_MATHJAX not in graded["feedback"][i]:
            problems.append(f"{student}'s feedback page has no MathJax in its safe mode")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-chapter", type=int, default=20, help="students in each chapter's class")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--code", type=Path, default=COURSE_ROOT, help="the checkout whose grader grades")
    parser.add_argument("--only", choices=("attacked", "honest"), help="grade one of the two classes only")
    parser.add_argument("--chapters", nargs="*", help="assignments to grade (default: chapters 2 to 7)")
    args = parser.parse_args()
    chapters = {}
    for attack in ATTACKS:
        if not args.chapters or attack.assignment in args.chapters:
            chapters.setdefault(attack.assignment, []).append(attack)
    if any(len(attacks) >= args.per_chapter for attacks in chapters.values()):
        parser.error(f"--per-chapter must leave honest students beside the attackers (up to {len(ATTACKS)} a class)")
    kinds = [k for k in (False, True) if args.only is None or args.only == ("attacked" if k else "honest")]
    failed = False
    print(f"{'assignment':<25} {'attacks':>7} {'honest MB':>9} {'attacked MB':>11} {'growth':>6} "
          f"{'honest s':>8} {'attacked s':>10}  verdict")  # fmt: skip
    for assignment, attacks in chapters.items():
        peaks, seconds, problems, full = {}, {}, [], None
        for attacked in kinds:
            with tempfile.TemporaryDirectory(prefix="attacked-class-", dir="/var/tmp") as folder:
                graded = grade_class(Path(folder), attacks, args.per_chapter, attacked, args.jobs, args.code)
            peaks[attacked], seconds[attacked] = graded["peak_mb"], graded["seconds"]
            problems += [
                f"{'attacked' if attacked else 'honest'} class: {p}"
                for p in verdicts(attacks, graded, attacked, args.per_chapter, full)
            ]
            if not attacked and graded["rows"]:  # the reference's score, full marks
                full = max(float(row["score"] or 0) for row in graded["rows"].values())
        growth = None if len(peaks) < 2 or None in peaks.values() else peaks[True] / peaks[False] - 1
        if growth is not None and growth > MEMORY_GROWTH:
            problems.append(f"the grader's peak grew by {growth:.0%}, more than {MEMORY_GROWTH:.0%}")
        allowed = len(attacks) * TOTAL_SECONDS / args.jobs
        if len(seconds) == 2 and seconds[True] - seconds[False] > allowed:
            problems.append(f"the attacks cost {seconds[True] - seconds[False]:.0f} s, more than {allowed:.0f} s")
        failed = failed or bool(problems)

        def shown(value, form=".0f"):
            return "-" if value is None else format(value, form)

        print(
            f"{assignment:<25} {len(attacks):>7} {shown(peaks.get(False)):>9} {shown(peaks.get(True)):>11} "
            f"{shown(growth, '.1%'):>6} {shown(seconds.get(False)):>8} {shown(seconds.get(True)):>10}  "
            f"{'ok' if not problems else '; '.join(problems)}",
            flush=True,
        )
        for attack in attacks:
            print(f"    {attack.what}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
