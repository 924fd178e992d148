"""Collecting submissions from nbgrader's exchange without trusting what students can change there.

``nbgrader submit`` copies a student's assignment folder into the exchange, as
``<exchange>/<course>/inbound/<student>+<assignment>+<timestamp>+<random>/``, with a
``timestamp.txt`` that says when. That folder is the student's: they own it (and nbgrader leaves it
writable by everyone), so after submitting they can change anything in it. nbgrader's own collect,
run as the instructor, then copies whatever it finds: a notebook swapped for a symbolic link (or a
hard link) brings in its target (``solutions/<a>/<a>.ipynb``, or another student's collected
notebook); a named pipe stops or hangs the collect of the whole class; an earlier time written into
``timestamp.txt`` escapes the late penalty.

:class:`SafeCollect` is nbgrader's collect (``nbgrader collect``, and the formgrader's *Collect*
button) with none of that trust; ``nbgrader_config.py`` plugs it in (``c.ExchangeFactory.collect``):

- a student any of whose submissions of the assignment in the exchange holds anything but plain
  folders and plain files with one link each (a symbolic or hard link, a named pipe, a socket, a
  device), at any depth or as the submission folder itself, is **refused**: nothing of theirs is
  copied, and ``submitted/<student>/<assignment>/`` holds only :data:`REFUSAL`, which says why, the
  submission time and, where it reads as one, the submission's :data:`SECRET` (so that the page
  saying why can be released to the student). ``make grade`` scores a refused student 0 with that
  reason;
- everything else is copied through file descriptors opened without following links, each checked
  again once open (a plain file, with one link, the very file that was checked), so a link swapped
  in during the collect is refused as well;
- the submission time written to ``submitted/<student>/<assignment>/timestamp.txt`` (which
  ``nbgrader autograde`` takes for late penalties) is when anything in the submission last changed,
  as the kernel recorded it: the newest status-change time (ctime) of its folders and files, which
  nobody but the kernel sets and which no file operation can move back. The student's own
  ``timestamp.txt`` is ignored (a difference of more than a second is logged). It is later than the
  time ``nbgrader submit`` printed by the moments the copy took.

:func:`unsafe_entries` is the check itself, for ``make grade`` too (:mod:`autograder.cli.grade`),
which runs it on every submission it grades and, where it finds the exchange, on the students'
submissions there: whatever collected them.
"""

from __future__ import annotations

import contextlib
import datetime
import fnmatch
import glob
import os
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from dateutil.tz import gettz
from nbgrader.exchange.default.collect import ExchangeCollect, groupby
from nbgrader.utils import parse_utc

REFUSAL = "collect_refused.txt"  # what SafeCollect leaves in submitted/<student>/<assignment>/ for a refused student
TIMESTAMP = "timestamp.txt"
SECRET = "submission_secret.txt"  # nbgrader submit's key to the student's feedback (release_feedback needs it)
_SECRET_CHARACTERS = frozenset("0123456789abcdef")
_KINDS = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a named pipe",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
}
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC  # a fifo opens without waiting


def kind(mode: int) -> str:
    """What a file of this mode is, in words."""
    return _KINDS.get(stat.S_IFMT(mode), "a plain file" if stat.S_ISREG(mode) else "a folder")


def unsafe_entries(folder: Path, relative_to: Path | None = None, hard_links: bool = True) -> list[tuple[str, str]]:
    """Whatever in ``folder``, itself included, is not a plain folder or a plain file: (its path, relative
    to ``relative_to`` (default: ``folder``'s parent), and what it is), sorted by path.

    Nothing is followed or opened: a folder's entries are read (the kinds from the folder listing),
    and a plain file's status only when ``hard_links`` asks whether it has more than one link (a
    second name for a file elsewhere, which reading it would read). A folder that cannot be read is
    listed as such. A missing ``folder`` gives nothing.
    """
    folder = Path(folder)
    base = Path(relative_to) if relative_to is not None else folder.parent

    def name(path) -> str:
        return Path(path).relative_to(base).as_posix()

    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(info.st_mode):
        return [(name(folder), kind(info.st_mode))]
    found, todo = [], [folder]
    while todo:
        current = todo.pop()
        try:
            with os.scandir(current) as listing:
                entries = list(listing)
        except OSError as error:
            found.append((name(current), f"a folder that cannot be read ({error.strerror})"))
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    links = entry.stat(follow_symlinks=False).st_nlink if hard_links else 1
                    if links > 1:
                        found.append((name(entry.path), f"a file with {links} hard links"))
                else:
                    found.append((name(entry.path), kind(entry.stat(follow_symlinks=False).st_mode)))
            except FileNotFoundError:  # gone while being looked at: whatever replaced it is looked at when copied
                continue
    return sorted(found)


def describe(found: list[tuple[str, str]], most: int = 3) -> str:
    """``found`` (from :func:`unsafe_entries`) as text: 'a symbolic link (x/y.ipynb), a named pipe (x/z)'."""
    shown = ", ".join(f"{what} ({path})" for path, what in found[:most])
    return shown + (f" and {len(found) - most} more" if len(found) > most else "")


class Refused(Exception):
    """A submission that is not plain folders and files, or that changed into something else while it was
    being copied. The message says what and where, and follows "the submission": 'holds a named pipe
    (x/y)'."""


@dataclass
class Copied:
    """What :func:`copy_tree` copied: the newest status-change time of the copy's sources (ns)."""

    newest_change_ns: int
    files: int = 0
    skipped: tuple[str, ...] = ()


def copy_tree(source: Path, dest: Path, keep=None, shown: str | None = None) -> Copied:
    """Copy the folder ``source`` into ``dest`` (which must not exist) without following a link.

    Each folder and file is opened with ``O_NOFOLLOW`` (a file also ``O_NONBLOCK``, so that a named
    pipe cannot make it wait) and checked once open: a folder must be a folder, a file a plain file
    with one link, the same file (device and inode) that the listing showed. Anything else raises
    :class:`Refused`, and ``dest`` is removed. ``keep(relative_path, size)`` says whether a file is
    copied (default: all). The newest ctime is taken after each file has been read, so a change made
    while it was read is counted.
    """
    shown = shown or str(source)
    try:
        top = os.open(source, _DIRECTORY)
    except OSError as error:
        raise Refused(f"is not a folder that can be opened ({shown}: {error.strerror})") from None
    copied = Copied(0)
    skipped: list[str] = []
    try:
        _copy_folder(top, Path(dest), "", shown, keep, copied, skipped)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    finally:
        os.close(top)
    copied.skipped = tuple(skipped)
    return copied


def _copy_folder(fd: int, dest: Path, relative: str, shown: str, keep, copied: Copied, skipped: list[str]) -> None:
    os.mkdir(dest, 0o755)
    for name in sorted(os.listdir(fd)):
        path = f"{relative}{name}"
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed meanwhile: not part of the submission
        if stat.S_ISDIR(info.st_mode):
            if keep is not None and not keep(path, None):
                skipped.append(f"{path}/")
                continue
            child = _open(name, fd, _DIRECTORY, f"{shown}/{path}")
            try:
                _same(child, info, f"{shown}/{path}", folder=True)
                _copy_folder(child, dest / name, f"{path}/", shown, keep, copied, skipped)
            finally:
                os.close(child)
        elif stat.S_ISREG(info.st_mode):
            if keep is not None and not keep(path, info.st_size):
                skipped.append(path)
                continue
            source = _open(name, fd, _FILE, f"{shown}/{path}")
            try:
                _same(source, info, f"{shown}/{path}", folder=False)
                with open(dest / name, "xb") as out:
                    while chunk := os.read(source, 1 << 20):
                        out.write(chunk)
                after = os.fstat(source)
                if after.st_nlink != 1:
                    raise Refused(f"holds a file with {after.st_nlink} hard links ({shown}/{path})")
                copied.newest_change_ns = max(copied.newest_change_ns, after.st_ctime_ns)
                copied.files += 1
            finally:
                os.close(source)
            os.chmod(dest / name, 0o644)
        else:
            raise Refused(f"holds {kind(info.st_mode)} ({shown}/{path})")
    copied.newest_change_ns = max(copied.newest_change_ns, os.fstat(fd).st_ctime_ns)


def _open(name: str, folder: int, flags: int, shown: str) -> int:
    try:
        return os.open(name, flags, dir_fd=folder)
    except OSError as error:  # ELOOP: swapped for a symbolic link since it was listed
        raise Refused(f"changed while it was collected ({shown}: {error.strerror})") from None


def _same(fd: int, listed: os.stat_result, shown: str, folder: bool) -> None:
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (listed.st_dev, listed.st_ino):
        raise Refused(f"changed while it was collected ({shown}: another file took its place)")
    if (folder and not stat.S_ISDIR(opened.st_mode)) or (not folder and not stat.S_ISREG(opened.st_mode)):
        raise Refused(f"holds {kind(opened.st_mode)} ({shown})")
    if not folder and opened.st_nlink != 1:
        raise Refused(f"holds a file with {opened.st_nlink} hard links ({shown})")


def refusal_reason(folder: Path) -> str | None:
    """Why :class:`SafeCollect` refused the submission it left in ``folder``; None when it did not."""
    path = Path(folder) / REFUSAL
    try:
        descriptor = os.open(path, _FILE)
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


def submissions_in_exchange(inbound: Path, student: str, assignment: str) -> list[Path]:
    """Every submission of ``assignment`` by ``student`` in the exchange's ``inbound`` folder, as nbgrader
    names them (``<student>+<assignment>+<timestamp>[+<random>]``); links included, none followed."""
    pattern = f"{glob.escape(student)}+{glob.escape(assignment)}+*"
    return sorted(path for path in Path(inbound).glob(pattern) if path.name.count("+") >= 2)


@dataclass
class ExchangeSettings:
    """Where nbgrader, run from a course folder, finds the exchange, and which collect it runs."""

    inbound: Path | None  # <exchange>/<course_id>/inbound; None: no course id, or no such folder here
    collect: str  # the collect plugin's dotted name

    @property
    def collect_is_safe(self) -> bool:
        return self.collect == f"{SafeCollect.__module__}.{SafeCollect.__qualname__}"


def exchange_settings(root: Path) -> ExchangeSettings:
    """The exchange as ``nbgrader collect`` sees it from ``root``: the course's ``nbgrader_config.py``
    over Jupyter's configuration folders (``~/.jupyter``, ``/etc/jupyter``, ...), as nbgrader merges them.

    The files are the instructor's and are run here, as nbgrader runs them, with the warning filters
    that they set undone afterwards."""
    import warnings

    from jupyter_core.paths import jupyter_config_path
    from traitlets.config import Config
    from traitlets.config.loader import ConfigFileNotFound, JSONFileConfigLoader, PyFileConfigLoader

    config = Config()
    with warnings.catch_warnings():
        for folder in [*reversed(jupyter_config_path()), str(Path(root).resolve())]:  # the last one wins
            for loader in (PyFileConfigLoader, JSONFileConfigLoader):
                try:
                    name = "nbgrader_config.py" if loader is PyFileConfigLoader else "nbgrader_config.json"
                    config.merge(loader(name, path=folder).load_config())
                except ConfigFileNotFound:
                    continue

    def setting(name: str, classes: tuple[str, ...], default):
        for cls in classes:
            if cls in config and name in config[cls]:
                return config[cls][name]
        return default

    collect = setting("collect", ("ExchangeFactory",), ExchangeCollect)
    collect = collect if isinstance(collect, str) else f"{collect.__module__}.{collect.__qualname__}"
    exchange = setting("root", ("SafeCollect", "ExchangeCollect", "Exchange"), ExchangeCollect.root.default_value)
    course_id = setting("course_id", ("CourseDirectory",), "")
    inbound = Path(exchange) / course_id / "inbound" if course_id else None
    return ExchangeSettings(inbound if inbound is not None and inbound.is_dir() else None, collect)


class SafeCollect(ExchangeCollect):
    """nbgrader's collect, trusting nothing in the students' folders of the exchange; see the module."""

    def init_src(self):
        """nbgrader's choice of each student's submission (the newest, or with ``--before-duedate`` the
        newest before the due date, by the time in the folder's name), keeping all of each student's
        submissions of the assignment, so that every one is checked. A folder whose name does not parse
        is skipped with an error, instead of stopping the collect of the whole class."""
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        wanted = self.coursedir.student_id  # "*" (nbgrader's default) or one student
        student = glob.escape(wanted) if wanted and wanted != "*" else "*"
        pattern = os.path.join(self.inbound_path, f"{student}+{glob.escape(self.coursedir.assignment_id)}+*")
        records = []
        for path in sorted(glob.glob(pattern)):
            try:
                records.append(self._path_to_record(path))
            except Exception as error:  # noqa: BLE001 (a student's folder name: anything may be wrong with it)
                self.log.error("Skipping %s: its name is not <student>+<assignment>+<timestamp>+... (%s)", path, error)
        self.all_records = groupby(records, lambda item: item["username"])
        self.duedate = duedate = self._duedate() if self.before_duedate else None  # read only when needed
        self.src_records = []
        for group in self.all_records.values():
            ordered = self._sort_by_timestamp(group)
            before = [r for r in ordered if duedate is not None and r["timestamp"] <= duedate]
            self.src_records.append(before[0] if before else ordered[0])

    def _duedate(self):
        from nbgrader.api import Gradebook, MissingEntry

        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gradebook:
            try:
                return gradebook.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                return None

    def copy_files(self):
        assignment, course_id = self.coursedir.assignment_id, self.coursedir.course_id
        if not self.src_records:
            self.log.warning("No submissions of '%s' for course '%s' to collect", assignment, course_id)
        else:
            self.log.info(
                "Processing %d submissions of '%s' for course '%s'", len(self.src_records), assignment, course_id
            )
        for record in self.src_records:
            self._collect(record)

    def _collect(self, record: dict) -> None:
        student, assignment = record["username"], self.coursedir.assignment_id
        inbound = Path(self.inbound_path)
        source = inbound / record["filename"]
        dest = Path(self.coursedir.format_path(self.coursedir.submitted_directory, student, assignment))
        self._check_owner(student, source)
        found = [
            entry
            for other in self.all_records[student]
            for entry in unsafe_entries(inbound / other["filename"], inbound)
        ]
        if found:
            self._refuse(
                student,
                dest,
                source,
                f"the submission in the exchange holds {describe(found)}; nothing of it was collected (a collect "
                "that reads through it copies what a link points at, or waits on a pipe)",
            )
            return
        if not self._should_copy(student, dest, record):
            return
        staging = dest.with_name(f".{dest.name}.collecting")
        shutil.rmtree(staging, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        budget = [1000 * self.coursedir.max_dir_size]
        try:
            copied = copy_tree(
                source, staging, keep=lambda path, size: self._keep(path, size, budget), shown=source.name
            )
        except Refused as error:
            self._refuse(student, dest, source, f"the submission in the exchange {error}; nothing of it was collected")
            return
        for name in (TIMESTAMP, REFUSAL):  # the student's own are never taken
            (staging / name).unlink(missing_ok=True)
        (staging / TIMESTAMP).write_text(self._submission_time(student, source, copied.newest_change_ns))
        _remove(dest)
        staging.rename(dest)

    def _should_copy(self, student: str, dest: Path, record: dict) -> bool:
        """nbgrader's rule: collect what is not collected yet, a newer one with ``--update``, another one
        with ``--before-duedate``; and here, what replaces a refusal."""
        assignment = self.coursedir.assignment_id
        if not os.path.lexists(dest) or os.path.lexists(dest / REFUSAL):
            self.log.info("Collecting submission: %s %s", student, assignment)
            return True
        existing = self.coursedir.get_existing_timestamp(str(dest))
        if (self.update and (existing is None or record["timestamp"] > existing)) or (
            self.before_duedate and existing != record["timestamp"]
        ):
            self.log.info("Updating submission: %s %s", student, assignment)
            return True
        if self.update:
            self.log.info("No newer submission to collect: %s %s", student, assignment)
        else:
            self.log.info("Submission already exists, use --update to update: %s %s", student, assignment)
        return False

    def _check_owner(self, student: str, source: Path) -> None:
        """nbgrader's warning when the folder's owner is not the student it names (``check_owner``)."""
        if not self.check_owner or sys.platform == "win32":
            return
        import pwd

        try:
            owner = pwd.getpwuid(os.lstat(source).st_uid).pw_name
        except (KeyError, OSError):
            owner = "unknown id"
        if owner != student:
            self.log.warning(
                "%s claims to be submitted by %s but is owned by %s; cheating attempt? You may disable this "
                "warning by unsetting the option CollectApp.check_owner",
                source,
                student,
                owner,
            )

    def _keep(self, relative: str, size: int | None, budget: list[int]) -> bool:
        """nbgrader's ``CourseDirectory.ignore``, ``include``, ``max_file_size`` and ``max_dir_size`` (in KB),
        for one file (``size``) or folder (``size`` None)."""
        name = relative.rsplit("/", 1)[-1]
        if any(fnmatch.fnmatch(name, pattern) for pattern in self.coursedir.ignore):
            return False
        if size is None:
            return True
        if self.coursedir.include and not any(fnmatch.fnmatch(name, pattern) for pattern in self.coursedir.include):
            return False
        if self.coursedir.max_file_size and size > 1000 * self.coursedir.max_file_size:
            self.log.warning("Ignoring file too large '%s' (see config option CourseDirectory.max_file_size)", relative)
            return False
        budget[0] -= size
        if budget[0] < 0:
            raise Refused(f"is larger than CourseDirectory.max_dir_size ({self.coursedir.max_dir_size} KB)")
        return True

    def _time(self, nanoseconds: int) -> str:
        zone = gettz(self.timezone) or datetime.timezone.utc
        when = datetime.datetime.fromtimestamp(nanoseconds / 1e9, tz=datetime.timezone.utc)
        return when.astimezone(zone).strftime(self.timestamp_format)

    def _submission_time(self, student: str, source: Path, newest_change_ns: int) -> str:
        """When the kernel last saw the submission change, in nbgrader's format; a claim in the student's
        ``timestamp.txt`` that differs from it by more than a second is logged."""
        recorded = self._time(newest_change_ns)
        claimed = _claimed_time(source)
        if claimed is None or abs((parse_utc(recorded) - claimed).total_seconds()) > 1:
            self.log.warning(
                "%s's submission %s: its timestamp.txt says %s, but its files last changed at %s: that is recorded",
                student,
                source.name,
                "nothing readable" if claimed is None else claimed.isoformat(sep=" "),
                recorded,
            )
        return recorded

    def _refuse(self, student: str, dest: Path, source: Path, reason: str) -> None:
        """Replace ``dest`` with a refusal: :data:`REFUSAL` (the reason) and when the folder last changed."""
        self.log.error("Refusing the submission of %s for %s: %s", student, self.coursedir.assignment_id, reason)
        _remove(dest)
        dest.mkdir(parents=True)
        (dest / REFUSAL).write_text(reason + "\n")
        with contextlib.suppress(OSError):
            (dest / TIMESTAMP).write_text(self._time(os.lstat(source).st_ctime_ns))
        secret = submission_secret(source)
        if secret is not None:
            (dest / SECRET).write_text(secret)


def submission_secret(source: Path) -> str | None:
    """The :data:`SECRET` of the submission folder ``source``, or None where it is not a plain file in
    a plain folder (no link followed, no pipe waited on) holding up to 512 lowercase hex digits."""
    try:
        folder = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        descriptor = os.open(SECRET, _FILE, dir_fd=folder)
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
    when = _claimed_time(folder)
    return None if when is None else when.strftime("%Y-%m-%d %H:%M:%S.%f UTC")  # parse_utc: naive, in UTC


def _claimed_time(source: Path) -> datetime.datetime | None:
    """What the student's ``timestamp.txt`` says (read without following a link), or None."""
    try:
        descriptor = os.open(source / TIMESTAMP, _FILE)
    except OSError:
        return None
    try:
        return parse_utc(os.read(descriptor, 200).decode("utf-8", "replace").strip())
    except Exception:  # noqa: BLE001 (the student's text)
        return None
    finally:
        os.close(descriptor)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
