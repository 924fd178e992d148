"""Whose a folder in nbgrader's exchange is: the account that owns it, and whether that student is on the class list.

Every user may create folders in the exchange's ``inbound/``, and a folder's name says which student it
is for: nothing but its owner stops one student from naming a folder for another. On a hub each
student is an account whose name is the student id (``nbgrader submit`` names the folder after the
account it runs as, ``nbgrader.utils.get_username``), and only that account owns what it creates. So
a folder is a student's submission only when that student's account owns it: nbgrader's own
``check_owner`` rule (the owner's account name equal to the id in the folder's name), of which
nbgrader only logs a warning. Where the instructor gives a class list (``c.SafeCollect.class_list``),
only the students on it count (:func:`read_class_list`).
"""

from __future__ import annotations

import csv
import glob
import io
import os
from pathlib import Path

CLASS_LIST_SETTING = "c.SafeCollect.class_list"


class ClassListError(ValueError):
    """A class list that cannot be read, or does not read as one; the message names the file and the setting."""


def named_student(folder_name: str) -> str | None:
    """The student id in an exchange folder's name (``<student>+<assignment>+<timestamp>[+<random>]``), as
    nbgrader's collect reads it; None for a name it does not read."""
    parts = folder_name.rsplit("+", 3)
    return parts[0] if len(parts) >= 3 else None


def folders_in_exchange(inbound: Path, assignment: str) -> list[tuple[Path, str]]:
    """Every folder (or anything else) of ``assignment`` in the exchange's ``inbound``, whoever it is for, with
    the student its name says; links included, none followed."""
    found = []
    for path in sorted(Path(inbound).glob(f"*+{glob.escape(assignment)}+*")):
        student = named_student(path.name)
        if student is not None:
            found.append((path, student))
    return found


def owner(path: Path) -> str:
    """The name of the account that owns ``path`` itself (a link is not followed), as nbgrader's owner check
    reads it, or 'uid N, which has no account'. Raises OSError where ``path`` cannot be looked at."""
    import pwd  # not on Windows, where nbgrader checks no owner either

    uid = os.lstat(path).st_uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}, which has no account"


def foreign_owner(folder: Path, student: str) -> str | None:
    """Why the exchange folder ``folder``, named for ``student``, is not theirs: 'named for <student> but owned
    by <account>'; None where ``student``'s account owns it."""
    try:
        account = owner(folder)
    except OSError as error:
        return f"named for {student}, and its owner cannot be read ({error.strerror})"
    return None if account == student else f"named for {student} but owned by {account}"


def not_on_list(student: str, class_list: frozenset[str] | None) -> str | None:
    """Why ``student`` is not graded for the class list (None: no class list, or they are on it)."""
    if class_list is None or student in class_list:
        return None
    return f"{student} is not on the class list"


def read_class_list(path: Path) -> frozenset[str]:
    """The student ids of the class list ``path``: one id a line (blank lines and lines starting with ``#``
    ignored), or the CSV that ``nbgrader db student import`` reads, whose header names an ``id`` column (a
    first line with a comma is read as that header). Raises :class:`ClassListError`."""
    where = f"the class list {path} ({CLASS_LIST_SETTING})"
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise ClassListError(f"{where} cannot be read: {getattr(error, 'strerror', None) or error}") from None
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    if lines and "," in lines[0]:
        reader = csv.DictReader(io.StringIO("\n".join(lines)))
        if "id" not in [name.strip() for name in reader.fieldnames or []]:
            raise ClassListError(
                f"{where} reads as a CSV file, and its header has no 'id' column: give nbgrader's "
                "'nbgrader db student import' CSV (id,first_name,last_name,email), or one student id a line"
            )
        ids = [({k.strip(): v for k, v in row.items() if k}.get("id") or "").strip() for row in reader]
        ids = [student for student in ids if student]
    else:
        for line in lines:
            if len(line.split()) != 1:
                raise ClassListError(
                    f"{where}: {line!r} is not one student id (one id a line, or a CSV with an 'id' column)"
                )
        ids = lines
    if not ids:
        raise ClassListError(f"{where} names no student: give one student id a line, or remove the setting")
    return frozenset(ids)
