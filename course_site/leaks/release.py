"""The release a leak check is made under: the one given, else the course's setting, or the command line's options."""

from __future__ import annotations

import os
from pathlib import Path

from autograder.release import course
from course_site.leaks.report import PublishError


def release_of(root: Path, release: course.Release | None) -> course.Release:
    if release is not None:
        return release
    try:
        return course.release(root)
    except course.SettingsError as error:
        raise PublishError(f"the release settings: {error}") from None


def add_release_options(parser) -> None:
    parser.add_argument(
        "--edition", choices=course.EDITIONS, help="the edition to check for (default: EDITION, else term.yml)"
    )
    parser.add_argument(
        "--released",
        metavar="NAMES",
        help="the released assignments, separated by spaces or commas, `all` or `none` "
        "(default: RELEASED, else term.yml; given alone: the term edition)",
    )


def release_from_options(args, root: Path) -> course.Release:
    """The release that the options, the environment and ``root``'s ``term.yml`` give."""
    environ = dict(os.environ)
    if getattr(args, "released", None) is not None:
        environ["RELEASED"] = args.released
        environ.pop("EDITION", None)
    if getattr(args, "edition", None):
        environ["EDITION"] = args.edition
    try:
        return course.release(root, environ)
    except course.SettingsError as error:
        raise PublishError(f"the release settings: {error}") from None
