"""A local copy of MathJax for the book, so that the site renders its mathematics without a CDN.

    python -m course_site.mathjax        # fetch it once (make book does), then the build is offline

The MathJax release is fetched from the npm registry, checked against its published SHA-512 and
unpacked into ``book/_static/mathjax`` (ignored by git). The book's ``mathjax_path`` points there.
"""

from __future__ import annotations

import base64
import hashlib
import io
import shutil
import sys
import tarfile
import urllib.request
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release.course import FEEDBACK_MATHJAX, FEEDBACK_MATHJAX_PARTS

VERSION = "3.2.2"
TARBALL = f"https://registry.npmjs.org/mathjax/-/mathjax-{VERSION}.tgz"
SHA512 = "Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw=="
TARGET = FEEDBACK_MATHJAX.parent
ENTRY = "tex-mml-chtml.js"  # the component the book loads (TeX in, CommonHTML out)
# The component that feedback pages inline (TeX in, SVG out: its fonts are in it, so a page that travels
# alone renders its mathematics offline), with the parts it loads (safe mode, TeX extensions), inlined too:
# autograder.nbgrader.feedback_html.FeedbackHTMLExporter.
FEEDBACK_ENTRY = FEEDBACK_MATHJAX.name


def _wanted(name: str) -> bool:
    """The book's and the feedback's entry points, and what the book's loads on demand (fonts, TeX
    extensions, the menu's accessibility and speech components); not the other entry points or the
    SVG output's parts (the feedback's entry point holds what it needs)."""
    if "/" not in name:
        return name in (ENTRY, FEEDBACK_ENTRY)
    return not name.startswith("output/svg")


def installed(target: Path = TARGET) -> bool:
    return (
        (target / ENTRY).is_file()
        and (target / FEEDBACK_ENTRY).is_file()
        and all((target / f"{part}.js").is_file() for part in FEEDBACK_MATHJAX_PARTS)
        and (target / "VERSION").is_file()
        and (target / "VERSION").read_text().strip() == VERSION
    )


def fetch(target: Path = TARGET) -> None:
    with urllib.request.urlopen(TARBALL, timeout=120) as response:
        data = response.read()
    digest = base64.b64encode(hashlib.sha512(data).digest()).decode()
    if digest != SHA512:
        raise RuntimeError(f"{TARBALL}: SHA-512 {digest} is not the published {SHA512}")
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive.getmembers():
            name = member.name.removeprefix("package/es5/")
            if not member.isfile() or name == member.name or not _wanted(name):
                continue
            out = tmp / name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(archive.extractfile(member).read())
    (tmp / "VERSION").write_text(VERSION + "\n")
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


def main() -> int:
    if installed():
        (TARGET / "VERSION").touch()  # newer than this script, for make
        print(f"MathJax {VERSION} is in {TARGET.relative_to(COURSE_ROOT)}")
        return 0
    print(f"Fetching MathJax {VERSION} from the npm registry")
    fetch()
    print(f"MathJax {VERSION} is in {TARGET.relative_to(COURSE_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
