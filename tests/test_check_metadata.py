"""The course's check of cells' nbgrader metadata (`autograder.nbgrader.check_metadata`) is nbgrader's, faster.

Every kind of bad metadata that nbgrader's own check refuses, the course's refuses with the same error; the course's
notebooks pass both; `make grade`'s autograde runs the course's check in both of its steps, which never builds a
schema validator per cell (`jsonschema.validate`).
"""

from __future__ import annotations

import copy
import runpy

import jsonschema
import pytest
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.nbgraderformat.common import SchemaTooNewError, SchemaTooOldError

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.nbgrader import check_metadata
from autograder.release import course

A = "ch03_multi_head"


def _notebook():
    return notebooks.read(course.notebook_path(A, "solutions"))


def _graded(nb):
    return next(cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("grade"))


def _broken(change):
    nb = copy.deepcopy(_notebook())
    change(_graded(nb))
    return nb


BROKEN = {
    "points as text": lambda cell: cell.metadata.nbgrader.update(points="two"),
    "no points": lambda cell: cell.metadata.nbgrader.pop("points"),
    "an unknown key": lambda cell: cell.metadata.nbgrader.update(surprise=True),
    "grade as a number": lambda cell: cell.metadata.nbgrader.update(grade=1),
    "an empty grade id": lambda cell: cell.metadata.nbgrader.update(grade_id=""),
    "no grade id": lambda cell: cell.metadata.nbgrader.pop("grade_id"),
    "an old schema": lambda cell: cell.metadata.nbgrader.update(schema_version=1),
    "a newer schema": lambda cell: cell.metadata.nbgrader.update(schema_version=9),
    "a code cell as a task": lambda cell: cell.metadata.nbgrader.update(task=True),
}


def _verdict(validator, nb) -> tuple[str, str] | None:
    try:
        validator().validate_nb(nb)
    except (ValidationError, SchemaTooOldError, SchemaTooNewError) as error:
        return type(error).__name__, str(error).splitlines()[0]
    return None


@pytest.mark.parametrize("name", BROKEN)
def test_the_course_check_refuses_what_nbgrader_refuses_with_the_same_error(name):
    nb = _broken(BROKEN[name])
    verdict = _verdict(MetadataValidator, nb)
    assert verdict is not None, f"nbgrader accepts {name}: not a case of bad metadata"
    assert _verdict(check_metadata.CourseMetadataValidator, nb) == verdict


def test_the_course_notebooks_pass_both_and_no_validator_is_built_per_cell(monkeypatch):
    for assignment in course.assignments():
        for nb in (notebooks.read(course.notebook_path(assignment, kind)) for kind in ("solutions", "exercises")):
            assert _verdict(MetadataValidator, nb) is None
            assert _verdict(check_metadata.CourseMetadataValidator, nb) is None
    check_metadata.CourseMetadataValidator().validate_nb(_notebook())  # the validator built, once

    def per_cell(*args, **kwargs):
        raise AssertionError("a schema validator built for one cell")

    monkeypatch.setattr(jsonschema, "validate", per_cell)
    check_metadata.CheckCellMetadata().preprocess(_notebook(), {})
    with pytest.raises(ValidationError, match="the nbgrader metadata may be corrupted"):
        check_metadata.CheckCellMetadata().preprocess(_broken(BROKEN["points as text"]), {})


def test_make_grade_autogrades_with_the_course_check_in_both_steps():
    class Config(dict):
        def __getattr__(self, name):
            return self.setdefault(name, Config())

    config = Config()
    runpy.run_path(str(COURSE_ROOT / "nbgrader_config.py"), {"get_config": lambda: config})
    name = "autograder.nbgrader.check_metadata.CheckCellMetadata"
    for steps in (config.Autograde.sanitize_preprocessors, config.Autograde.autograde_preprocessors):
        assert name in steps and "nbgrader.preprocessors.CheckCellMetadata" not in steps
