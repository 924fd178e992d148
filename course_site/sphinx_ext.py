"""The book's Sphinx extension (listed in ``_config.yml`` under ``sphinx.extra_extensions``).

``exercise-links`` puts an exercise notebook's links on a page::

    ```{exercise-links} ch02_scaled_dot_product
    ```

gives a download of ``exercises/ch02_scaled_dot_product/ch02_scaled_dot_product.ipynb`` (copied
into the site), an "Open in Colab" link and a link to the file on GitHub, both in the repository
that the exercises name (:func:`autograder.release.course.exercise_repository`): ``_config.yml``'s in the open
edition; in a term, the students' repository at its release (``students_repository:`` in
``term.yml``), which also names the site's repository button and is installed by the downloaded
notebook's Colab cell. A notebook that does not exist fails the build.

``solution-code`` shows the reference solution of a graded item, from its solution notebook (the
one source; :func:`autograder.release.reference.item_source`), inside a ``solution`` block of
sphinx-exercise that follows the item's ``exercise`` prompt::

    ```{solution-code} ch03_multi_head split_heads
    ```

``package-code`` shows an object of the course's package (like ``literalinclude`` with
``:pyobject:``) whose module builds on reference solutions::

    ```{package-code} attention_course/models/transformer.py EncoderDecoder
    ```

A code cell of a chapter that works an item out step by step carries the tag
``solution-<assignment>`` (``:tags: [solution-ch03_multi_head]``). Both directives and those
cells follow the term's release settings (:func:`autograder.release.course.release`, read once when the
build starts): in the open edition they show the code; in the term edition, code that is or
builds on an unreleased chapter's solution is never written into the page, its search index or
its sources, and a note says when it will be (a tagged cell keeps its output, the printed result of
running it, and loses its code). The term edition publishes no page sources (``_sources/``, the
download button). The setting is part of Sphinx's configuration, so changing it re-reads every
page.

The extension also writes the site's root ``index.html``, which only redirects to the first page,
as a complete page (title, favicon, a link for readers whose browser does not follow the
redirect), and removes script tags that an extension of Jupyter Book adds twice to every
page (a duplicated ``const`` declaration is a JavaScript error in the reader's console), and gives the body
of each exercise and solution block an id of its own (sphinx-exercise gives them all the same two).

A figure of panels (``attention_course.plotting.panels_html``: its two images, side by side and stacked, as data
URLs in the executed notebook) has its images written as files of the site's ``_images``, so that a reader's
browser fetches only the one that its window chooses.

A page whose executed code shows interactive maps (``attention_course.plotting.AttentionMaps``) loads
plotly.js, copied from the pinned plotly package into the site's ``_static`` (no CDN: the site works
offline); no other page loads it. ``course.js`` hands a click on the sidebar buttons a reader sees to the
ones the themes bind (``book/_static/course.js`` says why). :mod:`course_site.reading` titles the home page once
and lets the search quote the pages of a site opened from ``file://``; :mod:`course_site.examples` shows the
instructor guide's example class report.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import html
import re
import shutil
from pathlib import Path

import nbformat
import plotly
from docutils import nodes
from sphinx import addnodes
from sphinx.util.docutils import SphinxDirective

from attention_course.tooling import syntax
from autograder.release import colab, course, packages, reference
from autograder.release.course import exercise_path


def links_repository(config) -> course.Repository:
    """The repository that the exercise links name, as :func:`set_release` put it in the configuration."""
    url, ref = config.course_exercise_repository.split()
    return course.Repository(url, ref)


def exercise_links(assignment: str, repo: course.Repository, docname: str) -> nodes.Node:
    """The links of an exercise notebook: its download (copied into the site), Colab and GitHub in ``repo``."""
    path = exercise_path(assignment)
    download = addnodes.download_reference(
        "",
        "",
        refdoc=docname,
        reftarget="/" + path,
        refexplicit=True,
        refdomain="",
        reftype="download",
        classes=["exercise-download"],
    )
    download += nodes.inline("", f"Download {assignment}.ipynb")
    colab_link = nodes.reference(
        "", "", nodes.inline("", "Open in Colab"), refuri=repo.colab_url(path), classes=["exercise-colab"]
    )
    github = nodes.reference(
        "", "", nodes.inline("", "View on GitHub"), refuri=repo.blob_url(path), classes=["exercise-github"]
    )
    links = nodes.paragraph("", "", download, nodes.Text(" "), colab_link, nodes.Text(" "), github)
    return nodes.container("", links, classes=["exercise-links"])


class ExerciseLinks(SphinxDirective):
    required_arguments = 1
    has_content = False

    def run(self):
        assignment = self.arguments[0]
        path = exercise_path(assignment)
        if not (Path(self.env.srcdir) / path).is_file():
            raise self.error(f"exercise-links: there is no notebook {path} (run `make exercises`?)")
        return [exercise_links(assignment, links_repository(self.env.config), self.env.docname)]


class ColabInstall(SphinxDirective):
    """The line that installs the course's packages on Colab, from the repository the exercises name (in a
    term, the students' repository at its release): ``{colab-install}``."""

    has_content = False

    def run(self):
        code = colab.install_line(links_repository(self.env.config))
        return [_code_block(code, "ipython3", ("colab-install",))]


def release_of(env) -> course.Release:
    return course.Release.from_key(env.config.course_release)


def withheld_note(what: str, name: str, assignments: list[str]) -> nodes.Node:
    """A note in place of code that is not released: ``<what> `name` is shown here once ...``."""
    paragraph = nodes.paragraph(
        "",
        f"{what} ",
        nodes.literal(name, name),
        nodes.Text(
            " is shown here once your instructor releases the solutions of exercise"
            + ("s " if len(assignments) > 1 else " ")
        ),
    )
    for i, assignment in enumerate(assignments):
        if i:
            paragraph += nodes.Text(" and " if i == len(assignments) - 1 else ", ")
        paragraph += nodes.literal(assignment, assignment)
    paragraph += nodes.Text(", after the deadline.")
    return nodes.container("", paragraph, classes=["solution-withheld"])


def _code_block(code: str, language: str = "python", classes: tuple[str, ...] = ("solution-code",)) -> nodes.Node:
    block = nodes.literal_block(code, code, language=language, classes=list(classes))
    block["highlight_args"] = {}
    return block


class SolutionCode(SphinxDirective):
    """The reference code of one graded item: ``{solution-code} <assignment> <name>``."""

    required_arguments = 2
    has_content = False

    def run(self):
        assignment, name = self.arguments
        root = Path(self.env.srcdir)
        try:
            path = course.notebook_path(assignment, "solutions", root)
        except FileNotFoundError as error:
            raise self.error(f"solution-code: {error}") from None
        self.env.note_dependency(str(path))
        if not release_of(self.env).is_released(assignment):
            return [withheld_note("The reference solution of", name, [assignment])]
        try:
            code = reference.item_source(assignment, name, root)
        except reference.ReferenceUnavailable as error:
            raise self.error(f"solution-code: {error}") from None
        return [_code_block(code)]


class PackageCode(SphinxDirective):
    """An object of the course's package: ``{package-code} <path> <name>`` (``Class.method`` allowed).

    Where the module builds on a reference solution that is not released, only a note is shown.
    """

    required_arguments = 2
    has_content = False

    def run(self):
        rel, name = self.arguments
        root = Path(self.env.srcdir)
        path = root / rel
        if not path.is_file():
            raise self.error(f"package-code: there is no file {rel}")
        self.env.note_dependency(str(path))
        needs = packages.requirements(root).get(rel, frozenset())
        missing = [a for a in sorted(needs) if not release_of(self.env).is_released(a)]
        if missing:
            return [withheld_note("The code of", name, missing)]
        source = path.read_text()
        node = syntax.parse(source)
        for part in name.split("."):
            found = next(
                (
                    child
                    for child in getattr(node, "body", [])
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child.name == part
                ),
                None,
            )
            if found is None:
                raise self.error(f"package-code: {rel} defines no {name}")
            node = found
        lines = source.splitlines()
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        code = "\n".join(lines[first - 1 : node.end_lineno])
        indent = len(code) - len(code.lstrip(" "))
        return [_code_block("\n".join(line[indent:] for line in code.splitlines()))]


SOLUTION_TAG = "solution-"


def withhold_tagged_cells(app, doctree) -> None:
    """Remove the code of the cells tagged ``solution-<assignment>`` whose assignment is not released."""
    release = release_of(app.env)
    for cell in list(doctree.findall(nodes.container)):
        if "cell" not in cell.get("classes", []):
            continue
        tags = (cell.get("cell_metadata") or {}).get("tags", [])
        withheld = sorted(
            tag[len(SOLUTION_TAG) :]
            for tag in tags
            if tag.startswith(SOLUTION_TAG) and not release.is_released(tag[len(SOLUTION_TAG) :])
        )
        if not withheld:
            continue
        for child in list(cell.children):
            if "cell_input" in child.get("classes", []):
                cell.replace(child, withheld_note("The code of", "this step", withheld))
        cell["cell_metadata"] = {key: value for key, value in cell["cell_metadata"].items() if key == "tags"}


def set_release(app, config) -> None:
    """Read the release settings (``term.yml``, ``EDITION``, ``RELEASED``) and the repository that the
    exercises name (a term's students' repository: ``STUDENTS_REPOSITORY``, ``STUDENTS_RELEASE``) into
    the configuration.

    The term edition publishes no page sources (a page's Markdown holds the code of its cells), and its
    repository button opens the students' repository.
    """
    from sphinx.errors import ConfigError

    try:
        release = course.release(Path(app.srcdir))
        repo = course.exercise_repository(release, Path(app.srcdir))
    except ValueError as error:  # SettingsError, or _config.yml's repository
        raise ConfigError(str(error)) from None
    config.course_release = release.key
    config.course_exercise_repository = f"{repo.url} {repo.ref}"
    if not config.nb_execution_cache_path:
        # One cache of executed notebooks for every output folder (`jupyter-book build --path-output`):
        # another edition of the same chapters re-renders them without executing them again.
        config.nb_execution_cache_path = str(Path(app.srcdir) / "_build" / ".jupyter_cache")
    if release.edition == "term":
        config.html_copy_source = False
        config.html_theme_options = {
            **(config.html_theme_options or {}),
            "use_download_button": False,
            "repository_url": repo.url,
            "repository_branch": repo.ref,
        }


def retarget_downloads(app, exception) -> None:
    """Give the site's copies of the exercise notebooks the Colab cell of the repository that the links
    name (a term's students' repository), as the students' repository's own notebooks have it."""
    if exception is not None or app.builder.format != "html":
        return
    repo = links_repository(app.config)
    for source, (_, folder) in app.env.dlfiles.items():
        if not re.fullmatch(r"exercises/(\w+)/\1\.ipynb", Path(source).as_posix()):
            continue
        copy = Path(app.outdir) / "_downloads" / folder
        nb = nbformat.read(str(copy), as_version=4)
        if colab.retarget(nb, repo):
            nbformat.write(nb, str(copy))


# The id that sphinx-exercise gives the body of every exercise and every solution block: the same on each, so a
# page with two exercises held one id twice (invalid HTML, and a link to it reaches the first only).
SHARED_CONTENT_IDS = ("exercise-content", "solution-content")


def unique_content_ids(app, doctree, docname) -> None:
    """Each exercise's and solution's body named after its block (``<label>-content``, the block's own id, which
    sphinx-exercise makes unique), or numbered where its block has no id, so that no id appears twice on a page."""
    taken = {id_ for node in doctree.findall(nodes.Element) for id_ in node.get("ids", [])}
    counts = dict.fromkeys(SHARED_CONTENT_IDS, 0)
    for section in list(doctree.findall(nodes.section)):
        for shared in [id_ for id_ in section["ids"] if id_ in SHARED_CONTENT_IDS]:
            owner = section.parent
            while owner is not None and not (isinstance(owner, nodes.Element) and owner.get("ids")):
                owner = owner.parent
            counts[shared] += 1
            base = f"{owner['ids'][0]}-content" if owner is not None else f"{shared}-{counts[shared]}"
            new, n = base, 1
            while new in taken:
                n += 1
                new = f"{base}-{n}"
            taken.add(new)
            section["ids"] = [new if id_ == shared else id_ for id_ in section["ids"]]


# An image of a figure of panels in the page, as attention_course.plotting.panels_html writes it.
_PANEL_IMAGE = re.compile(r'\b(src|srcset)="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def panel_images_as_files(app, doctree, docname) -> None:
    """The images of each figure of panels in the page's HTML written as files of the site's ``_images`` (named by
    their content) and the page pointing at them: a ``<picture>`` fetches only the image its window chooses, where
    data URLs put both in every reader's download."""
    if app.builder.format != "html":
        return
    up = "../" * docname.count("/")

    def as_file(match: re.Match) -> str:
        data = base64.b64decode(match.group(2))
        name = f"panels-{hashlib.sha256(data).hexdigest()[:24]}.png"
        target = Path(app.outdir) / "_images" / name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return f'{match.group(1)}="{up}_images/{name}"'

    for raw in list(doctree.findall(nodes.raw)):
        text = raw.astext()
        if "course-panels" in text and "html" in raw.get("format", "").split():
            raw.replace_self(
                nodes.raw("", _PANEL_IMAGE.sub(as_file, text), format=raw["format"], classes=raw["classes"])
            )


def drop_duplicate_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        # Sphinx registers an inline script once with filename None and once with "".
        key = (getattr(script, "filename", script) or "", tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique  # in place: the builder and other handlers hold this list


PLOTLY_JS = "plotly.min.js"


def load_plotly_where_needed(app, pagename, templatename, context, doctree):
    """plotly.js on the pages that draw with it (a map's element carries plotly's class), in the head: the
    map's own script, in the body, calls it as the page is read."""
    if "plotly-graph-div" in context.get("body", ""):
        app.add_js_file(PLOTLY_JS, priority=200)


def copy_plotly(app, exception):
    """The pinned plotly package's plotly.js, into the site (only what the maps need of the package)."""
    if exception is not None or app.builder.format != "html":
        return
    shutil.copyfile(Path(plotly.__file__).parent / "package_data" / PLOTLY_JS, Path(app.outdir) / "_static" / PLOTLY_JS)


REDIRECT = re.compile(r'^\s*<meta http-equiv="Refresh" content="0; url=([^"]+)" />\s*$')


def complete_root_redirect(app, exception):
    """Replace the one-line redirect that sphinx-external-toc writes as index.html."""
    if exception is not None or app.builder.format != "html":
        return
    index = Path(app.outdir) / "index.html"
    match = REDIRECT.match(index.read_text()) if index.is_file() else None
    if not match:
        return
    url, title = html.escape(match.group(1)), html.escape(app.config.html_title or app.config.project)
    favicon = app.config.html_favicon
    icon = f'  <link rel="icon" href="_static/{html.escape(Path(favicon).name)}">\n' if favicon else ""
    index.write_text(
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n  <meta charset="utf-8">\n'
        f'  <title>{title}</title>\n  <meta http-equiv="Refresh" content="0; url={url}">\n{icon}'
        f'</head>\n<body>\n  <p>The course begins at <a href="{url}">{title}</a>.</p>\n</body>\n</html>\n'
    )


def setup(app):
    app.add_config_value("course_release", "open", "env", types=[str])
    app.add_config_value("course_exercise_repository", "", "env", types=[str])
    app.connect("config-inited", set_release)
    app.connect("doctree-read", withhold_tagged_cells)
    app.connect("doctree-resolved", unique_content_ids)
    app.connect("doctree-resolved", panel_images_as_files)
    app.add_directive("exercise-links", ExerciseLinks)
    app.add_directive("colab-install", ColabInstall)
    app.add_directive("solution-code", SolutionCode)
    app.add_directive("package-code", PackageCode)
    app.connect("html-page-context", load_plotly_where_needed)
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    app.connect("build-finished", copy_plotly)
    app.connect("build-finished", complete_root_redirect, priority=900)  # after sphinx-external-toc
    app.connect("build-finished", retarget_downloads)
    app.setup_extension("course_site.reading")
    app.setup_extension("course_site.examples")
    app.add_css_file("course.css")
    app.add_js_file("course.js")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
