"""The book's Sphinx extension (listed in ``_config.yml`` under ``sphinx.extra_extensions``).

``exercise-links`` puts an exercise notebook's links on a page::

    ```{exercise-links} ch02_scaled_dot_product
    ```

gives a download of ``exercises/ch02_scaled_dot_product/ch02_scaled_dot_product.ipynb`` (copied
into the site), an "Open in Colab" link and a link to the file on GitHub, both in the repository
that ``_config.yml`` names. A notebook that does not exist fails the build.

The extension also writes the site's root ``index.html``, which only redirects to the first page,
as a complete page (title, favicon, a link for readers whose browser does not follow the
redirect), and removes script tags that an extension of Jupyter Book adds twice to every
page (a duplicated ``const`` declaration is a JavaScript error in the reader's console).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.util.docutils import SphinxDirective

from course_site import exercise_path, repository


class ExerciseLinks(SphinxDirective):
    required_arguments = 1
    has_content = False

    def run(self):
        assignment = self.arguments[0]
        path = exercise_path(assignment)
        root = Path(self.env.srcdir)
        if not (root / path).is_file():
            raise self.error(f"exercise-links: there is no notebook {path} (run `make exercises`?)")
        try:
            repo = repository(root)
        except ValueError as error:
            raise self.error(f"exercise-links: {error}") from None

        download = addnodes.download_reference(
            "", "", refdoc=self.env.docname, reftarget="/" + path, refexplicit=True,
            refdomain="", reftype="download", classes=["exercise-download"])
        download += nodes.inline("", f"Download {assignment}.ipynb")
        colab = nodes.reference("", "", nodes.inline("", "Open in Colab"),
                                refuri=repo.colab_url(path), classes=["exercise-colab"])
        github = nodes.reference("", "", nodes.inline("", "View on GitHub"),
                                 refuri=repo.blob_url(path), classes=["exercise-github"])
        links = nodes.paragraph("", "", download, nodes.Text(" "), colab, nodes.Text(" "), github)
        return [nodes.container("", links, classes=["exercise-links"])]


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
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n  <meta charset=\"utf-8\">\n"
        f"  <title>{title}</title>\n  <meta http-equiv=\"Refresh\" content=\"0; url={url}\">\n{icon}"
        f"</head>\n<body>\n  <p>The course begins at <a href=\"{url}\">{title}</a>.</p>\n</body>\n</html>\n")


def setup(app):
    app.add_directive("exercise-links", ExerciseLinks)
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    app.connect("build-finished", complete_root_redirect, priority=900)  # after sphinx-external-toc
    app.add_css_file("course.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
