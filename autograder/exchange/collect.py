"""nbgrader's collect (``SafeCollect``), trusting nothing that students can change in the exchange.

:class:`SafeCollect` is nbgrader's collect (``nbgrader collect``, and the formgrader's *Collect*
button) with none of the trust that :mod:`autograder.exchange` describes; ``nbgrader_config.py`` plugs
it in (``c.ExchangeFactory.collect``):

- a folder counts as a student's submission only when that student's account owns it (nbgrader's
  ``check_owner`` rule, which nbgrader only warns about: :mod:`autograder.exchange.owners`), and, where
  ``c.SafeCollect.class_list`` names a class list, only for a student on it. Any other folder is
  collected for nobody, logged as an error (another account's) or a warning (not on the list), and never
  changes the verdict of the student it names: a folder planted under another student's name is
  neither chosen as their newest submission nor looked at for their refusal;
- a student any of whose submissions of the assignment in the exchange holds anything but plain
  folders and plain files with one link each (a symbolic or hard link, a named pipe, a socket, a
  device), at any depth or as the submission folder itself, is **refused**: nothing of theirs is
  copied, and ``submitted/<student>/<assignment>/`` holds only :data:`~autograder.exchange.records.REFUSAL`,
  which says why, the submission time and, where it reads as one, the submission's
  :data:`~autograder.exchange.records.SECRET` (so that the page saying why can be released to the
  student). ``make grade`` scores a refused student 0 with that reason;
- everything else is copied through file descriptors opened without following links, each checked
  again once open (a plain file, with one link, the very file that was checked), so a link swapped
  in during the collect is refused as well;
- the submission time written to ``submitted/<student>/<assignment>/timestamp.txt`` (which
  ``nbgrader autograde`` takes for late penalties) is when anything in the submission last changed,
  as the kernel recorded it: the newest status-change time (ctime) of its folders and files, which
  nobody but the kernel sets and which no file operation can move back. The student's own
  ``timestamp.txt`` is ignored (a difference of more than a second is logged). It is later than the
  time ``nbgrader submit`` printed by the moments the copy took.
"""

from __future__ import annotations

import contextlib
import datetime
import fnmatch
import glob
import os
import shutil
import sys
from pathlib import Path

from dateutil.tz import gettz
from nbgrader.exchange.default.collect import ExchangeCollect, groupby
from nbgrader.utils import parse_utc
from traitlets import Unicode

from autograder.exchange.copying import Refused, copy_tree
from autograder.exchange.entries import describe, unsafe_entries
from autograder.exchange.owners import ClassListError, foreign_owner, not_on_list, read_class_list
from autograder.exchange.records import REFUSAL, SECRET, TIMESTAMP, claimed_time, submission_secret
from autograder.text.terminal import clean_text


class SafeCollect(ExchangeCollect):
    """nbgrader's collect, trusting nothing in the students' folders of the exchange; see the module."""

    class_list = Unicode(
        "",
        help="The class list, from the course folder: one student id a line, or the CSV of 'nbgrader db student "
        "import' (an 'id' column). Only its students are collected (and graded by make grade); empty: no class "
        "list, every student whose account owns their folder.",
    ).tag(config=True)

    def init_src(self):
        """nbgrader's choice of each student's submission (the newest, or with ``--before-duedate`` the
        newest before the due date, by the time in the folder's name), keeping all of each student's
        submissions of the assignment, so that every one is checked; only folders that count for the
        student they name do (their account owns it, they are on the class list). A folder whose name does
        not parse is skipped with an error, instead of stopping the collect of the whole class."""
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        wanted = self.coursedir.student_id  # "*" (nbgrader's default) or one student
        student = glob.escape(wanted) if wanted and wanted != "*" else "*"
        pattern = os.path.join(self.inbound_path, f"{student}+{glob.escape(self.coursedir.assignment_id)}+*")
        class_list = self._class_list()
        owners = self.check_owner and sys.platform != "win32"  # nbgrader checks no owner on Windows
        if not owners:
            self.log.warning("check_owner is off: each folder in the exchange counts for the student its name says")
        records = []
        for path in sorted(glob.glob(pattern)):
            try:
                record = self._path_to_record(path)
            except Exception as error:  # noqa: BLE001 (a student's folder name: anything may be wrong with it)
                self.log.error("Skipping %s: its name is not <student>+<assignment>+<timestamp>+... (%s)", path, error)
                continue
            student, shown = record["username"], clean_text(record["filename"], 300).replace("\n", " ")
            foreign = foreign_owner(Path(path), student) if owners else None
            if foreign:  # a student's names: cleaned for the terminal
                self.log.error("Not collecting %s, for anyone: it is %s", shown, clean_text(foreign, 600))
            elif not_on_list(student, class_list):
                self.log.warning("Not collecting %s: %s", shown, clean_text(not_on_list(student, class_list), 600))
            else:
                records.append(record)
        self.all_records = groupby(records, lambda item: item["username"])
        self.duedate = duedate = self._duedate() if self.before_duedate else None  # read only when needed
        self.src_records = []
        for group in self.all_records.values():
            ordered = self._sort_by_timestamp(group)
            before = [r for r in ordered if duedate is not None and r["timestamp"] <= duedate]
            self.src_records.append(before[0] if before else ordered[0])

    def _class_list(self) -> frozenset[str] | None:
        """The students of ``class_list`` (None: no class list); an unreadable one stops the collect."""
        if not self.class_list:
            self.log.info("No class list (c.SafeCollect.class_list): every student with a submission is collected")
            return None
        try:
            return read_class_list(Path(self.coursedir.root) / self.class_list)
        except ClassListError as error:
            self.fail(str(error))

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
        claimed = claimed_time(source)
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


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
