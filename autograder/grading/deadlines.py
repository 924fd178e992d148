"""The term's due dates and late policy, as ``term.yml`` sets them, and the words that say how late work was.

``term.yml`` holds them (the instructor guide, "Deadlines and late work")::

    late_policy:              # the term's, for every assignment that gives none of its own; absent: none
      penalty: 10%            # of the points earned, for each day (or hour) started after the due date
      per: day                # day or hour
      cap: 50%                # the most that the penalty takes (default: 100%)
      zero_after: 7 days      # later than this after the due date scores 0 (0 days: any lateness does)
      grace: 15 minutes       # late by no more than this: no penalty (default: none)
    deadlines:
      ch03_multi_head:
        due: 2027-02-14 23:59 Europe/London     # a time zone or offset is required
        late_policy: none                       # this assignment's own policy (optional)
        extensions:                             # per student: a longer time, or a due date of their own
          alice: 2 days
          bob: 2027-02-16 12:00 UTC

``make grade`` writes the due date and each student's extension into nbgrader's gradebook (the assignment's
``duedate``, the submission's ``extension``: :mod:`autograder.grading.lateness`), where ``nbgrader export``, nbgrader's
collect and its late-penalty step read them, and the course's plugin of that step
(:mod:`autograder.nbgrader.late_policy`) applies the policy. Every output says lateness in one set of words
(:func:`late_words`): "late by 6 h 41 min: -10%". A bad value is refused with the key that holds it named
(:class:`DeadlineError`).
"""

from __future__ import annotations

import datetime
import math
import re
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path

from autograder.release import course

UNITS = {"week": 604800, "day": 86400, "hour": 3600, "h": 3600, "minute": 60, "min": 60, "second": 1, "s": 1}
_AMOUNT = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*(?:,|and\b)?", re.IGNORECASE)
_PERCENT = re.compile(r"\s*(\d+(?:\.\d+)?)\s*%?\s*")


class DeadlineError(course.SettingsError):
    """``term.yml``'s ``deadlines:`` or ``late_policy:`` says something the course cannot read."""


@dataclass(frozen=True)
class Policy:
    """A late policy: ``penalty`` percent of the points earned per ``per`` started after the due date, at most
    ``cap`` percent; later than ``zero_after`` (None: never), 100%; late by no more than ``grace``, nothing."""

    penalty: float = 0.0
    per: str = "day"
    cap: float = 100.0
    zero_after: float | None = None  # seconds
    grace: float = 0.0  # seconds

    def percent(self, seconds_late: float) -> float:
        """The share of the points earned that a submission ``seconds_late`` after its due date loses, in percent."""
        if seconds_late <= 0 or seconds_late <= self.grace:
            return 0.0
        if self.zero_after is not None and seconds_late > self.zero_after:
            return 100.0
        started = math.ceil(seconds_late / UNITS[self.per])
        return min(self.cap, self.penalty * started)

    def penalty_points(self, score: float, seconds_late: float) -> float:
        """The points that ``score`` earned ``seconds_late`` after the due date loses (never more than it)."""
        return min(score, round(score * self.percent(seconds_late) / 100, 6)) if score > 0 else 0.0


NO_POLICY = Policy()


@dataclass(frozen=True)
class Deadline:
    """One assignment's due date (naive UTC, as nbgrader's gradebook holds it), its policy and the extensions."""

    assignment: str
    due: datetime.datetime
    policy: Policy = NO_POLICY
    extensions: dict[str, datetime.timedelta] = field(default_factory=dict)

    def extension(self, student: str) -> datetime.timedelta | None:
        return self.extensions.get(student)


def duration_words(seconds: float) -> str:
    """A duration as the summary says it: "6 h 41 min", "2 days 3 h", "12 min", "40 s" (never "0 s")."""
    whole = max(1, math.ceil(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes = max(1, int(seconds // 60))
    days, hours, minutes = minutes // 1440, minutes // 60 % 24, minutes % 60
    if days:
        return f"{days} day{'s' if days > 1 else ''}" + (f" {hours} h" if hours else "")
    return " ".join(filter(None, [f"{hours} h" if hours else "", f"{minutes} min" if minutes else ""]))


def late_words(seconds_late: float, policy: Policy | None, extension: datetime.timedelta | None = None,
               penalty: float = 0.0) -> str:  # fmt: skip
    """How late a submission was and what it lost, in the words of the summary, the CSV, the feedback and the
    export: "late by 6 h 41 min: -10%"; '' when on time. ``policy`` None: the term sets none for the assignment,
    and nbgrader's own late-penalty setting gave ``penalty`` points."""
    if seconds_late <= 0:
        return ""
    late = f"late by {duration_words(seconds_late)}"
    if extension:
        late += f" (after an extension of {duration_words(extension.total_seconds())})"
    if policy is None:
        return f"{late}: -{penalty:g} points" if penalty else f"{late}: no penalty"
    if seconds_late <= policy.grace:
        return f"{late}: within the grace period of {duration_words(policy.grace)}, no penalty"
    if policy.zero_after is not None and seconds_late > policy.zero_after:
        return f"{late}: past the cut-off of {duration_words(policy.zero_after)}, -100%"
    percent = policy.percent(seconds_late)
    return f"{late}: -{percent:g}%" if percent else f"{late}: no penalty (no late policy)"


def deadline(assignment: str, root: Path | None = None) -> Deadline | None:
    """``assignment``'s deadline in ``term.yml`` under ``root``; None where it gives no due date for it."""
    settings = course.term_settings(root)
    deadlines = settings.get("deadlines") or {}
    if not isinstance(deadlines, dict):
        raise DeadlineError(f"term.yml: deadlines must map assignment names to their due dates, got {deadlines!r}")
    unknown = sorted(set(map(str, deadlines)) - set(course.assignments(root)))
    if unknown and course.assignments(root):
        raise DeadlineError(f"term.yml: deadlines names {', '.join(map(repr, unknown))}, which is not an assignment")
    entry = deadlines.get(assignment)
    if entry is None:
        return None
    where = f"term.yml: deadlines.{assignment}"
    if not isinstance(entry, dict) or "due" not in entry:
        raise DeadlineError(f"{where} must hold `due:` (a date, time and time zone), got {entry!r}")
    extra = sorted(set(entry) - {"due", "late_policy", "extensions"})
    if extra:
        raise DeadlineError(f"{where} holds {', '.join(map(repr, extra))}: only due, late_policy and extensions")
    due = moment(entry["due"], f"{where}.due")
    own = entry.get("late_policy", settings.get("late_policy"))
    where_policy = f"{where}.late_policy" if "late_policy" in entry else "term.yml: late_policy"
    extensions = entry.get("extensions") or {}
    if not isinstance(extensions, dict):
        raise DeadlineError(f"{where}.extensions must map student ids to a duration or a due date, got {extensions!r}")
    return Deadline(
        assignment,
        due,
        policy(own, where_policy),
        {str(student): extension(value, due, f"{where}.extensions.{student}") for student, value in extensions.items()},
    )


def check_all(root: Path | None = None) -> list[Deadline]:
    """Every deadline of ``term.yml``, read (so that a bad one is refused before grading starts)."""
    found = [deadline(name, root) for name in course.assignments(root)]
    policy(course.term_settings(root).get("late_policy"), "term.yml: late_policy")
    return [entry for entry in found if entry is not None]


def policy(value, where: str) -> Policy:
    """A late policy from ``term.yml``: absent or ``none``, no penalty; else a mapping (module docstring)."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return NO_POLICY
    if not isinstance(value, dict):
        raise DeadlineError(f"{where} must be `none` or hold penalty, per, cap, zero_after, grace; got {value!r}")
    extra = sorted(set(value) - {"penalty", "per", "cap", "zero_after", "grace"})
    if extra:
        raise DeadlineError(f"{where} holds {', '.join(map(repr, extra))}: only penalty, per, cap, zero_after, grace")
    per = str(value.get("per", "day")).strip().lower()
    if per not in ("day", "hour"):
        raise DeadlineError(f"{where}.per must be day or hour, got {value.get('per')!r}")
    zero_after = value.get("zero_after")
    return Policy(
        penalty=percent(value.get("penalty", 0), f"{where}.penalty"),
        per=per,
        cap=percent(value.get("cap", 100), f"{where}.cap"),
        zero_after=None if zero_after is None else seconds(zero_after, f"{where}.zero_after"),
        grace=seconds(value.get("grace", 0), f"{where}.grace"),
    )


def percent(value, where: str) -> float:
    """A percentage, ``10%`` or ``10``, from 0 to 100."""
    found = _PERCENT.fullmatch(str(value)) if not isinstance(value, bool) else None
    if not found or not 0 <= float(found.group(1)) <= 100:
        raise DeadlineError(f"{where} must be a percentage from 0% to 100%, such as 10%; got {value!r}")
    return float(found.group(1))


def seconds(value, where: str) -> float:
    """A duration such as ``7 days``, ``36 hours``, ``2 days 6 hours`` or ``15 minutes`` (0 alone: none), in seconds."""
    text = str(value).strip().lower()
    if text == "0":
        return 0.0
    total, at = 0.0, 0
    for found in _AMOUNT.finditer(text):
        unit = found.group(2).lower()
        unit = unit[:-1] if unit not in UNITS and unit.endswith("s") else unit  # days, hours, minutes, mins
        if found.start() != at or unit not in UNITS:
            break
        total, at = total + float(found.group(1)) * UNITS[unit], found.end()
    if at == 0 or at != len(text) or isinstance(value, bool):
        raise DeadlineError(f"{where} must be a duration such as `2 days`, `36 hours` or `15 minutes`; got {value!r}")
    return total


def moment(value, where: str) -> datetime.datetime:
    """A date and time with its time zone (an offset, ``UTC`` or a zone's name such as ``Europe/London``), as
    naive UTC (nbgrader's gradebook's); a time without a zone is refused, as it could be read in any."""
    when = value if isinstance(value, datetime.datetime) else None
    if when is None and isinstance(value, str):
        text = value.strip()
        zone = None
        name = text.rsplit(None, 1)[-1] if " " in text else ""
        if name.upper() in ("UTC", "Z") or "/" in name:
            try:
                zone = datetime.timezone.utc if name.upper() in ("UTC", "Z") else zoneinfo.ZoneInfo(name)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise DeadlineError(f"{where}: no time zone named {name!r} (such as Europe/London, or UTC)") from None
            text = text[: -len(name)].strip()
        try:
            when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            when = None
        if when is not None and zone is not None:
            when = None if when.tzinfo is not None else when.replace(tzinfo=zone)
    if when is None:
        raise DeadlineError(
            f"{where} must be a date and time with its time zone, such as `2027-02-14 23:59 Europe/London` or "
            f"`2027-02-14 23:59 +01:00`; got {value!r}"
        )
    if when.tzinfo is None:
        raise DeadlineError(f"{where} has no time zone: add one, such as `{value} UTC` or `{value} Europe/London`")
    return when.astimezone(datetime.timezone.utc).replace(tzinfo=None)


def extension(value, due: datetime.datetime, where: str) -> datetime.timedelta:
    """A student's extension: a duration, or a due date of their own (later than the assignment's)."""
    if isinstance(value, datetime.date) or (isinstance(value, str) and re.match(r"\s*\d{4}-\d", value)):
        own = moment(value, where)
        if own <= due:
            raise DeadlineError(f"{where}: the student's due date {value} is not later than the assignment's")
        return own - due
    return datetime.timedelta(seconds=seconds(value, where))
