"""The counts that the pages give in words (the chapters, the exercises and notebooks, which chapters have an
exercise, the points of each and in all) are those of ``_toc.yml`` and the assignments (``solutions/``), so that
a chapter or an exercise added, or a test cell's points changed, makes this fail until the prose says so."""

from __future__ import annotations

import re

import pytest
import yaml

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import course
from tests.support.points import max_points

# The pages that state the course's counts in words.
PAGES = ("README.md", "book/intro.md", "book/working_on_exercises.md", "book/instructor_guide.md")
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
ORDINALS = ["zeroth", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
            "eleventh", "twelfth"]  # fmt: skip


def toc_chapters() -> list[str]:
    """The chapters, in the order of the table of contents: the files of its part "Chapters"."""
    toc = yaml.safe_load((COURSE_ROOT / "_toc.yml").read_text())
    return [entry["file"].rsplit("/", 1)[-1] for part in toc["parts"] if part.get("caption") == "Chapters"
            for entry in part["chapters"]]  # fmt: skip


CHAPTERS = toc_chapters()
ASSIGNMENTS = course.assignments()
NUMBER = {chapter: int(re.match(r"ch(\d+)_", chapter)[1]) for chapter in CHAPTERS}
WITH_EXERCISE = [NUMBER[chapter] for chapter in CHAPTERS if chapter in ASSIGNMENTS]
WITHOUT_EXERCISE = [NUMBER[chapter] for chapter in CHAPTERS if chapter not in ASSIGNMENTS]


def in_words(numbers: list[int]) -> str:
    """``[1, 2, ..., 8, 10]`` as the pages say it: ``1 to 8 and 10``."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    said = [said for run in runs for said in ([f"{run[0]} to {run[-1]}"] if len(run) > 2 else map(str, run))]
    return said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}"


def text(page: str) -> str:
    return re.sub(r"\s+", " ", (COURSE_ROOT / page).read_text())


def test_the_course_has_chapters_without_an_exercise_and_every_assignment_is_a_chapter():
    assert set(ASSIGNMENTS) <= set(CHAPTERS), set(ASSIGNMENTS) - set(CHAPTERS)
    assert in_words([1, 2, 3, 4, 5, 6, 7, 8, 10]) == "1 to 8 and 10" and in_words([1, 2, 4]) == "1, 2 and 4"
    assert in_words([1, 2, 3, 4, 5, 6, 7, 8, 10, 11]) == "1 to 8, 10 and 11"


@pytest.mark.parametrize("page", PAGES)
def test_a_count_in_words_is_that_of_the_chapters_or_the_assignments(page):
    """A count of chapters, exercises, notebooks or assignments in words: "the ten chapters", "Nine assignments"."""
    counts = {"chapter": len(CHAPTERS), "exercise": len(ASSIGNMENTS), "notebook": len(ASSIGNMENTS),
              "assignment": len(ASSIGNMENTS)}  # fmt: skip
    found = re.finditer(rf"\b(?P<count>{'|'.join(WORDS[2:])}) (?P<what>chapter|exercise|notebook|assignment)s\b",
                        text(page), re.I)  # fmt: skip
    wrong = [m[0] for m in found if WORDS.index(m["count"].lower()) != counts[m["what"]]]
    assert not wrong, f"{page} says {wrong}: the course has {len(CHAPTERS)} chapters and {len(ASSIGNMENTS)} exercises"


@pytest.mark.parametrize("page", PAGES)
def test_the_chapters_said_to_have_an_exercise_are_those_with_an_assignment(page):
    """Which chapters end with an exercise: "Chapters 1 to 8 and 10 end with", "chapter 9 has none", "but the ninth"."""
    page_text = text(page)
    for m in re.finditer(r"\bChapters (?P<which>\d+(?:(?: to |, | and )\d+)*) (?:end with|have one each)", page_text):
        assert m["which"] == in_words(WITH_EXERCISE), f"{page}: {m[0]!r}, but the exercises are {WITH_EXERCISE}"
    for m in re.finditer(r"\b[Cc]hapter (?P<n>\d+)(?:, [^,.]*,)? (?:has none|has no exercise)", page_text):
        assert int(m["n"]) in WITHOUT_EXERCISE, f"{page}: {m[0]!r}, but chapter {m['n']} has an exercise"
    for m in re.finditer(r"\b(?:[Ee]very chapter|all) but the (?P<which>\w+)\b", page_text):
        last = NUMBER[CHAPTERS[-1]]
        said = "last" if [last] == WITHOUT_EXERCISE else ORDINALS[WITHOUT_EXERCISE[0]]
        assert len(WITHOUT_EXERCISE) == 1 and m["which"] == said, (
            f"{page}: {m[0]!r}, but the chapters without an exercise are {WITHOUT_EXERCISE}"
        )


@pytest.mark.parametrize("page", PAGES)
def test_the_points_of_each_exercise_and_in_all_are_the_notebooks(page):
    """A table row of an exercise ending in its points, and "267 points in all"."""
    rows = {}
    for line in (COURSE_ROOT / page).read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
        named = [a for a in ASSIGNMENTS if cells and f"`{a}`" in cells[0]]
        if named and re.fullmatch(r"\d+", cells[-1]):
            rows[named[0]] = int(cells[-1])
    wrong = {name: (said, max_points(name)) for name, said in rows.items() if said != max_points(name)}
    assert not wrong, f"{page}: the points of (said, in the notebook): {wrong}"
    if rows:
        assert sorted(rows) == ASSIGNMENTS, f"{page}: its table leaves out {sorted(set(ASSIGNMENTS) - set(rows))}"
    total = sum(max_points(name) for name in ASSIGNMENTS)
    for said in re.findall(r"\b(\d[\d,]*) points in all", text(page)):
        assert int(said.replace(",", "")) == total, f"{page}: {said} points in all, but the notebooks give {total}"


def test_the_exercise_page_says_what_the_assignments_are():
    page = text("book/working_on_exercises.md")
    assert f"## The {WORDS[len(ASSIGNMENTS)]} exercises" in page
    assert f"Chapters {in_words(WITH_EXERCISE)} end with an exercise" in page
    assert f"{sum(max_points(name) for name in ASSIGNMENTS):g} points in all" in page
    assert f"All {WORDS[len(ASSIGNMENTS)]} notebooks" in page
    # "every exercise has one" written answer: tests/test_exercises.py checks each released notebook


def test_a_count_typed_wrong_is_found(monkeypatch, tmp_path):
    """The checks above fail on the sentences that issue 57 found false."""
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "page.md").write_text(
        "Every chapter but the last ends with an exercise. All eight notebooks are built the same way.\n"
        "| `ch01_bahdanau` | items | 18 |\n\nThat is 266 points in all.\n"
    )
    monkeypatch.setattr(f"{__name__}.COURSE_ROOT", tmp_path)
    for check in (test_a_count_in_words_is_that_of_the_chapters_or_the_assignments,
                  test_the_chapters_said_to_have_an_exercise_are_those_with_an_assignment,
                  test_the_points_of_each_exercise_and_in_all_are_the_notebooks):  # fmt: skip
        with pytest.raises(AssertionError):
            check("book/page.md")
