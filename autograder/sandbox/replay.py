"""A student's Triton kernels run again, in a sandbox of the grader's where no other code of theirs runs.

:func:`replay` is what the grader calls in that sandbox (:mod:`autograder.calls.launches` prepares the request and
reads the result): it defines the kernels from ``program`` (source that :mod:`autograder.calls.kernel_source` has
read as Triton code alone), lays out the tensors of the recorded launches in storages of its own, filled as the
grader says (the check's inputs, Δ, one number everywhere, or NaN where the grader does not trust what the
student's process held), and runs the launches in order in Triton's interpreter. While they run,
every load, store and atomic operation is checked to stay inside the storages (one that does not stops the replay:
the interpreter would read or write the process's memory), and noted: which elements the kernels stored, which rows
of the queries and of the keys each program touches (for the causal kernels' blocks; a tensor the kernels wrote that
holds the queries or keys, a scratch copy, is labelled as they are, recognised by its values before each launch
reads it: :mod:`autograder.sandbox.layouts`), whether a kernel read a value the grader did not give it and no kernel
wrote, and the largest tensor any program made (a load, a broadcast, a product, a reduction). The result is plain
data: the storages as the kernels left them, and those notes.

The same function runs in a notebook's own process for its visible tests, where the student's code runs anyway.
"""

from __future__ import annotations

import contextlib
import linecache
import math

import numpy as np
import torch

MAX_PROGRAMS = 4096  # programs of one launch
SAFE_BUILTINS = ("range", "min", "max", "abs", "float", "int", "bool", "len", "print", "round", "pow", "divmod")
FILENAME = "<the kernels replayed>"


class ReplayError(Exception):
    """The replay stopped: ``launch`` is the launch it stopped in."""

    def __init__(self, message: str, launch: int | None = None):
        super().__init__(message)
        self.launch = launch


def replay(program: str, request: dict) -> dict:
    """Run the launches of ``request`` with the kernels ``program`` defines. ``request``:

    - ``storages``: each ``{"dtype": name, "size": elements}``;
    - ``launches``: each ``{"kernel": name, "grid": [x, y, z], "args": {name: argument}}``, an argument either
      ``{"value": number}`` or ``{"view": {"storage", "offset", "shape", "stride", "fill", "logged"}}``: ``fill`` the
      tensor to write into the view where the storage is new (or changed since the kernels last left it), None for
      NaN; ``logged`` what the student's process held there before the launch, for a storage seen before;
    - ``rows``: each ``{"storage", "side": "query" | "key", "elements", "rows"}``, the row (``n * L + l``) of each
      element of a storage that holds queries or keys;
    - ``sides``: each ``{"side", "values"}``, the queries or keys (canonical, ``(N, L, d)``), to label what the
      kernels wrote that holds them.

    Returns ``{"storages": [tensors], "stored": [bool tensors], "programs": table, "largest": elements,
    "poison_read": [[launch, storage]], "changed": [[launch, storage]], "error": None or text, "launch": index}``,
    ``stored`` the elements of each storage that a kernel stored, the programs' table as :func:`_plain` lays it out
    (the rows of the queries and keys each program touched).
    """
    from attention_course.kernels.interpreter import load_triton

    triton, _ = load_triton()  # in its interpreter, wherever this process imported it first
    kernels = _define(program, triton)
    storages = [torch.empty(int(s["size"]), dtype=getattr(torch, s["dtype"])) for s in request["storages"]]
    poisoned = [np.zeros(len(s), dtype=bool) for s in storages]
    seen = [False] * len(storages)
    watch = _Watch(storages, poisoned, request.get("rows", []))
    result = {
        "programs": watch.programs,
        "poison_read": watch.poison_read,
        "changed": [],
        "error": None,
        "launch": None,
    }
    try:
        for index, launch in enumerate(request["launches"]):
            watch.launch = index
            kernel = kernels.get(launch["kernel"])
            if kernel is None:
                raise ReplayError(f"no kernel {launch['kernel']} in the program", index)
            grid = tuple(int(n) for n in launch["grid"]) or (1,)
            if math.prod(grid) > MAX_PROGRAMS or min(grid) < 0:
                raise ReplayError(f"a grid of {math.prod(grid)} programs (at most {MAX_PROGRAMS})", index)
            arguments, fresh = {}, set()
            for name, argument in launch["args"].items():
                if "view" not in argument:
                    arguments[name] = argument["value"]
                    continue
                spec = argument["view"]
                number = int(spec["storage"])
                view = torch.as_strided(storages[number], spec["shape"], spec["stride"], spec["offset"])
                if not seen[number] and number not in fresh:
                    _poison(storages[number], poisoned[number])
                    fresh.add(number)
                if number in fresh:
                    _fill(view, spec.get("fill"), poisoned[number], storages[number])
                elif _changed(view, spec.get("logged")):
                    result["changed"].append([index, number])
                    _fill(view, spec.get("fill"), poisoned[number], storages[number])
                watch.recognise(number, view, request.get("sides", []))
                arguments[name] = view
            for number in fresh:
                seen[number] = True
            with watch.watching():
                try:
                    kernel[grid](**arguments)
                except ReplayError as exc:
                    exc.launch = index
                    raise
                except Exception as exc:
                    cause = exc.__cause__ if exc.__cause__ is not None else exc
                    stopped = _stopped(exc)
                    if stopped is not None:
                        stopped.launch = index
                        raise stopped from None
                    # its type only: a message can hold values the kernel computed from the grader's inputs
                    raise ReplayError(f"{type(cause).__name__} raised in the kernel", index) from None
    except ReplayError as exc:
        result["error"], result["launch"] = str(exc), exc.launch
    result["storages"] = storages
    result["stored"] = [torch.from_numpy(mask) for mask in watch.stored]
    result["largest"] = watch.largest
    return _plain(result)


def _stopped(exc: BaseException) -> ReplayError | None:
    """The replay's own stop behind what a kernel raised, however deep the interpreter wrapped it (a kernel that
    calls another ``@triton.jit`` function wraps it once for each call)."""
    for _ in range(32):
        if exc is None or isinstance(exc, ReplayError):
            return exc
        exc = exc.__cause__ if exc.__cause__ is not None else exc.__context__
    return None


def _define(program: str, triton) -> dict:
    """The kernels ``program`` defines, each made a Triton kernel, in a namespace of their own with Triton and a few
    of Python's functions only (the grader has read the program as Triton code alone)."""
    import builtins

    lines = program.splitlines(keepends=True)
    linecache.cache[FILENAME] = (len(program), None, lines, FILENAME)  # the interpreter reads a kernel's source
    namespace = {
        "__builtins__": {name: getattr(builtins, name) for name in SAFE_BUILTINS},
        "__name__": "replayed_kernels",
        "tl": triton.language,
        "triton": triton,
        "math": math,
    }
    exec(compile(program, FILENAME, "exec"), namespace)  # noqa: S102 (read as Triton code alone: kernel_source)
    defined = [
        name
        for name, value in namespace.items()
        if callable(value) and getattr(value, "__module__", "") == "replayed_kernels"
    ]
    for name in defined:
        namespace[name] = triton.jit(namespace[name])
    return {name: namespace[name] for name in defined}


def _poison(storage: torch.Tensor, poisoned: np.ndarray) -> None:
    """A new storage holds NaN (or its dtype's largest number) until the grader fills a view of it."""
    if storage.dtype.is_floating_point:
        storage.fill_(float("nan"))
    elif storage.dtype == torch.bool:
        storage.fill_(True)
    else:
        storage.fill_(torch.iinfo(storage.dtype).max)
    poisoned[:] = True


def _changed(view: torch.Tensor, logged) -> bool:
    """Whether what the student's process held in ``view`` before a launch differs from what the kernels left there
    (the launcher changed it between launches); None: not recorded, taken as unchanged."""
    if logged is None:
        return False
    if not isinstance(logged, torch.Tensor) or tuple(logged.shape) != tuple(view.shape):
        return True
    here, there = view.detach().double(), logged.detach().double()
    return not torch.allclose(here, there, rtol=1e-4, atol=1e-5, equal_nan=True)


def _fill(view: torch.Tensor, fill, poisoned: np.ndarray, storage: torch.Tensor) -> None:
    elements = _elements(view, storage)
    if fill is None:
        if view.dtype.is_floating_point:
            view.fill_(float("nan"))
        else:
            view.fill_(torch.iinfo(view.dtype).max if view.dtype != torch.bool else True)
        poisoned[elements] = True
        return
    view.copy_(fill.to(view.dtype).reshape(view.shape))
    poisoned[elements] = False


def _elements(view: torch.Tensor, storage: torch.Tensor) -> np.ndarray:
    """The indices in ``storage`` of the elements of ``view``."""
    index = torch.arange(storage.numel())
    return torch.as_strided(index, view.shape, view.stride(), view.storage_offset()).reshape(-1).numpy()


class _Watch:
    """The interpreter's memory operations, checked against the storages and noted, while :meth:`watching`."""

    def __init__(self, storages: list[torch.Tensor], poisoned: list[np.ndarray], rows: list[dict]):
        self.storages, self.poisoned = storages, poisoned
        self.launch = 0
        held = [i for i, s in enumerate(storages) if s.numel()]  # an empty storage holds no address
        self.bases = np.zeros(len(storages), dtype=np.uint64)
        self.ends = np.zeros(len(storages), dtype=np.uint64)
        for i in held:
            self.bases[i] = storages[i].data_ptr()
            self.ends[i] = storages[i].data_ptr() + storages[i].numel() * storages[i].element_size()
        self.order = np.array(sorted(held, key=lambda i: int(self.bases[i])), dtype=np.int64)
        self.sides = {}  # storage -> (side of each element: 0 none, 1 query, 2 key; its row, n * L + l)
        for entry in rows:
            number = int(entry["storage"])
            if number not in self.sides:
                size = storages[number].numel()
                self.sides[number] = (np.zeros(size, dtype=np.int8), np.full(size, -1, dtype=np.int64))
            side, table = self.sides[number]
            elements = np.asarray(entry["elements"], dtype=np.int64)
            side[elements] = 1 if entry["side"] == "query" else 2
            table[elements] = np.asarray(entry["rows"], dtype=np.int64)
        self.programs: list[dict] = []  # one entry per (launch, program) that touched queries or keys
        self._program: dict[tuple, dict] = {}
        self.poison_read: list[list[int]] = []
        self.stored = [np.zeros(s.numel(), dtype=bool) for s in storages]  # the elements a kernel stored
        self._carried_by: tuple = ()
        self._carried: list[tuple] = []  # (values, sides, rows) the current program loaded from the inputs
        self.largest = 0  # elements of the largest tensor a program made

    def recognise(self, number: int, view: torch.Tensor, sides: list[dict]) -> None:
        """Label the elements of ``view`` (of storage ``number``) that the kernels wrote as the queries or keys it
        holds, if it holds them (a scratch copy is the input it was copied from)."""
        from autograder.sandbox.layouts import laid_out

        elements = _elements(view, self.storages[number])
        if not len(elements) or not self.stored[number][elements].any():
            return
        for entry in sides:
            laid = laid_out(view, entry["values"])
            if laid is None:
                continue
            if number not in self.sides:
                size = self.storages[number].numel()
                self.sides[number] = (np.zeros(size, dtype=np.int8), np.full(size, -1, dtype=np.int64))
            side, table = self.sides[number]
            side[elements] = 1 if entry["side"] == "query" else 2
            table[elements] = laid[1].numpy()
            return

    @contextlib.contextmanager
    def watching(self):
        from triton.runtime import interpreter

        builder = interpreter.interpreter_builder
        names = ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas")
        originals = {name: getattr(builder, name) for name in names}
        made = interpreter.TensorHandle.__post_init__

        def load(ptrs, mask, other, *args, **kwargs):
            self.check(ptrs, mask, "load")
            return originals["create_masked_load"](ptrs, mask, other, *args, **kwargs)

        def store(ptrs, value, mask, *args, **kwargs):
            self.check(ptrs, mask, "store", value)
            return originals["create_masked_store"](ptrs, value, mask, *args, **kwargs)

        def atomic_rmw(op, ptr, val, mask, *args, **kwargs):
            self.check(ptr, mask, "atomic")
            return originals["create_atomic_rmw"](op, ptr, val, mask, *args, **kwargs)

        def atomic_cas(ptr, cmp, val, *args, **kwargs):
            self.check(ptr, None, "atomic")
            return originals["create_atomic_cas"](ptr, cmp, val, *args, **kwargs)

        def measured(handle):  # every tensor a program makes: loads, broadcasts, products, reductions, tl.dot
            made(handle)
            self.largest = max(self.largest, int(np.size(handle.data)))

        for name, replacement in zip(names, (load, store, atomic_rmw, atomic_cas)):
            setattr(builder, name, replacement)
        interpreter.TensorHandle.__post_init__ = measured
        try:
            yield
        finally:
            interpreter.TensorHandle.__post_init__ = made
            for name in names:
                with contextlib.suppress(AttributeError):
                    delattr(builder, name)

    def check(self, ptrs, mask, kind: str, value=None) -> None:
        """Stop where an access leaves the storages; note the rows a program touches and the poison it reads, and
        carry the rows of what it loaded to where it stores the same values (``value``: what a store writes)."""
        from triton.runtime import interpreter

        addresses = np.asarray(ptrs.data, dtype=np.uint64).reshape(-1)
        size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        wanted = (
            np.ones(addresses.shape, dtype=bool)
            if mask is None
            else np.broadcast_to(np.asarray(mask.data, dtype=bool), np.shape(ptrs.data)).reshape(-1)
        )
        if not len(self.order):
            slot = np.full(addresses.shape, -1)
            number = np.zeros(addresses.shape, dtype=np.int64)
        else:
            slot = np.searchsorted(self.bases[self.order], addresses, side="right") - 1
            number = self.order[np.clip(slot, 0, None)]
        # compared without sums that could wrap around 2**64 (every storage held is at least one element long)
        last = np.where(self.ends[number] >= np.uint64(size), self.ends[number] - np.uint64(size), 0)
        inside = (slot >= 0) & (addresses >= self.bases[number]) & (addresses <= last) & (self.ends[number] > 0)
        offset = np.where(inside, addresses - self.bases[number], 0)
        if (wanted & ~inside).any():
            raise ReplayError(f"a {kind} outside the tensors the kernel was given, where no mask kept it inside")
        program = tuple(interpreter.interpreter_builder.grid_idx)
        if self._carried_by != (self.launch, *program):  # a new program: what the last one loaded is forgotten
            self._carried_by, self._carried = (self.launch, *program), []
        stored = None if value is None else np.broadcast_to(np.asarray(value.data), np.shape(ptrs.data)).reshape(-1)
        for storage in np.unique(number[inside]):
            here = inside & (number == storage)
            items = (offset[here] // np.uint64(self.storages[storage].element_size())).astype(np.int64)
            if kind == "load" and self.poisoned[storage][items[wanted[here]]].any():
                event = [self.launch, int(storage)]
                if event not in self.poison_read:
                    self.poison_read.append(event)
            if kind != "load":
                self.poisoned[storage][items[wanted[here]]] = False
                self.stored[storage][items[wanted[here]]] = True
                self._carry(int(storage), items[wanted[here]], None if stored is None else stored[here][wanted[here]])
            sides = self.sides.get(int(storage))
            if sides is None or kind != "load":
                continue
            side, table = sides[0][items], sides[1][items]
            labelled = (side > 0) & (table >= 0) & wanted[here]
            if labelled.any():
                values = self.storages[storage][torch.from_numpy(items[labelled])].double().numpy()
                self._carried.append((values, side[labelled], table[labelled]))
            entry = self._entry(program)
            for code, name in ((1, "query"), (2, "key")):  # a row of -1: padding past a sequence's end
                tried = table[(side == code) & (table >= 0)]
                entry[f"{name}_tried"].update(int(r) for r in np.unique(tried))
                loaded = table[(side == code) & (table >= 0) & wanted[here]]
                entry[f"{name}_loaded"].update(int(r) for r in np.unique(loaded))

    def _carry(self, storage: int, items: np.ndarray, values) -> None:
        """Label the elements ``items`` of ``storage`` that a program stored (``values``) as the rows of the queries or
        keys it loaded the same values from (as the storage's dtype rounds them), and unlabel the others: a copy of
        an input, in whatever layout, is still that input."""
        found = np.zeros(len(items), dtype=bool)
        if values is not None and self._carried and len(items):
            loaded = np.concatenate([part[0] for part in self._carried])
            sides = np.concatenate([part[1] for part in self._carried])
            rows = np.concatenate([part[2] for part in self._carried])
            dtype = self.storages[storage].dtype
            rounded = torch.from_numpy(loaded).to(dtype).double().numpy()
            order = np.argsort(rounded, kind="stable")
            wanted = torch.from_numpy(np.array(values, dtype=np.float64)).to(dtype).double().numpy()
            at = np.clip(np.searchsorted(rounded[order], wanted), 0, len(order) - 1)
            found = (rounded[order][at] == wanted) & (wanted != 0)
            if found.any() and storage not in self.sides:
                size = self.storages[storage].numel()
                self.sides[storage] = (np.zeros(size, dtype=np.int8), np.full(size, -1, dtype=np.int64))
            if found.any():
                self.sides[storage][0][items[found]] = sides[order][at][found]
                self.sides[storage][1][items[found]] = rows[order][at][found]
        if storage in self.sides:
            self.sides[storage][0][items[~found]] = 0
            self.sides[storage][1][items[~found]] = -1

    def _entry(self, program: tuple) -> dict:
        key = (self.launch, *program)
        if key not in self._program:
            entry = {"launch": self.launch, "program": list(program)}
            entry.update({f"{side}_{what}": set() for side in ("query", "key") for what in ("tried", "loaded")})
            self._program[key] = entry
            self.programs.append(entry)
        return self._program[key]


def _plain(result: dict) -> dict:
    """``result`` as plain data to cross to the grader, in a few values however many programs and rows: the programs
    as one table of (launch, program index) rows, ``where``; the rows of each kind that they touched as one int64
    tensor, ``<kind>``, program after program, each program's ending at ``<kind>_ends``."""
    entries = result["programs"]
    where = [[entry["launch"], *entry["program"]] for entry in entries]
    programs = {"where": torch.tensor(where, dtype=torch.int64).reshape(-1, 4)}
    for kind in (f"{side}_{what}" for side in ("query", "key") for what in ("tried", "loaded")):
        rows = [sorted(entry[kind]) for entry in entries]
        programs[kind] = torch.tensor([row for part in rows for row in part], dtype=torch.int64)
        programs[f"{kind}_ends"] = torch.tensor([len(part) for part in rows], dtype=torch.int64).cumsum(0)
    return {**result, "programs": programs}
