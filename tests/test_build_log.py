"""The log filter of `make book`'s build (course_site/build_log.py): a line per chapter, MyST's dumps left out,
everything else passed on as it came; the build's exit status stays the pipeline's."""

import io
import select
import subprocess
import sys

from attention_course.tooling.notebooks import COURSE_ROOT
from course_site import build_log

ESC = b"\x1b"
LOG = [
    b"Running Jupyter-Book v1.0.2",
    ESC + b"[01mmyst v2.0.0:" + ESC + b"[39;49;00m MdParserConfig(commonmark_only=False, " + b"x" * 5000 + b")",
    b"myst-nb v1.1.0: NbParserConfig(custom_formats={}, " + b"y" * 3000,
    b"myst v2.0.0: a line that is not a dump",
    ESC + b"[2K/work/book/ch01_bahdanau.md: Executing notebook using local CWD [mystnb]",
    b"/work/book/ch01_bahdanau.md: Executed notebook in 12.34 seconds [mystnb]",
    b"/work/book/ch01_bahdanau.md: Cached executed notebook: ID=1 [mystnb]",
    ESC + b"[32m/work/book/ch02_scaled.md: Using cached notebook: ID=3 [mystnb]" + ESC + b"[0m",
    ESC + b"[91mWARNING: book/ch03.md: something" + ESC + b"[0m",
    b"reading sources... [ 50%] book/ch04 \xff\xfe",
    b"/work/book/ch02_scaled.md: Executed notebook in 1 in 2.5 seconds, seconds\r",
    b"build succeeded.",
]
SHOWN = [
    b"Running Jupyter-Book v1.0.2",
    b"myst v2.0.0: a line that is not a dump",
    b"[book] executing ch01_bahdanau ...",
    b"[book] executed ch01_bahdanau in 12.34 s",
    b"[book] rendering ch02_scaled with its outputs from the cache",
    ESC + b"[91mWARNING: book/ch03.md: something" + ESC + b"[0m",  # the page is now ch03: as it came, colours kept
    b"reading sources... [ 50%] book/ch04 \xff\xfe",
    b"[book] executed ch02_scaled in 2.5 s",  # after the last " in ", up to the first " seconds"
    b"build succeeded.",
]


def test_the_log_keeps_a_line_per_chapter_and_drops_the_configuration_dumps():
    assert list(build_log.shortened(LOG)) == SHOWN


def test_a_chapter_line_names_the_last_page_seen():
    lines = [b"book/ch05.md: Executing notebook", b"x.md: Executed notebook in 3 seconds", b"Executing notebook"]
    assert list(build_log.shortened(lines)) == [
        b"[book] executing ch05 ...",
        b"[book] executed ch05 in 3 s",
        b"Executing notebook",  # not a page's line: passed on
    ]
    assert list(build_log.shortened([b"a.md: Using cached notebook"])) == [
        b"[book] rendering  with its outputs from the cache"  # no page named yet
    ]


def test_every_line_ends_with_a_newline_even_the_last():
    out = io.BytesIO()
    assert build_log.main(io.BytesIO(b"one\r\nbook/a.md: Cached executed notebook\n\nlast"), out) == 0
    assert out.getvalue() == b"one\r\n\nlast\n"


def _pipeline(log, status: int) -> subprocess.CompletedProcess:
    command = f"set -o pipefail; {{ cat {log}; exit {status}; }} | {sys.executable} -m course_site.build_log"
    return subprocess.run(["bash", "-c", command], cwd=COURSE_ROOT, capture_output=True)


def test_the_builds_exit_status_is_the_pipelines(tmp_path):
    """As `make book` runs it (`set -o pipefail`): a build that fails fails the recipe, one that succeeds
    passes; the filter shows the same lines either way."""
    log = tmp_path / "build.log"
    log.write_bytes(b"\n".join(LOG) + b"\n")
    failed, passed = _pipeline(log, 3), _pipeline(log, 0)
    assert failed.returncode == 3 and passed.returncode == 0, (failed.stderr, passed.stderr)
    assert failed.stdout == passed.stdout == b"".join(line + b"\n" for line in SHOWN)


def test_each_line_is_shown_as_soon_as_it_is_read():
    with subprocess.Popen(
        [sys.executable, "-m", "course_site.build_log"], cwd=COURSE_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as filter_:
        filter_.stdin.write(b"book/ch01.md: Executing notebook\n")
        filter_.stdin.flush()
        assert select.select([filter_.stdout], [], [], 30)[0], "no line shown while the build goes on"
        assert filter_.stdout.readline() == b"[book] executing ch01 ...\n"  # the build has not ended
        filter_.stdin.close()
        assert filter_.stdout.read() == b"" and filter_.wait() == 0
