"""The internal link check of a built site.

Every link, image, script and stylesheet that points
inside the site must name a file that exists, and every ``#fragment`` an element of that page; no id names two
elements of a page (a link to it would reach the first only).

    python -m course_site.links [_build/html]     # exit 1 and list what is broken

External links are checked by ``make linkcheck`` (Sphinx's linkcheck builder, needs a network).
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from attention_course.tooling.notebooks import COURSE_ROOT

LINK_ATTRIBUTES = {"a": "href", "link": "href", "img": "src", "script": "src", "source": "src", "iframe": "src"}


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.id_counts: Counter[str] = Counter()  # the id attributes of the page's elements
        self.links: list[tuple[str, str]] = []  # (tag, url)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if attrs.get("id"):
            self.id_counts[attrs["id"]] += 1
        url = attrs.get(LINK_ATTRIBUTES.get(tag, ""))
        if url:
            self.links.append((tag, url))


@cache
def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(errors="replace"))
    return page


@dataclass(frozen=True)
class BrokenLink:
    page: str
    tag: str
    url: str
    reason: str

    def __str__(self):
        return f"{self.page}: <{self.tag}> {self.url}: {self.reason}"


def pages(site: Path) -> list[Path]:
    """The site's HTML pages (not the files under _static/ or _sources/)."""
    return sorted(p for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith("_"))


def is_internal(url: str) -> bool:
    parts = urlsplit(url)
    return not parts.scheme and not parts.netloc


def scan(site: Path) -> tuple[int, list[BrokenLink]]:
    """Return the number of internal links checked and the broken ones (an id on two elements of a page is one:
    ``#id``, on the first element that holds it)."""
    site = Path(site).resolve()
    _parse.cache_clear()
    checked, broken = 0, []
    for page_path in pages(site):
        page_name = page_path.relative_to(site).as_posix()
        for id_, count in sorted(_parse(page_path).id_counts.items()):
            if count > 1:
                broken.append(BrokenLink(page_name, "id", f"#{id_}", f"the id of {count} elements of the page"))
        for tag, url in _parse(page_path).links:
            if not is_internal(url):
                continue
            checked += 1
            parts = urlsplit(url)
            target = page_path if not parts.path else (page_path.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if site not in target.parents and target != site:
                broken.append(BrokenLink(page_name, tag, url, "points outside the site"))
            elif not target.is_file():
                broken.append(BrokenLink(page_name, tag, url, "no such file"))
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in _parse(target).ids:
                broken.append(BrokenLink(page_name, tag, url, f"no element with id {parts.fragment!r} on that page"))
    return checked, broken


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    site = Path(argv[0]) if argv else COURSE_ROOT / "_build" / "html"
    if not (site / "index.html").is_file():
        print(f"{site}: no index.html; build the book first (make book)")
        return 2
    checked, broken = scan(site)
    for link in broken:
        print(link)
    print(f"{checked} internal links in {len(pages(site))} pages, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
