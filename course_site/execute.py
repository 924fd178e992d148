"""Execute the book's pages into the shared execution cache, several at a time, before ``jupyter-book build``.

    python -m course_site.execute [--jobs 2] [BOOK]     # make book runs this, then jupyter-book build

The book is built in myst-nb's ``cache`` mode (``_config.yml``): a page whose code cells are in the
cache (``execute.cache``, jupyter-cache) is rendered with the cached outputs, and any other page is
executed while Sphinx reads it, one page after another. The chapters run on one thread each, so on
a machine with several cores this module executes the pages that are not in the cache first, in a
pool of ``--jobs`` processes, and puts their outputs into the same cache; ``jupyter-book build``
then finds every page there ("Using cached notebook") and executes nothing. The pages start in the
order that ends soonest: first those whose time is not known (a new chapter; the largest code
first), then the longest first, by the time of a page's last run that the cache remembers, or else
that the last ``make bench-book`` recorded (``benchmarks/figures.json``).

It prints a line as each page starts and finishes (``[book] executing ch01_bahdanau ...``,
``[book] executed ch01_bahdanau in 154.2 s``) or is found in the cache, and while a page runs, every
``--progress`` seconds (30), the code cell it is at and the last line that cell has shown, a training loop's
step or epoch (``[book] ch01_bahdanau: cell 12/44 (2 min 30 s): no attention: 46% 230/500 [01:10<01:20, ...]``:
a worker's thread that wakes up to print, nothing added to the cells), so that a long chapter on a busy machine
is not taken for a hang; it exits 1, naming the page
and its error, if a page fails: then it starts no other page, lets the ones already running finish
(their outputs are kept), and ``make book`` stops before the build.

The cache key must be the one myst-nb computes during the build, so a page is read exactly as
myst-nb reads it: the Sphinx configuration that Jupyter Book makes of ``_config.yml``
(``jupyter_book.config.get_final_config``), the Markdown and notebook settings made from it as
myst-parser and myst-nb make them (``MdParserConfig``, ``NbParserConfig``), myst-nb's own reader
(``create_nb_reader``) and its changes to a read page (kernel aliases, the page's ``mystnb``
settings), as in ``myst_nb.sphinx_.Parser.parse``. The key (jupyter-cache's
``create_hashed_notebook``) is the MD5 of the code cells' sources and metadata and the notebook's
``kernelspec``: the text around the cells is not part of it. A page is then executed as myst-nb's
``NotebookClientCache`` executes it: ``single_nb_execution`` with the page's folder as the working
directory, the configured timeout and ``allow_errors``, and the executed notebook stored with
``cache_notebook_bundle``. The workers only execute; this process alone reads and writes the cache
(its SQLite database and folders), one operation at a time, so that no two processes write to it
at once. The cache path is taken relative to the working directory, as myst-nb takes it: run this
where ``jupyter-book build`` runs (``make book`` runs both in the repository's root).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from tempfile import TemporaryDirectory

from jupyter_book.config import get_final_config
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from jupyter_cache.cache.db import NbCacheRecord, NbProjectRecord
from jupyter_cache.cache.main import JupyterCacheBase
from jupyter_cache.executors.utils import single_nb_execution
from myst_nb.core.config import NbParserConfig
from myst_nb.core.nb_to_tokens import nb_node_to_dict
from myst_nb.core.read import create_nb_reader
from myst_parser.config.main import MdParserConfig
from nbformat import NotebookNode
from sphinx_external_toc.parsing import parse_toc_yaml
from traitlets.config import Config

from course_site.progress import PROGRESS_SECONDS, Progress

DEFAULT_JOBS = 2
# The files Sphinx reads a page from, in its order of preference; myst-nb reads the last two and
# nb_custom_formats (an .rst page is not a notebook).
SUFFIXES = (".rst", ".md", ".ipynb")
# Where `make bench-book` records the seconds of each chapter of a cold build (benchmarks.figures).
RECORDED_TIMES = Path("benchmarks") / "figures.json"


@dataclass
class Page:
    """A page of the book that myst-nb reads as a notebook, read as myst-nb reads it."""

    name: str  # what the progress lines call it: the file's name without suffix (ch01_bahdanau)
    path: Path
    notebook: NotebookNode
    config: NbParserConfig  # the book's, with the page's own ``mystnb`` settings
    read_fmt: dict | None  # how jupyter-cache would read the file again (myst-nb's reader plugin)

    @property
    def uri(self) -> str:
        """The page as jupyter-cache records it (``add_nb_to_project``: the absolute path)."""
        return str(self.path.absolute())

    @property
    def code_size(self) -> int:
        return sum(len(cell.source) for cell in self.notebook.cells if cell.cell_type == "code")


@dataclass
class Outcome:
    """What a worker sends back: the executed notebook, or the error that stopped it."""

    notebook: NotebookNode
    seconds: float
    error: str | None = None  # one line: ZeroDivisionError: division by zero
    detail: str = ""  # the failing cell and its traceback (nbclient's message), or Python's traceback


@dataclass
class Run:
    """The pages this module executed, and those that failed (their outcomes)."""

    executed: dict[str, float] = field(default_factory=dict)
    failed: dict[str, Outcome] = field(default_factory=dict)
    left: list[str] = field(default_factory=list)  # not started because a page failed


def book_settings(root: Path) -> tuple[MdParserConfig, NbParserConfig]:
    """The Markdown and notebook settings that myst-nb reads the book's pages with in ``jupyter-book build``.

    Jupyter Book turns ``_config.yml`` into Sphinx's configuration (``get_final_config``, as its build
    does); myst-parser and myst-nb make their settings from its ``myst_*`` and ``nb_*`` values
    (``create_myst_config``, ``create_mystnb_config``), a value that is not there keeping its default.
    """
    sphinx_config, _ = get_final_config(
        user_yaml=root / "_config.yml", cli_config={"latex_individualpages": False}, sourcedir=root
    )
    md_values = {
        name: sphinx_config[f"myst_{name}"]
        for name, _, spec in MdParserConfig().as_triple()
        if "sphinx" not in spec.metadata.get("omit", []) and f"myst_{name}" in sphinx_config
    }
    nb_values = {}
    for name, _, spec in NbParserConfig().as_triple():
        if spec.metadata.get("sphinx_exclude"):
            continue
        for key in (f"nb_{name}", spec.metadata.get("legacy_name")):
            if key and key in sphinx_config:
                nb_values[name] = sphinx_config[key]
    nb_config = NbParserConfig(**nb_values)
    if not nb_config.execution_cache_path:
        # As course_site.sphinx_ext (set_release) sets it for the build.
        nb_config = nb_config.copy(execution_cache_path=str(root / "_build" / ".jupyter_cache"))
    return MdParserConfig(**md_values), nb_config


def toc_files(root: Path, nb_config: NbParserConfig) -> list[Path]:
    """The files of the pages that ``_toc.yml`` lists, in its order (its ``glob`` entries expanded)."""
    site_map = parse_toc_yaml(root / "_toc.yml")
    suffixes = [*SUFFIXES, *nb_config.custom_formats]
    files: list[Path] = []
    for docname in site_map:
        found = next(
            (root / f"{docname}{suffix}" for suffix in suffixes if (root / f"{docname}{suffix}").is_file()), None
        )
        if found is not None:
            files.append(found)
    for pattern in sorted(site_map.globs()):
        for suffix in suffixes:
            files.extend(sorted(path for path in root.glob(f"{pattern}{suffix}") if path not in files))
    return files


def read_page(path: Path, md_config: MdParserConfig, nb_config: NbParserConfig) -> Page | None:
    """``path`` read as myst-nb reads it (``myst_nb.sphinx_.Parser.parse``), or None if it is no notebook."""
    text = path.read_text(encoding="utf-8-sig")  # Sphinx's source_encoding
    reader = create_nb_reader(str(path), md_config, nb_config, text)
    if reader is None:
        return None  # plain Markdown, with no code to execute
    notebook = reader.read(text)
    kernel_name = notebook.metadata.get("kernelspec", {}).get("name", None)
    if kernel_name is not None and nb_config.kernel_rgx_aliases:
        for pattern, alias in nb_config.kernel_rgx_aliases.items():
            if re.fullmatch(pattern, kernel_name):
                notebook.metadata["kernelspec"]["name"] = alias
                break
    if nb_config.metadata_key in notebook.metadata:
        overrides = nb_node_to_dict(notebook.metadata[nb_config.metadata_key])
        overrides.pop("output_folder", None)
        with suppress(Exception):  # myst-nb warns and keeps the book's settings (a warning fails the build: -W)
            nb_config = nb_config.copy(**overrides)
    return Page(path.stem, path, notebook, nb_config, reader.read_fmt)


def book_pages(root: Path) -> tuple[list[Page], NbParserConfig]:
    """The pages of the book that are notebooks, in the table of contents' order, and the book's settings."""
    md_config, nb_config = book_settings(root)
    pages = [page for path in toc_files(root, nb_config) if (page := read_page(path, md_config, nb_config))]
    return pages, nb_config


def excluded(page: Page) -> bool:
    """Whether the build leaves the page unexecuted (``execute.exclude_patterns``, as ``create_client``)."""
    posix_path = PurePosixPath(page.path.as_posix())
    return any(posix_path.match(pattern) for pattern in page.config.execution_excludepatterns)


def local_kernel(sockets: str) -> Config:
    """The kernel's channels as Unix sockets in the folder ``sockets``, not TCP ports: a kernel on TCP warns
    once per page that its traffic is unencrypted (ipykernel 7), which the build log has no use for, and
    sockets in a folder of the build's own are reachable by no other user."""
    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = os.path.join(sockets, "kernel")
    return config


def execute_notebook(
    notebook: NotebookNode,
    cwd: str | None,
    timeout: int | None,
    allow_errors: bool,
    name: str = "",
    progress_seconds: float = PROGRESS_SECONDS,
) -> Outcome:
    """Run in a worker: execute ``notebook`` as myst-nb's ``NotebookClientCache`` does (in ``cwd``, or in a
    temporary folder where ``cwd`` is None), saying every ``progress_seconds`` which cell of the page ``name``
    runs (:class:`Progress`)."""
    started = time.perf_counter()
    with (
        nullcontext(cwd) if cwd is not None else TemporaryDirectory() as folder,
        TemporaryDirectory() as sockets,
        Progress(name or "page", notebook, progress_seconds) as progress,
    ):
        try:
            result = single_nb_execution(
                notebook,
                cwd=os.path.abspath(folder),
                timeout=timeout,
                allow_errors=allow_errors,
                meta_override=True,
                config=local_kernel(sockets),
                on_cell_execute=progress.cell_started,
            )
        except Exception as error:  # the kernel died or did not start; myst-nb does not catch these either
            summary = f"{type(error).__name__}: {error}".splitlines()[0]
            return Outcome(notebook, time.perf_counter() - started, summary, traceback.format_exc())
    error = result.err
    if error is None:
        return Outcome(result.nb, result.time)
    if getattr(error, "ename", None):  # CellExecutionError: the exception raised in the kernel
        summary = f"{error.ename}: {error.evalue}"
    else:  # CellTimeoutError
        summary = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    return Outcome(result.nb, result.time, summary, str(error))


def previous_seconds(cache: JupyterCacheBase, pages: list[Page], root: Path) -> dict[str, float]:
    """The seconds that each page took when it last ran, where known (by page name): the cache's record of
    its last run (of an older version of its code), else the cold build that ``make bench-book`` recorded
    last (``benchmarks/figures.json``, committed: known in a fresh clone too)."""
    try:
        recorded = json.loads((root / RECORDED_TIMES).read_text())["book-build"]["figures"]["chapters"]
    except (OSError, ValueError, KeyError, TypeError):
        recorded = {}
    known: dict[str, float] = {}
    for page in pages:
        records = NbCacheRecord.records_from_uri(page.uri, cache.db)
        timed = [record for record in records if (record.data or {}).get("execution_seconds")]
        if timed:
            known[page.name] = max(timed, key=lambda record: record.created).data["execution_seconds"]
        elif isinstance(recorded.get(page.name), (int, float)):
            known[page.name] = float(recorded[page.name])
    return known


def execution_order(pages: list[Page], previous: dict[str, float]) -> list[Page]:
    """The order to start the pages in: those whose time is not known first, the largest code first (a long
    page started last would keep one worker busy alone at the end, and a short one started first costs
    little); then the others, the longest first. Ties keep the table of contents' order."""
    return sorted(
        pages,
        key=lambda page: (page.name in previous, -previous[page.name] if page.name in previous else -page.code_size),
    )


def _pages(count: int) -> str:
    return f"{count} page{'' if count == 1 else 's'}"


def _say(line: str, *, error: bool = False) -> None:
    print(line, file=sys.stderr if error else sys.stdout, flush=True)


def execute_pages(
    pages: list[Page],
    cache_path: str | Path,
    jobs: int = DEFAULT_JOBS,
    root: Path = Path("."),
    progress_seconds: float = PROGRESS_SECONDS,
) -> Run:
    """Execute the pages whose code is not in the cache, ``jobs`` at a time, into the cache, each saying every
    ``progress_seconds`` which cell it is at."""
    cache = get_cache(cache_path)
    run = Run()
    pending: list[Page] = []
    hashes: dict[str, str] = {}  # hash of the code -> the page that will execute it
    for page in pages:
        if page.config.execution_mode != "cache" or excluded(page):
            continue  # the build executes it itself (mode auto or force), or never
        try:
            cache.match_cache_notebook(page.notebook)
        except KeyError:
            pass
        else:
            _say(f"[book] {page.name}: code unchanged, outputs from the cache")
            continue
        _, hashkey = cache.create_hashed_notebook(page.notebook)
        if hashkey in hashes:  # the same code as another page: one run gives both their outputs
            _say(f"[book] {page.name}: the same code as {hashes[hashkey]}, executed once")
            continue
        hashes[hashkey] = page.name
        pending.append(page)
    if not pending:
        return run
    queue = execution_order(pending, previous_seconds(cache, pending, root))
    jobs = max(1, min(jobs, len(queue)))
    _say(f"[book] {_pages(len(queue))} to execute, {jobs} at a time")
    started = time.perf_counter()
    running: dict[Future, tuple[Page, str]] = {}
    # The platform's way of starting processes (fork on Linux: a worker starts at once, importing
    # nothing again); a worker never touches the cache, whose open connection a forked one inherits.
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        while queue or running:
            while queue and len(running) < jobs and not run.failed:
                page = queue.pop(0)
                # As NotebookClientCache: the page joins the cache's project, its old traceback removed.
                if page.read_fmt is not None:
                    record = cache.add_nb_to_project(str(page.path), read_data=page.read_fmt)
                else:
                    record = cache.add_nb_to_project(str(page.path))
                NbProjectRecord.remove_tracebacks([record.pk], cache.db)
                cwd = None if page.config.execution_in_temp else str(page.path.parent)
                config = page.config
                future = pool.submit(
                    execute_notebook,
                    page.notebook,
                    cwd,
                    config.execution_timeout,
                    config.execution_allow_errors,
                    page.name,
                    progress_seconds,
                )
                running[future] = (page, record.uri)
                _say(f"[book] executing {page.name} ...")
            if run.failed and queue:
                run.left = [page.name for page in queue]
                queue = []
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                page, uri = running.pop(future)
                try:
                    outcome = future.result()
                except Exception as error:  # the worker itself died (killed, out of memory)
                    outcome = Outcome(page.notebook, 0.0, f"{type(error).__name__}: {error}", traceback.format_exc())
                if outcome.error is None:
                    cache.cache_notebook_bundle(
                        CacheBundleIn(outcome.notebook, uri, data={"execution_seconds": outcome.seconds}),
                        check_validity=False,
                        overwrite=True,
                    )
                    run.executed[page.name] = outcome.seconds
                    _say(f"[book] executed {page.name} in {outcome.seconds:.1f} s")
                else:
                    if not page.config.execution_raise_on_error:
                        NbProjectRecord.set_traceback(uri, outcome.detail, cache.db)
                    run.failed[page.name] = outcome
                    _say(f"[book] {page.name} failed after {outcome.seconds:.1f} s: {outcome.error}", error=True)
                    _say(outcome.detail.rstrip(), error=True)
    if run.executed:
        seconds = time.perf_counter() - started
        _say(f"[book] executed {_pages(len(run.executed))} in {seconds:.1f} s, {jobs} at a time")
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("book", nargs="?", default=".", help="the book's folder (_config.yml, _toc.yml); default: .")
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="pages executed at a time (default: 2)")
    parser.add_argument(
        "--progress",
        type=float,
        default=PROGRESS_SECONDS,
        metavar="SECONDS",
        help=f"while a page runs, say which cell it is at every SECONDS (default: {PROGRESS_SECONDS:g})",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be 1 or more")
    if not args.progress > 0:
        parser.error(f"--progress must be a number of seconds above 0, got {args.progress:g}")
    root = Path(args.book).absolute()  # as jupyter-book takes the source folder
    pages, nb_config = book_pages(root)
    if nb_config.execution_mode != "cache":
        _say(f"[book] execute_notebooks is {nb_config.execution_mode!r}, not 'cache': the build executes the pages")
        return 0
    run = execute_pages(pages, nb_config.execution_cache_path, args.jobs, root, args.progress)
    if run.failed:
        names = ", ".join(run.failed)
        left = f"; not started: {', '.join(run.left)}" if run.left else ""
        _say(f"[book] the book is not built: {names} failed (the error is above){left}", error=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
