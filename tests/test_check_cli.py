"""The exit status of `make check` and `make validate`, and of their commands: 0 every test passed, 1 a test
failed, 2 not checked (a usage error, a file that is not a readable notebook, the grader's own failure: never 1).
Both Makefiles, the instructor's and the students' template, fail unless the command's status is 0."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.api import items
from autograder.api.items import CheckFailed
from autograder.cli import check, validate
from autograder.grading import notebook as graded_notebook
from autograder.grading import report as graded
from autograder.grading.classroom import fill
from autograder.grading.notebook import grade_notebook
from autograder.release import course

A = "ch02_scaled_dot_product"
STUDENTS_MAKEFILE = COURSE_ROOT / "course_site" / "templates" / "student" / "Makefile"


def test_a_failure_of_the_grader_is_not_checked_not_a_score(tmp_path, monkeypatch, capsys):
    path = tmp_path / f"{A}.ipynb"
    shutil.copy(course.notebook_path(A, "exercises"), path)

    def crash(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr(check, "grade_notebook", crash)
    assert check.main([str(path)]) == 2
    out = capsys.readouterr()
    verdict = out.out.strip().splitlines()[-1]
    assert verdict == "Verdict: not checked. The grader failed: OSError: no space left on device"
    assert "Traceback" in out.err


def _report(*passed: bool, message: str = "softmax: rows sum to 1 failed") -> graded.Report:
    report = graded.Report(A, A)
    for index, ok in enumerate(passed):
        report.tests[f"test_{index}"] = graded.TestResult(f"test_{index}", 1.0, ok, "" if ok else message)
    return report


def _answered(path: Path, assignment: str = A, **answers) -> Path:
    """The released notebook of ``assignment`` with every cell answered (``answers`` by grade id: a written
    answer's text, or None to leave it as released), written at ``path``."""
    nb = fill(assignment, {gid: text for gid, text in answers.items() if text is not None})
    for cell in nb.cells:
        if notebooks.cell_id(cell) in answers and answers[notebooks.cell_id(cell)] is None:
            cell.source = notebooks.WRITTEN_PLACEHOLDER
    nbformat.write(nb, str(path))
    return path


@pytest.mark.parametrize(
    "report,status,verdict",
    [
        (
            _report(True, True),
            0,
            "Verdict: every test passes (2 / 2); the written answer explain_saturated_attention (2 points) awaits "
            "your instructor's grading. Ready to submit.",
        ),
        (_report(True, False), 1, "Verdict: 1 / 2; 1 test fails."),
        (
            _report(False, False, message="no test ran: could not read the notebook: NotJSONError: not JSON"),
            2,
            "Verdict: not checked. The notebook was not run: could not read the notebook: NotJSONError: not JSON",
        ),
    ],
    ids=["full marks", "a test fails", "not run"],
)
def test_check_exits_0_for_full_marks_1_for_a_failed_test_and_2_for_a_notebook_not_run(
    report, status, verdict, tmp_path, monkeypatch, capsys
):
    path = _answered(tmp_path / f"{A}.ipynb")
    monkeypatch.setattr(check, "grade_notebook", lambda *args, **kwargs: report)
    assert check.main([str(path)]) == status
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith(verdict)


def _notebook(path: Path, *tests: str) -> Path:
    """A notebook of one code cell and a test cell per source in ``tests`` (nbgrader's metadata, 1 point each)."""
    cells = [new_code_cell("x = 1")]
    for index, source in enumerate(tests):
        meta = {"grade": True, "solution": False, "locked": True, "points": 1, "grade_id": f"test_{index}"}
        cells.append(new_code_cell(source, metadata={"nbgrader": {**meta, "schema_version": 3}}))
    nbformat.write(new_notebook(cells=cells), str(path))
    return path


def test_validate_exits_0_when_every_visible_test_passed_and_1_when_one_failed(tmp_path, capsys):
    assert validate.main([str(_notebook(tmp_path / "right.ipynb", "assert x == 1"))]) == 0
    assert "All visible tests passed" in capsys.readouterr().out
    assert validate.main([str(_notebook(tmp_path / "wrong.ipynb", "assert x == 1", "assert x == 2"))]) == 1
    out = capsys.readouterr().out
    assert "FAIL  test_1" in out and "pass  test_0" in out and "Some visible tests failed" in out


def test_validate_exits_2_for_a_file_that_is_not_a_notebook_with_tests(tmp_path, capsys):
    broken = tmp_path / "broken.ipynb"
    broken.write_text('{"cells": [ not json')
    assert validate.main([str(broken)]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"Not validated: {broken} could not be read as a notebook (") and "Traceback" not in out
    assert validate.main([str(_notebook(tmp_path / "untested.ipynb"))]) == 2
    assert "untested.ipynb has no test cells: is it an exercise?" in capsys.readouterr().out
    with pytest.raises(SystemExit) as usage:
        validate.main([str(tmp_path / "absent.ipynb")])
    assert usage.value.code == 2


def _make(makefile_dir: Path, target: str, status: int, tmp_path: Path, *old: str) -> subprocess.CompletedProcess:
    """`make target NOTEBOOK=...` in ``makefile_dir`` with a stand-in python that exits with ``status`` (BIN
    given on the command line: the venv and the sandbox taken as made, ``old``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    python = bin_dir / "python"
    python.write_text(f"#!/bin/sh\necho 'the command ran'\nexit {status}\n")
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.run(
        ["make", "-C", str(makefile_dir), *(f"--assume-old={name}" for name in old), f"BIN={bin_dir}", target]
        + ["NOTEBOOK=exercises/x/x.ipynb"],
        capture_output=True,
        text=True,
        env=env,
    )


def _makefile_folder(makefile, tmp_path):
    """The folder whose Makefile runs (the course's, or a copy of the students' in ``tmp_path``), and the files
    that make must take as up to date there."""
    if makefile == "instructor":
        return COURSE_ROOT, (".venv/.installed", ".venv/.bytecode", "sandbox")
    folder = tmp_path / "students"
    folder.mkdir()
    shutil.copy(STUDENTS_MAKEFILE, folder / "Makefile")
    return folder, (".venv/.installed", ".venv/.jupyter-config")


@pytest.mark.parametrize("target", ["check", "validate"])
@pytest.mark.parametrize("makefile", ["instructor", "students"])
def test_make_check_and_validate_fail_unless_every_test_passed(makefile, target, tmp_path):
    """make exits 0 only for the command's 0; for 1 (a test failed) and 2 (not checked) it fails, naming the
    status (make's own exit status is 2 for both)."""
    folder, old = _makefile_folder(makefile, tmp_path)
    for status in (0, 1, 2):
        made = _make(folder, target, status, tmp_path, *old)
        assert "the command ran" in made.stdout, made.stdout + made.stderr
        assert (made.returncode == 0) == (status == 0), (status, made.stdout, made.stderr)
        if status:
            assert f"[{target}] Error {status}" in made.stderr or f"{target}] Error {status}" in made.stderr, (
                made.stderr
            )


def test_a_partly_right_question_is_marked_part_with_its_share(tmp_path, monkeypatch, capsys):
    report = _report(True, False, message="mask_for: 1 of 3 situations wrong, 2 right")
    report.tests["test_1"].partial = 0.67
    path = tmp_path / f"{A}.ipynb"
    shutil.copy(course.notebook_path(A, "exercises"), path)
    monkeypatch.setattr(check, "grade_notebook", lambda *args, **kwargs: report)
    assert check.main([str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "  PART  test_1  0.67 / 1" in lines and "        mask_for: 1 of 3 situations wrong, 2 right" in lines
    assert lines[-1].startswith("Verdict: 1.67 / 2; 1 test fails.")


def test_a_written_answer_is_left_to_the_instructor_and_its_rubric_shown_as_plain_text(tmp_path, monkeypatch, capsys):
    """make check does not grade a written answer: it says so and prints its points and rubric, as plain text,
    from the instructor notebook (which a students' copy holds once the chapter is released); written in, it
    awaits the instructor, and full marks on the tests are ready to submit."""
    a = "ch10_what_heads_learn"
    report = graded.Report(a, a)
    report.tests["test_0"] = graded.TestResult("test_0", 2.0, True, "")
    path = _answered(tmp_path / f"{a}.ipynb", a, explain_split_prefix_score="The score averages 1/k.")
    monkeypatch.setattr(check, "grade_notebook", lambda *args, **kwargs: report)
    assert check.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "Written answers: graded by hand by your instructor, not here." in out
    assert "  explain_split_prefix_score (2 points): written, awaiting your instructor's grading" in out
    assert "        Rubric (2 points). One point for each of:" in out
    assert " 1/k;" in out and "(1 + 1/2)/2 = 0.75" in out
    rubrics = out[out.index("Written answers:") : out.index("Verdict:")]
    assert "$" not in rubrics and "**" not in rubrics and "\\" not in rubrics
    assert out.splitlines()[-1] == (
        "Verdict: every test passes (2 / 2); the written answer explain_split_prefix_score (2 points) awaits "
        "your instructor's grading. Ready to submit."
    )
    assert "  explain_saturated_attention (2 points)" in check.written_rubrics(A)


@pytest.mark.parametrize("left", ["YOUR ANSWER HERE", "", "deleted"])
def test_check_is_never_ready_to_submit_with_a_written_answer_left_as_released(left, tmp_path, monkeypatch, capsys):
    """Every test passing, a written answer still as released (placeholder, blank, or its cell deleted) is not
    ready to submit: the verdict names it with its points, and make check fails (status 1)."""
    a = "ch10_what_heads_learn"
    report = graded.Report(a, a)
    report.tests["test_0"] = graded.TestResult("test_0", 2.0, True, "")
    path = _answered(tmp_path / f"{a}.ipynb", a, explain_split_prefix_score=None)
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if notebooks.cell_id(cell) == "explain_split_prefix_score":
            cell.source = left
    nb.cells = [c for c in nb.cells if left != "deleted" or notebooks.cell_id(c) != "explain_split_prefix_score"]
    nbformat.write(nb, str(path))
    monkeypatch.setattr(check, "grade_notebook", lambda *args, **kwargs: report)
    assert check.main([str(path)]) == 1
    out = capsys.readouterr().out
    assert "Ready to submit" not in out
    assert "  explain_split_prefix_score (2 points): NOT WRITTEN yet" in out
    assert out.splitlines()[-1] == (
        "Verdict: every test passes (2 / 2), but the written answer explain_split_prefix_score (2 points) is still "
        "as released (YOUR ANSWER HERE or blank): write it before you submit. Not ready to submit."
    )
    report.tests["test_0"] = graded.TestResult("test_0", 2.0, False, "softmax: rows sum to 1 failed")
    assert check.main([str(path)]) == 1
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .endswith(
            "fix that item, and check again. And the written answer explain_split_prefix_score (2 points) is still "
            "as released: write it too."
        )
    )


def test_the_verdict_of_a_notebook_without_written_answers_is_full_marks():
    assert check.verdict(_report(True, True)) == "Verdict: full marks (2 / 2). Ready to submit."
    answered = [notebooks.WrittenAnswer("a", 1.0, True), notebooks.WrittenAnswer("b", 2.0, True)]
    assert check.verdict(_report(True, True), answered) == (
        "Verdict: every test passes (2 / 2); the written answers a (1 point) and b (2 points) await your "
        "instructor's grading. Ready to submit."
    )


WRONG_SOFTMAX = (
    "import numpy as np\n"
    "def softmax(x, axis=-1):\n"
    "    e = np.exp((x - x.max(axis=axis, keepdims=True)) / 2)\n"
    "    return e / e.sum(axis=axis, keepdims=True)\n"
)


def test_make_check_shows_a_visible_known_answer_as_make_validate_does(tmp_path, capsys):
    """A visible test's known answer is in the released cell: where it fails, the grader (make check) shows the
    value returned beside it, in the same words as make validate's kernel."""
    report = grade_notebook(A, fill(A, {"softmax": WRONG_SOFTMAX}), isolation="none", only=["softmax"])
    message = report.tests["test_softmax_values"].message
    assert "a known answer failed" in message, message
    shown = [line.strip() for line in message.splitlines() if line.strip().startswith(("returned:", "the known"))]
    assert shown == ["returned: [0.1863, 0.3072, 0.5065]", "the known answer: [0.09003, 0.2447, 0.6652]"], message
    path = tmp_path / f"{A}.ipynb"
    nbformat.write(fill(A, {"softmax": WRONG_SOFTMAX}), str(path))
    lines, passed = validate.validate(path)
    validated = [line.strip() for line in lines if line.strip().startswith(("returned:", "the known"))]
    assert not passed and validated[:2] == shown, lines


def _made(target: str, path: Path) -> subprocess.CompletedProcess:
    """``make -s <target> NOTEBOOK=path`` in the course's checkout, as a student runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE") and k not in ("NOTEBOOK", "ASSIGNMENT")}
    return subprocess.run(
        ["make", "-s", "-C", str(COURSE_ROOT), "--assume-old=.venv/.installed", "--assume-old=.venv/.bytecode"]
        + [target, f"NOTEBOOK={path}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def _fail_block(output: str, test: str) -> list[str]:
    """The lines of ``test``'s FAIL block in a make validate or make check report."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("FAIL") and test in line)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("        ")), len(lines))
    return lines[start:end]


@pytest.mark.slow
def test_validate_and_check_label_each_difference_with_the_helpers_it_ran_with(tmp_path):
    """MultiHeadAttention scaled by √d_model, beside a split_heads that mixes positions and heads: make validate
    runs it with the student's own helpers (the largest difference 0.764 with torch's), make check with correct
    ones, as grading does (0.0818). One test, two numbers: each failure's first line says what it compares."""
    from tests.buggy.ch03_multi_head import BUGS

    assignment = "ch03_multi_head"
    wrong = {bug.item: bug.code for bug in BUGS if bug.name in ("mha_scale_by_d_model", "split_without_transpose")}
    path = tmp_path / f"{assignment}.ipynb"
    nbformat.write(fill(assignment, wrong), str(path))
    validated, checked = _made("validate", path), _made("check", path)
    own = _fail_block(validated.stdout, "test_mha_matches_torch")
    graded_with = _fail_block(checked.stdout, "test_mha_matches_torch")
    assert (
        "CheckFailed: MultiHeadAttention(16, 4) (run with your own split_heads, merge_heads): "
        "agreement with torch.nn.MultiheadAttention failed"
    ) in [line.strip() for line in own], validated.stdout
    assert (
        "MultiHeadAttention(16, 4) (graded with correct split_heads, merge_heads): "
        "agreement with torch.nn.MultiheadAttention failed"
    ) in [line.strip() for line in graded_with], checked.stdout
    differences = [next(line for line in block if "largest difference" in line) for block in (own, graded_with)]
    assert "is 0.764 " in differences[0] and "is 0.0818 " in differences[1], differences
    # the helpers' own test fails in both, and names the helper's mistake
    assert "FAIL  test_split_heads_values" in validated.stdout and "FAIL  test_split_heads_values" in checked.stdout


def test_a_failed_test_says_whether_its_visible_or_its_hidden_part_failed_in_check_and_feedback(tmp_path):
    """MultiHeadAttention scaled by √d_model that also fills masked scores with -1e9 alone: the scaling fails
    test_mha_matches_torch's visible part; the fill fails test_mha_mask's hidden part (a query that sees no key)
    while its visible part passes (make validate passes it). The check's report and the feedback (the test cell's
    output, which nbgrader's feedback page shows) say which part of each failed."""
    from autograder.nbgrader.execute import apply_report
    from tests.catalogue import variant

    assignment = "ch03_multi_head"
    code = variant(
        assignment,
        "MultiHeadAttention",
        ("math.sqrt(q.size(-1))", "math.sqrt(query.size(-1))"),
        ('float("-inf")', "-1e9"),
        ("weights = weights.masked_fill(~mask, 0.0)", "weights = weights"),
    )
    nb = fill(assignment, {"MultiHeadAttention": code})
    report = grade_notebook(assignment, nb, isolation="none", only=["MultiHeadAttention"])
    visible = "The visible part of this test failed: make validate runs it too."
    hidden = "The hidden part of this test failed; its visible part (make validate runs it) passed."
    assert report.tests["test_mha_matches_torch"].message.splitlines()[0] == visible, report.tests
    assert report.tests["test_mha_mask"].message.splitlines()[0] == hidden, report.tests
    assert report.tests["test_mha_shapes"].passed  # a cell that passes says nothing
    shown = check.format_report(report, tmp_path / f"{assignment}.ipynb").splitlines()
    assert shown[shown.index(next(line for line in shown if "FAIL  test_mha_mask" in line)) + 1].strip() == hidden
    apply_report(nb, report)
    outputs = {notebooks.cell_id(cell): cell.outputs for cell in nb.cells if notebooks.is_test(cell)}
    assert outputs["test_mha_mask"][0]["evalue"].startswith(hidden + "\n"), outputs["test_mha_mask"]
    assert outputs["test_mha_matches_torch"][0]["evalue"].startswith(visible + "\n")


def _with_blank(assignment: str, *blank: str) -> nbformat.NotebookNode:
    """The reference's notebook with the solution cells ``blank`` left as released (``raise NotImplementedError()``)."""
    released = {notebooks.cell_id(c): c.source for c in fill(assignment, blank=True).cells if notebooks.is_solution(c)}
    nb = fill(assignment)
    for cell in nb.cells:
        if notebooks.cell_id(cell) in blank:
            cell.source = released[notebooks.cell_id(cell)]
    return nb


def test_check_says_once_that_an_unwritten_part_is_not_written_yet(tmp_path):
    """Chapter 11 with Part 2 (flash_attention_backward) as released: its eight test cells each FAIL with their
    score, and one line after them says that the item is not written yet, not eight identical messages; the cell
    that runs it raised NotImplementedError, which the report says means what it runs is not written yet (never
    "raised NotImplementedError: " and nothing after the colon)."""
    assignment = "ch11_flash_attention"
    nb = _with_blank(assignment, "flash_attention_backward")
    report = grade_notebook(assignment, nb, isolation="none", only=["flash_attention_backward"])
    lines = check.format_report(report, tmp_path / f"{assignment}.ipynb").splitlines()
    failed = [line for line in lines if line.startswith("  FAIL  test_backward_")]
    assert len(failed) == 8 and lines.index(failed[-1]) - lines.index(failed[0]) == 7, lines
    said = lines[lines.index(failed[-1]) + 1].strip()
    assert said == (
        "flash_attention_backward is not written yet (it raises NotImplementedError): these 8 tests fail until it is."
    ), lines
    assert sum("not written yet" in line for line in lines) == 2 and not any("problem:" in line for line in lines)
    raised = [line for line in lines if "raised NotImplementedError" in line]
    assert raised == [
        "  the second code cell under the heading 'Part 2: the backward pass' raised NotImplementedError: what it "
        "runs is not written yet"
    ], lines
    # the feedback keeps each cell's own message, which says the same of its item
    assert all(
        "flash_attention_backward is not written yet" in test.message and test.unwritten == "flash_attention_backward"
        for test in report.tests.values()
    )


def test_validate_says_once_that_an_unwritten_item_is_not_written_yet(tmp_path):
    """make validate on chapter 3 with MultiHeadAttention as released: its four visible test cells FAIL, then one line
    says it is not written yet; a cell that raised the stubs' empty NotImplementedError says what that means."""
    assignment = "ch03_multi_head"
    path = tmp_path / f"{assignment}.ipynb"
    nbformat.write(_with_blank(assignment, "MultiHeadAttention"), str(path))
    lines, passed = validate.validate(path)
    assert not passed
    failed = [line for line in lines if line.startswith("  FAIL  ")]
    assert [line.split()[1] for line in failed] == [
        "test_mha_shapes",
        "test_mha_matches_torch",
        "test_mha_mask",
        "test_mha_error",
    ], lines
    assert lines[lines.index(failed[-1]) + 1].strip() == (
        "MultiHeadAttention is not written yet (it raises NotImplementedError): these 4 tests fail until it is."
    ), lines
    assert not any("CheckFailed" in line or line.rstrip().endswith(":") for line in lines), lines
    assert any(line.endswith("NotImplementedError: what it runs is not written yet") for line in lines), lines


def test_a_hidden_known_answer_stays_hidden_where_the_cell_runs_visible_ones_beside_it():
    """The grader runs a cell's visible lines and its hidden region in turn (grading/notebook.test_runs): the same
    failing known answer shows its values in the visible lines and none in the hidden region."""
    item = "item = Item('ch02_scaled_dot_product', 'softmax', lambda x, axis=-1: np.exp(x) / 3)\n"
    known = "check_equals(item, [literal([1.0, 2.0, 3.0])], [0.09, 0.2447, 0.6652])\n"
    header = "import numpy as np\nfrom autograder import Item, check_equals, literal\n" + item

    def failure(code: str) -> str:
        namespace: dict = {}
        with pytest.raises(CheckFailed) as failed:
            for hidden, run in graded_notebook.test_runs(code, "test_0"):
                with items.hidden_tests(hidden):
                    exec(run, namespace)
        return str(failed.value)

    visible = failure(header + known + "### BEGIN HIDDEN TESTS\nx = 1\n### END HIDDEN TESTS\n")
    assert "returned: [0.9061, 2.463, 6.695]" in visible and "the known answer: [0.09, 0.2447, 0.6652]" in visible
    hidden = failure(header + "### BEGIN HIDDEN TESTS\n" + known + "### END HIDDEN TESTS\n")
    assert "a known answer failed" in hidden and "returned:" not in hidden and "0.2447" not in hidden, hidden
    # a hidden region inside a block cannot run apart: the cell runs whole, as hidden
    nested = header + "if True:\n    ### BEGIN HIDDEN TESTS\n    " + known + "    ### END HIDDEN TESTS\n" + known
    assert [hidden for hidden, _ in graded_notebook.test_runs(nested, "test_0")] == [True]
    assert "returned:" not in failure(nested)


def _validated(tmp_path: Path, name: str, *cells) -> tuple[int, list[str]]:
    path = tmp_path / name
    nbformat.write(new_notebook(cells=list(cells)), str(path))
    status = validate.main([str(path)])
    return status, path


def _written(text: str, gid: str = "explain_x", points: float = 2) -> nbformat.NotebookNode:
    meta = {"grade": True, "solution": True, "locked": False, "points": points, "grade_id": gid}
    return new_markdown_cell(text, metadata={"nbgrader": {**meta, "schema_version": 3}})


def _test(source: str, gid: str = "test_0") -> nbformat.NotebookNode:
    meta = {"grade": True, "solution": False, "locked": True, "points": 1, "grade_id": gid}
    return new_code_cell(source, metadata={"nbgrader": {**meta, "schema_version": 3}})


def test_validate_names_a_written_answer_left_as_released_and_not_one_written(tmp_path, capsys):
    """make validate warns of a written answer still as released, with its points, and that the instructor grades
    it by hand; its last line never says all is done alone. It is not a test: the status stays 0."""
    status, _ = _validated(
        tmp_path, "left.ipynb", new_code_cell("x = 1"), _test("assert x == 1"), _written("YOUR ANSWER HERE")
    )
    out = capsys.readouterr().out.splitlines()
    assert status == 0
    assert "Written answers: graded by hand by your instructor, with a rubric; not checked here" in out
    assert any(line.startswith("  NOT WRITTEN  explain_x (2 points): its cell is as released") for line in out), out
    assert out[-1] == (
        "All visible tests passed, but the written answer explain_x (2 points) is not written yet: write it before "
        "you submit. Hidden tests run when your work is graded."
    )
    status, _ = _validated(
        tmp_path, "written.ipynb", new_code_cell("x = 1"), _test("assert x == 1"), _written("Because the gaps grow.")
    )
    out = capsys.readouterr().out.splitlines()
    assert status == 0
    assert "  written      explain_x (2 points): awaits your instructor's grading" in out
    assert not any("NOT WRITTEN" in line for line in out)
    assert out[-1] == "All visible tests passed. Hidden tests run when your work is graded."
    status, _ = _validated(tmp_path, "both.ipynb", new_code_cell("x = 1"), _test("assert x == 2"), _written(""))
    out = capsys.readouterr().out.splitlines()
    assert status == 1
    assert out[-1] == (
        "Some visible tests failed or a cell raised an error: see above. And the written answer explain_x "
        "(2 points) is not written yet."
    )


def test_validate_compares_written_answers_with_the_released_notebook(tmp_path, capsys):
    """A copy of an exercise (named after it) is compared with its released notebook: a written answer whose cell
    was deleted is still to write, with the released notebook's points."""
    folder = tmp_path / "ch10_what_heads_learn"
    folder.mkdir()
    status, _ = _validated(folder, "my copy.ipynb", new_code_cell("x = 1"), _test("assert x == 1"))
    out = capsys.readouterr().out
    assert status == 0
    assert "  NOT WRITTEN  explain_split_prefix_score (2 points)" in out


def test_validate_shows_the_value_returned_beside_a_visible_known_answer(tmp_path, capsys):
    """A visible test's known answer is public: where it fails, make validate shows what the code returned."""
    source = (
        "import numpy as np\n"
        "from autograder import Item, check_equals, literal\n"
        "item = Item('ch02_scaled_dot_product', 'softmax', lambda x, axis=-1: np.exp(x) / 3)\n"
        "check_equals(item, [literal([1.0, 2.0, 3.0])], [0.09, 0.2447, 0.6652])\n"
    )
    status, _ = _validated(tmp_path, "values.ipynb", _test(source))
    out = capsys.readouterr().out
    assert status == 1
    assert "softmax: a known answer failed" in out, out
    assert "returned: [0.9061, 2.463, 6.695]" in out and "the known answer: [0.09, 0.2447, 0.6652]" in out, out


# Names that browsers, Colab and people give a notebook: make must pass each to the command as it is.
ODD_NAMES = ("ch02_scaled_dot_product (1).ipynb", "Copy of ch02_scaled_dot_product.ipynb", """it's "mine" (2).ipynb""")


@pytest.mark.parametrize("target", ["check", "validate"])
@pytest.mark.parametrize("makefile", ["instructor", "students"])
def test_make_passes_the_notebook_and_assignment_as_given(makefile, target, tmp_path):
    """A name with spaces, parentheses and quotes reaches the command as one argument, unchanged (the shell's
    syntax error before); make check passes ASSIGNMENT as --assignment."""
    folder, old = _makefile_folder(makefile, tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text("#!/bin/sh\nprintf 'arg:%s\\n' \"$@\"\n")
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE") and k not in ("NOTEBOOK", "ASSIGNMENT")}
    for name in ODD_NAMES:
        notebook = f"downloads/{name}"
        made = subprocess.run(
            ["make", "-s", "-C", str(folder), *(f"--assume-old={o}" for o in old), f"BIN={bin_dir}", target]
            + [f"NOTEBOOK={notebook}", f"ASSIGNMENT={A}"],
            capture_output=True,
            text=True,
            env=env,
        )
        assert made.returncode == 0, made.stdout + made.stderr
        args = [line.removeprefix("arg:") for line in made.stdout.splitlines() if line.startswith("arg:")]
        assert notebook in args, (args, made.stderr)
        if target == "check":
            assert args[args.index("--assignment") + 1] == A, args
        else:
            assert "--assignment" not in args, args


def test_the_assignment_of_a_renamed_copy_is_the_one_its_setup_cell_declares(tmp_path, monkeypatch, capsys):
    """Colab's "Copy of ..." in a folder of any name: the setup cell's ASSIGNMENT names it, where it is one of
    the course's; a name that is not (a path, say) is never taken, and then check asks for --assignment."""
    copy = tmp_path / "Copy of ch11_flash_attention.ipynb"
    shutil.copy(course.notebook_path("ch11_flash_attention", "exercises"), copy)
    assert course.assignment_names(copy) == ["ch11_flash_attention"]
    seen = []
    monkeypatch.setattr(check, "grade_notebook", lambda assignment, *a, **k: seen.append(assignment) or _report(True))
    check.main([str(copy)])
    assert seen == ["ch11_flash_attention"]
    nb = nbformat.read(str(copy), as_version=4)
    for cell in nb.cells:
        if notebooks.cell_id(cell) == "setup":
            assert 'ASSIGNMENT = "ch11_flash_attention"' in cell.source
            cell.source = cell.source.replace('"ch11_flash_attention"', '"../../solutions/ch11_flash_attention"')
    nbformat.write(nb, str(copy))
    assert notebooks.declared_assignment(nb) == "../../solutions/ch11_flash_attention"
    assert course.assignment_names(copy) == []
    with pytest.raises(SystemExit) as usage:
        check.main([str(copy)])
    assert usage.value.code == 2
    err = capsys.readouterr().err
    assert "cannot tell the assignment of" in err and "pass --assignment (make check ASSIGNMENT=...)" in err, err
    check.main([str(copy), "--assignment", "ch11_flash_attention"])
    assert seen == ["ch11_flash_attention"] * 2


MISNAMED = ("Copy of ch03_multi_head.ipynb", "ch03_multi_head (1).ipynb", "ch03_multi_head-Copy1.ipynb")


@pytest.mark.parametrize("name", MISNAMED)
def test_check_says_first_that_a_misnamed_notebook_would_not_be_graded_and_what_to_rename_it(
    name, tmp_path, monkeypatch, capsys
):
    """Colab's, a browser's and Jupyter's names for a copy: make grade refuses them (0 points: the only name it reads
    is ch03_multi_head.ipynb), so make check, its tests all passing, says so on its first line, names the name to
    give it, never says "Ready to submit", and fails (1); the same notebook so named is ready."""
    assignment = "ch03_multi_head"
    folder = tmp_path / "Downloads"
    folder.mkdir()
    report = graded.Report(assignment, assignment)
    report.tests["test_mha_shapes"] = graded.TestResult("test_mha_shapes", 1.0, True, "")
    monkeypatch.setattr(check, "grade_notebook", lambda *args, **kwargs: report)
    copy = _answered(folder / name, assignment)
    assert check.main([str(copy)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0] == (
        f"NOT GRADED UNDER THIS NAME: {name} would not be graded under its name: the only name grading reads is "
        f"{assignment}.ipynb. Rename it {assignment}.ipynb before you submit (a submission without it scores 0)."
    ), out
    assert out[-1].startswith("Verdict: every test passes (1 / 1), but rename the notebook ch03_multi_head.ipynb")
    assert "Not ready to submit." in out[-1] and "Ready to submit." not in out[-1].replace("Not ready", ""), out
    renamed = copy.rename(folder / f"{assignment}.ipynb")
    assert check.main([str(renamed)]) == 0
    out = capsys.readouterr().out
    assert "NOT GRADED" not in out and "rename" not in out and out.strip().splitlines()[-1].endswith("Ready to submit.")


def test_a_failing_check_of_a_misnamed_notebook_says_to_rename_it_too(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(check, "grade_notebook", lambda *args, **kwargs: _report(True, False))
    copy = _answered(tmp_path / f"Copy of {A}.ipynb")
    assert check.main([str(copy)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith(f"NOT GRADED UNDER THIS NAME: Copy of {A}.ipynb would not be graded under its name")
    assert out[-1].startswith("Verdict: 1 / 2; 1 test fails.") and out[-1].endswith(
        f"And rename the notebook {A}.ipynb, the only name grading reads."
    ), out


def test_validate_says_first_and_last_that_a_misnamed_notebook_would_not_be_graded(tmp_path, capsys):
    """make validate runs a misnamed copy (its folder names the assignment) and passes, but its first and last
    lines say what to rename it to; a notebook of the assignment's name hears nothing of it."""
    folder = tmp_path / A
    folder.mkdir()
    assert validate.main([str(_notebook(folder / f"{A} (1).ipynb", "assert x == 1"))]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith(f"NOT GRADED UNDER THIS NAME: {A} (1).ipynb would not be graded under its name"), out
    assert out[-1] == f"And rename the notebook {A}.ipynb before you submit: grading reads no other name.", out
    assert validate.main([str(_notebook(folder / f"{A}.ipynb", "assert x == 1"))]) == 0
    assert "rename" not in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("name", ODD_NAMES[:2])
def test_make_validate_and_check_run_a_right_notebook_downloaded_or_copied_and_say_to_rename_it(name, tmp_path):
    """The reference solution under a browser's and Colab's name, in a folder named for nothing, as a student
    meets it in a fresh clone: make validate and make check find its assignment and run it; every test passes,
    but each says first that grading would not read it under its name, and make check fails on it (make grade
    refuses it: 0 points) until it is renamed."""
    path = tmp_path / "Downloads" / name
    path.parent.mkdir()
    shutil.copy(course.notebook_path(A, "solutions"), path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE") and k not in ("NOTEBOOK", "ASSIGNMENT")}
    warning = f"NOT GRADED UNDER THIS NAME: {name} would not be graded under its name"
    for target, status, last in (
        ("validate", 0, f"And rename the notebook {A}.ipynb before you submit"),
        ("check", 2, "Verdict: every test passes ("),
    ):
        made = subprocess.run(
            ["make", "-s", "-C", str(COURSE_ROOT), "--assume-old=.venv/.installed", "--assume-old=.venv/.bytecode"]
            + [target, f"NOTEBOOK={path}"],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert made.returncode == status, made.stdout + made.stderr
        lines = made.stdout.strip().splitlines()
        assert lines[0].startswith(warning) and lines[-1].startswith(last), made.stdout
        if target == "validate":
            assert "All visible tests passed." in made.stdout, made.stdout
        else:
            assert f"), but rename the notebook {A}.ipynb, the only name grading reads" in lines[-1], made.stdout
            assert f"{target}] Error 1" in made.stderr and "Ready to submit" not in made.stdout, made.stderr


@pytest.mark.parametrize("target,variable", [("student-repo", "DEST"), ("check-site", "SITE")])
def test_make_passes_a_folder_as_given(target, variable, tmp_path):
    """The folders that targets take pass as one argument too, whatever their name holds."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text("#!/bin/sh\nprintf 'arg:%s\\n' \"$@\"\n")
    (bin_dir / "python").chmod(0o755)
    folder = """../it's "the" site (1)"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE") and k != variable}
    made = subprocess.run(
        ["make", "-s", "-C", str(COURSE_ROOT), "--assume-old=.venv/.installed", "--assume-old=.venv/.bytecode"]
        + [f"BIN={bin_dir}", target, f"{variable}={folder}"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    args = [line.removeprefix("arg:") for line in made.stdout.splitlines() if line.startswith("arg:")]
    assert args.count(folder) == (3 if target == "check-site" else 1), args
