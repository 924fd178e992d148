"""nbgrader's check of every cell's nbgrader metadata, with the schema's validator built once (``CheckCellMetadata``).

nbgrader checks each cell's metadata against its JSON schema with ``jsonschema.validate``, which checks the schema
itself and builds a validator for every cell: about 1.5 ms a cell, twice per notebook in ``nbgrader autograde``
(its sanitising and its grading steps), a tenth of a second per notebook of ``make grade``'s phase 4, which one
process runs for the whole class. The course's check is nbgrader's (the same schema, the same checks after it,
the same error, :class:`nbgrader.nbgraderformat.ValidationError`), with the validator of each schema version built
once per process.
"""

from __future__ import annotations

import traceback

import jsonschema
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.nbgraderformat.common import BaseMetadataValidator
from nbgrader.preprocessors import NbGraderPreprocessor

_VALIDATORS: dict[int, jsonschema.protocols.Validator] = {}  # schema version -> its validator, checked once


class _SchemaOnce(BaseMetadataValidator):
    """The schema part of nbgrader's check of a cell, its validator built once (the version checks are nbgrader's)."""

    def validate_cell(self, cell) -> None:
        meta = cell.metadata.get("nbgrader")
        if meta is None or meta.get("schema_version", 0) != self.schema_version:
            super().validate_cell(cell)  # nothing to check, or nbgrader's error on another version
            return
        validator = _VALIDATORS.get(self.schema_version)
        if validator is None:
            kind = jsonschema.validators.validator_for(self.schema)
            kind.check_schema(self.schema)
            validator = _VALIDATORS.setdefault(self.schema_version, kind(self.schema))
        error = jsonschema.exceptions.best_match(validator.iter_errors(meta))
        if error is not None:
            raise error


class CourseMetadataValidator(MetadataValidator, _SchemaOnce):
    """nbgrader's metadata validator (its checks after the schema's: grade ids, points, markdown cells, ids unique),
    whose schema check is :class:`_SchemaOnce`'s."""


class CheckCellMetadata(NbGraderPreprocessor):
    """nbgrader's ``CheckCellMetadata`` with :class:`CourseMetadataValidator`: the same refusal of a notebook whose
    nbgrader metadata is not valid, logged the same way."""

    def preprocess(self, nb, resources):
        try:
            CourseMetadataValidator().validate_nb(nb)
        except ValidationError:
            self.log.error(traceback.format_exc())
            message = "Notebook failed to validate; the nbgrader metadata may be corrupted."
            self.log.error(message)
            raise ValidationError(message) from None
        return nb, resources
