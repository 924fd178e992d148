"""Serve the built book on this machine (``make serve``), as the published site serves it.

    python -m course_site.serve [SITE] [--port 8000]    # SITE: _build/html; Ctrl+C stops

The site also reads opened from its folder (``file://``, :mod:`course_site.reading`); served, every page
and the search behave as on the published site. It listens on 127.0.0.1 only (nothing outside this machine
reaches it), and says where: ``The book is served at http://127.0.0.1:8000/ (Ctrl+C stops)``; ``--port 0``
takes a free port and names it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import sys
from pathlib import Path

DEFAULT_SITE = Path("_build") / "html"
DEFAULT_PORT = 8000
HOST = "127.0.0.1"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Files of the site, without a line on the terminal for every request."""

    def log_message(self, *args) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_site.serve", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("site", nargs="?", default=str(DEFAULT_SITE), help=f"the built site (default: {DEFAULT_SITE})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default: {DEFAULT_PORT}; 0: a free one")
    args = parser.parse_args(argv)
    site = Path(args.site)
    if not (site / "index.html").is_file():
        parser.error(f"site: {site} holds no built book (no index.html): build it with `make book`")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port: expected a port from 0 to 65535, got {args.port}")
    handler = functools.partial(QuietHandler, directory=str(site.absolute()))
    try:
        server = http.server.ThreadingHTTPServer((HOST, args.port), handler)
    except OSError as error:
        print(f"port {args.port} is taken ({error.strerror}): choose another, make serve PORT=8001", file=sys.stderr)
        return 1
    with server:
        print(f"The book is served at http://{HOST}:{server.server_port}/ (Ctrl+C stops)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
