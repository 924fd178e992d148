"""The check for machines' absolute paths (course_site/paths.py) finds what is planted and passes what is not.

tests/test_book.py runs it on the real site, README.md and benchmarks/figures.json; here it runs on strings and a
small site made for it, so that a check that could not fail would show.
"""

import json

import pytest

from course_site import paths

PLANTED = [
    ("measured by `python benchmarks/gpu.py --out /root/gpu-run`", "/root/gpu-run"),
    ("records fetched to /home/alice/records/train.json", "/home/alice/records"),
    ("a Mac's /Users/bob/course/_build", "/Users/bob/course"),
    ("make train DEST=/tmp/t24/train", "/tmp/t24"),
    ('"command": "train --out /var/tmp/run-7"', "/var/tmp/run-7"),
    ("the checkout at /work/main/README.md", "/work/main"),
    ("file:///home/carol/site/index.html", "/home/carol/site"),
    ("<code>/tmp/tmp.Xy3kQ9ZpLm/train</code>", "/tmp/tmp.Xy3kQ9ZpLm"),
    ("written to its folder tmpk3j4_9x2 then moved", "tmpk3j4_9x2"),
    ("mktemp gave tmp.AbC123xyZ0", "tmp.AbC123xyZ0"),
]
CLEAN = [
    "python benchmarks/gpu.py --out benchmarks/gpu-run",
    "the site is in _build/html and its cache in _build/.jupyter_cache",
    "see https://github.com/karpathy/nanoGPT/tree/master/tmp/data and http://example.org/home/alice/",
    "~/tmp/notes and ./tmp/out are relative",
    "pytest's tmp_path and tmp_path_factory; tmp_results; a tmp file",
    "a bare /tmp or /home/ names no machine's folder",
]


@pytest.mark.parametrize("text, path", PLANTED)
def test_a_planted_path_is_found(text, path):
    assert paths.find(text) == [(1, path)]


@pytest.mark.parametrize("text", CLEAN)
def test_relative_paths_and_addresses_are_not_a_machines(text):
    assert paths.find(text) == []


def test_the_line_of_each_path_is_named():
    assert paths.find("one\ntwo /root/a\nthree\n/tmp/x and /home/u/y") == [
        (2, "/root/a"),
        (4, "/tmp/x"),
        (4, "/home/u/y"),
    ]


@pytest.fixture
def small_site(tmp_path):
    site = tmp_path / "site"
    (site / "book").mkdir(parents=True)
    (site / "_sources" / "book").mkdir(parents=True)
    (site / "_static").mkdir()
    (site / "index.html").write_text('<html><body><a href="book/ch01.html">chapter 1</a></body></html>')
    (site / "book" / "ch01.html").write_text("<html><body><pre>python benchmarks/gpu.py</pre></body></html>")
    (site / "_sources" / "book" / "ch01.md").write_text("# Chapter 1\n")
    (site / "searchindex.js").write_text('Search.setIndex({"docnames": ["book/ch01"]})')
    # a library under _static/ holds such strings in its own code: not what a reader reads
    (site / "_static" / "library.js").write_text('var home = "/home/user/.cache";')
    readme = tmp_path / "README.md"
    readme.write_text("`make book` builds into _build/html\n")
    figures = tmp_path / "figures.json"
    figures.write_text(json.dumps({"gpu": {"command": "python benchmarks/gpu.py --out benchmarks/gpu-run"}}))
    return site, [readme, figures]


def test_a_clean_site_and_records_pass(small_site):
    site, records = small_site
    checked, found = paths.scan_site(site, records)
    assert checked == 6 and found == []
    assert paths.main([str(site), *map(str, records)]) == 0


@pytest.mark.parametrize(
    "where, planted",
    [
        ("book/ch01.html", "<pre>$ ls /root/course-gpu/records</pre>"),
        ("searchindex.js", '"terms": {"/tmp/t24/train": [0]}'),
        ("_sources/book/ch01.md", "fetched to /home/runner/records"),
        ("README.md", "`make train` (into /var/tmp/t24)"),
        ("figures.json", '"command": "train --out /tmp/tmp.Q2w3E4r5T6"'),
    ],
)
def test_a_path_planted_in_a_page_the_index_or_a_record_is_found(small_site, where, planted, capsys):
    site, records = small_site
    target = {"README.md": records[0], "figures.json": records[1]}.get(where, site / where)
    text = target.read_text().rstrip("\n") + "\n"
    target.write_text(text + planted + "\n")
    _, found = paths.scan_site(site, records)
    assert len(found) == 1 and found[0].line == text.count("\n") + 1, found
    assert found[0].file.endswith(where) and found[0].path in planted
    assert paths.main([str(site), *map(str, records)]) == 1
    assert found[0].path in capsys.readouterr().out


def test_a_folder_the_courses_software_uses_is_no_machines():
    """The grader's lock folder, a string of autograder/sandbox/uids.py, is where it is on every machine: the
    instructor's guide names it. Another folder beside it is still found."""
    folder = "/tmp/attention-grader-uids"
    assert f'Path("{folder}")' in (paths.COURSE_ROOT / "autograder" / "sandbox" / "uids.py").read_text()
    assert folder in paths.software_paths()
    assert paths.find(f"a lock in {folder}/1001.lock") == []
    assert paths.find(f"a lock in {folder}-copy/1001.lock") == [(1, f"{folder}-copy")]
