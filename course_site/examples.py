"""The instructor guide's example class report, part of the book's Sphinx extension (:mod:`course_site.sphinx_ext`).

``class-report-example`` shows the report of the example class that ``make class-report-example`` graded
(``book/_examples/class-report/``: the test suite's right and wrong answers, graded by ``make grade``)::

    ```{class-report-example} ch02_scaled_dot_product
    ```

its figures and the causes of the test cells most lost, with links to its two pages, which the site serves
(``_static/class-report-example/``). Its causes are the grader's hints, which name what hidden checks found: in a
term that has not released the assignment, a note takes its place, and no page of it is published.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from autograder.release import course
from course_site.sphinx_ext import release_of, withheld_note

EXAMPLES = Path("book") / "_examples" / "class-report"  # tests/example_class.py's report (make class-report-example)
EXAMPLES_URL = "_static/class-report-example"  # where the site serves it


class ClassReportExample(SphinxDirective):
    """``{class-report-example} <assignment>``: the example class's report (see the module), or the note that it is
    shown once the assignment is released."""

    required_arguments = 1
    has_content = False

    def run(self):
        assignment = self.arguments[0]
        path = Path(self.env.srcdir) / EXAMPLES / f"{assignment}-report.json"
        if not path.is_file():
            raise self.error(f"class-report-example: no {path.name} in {EXAMPLES}: make class-report-example writes it")
        self.env.note_dependency(str(path))
        if not release_of(self.env).is_released(assignment):
            return [withheld_note("The report of the example class graded on", assignment, [assignment])]
        data = json.loads(path.read_text())
        summary, tests = data["summary"], data["tests"]
        up = "../" * self.env.docname.count("/")
        lost = sorted((t for t in tests if t["lost"] > 0), key=lambda t: -t["lost"])[:3]
        figures = nodes.paragraph(
            "",
            f"{summary['students']} students, {summary['graded']} graded: mean {summary['mean']:.2f} of "
            f"{data['max_score']:g} points, median {summary['median']:g}, {summary['at_full_marks']} at full marks; "
            f"{summary['awaiting_grading']} written answers awaiting grading. The test cells most lost:",
        )
        items = nodes.bullet_list()
        for test in lost:
            causes = "; ".join(f"{c['words']} ({c['count']})" for c in test["causes"][:2])
            wrong = len(test["partial"]) + len(test["zero"])
            items += nodes.list_item(
                "",
                nodes.paragraph(
                    "", "", nodes.literal(test["grade_id"], test["grade_id"]),
                    nodes.Text(f": {wrong} of {len(test['scores'])} lost points. {causes}"),
                ),
            )  # fmt: skip
        links = nodes.paragraph("", "The whole report: ")
        for k, (label, name) in enumerate(
            (
                ("the instructor's copy", f"{assignment}-report.html"),
                ("without names", f"{assignment}-report-anonymous.html"),
            )
        ):
            links += nodes.Text(", " if k else "")
            links += nodes.reference(label, label, refuri=f"{up}{EXAMPLES_URL}/{name}")
        links += nodes.Text(".")
        return [nodes.container("", figures, items, links, classes=["class-report-example"])]


def copy_class_report_examples(app, exception):
    """The example class reports into the site (``_static/class-report-example/``), each of an assignment released."""
    if exception is not None or app.builder.format != "html":
        return
    release = course.Release.from_key(app.config.course_release)
    target = Path(app.outdir) / EXAMPLES_URL
    for path in sorted((Path(app.srcdir) / EXAMPLES).glob("*-report*.html")):
        if release.is_released(path.name.partition("-report")[0]):
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target / path.name)


def setup(app):
    app.add_directive("class-report-example", ClassReportExample)
    app.connect("build-finished", copy_class_report_examples)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
