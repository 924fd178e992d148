"""A package's names imported on first use (PEP 562).

What ``attention_course`` and ``autograder`` export, without importing torch for a caller that uses none of it."""

from __future__ import annotations

import importlib
import sys


def exports(package: str, homes: dict[str, str]):
    """``__getattr__`` and ``__dir__`` for the package ``package``, whose names are those of ``homes``
    (name -> the module that defines it); each is imported when first asked for, then kept."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str):
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(homes[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted([*namespace, *homes])

    return __getattr__, __dir__
