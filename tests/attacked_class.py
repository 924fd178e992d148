"""A class under attack, graded to the end: issue 37's attacks, one in each of chapters 2 to 7.

    make bench-attacks                                   # 10 students a chapter, JOBS 2
    make bench-attacks ARGS="--per-chapter 4 --jobs 1"
    make bench-attacks ARGS="--code /path/to/an/older/checkout --only attacked"

Each chapter's class is graded twice by the command that ``make grade`` runs (``python -m autograder.cli.grade``,
in a process of its own): once with every student honest (the reference answers), once with one student of the
class attacking in place of an honest one. It prints, per chapter, the grader's peak memory (its own process's
largest resident set; the sandboxes are not the grader) for both classes and the difference, and checks:

- every honest student gets full marks, in both classes;
- the attacker's attacked test cells score 0 (the MathJax attacker, whose code is right, gets full marks and a
  feedback page whose MathJax leaves out the extension that makes links);
- the difference in the grader's peak memory is at most 250 MB.

The attacks: sizes handed to the grader's stand-ins as a NumPy int (ch04), a 0-d tensor (ch05) and a
one-element tensor (ch06), each asking the grader for a table or mask of gigabytes; stand-in calls queued all at
once, ahead of the grader's answers (ch03); a "ballast" that the notebook holds, frees during the memory-checked
call and takes back (ch07); and a student's TeX that would make a ``javascript:`` link over the whole page on
the feedback page (ch02). ``--code`` grades with another checkout's grader (a git worktree of an older commit,
in this environment): the figures before a fix.
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
from dataclasses import dataclass
from pathlib import Path

from nbformat.v4 import new_markdown_cell

from attention_course.notebooks import COURSE_ROOT
from autograder.classroom import fill, make_course, solution_bodies, submit

LIMIT_MB = 250  # the grader's peak memory, attacked class over honest class

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
SAFE_MATHJAX = "autoload: {html: []}"  # in the feedback page's MathJax configuration


@dataclass(frozen=True)
class Attack:
    assignment: str
    what: str
    item: str | None  # the solution cell replaced (None: the code is the reference's)
    code: str | None
    cells: tuple[str, ...] | None = None  # the test cells it must lose (None: all of its item's, tests/buggy's map)


ATTACKS = [
    Attack("ch02_scaled_dot_product", "a javascript: link in the student's TeX", None, None),
    Attack("ch03_multi_head", "400 stand-in calls queued at once", "MultiHeadAttention", queued_callbacks()),
    Attack("ch04_masking", "a size as a NumPy int", "decoder_self_attention_mask", NUMPY_SIZE),
    Attack("ch05_positional_encoding", "a size as a 0-d tensor", "PositionalEncoding", ZERO_D_SIZE),
    Attack("ch06_transformer", "a size as a one-element tensor", "greedy_decode", ONE_ELEMENT_SIZE),
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
    if attack.item is None:
        nb.cells.append(new_markdown_cell(MATHJAX_LINK))
    return nb


def grade_class(folder: Path, attack: Attack, students: int, attacked: bool, jobs: int, code: Path) -> dict:
    """Grade one chapter's class in a process of its own: its peak memory, seconds and grades (rows by student)."""
    course = make_course(folder)
    honest = fill(attack.assignment)
    for i in range(students):
        nb = attacker_notebook(attack) if attacked and i == 0 else honest
        submit(course, f"student{i:02d}", attack.assignment, nb)
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
    argv = [attack.assignment, "--root", str(course), "--jobs", str(jobs)]
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
    grades = course / "grades" / f"{attack.assignment}.csv"
    if grades.exists():
        with grades.open() as f:
            rows = {row["student"]: row for row in csv.DictReader(f)}
    feedback = sorted((course / "feedback" / "student00" / attack.assignment).glob("*.html"))
    return {
        "exit": run.returncode,
        "peak_mb": None if peak is None else peak / 1024,
        "seconds": seconds,
        "rows": rows,
        "feedback": feedback[0].read_text() if feedback else "",
        "tail": run.stderr[-1500:],
    }


def verdicts(attack: Attack, graded: dict, attacked: bool, students: int) -> list[str]:
    """What is wrong with a class's grading (nothing: an empty list)."""
    problems = []
    rows = graded["rows"]
    if graded["exit"] != 0 or len(rows) != students:
        return [f"grading ended with exit {graded['exit']} and {len(rows)} of {students} grades: {graded['tail']}"]
    for student, row in sorted(rows.items()):
        attacker = attacked and student == "student00"
        if attacker and attack.item is not None:
            kept = {cell: row[cell] for cell in zeroed_cells(attack) if float(row[cell] or 0) != 0}
            if kept:
                problems.append(f"the attacker kept points in {kept}")
        elif float(row["score"] or 0) != float(row["max_score"]):
            problems.append(f"{student}{' (attacker)' if attacker else ''}: {row['score']} of {row['max_score']}")
    if attacked and attack.item is None and SAFE_MATHJAX not in graded["feedback"]:
        problems.append("the attacker's feedback page has no MathJax configuration that leaves out links")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-chapter", type=int, default=10, help="students in each chapter's class")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--code", type=Path, default=COURSE_ROOT, help="the checkout whose grader grades")
    parser.add_argument("--only", choices=("attacked", "honest"), help="grade one of the two classes only")
    parser.add_argument("--chapters", nargs="*", help="assignments to grade (default: chapters 2 to 7)")
    args = parser.parse_args()
    chosen = [a for a in ATTACKS if not args.chapters or a.assignment in args.chapters]
    kinds = [k for k in (False, True) if args.only is None or args.only == ("attacked" if k else "honest")]
    failed = False
    print(f"{'assignment':<27} {'attack':<40} {'honest MB':>9} {'attacked MB':>11} {'diff':>6} {'s':>5}  verdict")
    for attack in chosen:
        peaks, seconds, problems = {}, 0.0, []
        for attacked in kinds:
            with tempfile.TemporaryDirectory(prefix="attacked-class-", dir="/var/tmp") as folder:
                graded = grade_class(Path(folder), attack, args.per_chapter, attacked, args.jobs, args.code)
            peaks[attacked], seconds = graded["peak_mb"], seconds + graded["seconds"]
            problems += [
                f"{'attacked' if attacked else 'honest'} class: {p}"
                for p in verdicts(attack, graded, attacked, args.per_chapter)
            ]
        diff = None if len(peaks) < 2 or None in peaks.values() else peaks[True] - peaks[False]
        if diff is not None and diff > LIMIT_MB:
            problems.append(f"the grader's peak grew by {diff:.0f} MB, more than {LIMIT_MB}")
        failed = failed or bool(problems)

        def shown(value):
            return "-" if value is None else f"{value:.0f}"

        print(
            f"{attack.assignment:<27} {attack.what:<40} {shown(peaks.get(False)):>9} {shown(peaks.get(True)):>11} "
            f"{shown(diff):>6} {seconds:>5.0f}  {'ok' if not problems else '; '.join(problems)}",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
