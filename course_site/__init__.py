"""Tooling for the course's web site: the book's Sphinx extension, the local MathJax copy, the
internal link check, the Colab set-up cell of the exercises and the student-facing export.

The public repository that students open exercises from (Colab links, ``pip install`` on Colab)
is set in one place, ``repository:`` in ``_config.yml``; :func:`repository` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

COURSE_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Repository:
    """The course's public GitHub repository, as ``_config.yml`` names it."""

    url: str  # https://github.com/<owner>/<name>
    branch: str

    @property
    def slug(self) -> str:
        """``owner/name``."""
        return self.url.removeprefix("https://github.com/").strip("/")

    def colab_url(self, path: str) -> str:
        """The address that opens ``path`` (a notebook in the repository) in Google Colab."""
        return f"https://colab.research.google.com/github/{self.slug}/blob/{self.branch}/{path}"

    def blob_url(self, path: str) -> str:
        """The address of ``path`` on GitHub."""
        return f"{self.url}/blob/{self.branch}/{path}"

    def pip_spec(self) -> str:
        """What ``pip install`` takes to install the course's packages from the repository."""
        return f"attention-course @ git+{self.url}@{self.branch}"


def repository(root: Path = COURSE_ROOT) -> Repository:
    config = yaml.safe_load((Path(root) / "_config.yml").read_text())
    repo = config.get("repository") or {}
    url, branch = repo.get("url"), repo.get("branch", "main")
    if not isinstance(url, str) or not url.startswith("https://github.com/") or url.rstrip("/").count("/") != 4:
        raise ValueError(f"_config.yml: repository.url must be https://github.com/<owner>/<name>, got {url!r}")
    return Repository(url.rstrip("/"), str(branch))


def exercise_path(assignment: str) -> str:
    """The released notebook of an assignment, relative to the repository root."""
    return f"exercises/{assignment}/{assignment}.ipynb"
