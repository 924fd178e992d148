"""The worker's side of the grader's stand-ins, in the sandbox.

:mod:`autograder.sandbox.worker` runs it; the grader's side is :mod:`autograder.calls.standins`. :class:`StandIns`
puts the grader's stand-ins in place of the notebook's objects of the names an item uses: each computes nothing
here, and its calls go back to the grader (:class:`Grader`) while the grader waits for the reply to a request, as
``Callback`` messages answered by a ``CallbackResult``. It also makes the proxy of a fixture that the grader holds
(:meth:`StandIns.held_fixture`). A call larger than the grader takes in one message raises an error in the
student's code before its arrays are encoded.
"""

from __future__ import annotations

from autograder.sandbox import wire


class Grader:
    """The way back to the grader while it waits for the reply to a request: the stand-ins' calls."""

    def __init__(self, requests, replies, values):
        import threading

        self.requests, self.replies, self.values = requests, replies, values
        self.serving = None  # the seq of the request being served, if any
        self.message_bytes = wire.MAX_MESSAGE  # the largest message the grader takes (the StandIn request says)
        self.lock = threading.Lock()

    def encode(self, what: str, value):
        """``value`` encoded for a call of the grader's ``what``; a RuntimeError, before anything is encoded,
        where its arrays alone would make a larger message than the grader takes."""
        size = array_bytes(value)
        if size * 4 // 3 > self.message_bytes:  # base64
            raise RuntimeError(
                f"the grader's {what} is called with {size / 2**20:,.1f} MiB of tensors, more than the grader "
                f"takes in one call ({self.message_bytes * 3 // 4 / 2**20:,.1f} MiB)"
            )
        return self.values.encode(value)

    def ask(self, callback: dict) -> wire.CallbackResult:
        with self.lock:
            if self.serving is None:
                raise RuntimeError("the grader's stand-ins answer only while the grader is calling your code")
            message = wire.frame(wire.Callback(self.serving, wire.StandInCall(**callback)))
            if len(message) - 4 > self.message_bytes:
                raise RuntimeError(
                    f"the call of the grader's {callback['name']} makes a message of {len(message):,} bytes, more "
                    f"than the grader takes ({self.message_bytes:,})"
                )
            self.replies.write(message)
            self.replies.flush()
            answer = wire.receive(self.requests, wire.FromGraderMessage)
        if not isinstance(answer, wire.CallbackResult) or answer.seq != self.serving:
            raise RuntimeError("the grader did not answer the stand-in's call")
        if not answer.ok:
            raise _builtin_error(answer.error_type)(answer.error[:2000])
        return answer


def array_bytes(value, depth: int = 0) -> int:
    """The bytes of the tensors and arrays in ``value`` (in lists, tuples, sets and dicts)."""
    import numpy as np
    import torch

    if depth > 32:
        return 0
    if isinstance(value, torch.Tensor):
        return 0 if value.is_meta else value.numel() * value.element_size()
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(array_bytes(part, depth + 1) for part in value)
    return 0


def _builtin_error(name: str) -> type:
    import builtins

    cls = getattr(builtins, name, None)
    return cls if isinstance(cls, type) and issubclass(cls, Exception) else RuntimeError


class StandIns:
    """The grader's stand-ins for the notebook's graded items, put in place while an item that uses
    them is graded, and the notebook's own objects they replaced."""

    def __init__(self, grader: Grader, values):
        self.grader, self.values = grader, values
        self.replaced: dict[str, object] = {}  # name -> the notebook's object

    MISSING = object()  # a name the notebook did not define: taken away again afterwards

    def install(self, namespace: dict, functions: list, modules: list) -> None:
        for key, original in self.replaced.items():
            if original is self.MISSING:
                namespace.pop(key, None)
            else:
                namespace[key] = original
        self.replaced = {}
        wanted = [(str(name), self._function(str(name))) for name in functions]
        wanted += [(str(name), self._module(str(name))) for name in modules]
        for name, stand_in in wanted:
            original = namespace.get(name, self.MISSING)
            keys = [name]
            if original is not self.MISSING:  # another name for the same object: `sh = split_heads`
                keys += [k for k, v in list(namespace.items()) if v is original and k != name and not k.startswith("_")]
            for key in keys:
                self.replaced.setdefault(key, namespace.get(key, self.MISSING))
                namespace[key] = stand_in

    def _function(self, name: str):
        grader, values = self.grader, self.values

        def stand_in(*args, **kwargs):
            answer = grader.ask(
                {
                    "kind": "call",
                    "name": name,
                    "args": grader.encode(name, list(args)),
                    "kwargs": grader.encode(name, dict(kwargs)),
                }
            )
            return values.decode(answer.value)

        stand_in.__name__ = stand_in.__qualname__ = name
        return stand_in

    def _module(self, name: str):
        import torch

        grader, values = self.grader, self.values

        class StandIn(torch.nn.Module):
            def __init__(self, *args, **kwargs):
                super().__init__()
                answer = grader.ask(
                    {
                        "kind": "construct",
                        "name": name,
                        "args": grader.encode(name, list(args)),
                        "kwargs": grader.encode(name, dict(kwargs)),
                        "rng": values.encode(torch.get_rng_state()),
                    }
                )
                self.__dict__["_stand_in_init"] = answer.init
                parameters = set(values.decode(answer.parameters))
                for key, value in values.decode(answer.state).items():
                    owner, path = self, key.split(".")
                    for part in path[:-1]:
                        if part not in owner._modules:
                            owner.add_module(part, torch.nn.Module())
                        owner = owner._modules[part]
                    if key in parameters:
                        owner.register_parameter(path[-1], torch.nn.Parameter(value))
                    else:
                        owner.register_buffer(path[-1], value)
                for attr, value in values.decode(answer.attributes).items():
                    setattr(self, attr, value)
                torch.set_rng_state(values.decode(answer.rng))

            def forward(self, *args, **kwargs):
                answer = grader.ask(
                    {
                        "kind": "forward",
                        "name": name,
                        "init": self._stand_in_init,
                        "state": grader.encode(name, dict(self.state_dict())),
                        "training": bool(self.training),
                        "args": grader.encode(name, list(args)),
                        "kwargs": grader.encode(name, dict(kwargs)),
                        "rng": values.encode(torch.get_rng_state()),
                    }
                )
                torch.set_rng_state(values.decode(answer.rng))
                return values.decode(answer.value)

            def extra_repr(self):
                return "the grader's stand-in"

        StandIn.__name__ = StandIn.__qualname__ = name
        return StandIn

    def held_fixture(self, number: int, name: str, methods: list, attributes: dict):
        """The proxy of the fixture that the grader holds under ``number``: ``attributes`` copied, and each of
        ``methods`` a call that the grader answers (with the fixture it holds, whose state stays there)."""
        import torch

        grader, values = self.grader, self.values

        def method(method_name: str):
            def call(self, *args, **kwargs):
                answer = grader.ask(
                    {
                        "kind": "fixture",
                        "name": method_name,
                        "held": number,
                        "args": grader.encode(f"{name}.{method_name}", list(args)),
                        "kwargs": grader.encode(f"{name}.{method_name}", dict(kwargs)),
                    }
                )
                return values.decode(answer.value)

            call.__name__ = call.__qualname__ = method_name
            return call

        def extra_repr(self):
            return "held by the grader"

        namespace = {m: method(m) for m in methods if m.isidentifier() and not m.startswith("_")}
        proxy = type(name, (torch.nn.Module,), {**namespace, "extra_repr": extra_repr})()
        for attr, value in attributes.items():
            if attr.isidentifier() and not attr.startswith("_"):
                setattr(proxy, attr, value)
        return proxy
