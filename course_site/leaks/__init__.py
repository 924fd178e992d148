"""The leak check: whether a folder about to be published (a built site, the student export) holds an answer.

    python -m course_site.leaks DIR [--edition open|term] [--released "ch01_bahdanau ..."]

``make check-site`` runs it on the built site and ``make student-repo`` on the export.
:func:`scan` (:mod:`.scan`) reads every file under DIR and reports, without ever printing the secret
text:

- a file of ``solutions/``: one in a folder named ``solutions`` (but the package of released
  reference modules, ``attention_course/solutions``), or a byte-for-byte copy of one (all that
  is looked for in a binary file; :mod:`.solution_files`);
- an nbgrader marker (:data:`MARKERS`; :mod:`.rules.markers`). The files that explain the markers
  are exempt: a package file identical to the repository's (``attention_course/tooling/notebooks.py``,
  ``attention_course/solutions/__init__.py``), and the built page of a book page that shows them (the
  instructor guide; :mod:`.markers`). Never a notebook;
- a *secret line* (:mod:`.rules.secret_lines`): a line (stripped, at least
  :data:`.targets.MIN_SECRET` characters) of a hidden-test region, or of a reference-solution region
  of an assignment that is not released, that no public source shows. Hidden tests are secret in
  every edition;
- the *code* of a reference-solution region of an assignment that is not released, however it is
  renamed or laid out (:class:`Secrets`, :mod:`.rules.solution_code`). A region (the code between
  ``### BEGIN SOLUTION`` and ``### END SOLUTION``, or a whole solution cell without markers;
  :mod:`.regions`) and each text of the file become normalized token streams
  (:class:`autograder.similarity.clones.Normalizer`, pygments' tokens: comments, strings and layout dropped,
  every name one placeholder but attributes, keyword arguments and keywords), and each stream's
  sequences of :data:`.index.SHINGLE` tokens copydetect's fingerprints
  (:func:`autograder.similarity.clones.fingerprints`, the clone detector of ``make similarity`` too; :mod:`.index`).
  The region's sequences that also occur in the public sources are no evidence and are left out; the
  rest are the region's own. It is reported when one passage of the file holds at least
  :data:`.index.THRESHOLD` of them, with the share found; a region with too few own sequences is
  looked for whole, and one too short or too public even for that is listed as unchecked (its lines
  are still looked for).

The *public sources* (:func:`public_sources`, :mod:`.sources`) are what students get legitimately under
the term's release: the exercises, the package files that :func:`autograder.release.packages.allowed` gives,
and the reference modules of the released assignments. The book's sources are not among them: what a
chapter shows is checked on the built site, like any other published file. Which assignments are
released is the course's setting (:func:`autograder.release.course.release`: ``term.yml``, ``EDITION``,
``RELEASED``); their reference solutions are published by design and not looked for.

The texts of a file (:func:`text_views`, :mod:`.views`): an HTML page's text (tags dropped, entities
decoded, so highlighted code is whole again) and its comments, scripts and attribute values; a
notebook's, a script's or a JSON file's raw text, its JSON strings decoded and their HTML as text; any
other file's raw text. Code inside comments and strings is compared too. A file identical to a public
source or to a third-party asset (``book/_static``, the files that Sphinx and its extensions ship;
:mod:`.known`) is only checked for markers: it cannot hold more than its original.

Where ``solutions/`` does not exist (a check run in the student repository itself) there is no
secret to look for: ``scan`` says so and checks the rest.
"""

from course_site.leaks.cache import secret_lines, secrets
from course_site.leaks.cli import main, print_report, summary
from course_site.leaks.markers import MARKERS
from course_site.leaks.regions import Region, Secret, solution_regions
from course_site.leaks.report import LeakReport, Problem, PublishError
from course_site.leaks.scan import scan
from course_site.leaks.sources import public_sources
from course_site.leaks.targets import Secrets
from course_site.leaks.views import text_views

__all__ = [
    "MARKERS",
    "LeakReport",
    "Problem",
    "PublishError",
    "Region",
    "Secret",
    "Secrets",
    "scan",
    "main",
    "print_report",
    "public_sources",
    "secret_lines",
    "secrets",
    "solution_regions",
    "summary",
    "text_views",
]
