"""Python source parsed into a syntax tree, one parse at a time in a process.

CPython 3.11 keeps the recursion depth of its AST constructor in state that every thread shares: two
threads parsing at once can fail with "SystemError: AST constructor recursion depth mismatch"
(python/cpython#106905). Gradings run side by side in threads of one process (the catalogue of
known mistakes grades two notebooks at a time), and each parses the course's modules and the
notebooks' cells, so every parse of the course's own code goes through :func:`parse`.
"""

from __future__ import annotations

import ast
import threading

_ONE_AT_A_TIME = threading.RLock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, never while another thread of this process runs it here."""
    with _ONE_AT_A_TIME:
        return ast.parse(source, filename)


def held():
    """The lock :func:`parse` takes, for code that parses through ``ast`` itself (Triton's interpreter reads a
    kernel's source with ``ast.parse`` and compiles the tree it rewrites): ``with held(): ...`` runs it while no
    thread of this process parses here. Re-entrant: :func:`parse` may be called inside."""
    return _ONE_AT_A_TIME
