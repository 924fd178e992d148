"""A package's names imported on first use (PEP 562).

What ``attention_course`` and ``autograder`` export, without importing torch for a caller that uses none of it."""

from __future__ import annotations

import importlib
import sys


def exports(package: str, homes: dict[str, str], modules: dict[str, str] | None = None):
    """``__getattr__`` and ``__dir__`` for the package ``package``, whose names are those of ``homes``
    (name -> the module that defines it) and the modules of ``modules`` (name -> the module's full name, for
    ``from package import name``); each is imported when first asked for, then kept."""
    namespace = sys.modules[package].__dict__
    modules = modules or {}

    def __getattr__(name: str):
        if name in modules:
            value = importlib.import_module(modules[name])
            namespace[name] = value
            return value
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(homes[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes, *modules})

    return __getattr__, __dir__
