"""A check's keyword options gathered into one dataclass argument, its signature listing each of them."""

from __future__ import annotations

import dataclasses
import functools
import inspect


def gathered(cls, into: str, names: tuple[str, ...], defaults: dict | None = None, required: tuple[str, ...] = ()):
    """A decorator: the check takes the fields ``names`` of the dataclass ``cls`` as keyword arguments (with
    ``defaults``' values where given, none for those ``required``, else the field's), and gets them as one
    argument, ``into``, a ``cls``. The check's signature, as callers and :func:`inspect.signature` see it,
    lists them."""
    fields = {field.name: field for field in dataclasses.fields(cls)}
    defaults = defaults or {}

    def decorate(check):
        own = [p for p in inspect.signature(check).parameters.values() if p.name != into]
        shared = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if name in required else defaults.get(name, fields[name].default),
                annotation=fields[name].type,
            )
            for name in names
        ]
        signature = inspect.Signature([*own, *shared])

        @functools.wraps(check)
        def with_options(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            given = {name: bound.arguments.pop(name, signature.parameters[name].default) for name in names}
            return check(*bound.args, **bound.kwargs, **{into: cls(**given)})

        with_options.__signature__ = signature
        return with_options

    return decorate
