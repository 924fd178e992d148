"""The class report's files (:mod:`autograder.grading.class_report`), beside the class's CSV in ``grades/``.

- ``<assignment>-report.html``: the instructor's copy, with the students' names;
- ``<assignment>-report-anonymous.html``: the same without a name, to show the class;
- ``<assignment>-report.json``: every figure, names included; ``<assignment>-report-items.csv`` (one row per test
  cell and written answer) and ``<assignment>-report-causes.csv`` (one row per cause of each test cell);
- ``term-report.html``, ``term-report-anonymous.html`` (no student's trajectory) and ``term-report.json``.

Each page is one file that loads nothing (its figures are SVG in the page, a Content-Security-Policy forbids any
request), reads on a phone (one column, each figure as wide as the screen) and prints. Every name and word is
escaped: a student's name is an account's, and the words are the grader's (no student's text is in the report).
"""

from __future__ import annotations

import csv
import html
import io
import json
from pathlib import Path

from autograder.grading.class_report import KIND_WORDS, SLOWEST, ClassReport, TermReport

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
:root { color-scheme: light; --full: #2f7d32; --partial: #e0a100; --zero: #c62828; --none: #9e9e9e; }
* { box-sizing: border-box; }
body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 60rem;
       padding: 1rem; color: #1a1a1a; overflow-wrap: break-word; }
h1 { font-size: 1.6rem; margin: 0 0 .5rem; } h2 { font-size: 1.3rem; margin-top: 2rem; } h3 { font-size: 1.05rem; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0; }
th, td { text-align: left; padding: .3rem .4rem; border-bottom: 1px solid #ddd; vertical-align: top; }
td.n, th.n { text-align: right; }
code { font-size: .92em; background: #f3f3f3; padding: 0 .2em; border-radius: 3px; }
figure { margin: 1rem 0; } figure svg { width: 100%; height: auto; max-width: 30rem; display: block; }
.scroll { overflow-x: auto; }
figcaption { font-size: .9rem; color: #444; }
.bar { display: flex; height: 1.1rem; width: 100%; border-radius: 3px; overflow: hidden; background: #eee;
       print-color-adjust: exact; -webkit-print-color-adjust: exact; }
.bar span { display: block; height: 100%; }
.full { background: var(--full); } .partial { background: var(--partial); } .zero { background: var(--zero); }
.none { background: var(--none); }
.legend span { display: inline-block; width: .8em; height: .8em; margin: 0 .25em 0 .6em; border-radius: 2px;
               print-color-adjust: exact; -webkit-print-color-adjust: exact; }
.item { border: 1px solid #ddd; border-radius: 6px; padding: .6rem .8rem; margin: .8rem 0; break-inside: avoid; }
.item h3 { margin: 0 0 .3rem; }
.counts { font-size: .92rem; color: #333; margin: .3rem 0; }
.causes { margin: .4rem 0 0; padding-left: 1.2rem; } .causes li { margin: .25rem 0; }
.kind { font-size: .8rem; color: #555; border: 1px solid #bbb; border-radius: 3px; padding: 0 .3em;
        white-space: nowrap; }
.names { font-size: .85rem; color: #444; }
.lead { font-size: 1.05rem; } .muted { color: #555; font-size: .9rem; }
@media print { body { max-width: none; font-size: 11pt; } .item { page-break-inside: avoid; } }
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _name(text) -> str:
    """A code name (a test cell's, an assignment's), escaped, that a narrow column breaks after an underscore only."""
    return _e(text).replace("_", "_<wbr>")


def _points(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}".rstrip("0").rstrip(".")


def _share(part: int, whole: int) -> str:
    return "–" if not whole else f"{100 * part / whole:.0f}%"


def _page(title: str, body: list[str]) -> str:
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<meta name="referrer" content="no-referrer">',
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>",
            *body,
            "</body></html>",
        ]
    )


def _svg(fig) -> str:
    """A matplotlib figure as SVG to put in the page: its text kept as text, ids fixed, no XML header."""
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "class-report"}):
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def histogram(scores: list[float], most: float, alt: str) -> str:
    """The score distribution: the share of the maximum in tenths, each bar labelled with its count."""
    from matplotlib.figure import Figure

    bins = [0] * 10
    for score in scores:
        share = score / most if most else 0.0
        bins[min(9, max(0, int(share * 10)))] += 1
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(4.0, 2.5), layout="constrained")
    ax = fig.add_subplot()
    bars = ax.bar(range(10), bins, width=0.9, color="#3b6ea8")
    ax.bar_label(bars, labels=[str(b) if b else "" for b in bins], fontsize=10)
    ax.set_xticks([i - 0.5 for i in range(11)], [f"{10 * i}" for i in range(11)], fontsize=9)
    ax.set_xlabel("score, % of the maximum", fontsize=10)
    ax.set_ylabel("students", fontsize=10)
    ax.set_ylim(0, max(bins + [1]) * 1.2)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.tick_params(axis="y", labelsize=9)
    ax.spines[["top", "right"]].set_visible(False)
    svg = _svg(fig)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{_e(alt)}" ', 1)


def _bar(parts: list[tuple[str, int]], total: int, label: str) -> str:
    spans = "".join(f'<span class="{cls}" style="width:{100 * n / total:.2f}%"></span>' for cls, n in parts if n)
    return f'<div class="bar" role="img" aria-label="{_e(label)}">{spans}</div>'


def _names(students: list[str], names: bool) -> str:
    return f' <span class="names">({_e(", ".join(students))})</span>' if names and students else ""


def class_html(report: ClassReport, names: bool) -> str:
    """The class report as one page; ``names``: the instructor's copy (else no student is named anywhere)."""
    graded = len(report.scores)
    copy = "the instructor's copy, with names" if names else "without names, to show the class"
    body = [
        f"<h1>What the class got wrong: <code>{_name(report.assignment)}</code></h1>",
        f'<p class="muted">{copy}</p>',
    ]
    body.append(
        f'<p class="lead">{report.students} submission(s): {graded} graded'
        + (f", {len(report.not_graded)} not graded (the grader's failure)" if report.not_graded else "")
        + (f", {len(report.refused)} refused (scored 0, not counted)" if report.refused else "")
        + (
            f". Mean {_points(report.mean)} / {_points(report.max_score)}, median {_points(report.median)}, "
            f"standard deviation {_points(report.stdev)}; "
            f"full marks: {report.at_full_marks} of {graded} ({_share(report.at_full_marks, graded)})."
            if graded
            else "."
        )
        + "</p>"
    )
    if report.awaiting:
        body.append(
            f"<p>{report.awaiting} written answer(s) await grading; they count 0 in these scores until graded "
            "(<code>make formgrader</code>, then <code>make grades</code>).</p>"
        )
    if report.late:
        body.append(f"<p>Submitted late: {len(report.late)} of {graded}{_names(report.late, names)}.</p>")
    most = report.most_lost()
    if most:
        body.append("<h2>Most lost</h2><ol>")
        for item in most:
            lost = len(item.partial) + len(item.zero)
            causes = "; ".join(f"{_e(c.words)} ({c.count})" for c in item.causes[:2])
            more = f"; {len(item.causes) - 2} other cause(s) below" if len(item.causes) > 2 else ""
            body.append(
                f'<li><a href="#{_e(item.grade_id)}"><code>{_name(item.grade_id)}</code></a>: {lost} of {item.graded} '
                f"lost points ({_points(item.lost)} points in all). Most often: {causes}{more}</li>"
            )
        body.append("</ol>")
    if graded:
        alt = (
            f"Histogram of the {graded} graded scores of {report.assignment}, in tenths of the maximum "
            f"{_points(report.max_score)}: mean {_points(report.mean)}, median {_points(report.median)}."
        )
        body += [
            "<h2>Scores</h2><figure>",
            histogram(list(report.scores.values()), report.max_score, alt),
            f"<figcaption>{_e(alt)}</figcaption></figure>",
        ]
    body.append("<h2>Test cells</h2>")
    body.append(
        '<p class="legend muted">Each bar: <span class="full"></span>full marks <span class="partial"></span>partial '
        '<span class="zero"></span>zero <span class="none"></span>not graded. Causes are the grader\'s own words: a '
        "known mistake where one explains the failure, else the property that failed, never a guess. Discrimination: "
        "how well a cell's score goes with the rest of the assignment's (-1 to 1; near 0 or below, a cell that "
        "students who do well elsewhere lose as often: worth reading again).</p>"
    )
    for item in report.tests:
        total = item.graded + len(item.not_graded)
        counts = f"{len(item.full)} full, {len(item.partial)} partial, {len(item.zero)} zero" + (
            f", {len(item.not_graded)} not graded" if item.not_graded else ""
        )
        parts = [("full", len(item.full)), ("partial", len(item.partial)), ("zero", len(item.zero)),
                 ("none", len(item.not_graded))]  # fmt: skip
        body.append(f'<section class="item" id="{_e(item.grade_id)}">')
        body.append(
            f"<h3><code>{_name(item.grade_id)}</code> · {_points(item.points)} point(s) · "
            f"mean {_points(item.mean)}</h3>"
        )
        if total:
            body.append(_bar(parts, total, f"{item.grade_id}: {counts}"))
        r = item.discrimination(report.scores)
        discrimination = "" if r is None else f"; discrimination {r:.2f}"
        body.append(
            f'<p class="counts">{counts} (full marks: {_share(len(item.full), item.graded)} of the graded'
            f"{discrimination}; graded in {item.seconds:.2f} s on average)</p>"
        )
        if item.causes:
            body.append('<ul class="causes">')
            for cause in item.causes:
                kind = _e(KIND_WORDS.get(cause.kind, cause.kind))
                body.append(
                    f'<li><strong>{cause.count}</strong> <span class="kind">{kind}</span> {_e(cause.words)}'
                    f"{_names(cause.students, names)}</li>"
                )
            body.append("</ul>")
        body.append("</section>")
    if report.written:
        body.append("<h2>Written answers</h2>")
        for item in report.written:
            counts = f"{len(item.graded)} graded (mean {_points(item.mean)}), {len(item.awaiting)} awaiting grading, "
            counts += f"{len(item.blank)} left blank"
            counts += f", {len(item.not_graded)} not graded" if item.not_graded else ""
            body.append(f'<section class="item"><h3><code>{_name(item.grade_id)}</code> · {_points(item.points)} '
                        f'point(s)</h3><p class="counts">{counts}</p>')  # fmt: skip
            if names and (item.awaiting or item.blank):
                awaiting, blank = ", ".join(item.awaiting) or "none", ", ".join(item.blank) or "none"
                body.append(f'<p class="names">awaiting: {_e(awaiting)}; blank: {_e(blank)}</p>')
            body.append("</section>")
    body.append("<h2>Not graded, refused, nothing answered</h2>")
    if not (report.not_graded or report.refused or report.unanswered):
        body.append("<p>Every submission was graded.</p>")
    if report.not_graded:
        body.append(
            f"<p>Not graded (the grader's failure, never the student's: grade them again once it is mended): "
            f"{len(report.not_graded)}</p><ul>"
        )
        for student, why in report.not_graded.items():
            who = f"{_e(student)}: " if names else ""
            body.append(f"<li>{who}{_e(why)}</li>")
        body.append("</ul>")
    if report.refused:
        body.append(f"<p>Refused (scored 0, not counted; the student's row of the CSV says why): "
                    f"{len(report.refused)}</p><ul>")  # fmt: skip
        for student, kind in report.refused.items():
            who = f"{_e(student)}: " if names else ""
            body.append(f"<li>{who}{_e(kind)}</li>")
        body.append("</ul>")
    if report.unanswered:
        body.append(
            f"<p>Graded with nothing answered (every notebook as released): {len(report.unanswered)}"
            f"{_names(report.unanswered, names)}</p>"
        )
    body += _times_html(report, names)
    return _page(f"{report.assignment}: the class report", body)


def _times_html(report: ClassReport, names: bool) -> list[str]:
    if not report.times:
        return []
    spent = [t.seconds for t in report.times]
    ordered = sorted(spent)
    body = [
        "<h2>Grading times</h2>",
        f"<p>{len(spent)} notebook(s) graded in {sum(spent):.0f} s of grading in all (notebooks graded side by side "
        f"overlap): median {ordered[len(ordered) // 2]:.1f} s, slowest {ordered[-1]:.1f} s.</p>",
        "<div class='scroll'><table><thead><tr>"
        + ("<th>student</th>" if names else "")
        + "<th class='n'>seconds</th><th>why</th>"
        "</tr></thead><tbody>",
    ]
    for t in report.times[:SLOWEST]:
        who = f"<td>{_e(t.student)}</td>" if names else ""
        body.append(f"<tr>{who}<td class='n'>{t.seconds:.1f}</td><td>{_e('; '.join(t.why) or '–')}</td></tr>")
    body.append("</tbody></table></div>")
    return body


def term_html(report: TermReport, names: bool) -> str:
    """The term's report as one page; ``names``: the instructor's copy, with each student's trajectory."""
    copy = "the instructor's copy, with each student's trajectory" if names else "without names, to show the class"
    body = ["<h1>The term's report</h1>", f'<p class="muted">{copy}</p>']
    if not report.assignments:
        body.append("<p>No assignment graded yet (<code>make grade ASSIGNMENT=...</code> writes each one's).</p>")
        return _page("The term's report", body)
    body.append("<h2>Assignments</h2><div class='scroll'><table><thead><tr><th>assignment</th><th class='n'>graded</th>"
                "<th class='n'>mean</th><th class='n'>full marks</th></tr></thead><tbody>")  # fmt: skip
    for row in report.assignments:
        mean = "–" if row["mean"] is None else f"{_points(row['mean'])} / {_points(row['max_score'])}"
        body.append(
            f"<tr><td><code>{_name(row['assignment'])}</code></td><td class='n'>{row['graded']}</td>"
            f"<td class='n'>{mean}</td><td class='n'>{_share(row['at_full_marks'], row['graded'])}</td></tr>"
        )
    body.append("</tbody></table></div>")
    if report.most_lost:
        body.append("<h2>Most lost over the term</h2><ol>")
        for row in report.most_lost:
            top = row["top_cause"]
            cause = f"; most often: {_e(top['words'])} ({top['count']})" if top else ""
            body.append(
                f"<li><code>{_name(row['assignment'])}</code> <code>{_name(row['grade_id'])}</code>: "
                f"{_points(row['lost_per_student'])} of {_points(row['points'])} point(s) lost per student, "
                f"{100 * row['share_lost']:.0f}% short of full marks{cause}</li>"
            )
        body.append("</ol>")
    if names and report.students:
        order = [row["assignment"] for row in report.assignments]
        body.append("<h2>Each student's trajectory</h2>")
        body.append('<p class="muted">Score as a share of the maximum; – not submitted, ? not graded or refused.</p>')
        body.append(
            '<div class="scroll trajectory"><table><thead><tr><th>student</th>'
            + "".join(f"<th class='n'>{k + 1}</th>" for k in range(len(order)))
            + "</tr></thead><tbody>"
        )
        for student, shares in sorted(report.students.items()):
            cells = []
            for name in order:
                value = shares.get(name, "absent")
                text = "–" if value == "absent" else "?" if value is None else f"{100 * value:.0f}%"
                cells.append(f"<td class='n'>{text}</td>")
            body.append(f"<tr><td>{_e(student)}</td>{''.join(cells)}</tr>")
        body.append("</tbody></table></div>")
        body.append('<p class="muted">' + "; ".join(f"{k + 1}: {_e(name)}" for k, name in enumerate(order)) + "</p>")
    return _page("The term's report", body)


def write_class(report: ClassReport, folder: Path) -> list[Path]:
    """The class report's files in ``folder`` (``grades/``): both pages, the JSON and the two CSVs."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{report.assignment}-report"
    written = [folder / f"{stem}.html", folder / f"{stem}-anonymous.html", folder / f"{stem}.json",
               folder / f"{stem}-items.csv", folder / f"{stem}-causes.csv"]  # fmt: skip
    written[0].write_text(class_html(report, names=True))
    written[1].write_text(class_html(report, names=False))
    written[2].write_text(json.dumps(report.to_json(), indent=1))
    with written[3].open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["grade_id", "notebook", "kind", "points", "full", "partial", "zero", "not_graded", "awaiting",
                      "blank", "mean", "points_lost", "seconds"])  # fmt: skip
        for item in report.tests:
            out.writerow([item.grade_id, item.notebook, "test", item.points, len(item.full), len(item.partial),
                          len(item.zero), len(item.not_graded), "", "", _points(item.mean), _points(item.lost),
                          f"{item.seconds:.2f}"])  # fmt: skip
        for item in report.written:
            out.writerow([item.grade_id, item.notebook, "written", item.points, "", "", "", len(item.not_graded),
                          len(item.awaiting), len(item.blank), _points(item.mean), "", ""])  # fmt: skip
    with written[4].open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["grade_id", "kind", "cause", "count", "students"])
        for item in report.tests:
            for cause in item.causes:
                out.writerow([item.grade_id, cause.kind, cause.words, cause.count, " ".join(cause.students)])
    return written


def write_term(report: TermReport, folder: Path) -> list[Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / "term-report.html", folder / "term-report-anonymous.html", folder / "term-report.json"]
    written[0].write_text(term_html(report, names=True))
    written[1].write_text(term_html(report, names=False))
    written[2].write_text(json.dumps(report.to_json(), indent=1))
    return written
