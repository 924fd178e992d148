"""``make similarity``'s report: the similar submissions of one assignment, found with copydetect.

The command is :mod:`autograder.cli.similarity`; this module compares and writes (:func:`similarity`) and sums up
(:func:`summary`).

For every ``submitted/<student>/<assignment>/<assignment>.ipynb`` it takes the code of the graded
answer cells only: the cells whose nbgrader ``grade_id`` is one of the solution cells of the
released exercise, in the notebook's order, except the understanding questions (tagged
``question``), whose short answers honest students write alike. Each student's answers become one Python file, and so
do the reference solutions that the open edition publishes to self-learners (the same cells of
the instructor notebook, as :func:`autograder.release.reference.item_source` shows them). copydetect
compares every pair of these files: students with each other, and each student with the
published solutions. The released stubs of the answer cells (``def``/``class`` lines,
docstrings, ``# YOUR CODE HERE``, ``raise NotImplementedError()``) are copydetect's
boilerplate, so what everyone was given never counts, and a blank submission has nothing left
to compare.

copydetect (through :func:`autograder.similarity.clones.compare_files`, the clone detector that the leak
check shares) tokenises the code before it fingerprints it: every name becomes ``V``/``F``/``O``,
every string ``S``, whitespace and comments go, so renaming variables, reformatting, changing
quotes or comments leaves the fingerprints as they were. A pair's *share* on one side is the
part of that side's fingerprinted code that the other side also has.

The written answers (graded by hand) are compared too, as runs of words, each with the same answer of every
other student and with its rubric, at the same thresholds (:mod:`autograder.similarity.written`).

Written under ``grades/similarity/`` (nothing else is read or written: no score, no gradebook, no feedback):

- ``<assignment>.html``: copydetect's report, the listed pairs side by side with the shared
  code highlighted (``<assignment>-written.html``: the written answers' pairs side by side);
- ``<assignment>.csv``: one row per listed pair: both names, what was compared (``answer``: ``code`` or a written
  answer's grade_id), both shares, the shared tokens (copydetect's tokenised characters, or runs of words) and
  whether the pair is flagged;
- ``<assignment>/``: the files that were compared (``students/<student>.py``,
  ``solutions/<assignment>.py``, ``stubs/<assignment>.py``, ``written/<student>.md``).

A pair is *listed* (the HTML and the CSV) when one side's share is above the display threshold,
and *flagged* when one side's share is at least the threshold and they share at least
``MIN_SHARED_TOKENS`` tokens. The larger of the two shares counts, so padding a copy with extra
code does not hide it. The minimum keeps a couple of short, natural lines from flagging two
students who answered nothing else: two ch04 submissions holding only the one-line answers of its
two shortest items share 55 tokens (a match also covers the end of the stub before it); 80 is
about three lines of real code.

Students who write ``pass``, ``...``, ``return None`` or nothing in place of the stub's
``raise NotImplementedError()`` have not answered either: those variants of the stubs are
boilerplate too, so such a submission is blank like an untouched one.

Where an item has one natural answer of a line or two (most of ch04_masking), honest students
write the same code and the same tokens; a flag says where to look, not that a student copied.

Parameters, measured on this course's items
-------------------------------------------
The graded items are short: tokenised, without their stubs, an item is 18 to 354 characters
(``padding_mask`` 18, ``merge_heads`` 45, ``split_heads`` 84, ``MultiHeadAttention`` 263) and
a whole assignment 247 to 844. copydetect's defaults (noise and guarantee thresholds of 25)
are made for longer programs: 25 tokenised characters is a whole statement here, so one edit
per line hides a copy. The figures below were measured with this module on planted classes
(the larger share of each pair): the reference solutions of all six assignments renamed and
reformatted; for ch02, ch03 and ch04, two independent correct solutions written by hand
(ch03's as in tests/test_similarity.py), a renamed copy of one of them, and one with its last
item replaced by the reference's; for ch03, a copy of the reference edited on most lines.

=========================================================  =========  =========  =========  =========  =========
pair                                                       k=5        k=8        k=10       k=15       k=25
=========================================================  =========  =========  =========  =========  =========
renamed and reformatted copy (11 pairs, all assignments)   >=0.94     >=0.93     >=0.92     >=0.90     >=0.91
copy edited on most lines (ch03)                           0.86       0.83       0.80       0.72       0.57
copy with a no-op line after every statement (6 pairs)     0.80-0.89  0.78-0.90  0.76-0.90  0.62-0.82  0.33-0.61
last item copied, the rest honest (ch04, ch02, ch03)       0.63-0.86  0.61-0.82  0.46-0.83  0.34-0.77  0.28-0.79
two honest solutions, or honest and the reference (13)     <=0.77     <=0.65     <=0.61     <=0.55     <=0.48
blank (untouched stubs, or ``pass``) with anything         0          0          0          0          0
=========================================================  =========  =========  =========  =========  =========

- noise threshold = guarantee threshold = 10 (copydetect's window of 1: every k-gram is a
  fingerprint, so the figures do not depend on the hash values, which Python draws anew in
  every process; the files are small, so it costs nothing). At k=10 a renamed copy keeps more
  than 0.9 and honest solutions stay at or below 0.61; a smaller k lets the course's idioms
  (``V=V.V(V,V)``, ``ifVisnotNone:``) make honest solutions look alike, a larger one lets a
  few edits hide a copy.
- threshold (flagged) = 0.80: well below every renamed copy (0.92) and further above every
  honest pair (0.61); a copy edited on most lines sits at it.
- display threshold (listed as near) = 0.65: above the honest pairs, below most partial and
  edited copies, which are worth a look though not a flag.
"""

from __future__ import annotations

import csv
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import course, reference
from autograder.similarity import clones
from autograder.similarity.written import ClassAnswers, summary_lines

NOISE_THRESHOLD = 10  # copydetect's noise_t (and guarantee_t): the shortest match (tokenised characters) that counts
DISPLAY_THRESHOLD = 0.65  # copydetect's display_t: pairs above it are listed in the HTML and the CSV
THRESHOLD = 0.80  # a pair is flagged at this share or above...
MIN_SHARED_TOKENS = 80  # ...when its two sides share at least this many tokenised characters
OUTPUT = Path("grades") / "similarity"
UNANSWERED = ("pass", "...", "return None", "")  # what students put where the stub raises
RAISE_LINE = re.compile(r"^([ \t]*)raise NotImplementedError\(\)[ \t]*$", re.M)
CSV_FIELDS = ["first", "second", "kind", "answer", "first_share", "second_share", "shared_tokens", "flagged"]
CODE = "code"  # the CSV's answer of a pair of code files


class SimilarityError(RuntimeError):
    """Nothing to compare: no submission of the assignment, or none that could be read."""


@dataclass
class Pair:
    """Two compared files: two students (``kind="classmates"``) or a student and the published
    solutions (``kind="reference"``, ``second`` is ``solutions/<assignment>``)."""

    first: str
    second: str
    kind: str
    first_share: float  # the part of first's fingerprinted code that second also has
    second_share: float
    shared_tokens: int
    flagged: bool
    answer: str = CODE  # what was compared: the code, or one written answer (its grade_id)

    @property
    def share(self) -> float:
        return max(self.first_share, self.second_share)

    def row(self) -> dict:
        return {
            "first": self.first,
            "second": self.second,
            "kind": self.kind,
            "answer": self.answer,
            "first_share": f"{self.first_share:.3f}",
            "second_share": f"{self.second_share:.3f}",
            "shared_tokens": self.shared_tokens,
            "flagged": "yes" if self.flagged else "no",
        }


@dataclass
class SimilarityReport:
    """What :func:`similarity` found and wrote."""

    assignment: str
    compared: list[str]  # the students whose answers were compared
    blank: list[str]  # compared, but nothing beyond the released stubs
    notes: dict[str, list[str]]  # student -> what was skipped or ignored
    pairs: list[Pair]  # the listed pairs, flagged first, then by share
    html: Path
    csv: Path
    threshold: float
    display: float
    reference: bool = True  # whether the published solutions were compared
    extra: list[str] = field(default_factory=list)  # notes about the whole run
    written: list[Pair] = field(default_factory=list)  # the listed pairs of written answers, flagged first
    written_ids: list[str] = field(default_factory=list)  # the written answers compared
    written_blank: dict[str, list[str]] = field(default_factory=dict)  # student -> written answers left blank
    written_html: Path | None = None

    @property
    def flagged(self) -> list[Pair]:
        return [pair for pair in self.pairs if pair.flagged]


def graded_ids(assignment: str, root: Path) -> list[str]:
    """The grade_ids of the released exercise's answer (solution) cells, in order; not those of the
    understanding questions, whose short answers honest students write alike."""
    nb = notebooks.read(course.notebook_path(assignment, "exercises", root))
    return [
        notebooks.cell_id(cell) for cell in nb.cells if notebooks.is_solution(cell) and not notebooks.is_question(cell)
    ]


def answer_cells(nb, ids: list[str]) -> list[tuple[str, str]]:
    """(grade_id, source) of the code cells of ``nb`` that answer one of ``ids``, in the notebook's order."""
    wanted = set(ids)
    return [
        (notebooks.cell_id(cell), cell.source)
        for cell in nb.cells
        if cell.cell_type == "code" and notebooks.cell_id(cell) in wanted
    ]


def stub_cells(assignment: str, root: Path) -> list[tuple[str, str]]:
    """The released exercise's answer cells as students receive them."""
    nb = notebooks.read(course.notebook_path(assignment, "exercises", root))
    return [(notebooks.cell_id(cell), cell.source) for cell in nb.cells if notebooks.is_solution(cell)]


def stub_file(assignment: str, root: Path) -> str:
    """The boilerplate: the released answer cells, and the same cells as students leave them unanswered
    (``pass``, ``...``, ``return None`` or nothing in place of ``raise NotImplementedError()``)."""
    cells = stub_cells(assignment, root)
    parts = [code_file(f"{assignment}: the released stubs", cells)]
    for blank in UNANSWERED:

        def unanswered(match, blank=blank):
            return match.group(1) + blank if blank else ""

        parts.append(
            code_file(
                f"{assignment}: the stubs with {blank or 'no body'}",
                [(gid, RAISE_LINE.sub(unanswered, source)) for gid, source in cells],
            )
        )
    return "\n\n".join(parts)


def solution_cells(assignment: str, ids: list[str], root: Path) -> list[tuple[str, str]]:
    """The published reference solution of each answer cell: what the open edition shows self-learners."""
    nb = notebooks.read(course.notebook_path(assignment, "solutions", root))
    cells = []
    for cell in nb.cells:
        if notebooks.is_solution(cell) and notebooks.cell_id(cell) in ids:
            names = notebooks.defined_names(cell.source)
            code = reference.item_source(assignment, names[0], root) if names else notebooks.solution_body(cell).strip()
            cells.append((notebooks.cell_id(cell), code))
    return cells


def code_file(title: str, cells: list[tuple[str, str]]) -> str:
    """One Python file of answer cells; the comments (which copydetect ignores) name each cell."""
    parts = [f"# {title}"] + [f"# ---- cell {grade_id}\n{source.strip()}" for grade_id, source in cells]
    return "\n\n".join(parts) + "\n"


def submissions(assignment: str, root: Path) -> tuple[dict[str, Path], dict[str, list[str]]]:
    """student -> ``submitted/<student>/<assignment>/<assignment>.ipynb``, and notes about the folders."""
    folders = sorted(p for p in (Path(root) / "submitted").glob(f"*/{assignment}") if p.is_dir())
    if not folders:
        raise SimilarityError(
            f"no submissions to compare: no folder submitted/<student>/{assignment}/ under {Path(root).resolve()}"
        )
    found, notes = {}, {}
    for folder in folders:
        student = folder.parent.name
        path = folder / f"{assignment}.ipynb"
        others = sorted(p.name for p in folder.glob("*.ipynb") if p.name != path.name)
        if path.is_file():
            found[student] = path
            if others:
                notes.setdefault(student, []).append(f"only {path.name} counts; ignored {', '.join(others)}")
        else:
            seen = f" (found {', '.join(others)})" if others else ""
            notes.setdefault(student, []).append(f"no {path.name} in {folder.relative_to(root)}{seen}: skipped")
    return found, notes


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (shorter in the HTML report)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def _write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", errors="replace")
    return _shown(path)


def similarity(
    assignment: str, root: Path = COURSE_ROOT, threshold: float = THRESHOLD, display: float = DISPLAY_THRESHOLD
) -> SimilarityReport:
    """Compare the answers of every submission of ``assignment``; write the HTML and the CSV."""
    root = Path(root)
    paths, notes = submissions(assignment, root)
    try:
        ids = graded_ids(assignment, root)
    except FileNotFoundError as error:
        raise SimilarityError(f"{error}: the released exercise names the graded cells (make exercises)") from None
    output = root / OUTPUT
    work = output / assignment
    if work.exists():
        shutil.rmtree(work)  # the files of the last run: a withdrawn submission must not linger
    output.mkdir(parents=True, exist_ok=True)

    written = ClassAnswers.of(assignment, root)
    files: dict[str, str] = {}  # shown path -> student
    for student, path in paths.items():
        try:
            nb = notebooks.read(path)
            cells = answer_cells(nb, ids)
            missing_written = written.add(student, nb, work / "written")
        except Exception as error:  # not JSON, not a notebook, not UTF-8...
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:160]
            notes.setdefault(student, []).append(f"unreadable notebook ({reason}): skipped")
            continue
        if missing_written:
            notes.setdefault(student, []).append(missing_written)
        if not cells:
            notes.setdefault(student, []).append(
                f"none of the graded cells ({', '.join(ids)}) found by grade_id: skipped"
            )
            continue
        missing = [gid for gid in ids if gid not in {gid for gid, _ in cells}]
        if missing:
            notes.setdefault(student, []).append(f"graded cells not found: {', '.join(missing)}")
        shown = _write(work / "students" / f"{student}.py", code_file(f"{student}: {assignment}", cells))
        files[shown] = student
    if not files:
        raise SimilarityError(
            f"no readable submission of {assignment} to compare: "
            + "; ".join(f"{s}: {', '.join(n)}" for s, n in sorted(notes.items()))
        )

    extra = []
    label = f"solutions/{assignment}"  # no student folder can be named so
    try:
        published = solution_cells(assignment, ids, root)
    except (FileNotFoundError, reference.ReferenceUnavailable) as error:
        published = []
        extra.append(f"not compared with the published solutions: {error}")
    if published:
        files[
            _write(
                work / "solutions" / f"{assignment}.py", code_file(f"{label}: the open edition's solutions", published)
            )
        ] = label
    stubs = _write(work / "stubs" / f"{assignment}.py", stub_file(assignment, root))

    html = output / f"{assignment}.html"
    detector = clones.compare_files(list(files), stubs, NOISE_THRESHOLD, display, html)
    coverage = {files[f]: int(detector.file_data[f].token_coverage) for f in files if f in detector.file_data}
    blank = sorted(s for s in paths if s in coverage and coverage[s] == 0 and s != label)
    pairs = _pairs(detector, files, label, threshold, display)

    matches, written_blank = written.compare(label, threshold, display)
    written_pairs = [Pair(*match) for match in matches]
    written_html = output / f"{assignment}-written.html"
    written.report(written_html, assignment, written_pairs, label)

    table = output / f"{assignment}.csv"
    with table.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(pair.row() for pair in [*pairs, *written_pairs])
    compared = sorted(s for s in files.values() if s != label)
    return SimilarityReport(
        assignment,
        compared,
        blank,
        notes,
        pairs,
        html,
        table,
        threshold,
        display,
        reference=bool(published),
        extra=extra,
        written=written_pairs,
        written_ids=written.ids,
        written_blank=written_blank,
        written_html=written_html,
    )


def _pairs(detector, files: dict[str, str], label: str, threshold: float, display: float) -> list[Pair]:
    """The listed pairs (a share above ``display``), each once, flagged ones first."""
    index = {path: i for i, path in enumerate(detector.ref_files)}
    pairs = []
    for i, first in enumerate(detector.test_files):
        for second in detector.test_files[i + 1 :]:
            j = index[second]
            share_1, share_2 = (float(s) for s in detector.similarity_matrix[i, j])
            if share_1 < 0 or max(share_1, share_2) <= display:  # not compared (unreadable), or not near
                continue
            names = [files[first], files[second]]
            shares = [share_1, share_2]
            if names[0] == label or (names[1] != label and share_2 > share_1):
                names.reverse()  # the student first; of two students, the one with the larger share
                shares.reverse()
            shared = int(detector.token_overlap_matrix[i, j])
            flagged = max(shares) >= threshold and shared >= MIN_SHARED_TOKENS
            kind = "reference" if label in names else "classmates"
            pairs.append(Pair(names[0], names[1], kind, shares[0], shares[1], shared, flagged))
    pairs.sort(key=lambda pair: (not pair.flagged, -pair.share, pair.first, pair.second))
    return pairs


def summary(report: SimilarityReport) -> str:
    blank = f" ({len(report.blank)} blank: {', '.join(report.blank)})" if report.blank else ""
    against = " and with the open edition's solutions" if report.reference else ""
    lines = [
        f"Similarity of {report.assignment}: {len(report.compared)} submission(s) compared with each "
        f"other{against}{blank}",
        f"flagged (a share >= {report.threshold:.2f}): {len(report.flagged)} pair(s); "
        f"near (a share > {report.display:.2f}): {len(report.pairs) - len(report.flagged)} pair(s)",
    ]
    width = max([10, *(len(p.first) + len(p.second) + 3 for p in report.pairs)])
    for pair in report.pairs:
        names = f"{pair.first} ~ {pair.second}"
        lines.append(
            f"  {'FLAGGED' if pair.flagged else 'near   '}  {names:<{width}}  "
            f"{pair.first_share:.2f} / {pair.second_share:.2f}  {pair.shared_tokens} shared tokens"
        )
    lines += summary_lines(report.written_ids, report.written, report.written_blank)
    for student, notes in sorted(report.notes.items()):
        lines += [f"note: {student}: {note}" for note in notes]
    lines += [f"note: {note}" for note in report.extra]
    lines += [f"Report: {report.html}", f"Table:  {report.csv}"]
    if report.written_html:
        lines.append(f"Written answers: {report.written_html}")
    return "\n".join(lines)
