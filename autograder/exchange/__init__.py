"""Collecting submissions from nbgrader's exchange without trusting what students can change there.

``nbgrader submit`` copies a student's assignment folder into the exchange, as
``<exchange>/<course>/inbound/<student>+<assignment>+<timestamp>+<random>/``, with a
``timestamp.txt`` that says when. That folder is the student's: they own it (and nbgrader leaves it
writable by everyone), so after submitting they can change anything in it. nbgrader's own collect,
run as the instructor, then copies whatever it finds: a notebook swapped for a symbolic link (or a
hard link) brings in its target (``solutions/<a>/<a>.ipynb``, or another student's collected
notebook); a named pipe stops or hangs the collect of the whole class; an earlier time written into
``timestamp.txt`` escapes the late penalty. And every user may create folders in ``inbound/``, named for
any student: one planted under another student's name would be collected as theirs.

:class:`~autograder.exchange.collect.SafeCollect` is nbgrader's collect with none of that trust
(:mod:`.collect`); what in a folder is not plain folders and files is found by :mod:`.entries`, a
folder is copied without following a link by :mod:`.copying`, what a collect leaves beside a
submission is read by :mod:`.records`, where the exchange is, as nbgrader finds it, is
:mod:`.layout`'s, and whose a folder there is (its owner's account, on the class list) is :mod:`.owners`'.
This package's names are those modules' (``make grade`` and the tests use them as ``exchange.<name>``).
"""

from autograder.exchange.collect import SafeCollect
from autograder.exchange.copying import Copied, Refused, copy_tree
from autograder.exchange.entries import describe, kind, unsafe_entries
from autograder.exchange.layout import ExchangeSettings, exchange_settings, submissions_in_exchange
from autograder.exchange.owners import (
    ClassListError,
    folders_in_exchange,
    foreign_owner,
    not_on_list,
    owner,
    read_class_list,
)
from autograder.exchange.records import (
    REFUSAL,
    SECRET,
    TIMESTAMP,
    refusal_reason,
    submission_secret,
    submitted_time,
)

__all__ = [
    "REFUSAL",
    "SECRET",
    "TIMESTAMP",
    "ClassListError",
    "Copied",
    "ExchangeSettings",
    "Refused",
    "SafeCollect",
    "copy_tree",
    "describe",
    "exchange_settings",
    "folders_in_exchange",
    "foreign_owner",
    "kind",
    "not_on_list",
    "owner",
    "read_class_list",
    "refusal_reason",
    "submission_secret",
    "submissions_in_exchange",
    "submitted_time",
    "unsafe_entries",
]
