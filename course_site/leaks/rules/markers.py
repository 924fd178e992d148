"""The rule of nbgrader markers: none in a published file, but the documents that explain or show them."""

from __future__ import annotations

from collections.abc import Iterator

from course_site.leaks.markers import MARKERS
from course_site.leaks.published import TextFile
from course_site.leaks.report import Problem


def find(file: TextFile) -> Iterator[Problem]:
    """Each marker that ``file`` holds where it is not allowed: a package module's anywhere in its
    whole text unless the module explains them, any other file's in its views unless it explains or
    shows them."""
    if file.module_prose:
        looked_in = [] if file.explains_markers else [file.text]
    else:
        looked_in = [] if file.markers_allowed else file.views
    for marker in MARKERS:
        if any(marker in view for view in looked_in):
            yield Problem(file.rel, f"{file.line_of(marker)}holds the nbgrader marker {marker!r}")


def allowed_here(file: TextFile) -> bool:
    """Whether ``file`` shows markers that it is allowed to (the report lists it)."""
    return file.markers_allowed and any(marker in view for view in file.views for marker in MARKERS)
