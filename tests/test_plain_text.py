"""A written answer's rubric as `make check` prints it: plain text, no Markdown's marks, no TeX."""

import re

import pytest

from attention_course.tooling import notebooks
from autograder.release import course
from autograder.text.plain_text import plain_text, tex


def _rubrics() -> list[tuple[str, str]]:
    found = []
    for assignment in course.assignments():
        nb = notebooks.read(course.notebook_path(assignment, "solutions"))
        found += [(notebooks.cell_id(cell), cell.source) for cell in nb.cells if notebooks.is_written(cell)]
    return found


RUBRICS = _rubrics()


def test_every_assignment_has_a_written_answer_to_convert():
    assert len(RUBRICS) == len(course.assignments())


@pytest.mark.parametrize("source", [source for _, source in RUBRICS], ids=[gid for gid, _ in RUBRICS])
def test_every_rubric_reads_as_plain_text(source):
    text = plain_text(source)
    assert "$" not in text and "**" not in text and "`" not in text, text
    commands = re.findall(r"\\[A-Za-z]+|\\[,;:!]", text)
    assert not commands, f"TeX left: {commands}\n{text}"
    assert not re.search(r"[{}]", text), text
    assert text.startswith("Rubric (2 points). One point for each of:"), text
    assert all(len(line) <= 100 for line in text.splitlines()), text
    # the words are all there: each word of the source outside its mathematics and code is in the text
    words = re.findall(r"[A-Za-z]{4,}", re.sub(r"\$[^$]*\$|`[^`]*`", " ", source))
    assert all(word in text for word in words), [word for word in words if word not in text]


def test_tex_is_written_as_one_would_type_it():
    assert tex(r"1/k") == "1/k"
    assert tex(r"\frac{1}{k}") == "1/k"
    assert tex(r"\frac{a + b}{\sqrt{d_k}}") == "(a + b)/sqrt(d_k)"
    assert tex("\\lfloor h / n_\\text{rep}\n  \\rfloor") == "floor(h / n_rep)"
    assert tex(r"e^{-t (s_\max - s_j)}") == "e^(-t (s_max - s_j))"
    assert tex(r"2^{-24}") == "2^(-24)"
    assert tex(r"h \bmod n_\text{kv} \ne 0") == "h mod n_kv != 0"
    assert tex(r"\min(\max_b \text{eos\_steps}[b], \text{max\_len})") == "min(max_b eos_steps[b], max_len)"
    assert tex(r"1 + 2 + \dots + S") == "1 + 2 + ... + S"
    assert tex(r"(h L + l)\,d_h") == "(h L + l) d_h"
    assert tex(r"m\theta") == "m theta"


def test_markdown_keeps_its_words_and_code_and_loses_its_marks():
    source = (
        "## What to write\n\n"
        "**Bold** and *italic* words, `code * kept`, a [link](https://example.org), $\\sqrt{d}$ and a price of \\$5.\n"
        "* a bullet that runs on\n  to a second line\n"
        "1. a numbered one"
    )
    assert plain_text(source) == (
        "What to write\n\n"
        "Bold and italic words, code * kept, a link (https://example.org), sqrt(d) and a price of $5.\n"
        "- a bullet that runs on to a second line\n"
        "1. a numbered one"
    )
