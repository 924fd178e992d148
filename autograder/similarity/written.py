"""Written answers compared between students for ``make similarity``: their words, in runs, beside each other's.

A written answer (nbgrader's manually graded answer) is prose, which copydetect's Python tokens do not
fit. Each is read as its words (:func:`words`: lower case, NFKC, with markdown, TeX and punctuation
dropped) in runs of ``WRITTEN_RUN`` words (:func:`word_runs`); the runs that the released notebook's
own text holds (:func:`released_runs`: the question, the placeholder ``YOUR ANSWER HERE``) never count,
so an answer left as released, or one that only quotes the question, is blank and matches nothing.
:func:`compare` compares each answer with the same answer of every other student and with its rubric
(the instructor notebook's cell, which the open edition publishes). A pair's share on one side is the
part of that side's runs that the other side also has; it is listed and flagged at the thresholds of
``make similarity`` (:mod:`autograder.cli.similarity`), where the two share at least ``MIN_SHARED_RUNS``
runs (about a dozen words in a row: two short answers alike by chance are not).

Measured on ch03's question (tests/test_similarity.py): two honest answers share 1 run of about 80
(0.01); a copy with bold, TeX, case, punctuation, line breaks and a word changed shares 0.90; an honest
answer that borrows a sentence of the rubric's, 0.28 of its own runs.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from attention_course.tooling import notebooks
from autograder.release import course

WRITTEN_RUN = 3  # written answers are compared as runs of this many words...
MIN_SHARED_RUNS = 10  # ...and a pair is listed or flagged where its sides share at least this many runs
_WORD = re.compile(r"[^\W_]+")


def written_ids(assignment: str, root: Path) -> list[str]:
    """The grade_ids of the released exercise's written answers (graded by hand), in order."""
    nb = notebooks.read(course.notebook_path(assignment, "exercises", root))
    return [notebooks.cell_id(cell) for cell in nb.cells if notebooks.is_written(cell)]


def written_answers(nb, ids: list[str]) -> dict[str, str]:
    """grade_id -> the text of each of ``ids``'s written answers in ``nb``: the first markdown cell of that
    grade_id (of copies, the one the instructor grades)."""
    found: dict[str, str] = {}
    for cell in nb.cells:
        grade_id = notebooks.cell_id(cell)
        if cell.cell_type == "markdown" and grade_id in ids and grade_id not in found:
            found[grade_id] = cell.source if isinstance(cell.source, str) else ""
    return found


def words(text: str) -> list[str]:
    """``text``'s words as written answers are compared: lower case, markdown, TeX and punctuation dropped."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def word_runs(text: str) -> set[tuple[str, ...]]:
    """Every run of ``WRITTEN_RUN`` words in a row in ``text``."""
    found = words(text)
    return {tuple(found[i : i + WRITTEN_RUN]) for i in range(len(found) - WRITTEN_RUN + 1)}


def released_runs(assignment: str, root: Path) -> set[tuple[str, ...]]:
    """The runs of words that the released notebook's text holds (its questions, the placeholders): they never
    count as shared."""
    nb = notebooks.read(course.notebook_path(assignment, "exercises", root))
    return set().union(*(word_runs(cell.source) for cell in nb.cells if cell.cell_type == "markdown"))


def rubrics(assignment: str, ids: list[str], root: Path) -> dict[str, str]:
    """grade_id -> the rubric of each written answer (the instructor notebook's cell, which the open edition
    publishes)."""
    nb = notebooks.read(course.notebook_path(assignment, "solutions", root))
    return written_answers(nb, ids)


def compare(
    texts: dict[str, dict[str, str]],
    published: dict[str, str],
    boilerplate: set[tuple[str, ...]],
    label: str,
    threshold: float,
    display: float,
) -> tuple[list[tuple], dict[str, list[str]]]:
    """The listed pairs of written answers (each answer with the same one of every other student, and with
    ``published``, its rubric, as ``label``), flagged first, and, per student, the answers left blank: nothing
    but ``boilerplate``'s runs, the released text's. A pair is ``(first, second, kind, first_share,
    second_share, shared runs, flagged, grade_id)``, the student first (of two, the one with the larger share);
    ``kind`` is ``classmates`` or ``reference``."""
    pairs: list[tuple] = []
    blank: dict[str, list[str]] = {}
    ids = list(dict.fromkeys(gid for answers in texts.values() for gid in answers))
    for gid in ids:
        sides = {}
        for student, answers in sorted(texts.items()):
            if gid in answers:
                runs = word_runs(answers[gid]) - boilerplate
                if runs:
                    sides[student] = runs
                else:
                    blank.setdefault(student, []).append(gid)
        if runs := word_runs(published.get(gid, "")) - boilerplate:
            sides[label] = runs
        names = list(sides)
        for i, first in enumerate(names):
            for second in names[i + 1 :]:
                shared = len(sides[first] & sides[second])
                shares = [shared / len(sides[first]), shared / len(sides[second])]
                if shared < MIN_SHARED_RUNS or max(shares) <= display:
                    continue
                pair = [first, second]
                if pair[0] == label or (pair[1] != label and shares[1] > shares[0]):
                    pair.reverse()  # the student first; of two students, the one with the larger share
                    shares.reverse()
                kind = "reference" if label in pair else "classmates"
                flagged = max(shares) >= threshold
                pairs.append((pair[0], pair[1], kind, shares[0], shares[1], shared, flagged, gid))
    pairs.sort(key=lambda pair: (not pair[6], -max(pair[3], pair[4]), pair[7], pair[0], pair[1]))
    return pairs, blank


def written_report(path: Path, assignment: str, pairs: list, texts: dict[str, dict[str, str]]) -> None:
    """The listed pairs of written answers side by side, as an HTML page (every text escaped)."""
    rows = []
    for pair in pairs:
        first, second = (texts.get(name, {}).get(pair.answer, "") for name in (pair.first, pair.second))
        rows.append(
            f"<h2>{'FLAGGED' if pair.flagged else 'near'}: {html.escape(pair.first)} ~ {html.escape(pair.second)}, "
            f"<code>{html.escape(pair.answer)}</code> ({pair.first_share:.2f} / {pair.second_share:.2f}, "
            f"{pair.shared_tokens} shared runs of {WRITTEN_RUN} words)</h2>\n<table><tr>"
            + "".join(f"<td><pre>{html.escape(text)}</pre></td>" for text in (first, second))
            + "</tr></table>"
        )
    title = f"Written answers of {assignment} alike"
    path.write_text(
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{html.escape(title)}</title>\n'
        "<style>td { vertical-align: top; width: 50%; border: 1px solid #ccc; } "
        "pre { white-space: pre-wrap; }</style>\n</head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n{chr(10).join(rows) or '<p>No pair listed.</p>'}\n</body>\n</html>\n",
        encoding="utf-8",
    )


@dataclass
class ClassAnswers:
    """One assignment's written answers, read from each submission as ``make similarity`` reads them (:meth:`add`),
    and compared (:meth:`compare`). An assignment without a released notebook has none to compare."""

    ids: list[str]  # the written answers' grade ids
    boilerplate: set[tuple[str, ...]]  # the released notebook's runs (released_runs)
    rubrics: dict[str, str]  # grade_id -> rubric (the instructor notebook's)
    texts: dict[str, dict[str, str]] = field(default_factory=dict)  # student -> grade_id -> answer

    @classmethod
    def of(cls, assignment: str, root: Path) -> ClassAnswers:
        try:
            ids = written_ids(assignment, root)
            boilerplate = released_runs(assignment, root)
        except FileNotFoundError:
            return cls([], set(), {})
        try:
            published = rubrics(assignment, ids, root) if ids else {}
        except FileNotFoundError:
            published = {}
        return cls(ids, boilerplate, published)

    def add(self, student: str, nb, folder: Path) -> str | None:
        """Keep ``student``'s written answers in ``nb`` (and write them to ``folder/<student>.md``); a note where
        some are missing."""
        answers = written_answers(nb, self.ids)
        if answers:
            self.texts[student] = answers
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{student}.md").write_text(
                "\n\n".join(f"<!-- {gid} -->\n{text.strip()}" for gid, text in answers.items()) + "\n",
                encoding="utf-8",
                errors="replace",
            )
        missing = [gid for gid in self.ids if gid not in answers]
        return f"written answers not found: {', '.join(missing)}" if missing else None

    def compare(self, label: str, threshold: float, display: float) -> tuple[list[tuple], dict[str, list[str]]]:
        """:func:`compare` of the answers kept, with the rubrics as ``label``."""
        return compare(self.texts, self.rubrics, self.boilerplate, label, threshold, display)

    def report(self, path: Path, assignment: str, pairs: list, label: str) -> None:
        written_report(path, assignment, pairs, {**self.texts, label: self.rubrics})


def summary_lines(ids: list[str], pairs: list, blank: dict[str, list[str]]) -> list[str]:
    """``make similarity``'s lines on the written answers ``ids``: the counts, then each listed pair."""
    if not ids:
        return []
    flagged = [pair for pair in pairs if pair.flagged]
    left = f" ({len(blank)} left blank: {', '.join(sorted(blank))})" if blank else ""
    lines = [
        f"written answers ({', '.join(ids)}) compared as words with each other's and the rubric{left}: "
        f"flagged {len(flagged)} pair(s); near {len(pairs) - len(flagged)} pair(s)"
    ]
    width = max([10, *(len(p.first) + len(p.second) + 3 for p in pairs)])
    for pair in pairs:
        names = f"{pair.first} ~ {pair.second}"
        lines.append(
            f"  {'FLAGGED' if pair.flagged else 'near   '}  {names:<{width}}  {pair.first_share:.2f} / "
            f"{pair.second_share:.2f}  {pair.shared_tokens} shared runs of {WRITTEN_RUN} words in {pair.answer}"
        )
    return lines
