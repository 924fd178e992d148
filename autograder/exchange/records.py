"""What a collect leaves beside a submission (refusal, secret, submission time), read without following a link."""

from __future__ import annotations

import datetime
import os
import stat
from pathlib import Path

from nbgrader.utils import parse_utc

from autograder.exchange.copying import READ_FILE, READ_FOLDER

REFUSAL = "collect_refused.txt"  # what SafeCollect leaves in submitted/<student>/<assignment>/ for a refused student
TIMESTAMP = "timestamp.txt"
SECRET = "submission_secret.txt"  # nbgrader submit's key to the student's feedback (release_feedback needs it)
_SECRET_CHARACTERS = frozenset("0123456789abcdef")


def refusal_reason(folder: Path) -> str | None:
    """Why :class:`~autograder.exchange.collect.SafeCollect` refused the submission it left in ``folder``; None
    when it did not."""
    path = Path(folder) / REFUSAL
    try:
        descriptor = os.open(path, READ_FILE)
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"the collect refused this submission ({path} cannot be read: {error.strerror})"
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return f"the collect refused this submission ({path} is not a plain file)"
        return os.read(descriptor, 8192).decode("utf-8", "replace").strip() or "the collect refused this submission"
    finally:
        os.close(descriptor)


def submission_secret(source: Path) -> str | None:
    """The :data:`SECRET` of the submission folder ``source``, or None where it is not a plain file in
    a plain folder (no link followed, no pipe waited on) holding up to 512 lowercase hex digits."""
    try:
        folder = os.open(source, READ_FOLDER)
    except OSError:
        return None
    try:
        descriptor = os.open(SECRET, READ_FILE, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        text = os.read(descriptor, 1024).decode("ascii", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(descriptor)
    return text if 0 < len(text) <= 512 and set(text) <= _SECRET_CHARACTERS else None


def submitted_time(folder: Path) -> str | None:
    """The time in ``folder``'s :data:`TIMESTAMP` (read without following a link), in nbgrader's format
    and UTC, or None where it holds none."""
    when = claimed_time(folder)
    return None if when is None else when.strftime("%Y-%m-%d %H:%M:%S.%f UTC")  # parse_utc: naive, in UTC


def collected_time(folder: Path) -> datetime.datetime | None:
    """The submission time that the course's collect wrote into ``submitted/<student>/<assignment>/`` (``folder``):
    when the kernel last saw the submission change in the exchange; read without following a link, or None."""
    return claimed_time(folder)


def claimed_time(source: Path) -> datetime.datetime | None:
    """What the student's ``timestamp.txt`` says (read without following a link), or None."""
    try:
        descriptor = os.open(source / TIMESTAMP, READ_FILE)
    except OSError:
        return None
    try:
        return parse_utc(os.read(descriptor, 200).decode("utf-8", "replace").strip())
    except Exception:  # noqa: BLE001 (the student's text)
        return None
    finally:
        os.close(descriptor)
