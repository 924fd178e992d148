"""The checks of the form of what an item returns and does: shapes, dtypes, device, numbers, buffers, errors.

None of them compares values with a reference: each holds whatever the values are, so a failure here says what is
wrong with the form before any value is compared.
"""

from __future__ import annotations

import builtins
import numbers

import numpy as np
import torch

from autograder.api import specs
from autograder.api.items import CheckFailed, Item, quoted_error, shape_difference, type_name
from autograder.api.options import CompareOptions, compares
from autograder.calls.call import CallOptions, parameter_names, seeded, takes_options
from autograder.calls.isolation import isolated


@isolated()
@takes_options()
@compares(hint="check the shape of each returned value against the assignment")
def check_output_shapes(item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions, shapes):
    """The item returns the right structure (a value, or a tuple of ``item.outputs``) with these shapes."""
    call = options.call(item, "output shapes", args, kwargs, compared.hint)
    values = call.outputs(call.run())
    shapes = [tuple(s) for s in shapes]
    if len(shapes) != len(values):
        raise ValueError(f"shapes lists {len(shapes)} shapes for {len(values)} outputs")
    for (name, value), shape in zip(values.items(), shapes):
        got = call.as_numpy(value, name).shape
        if got != shape:
            call.fail(shape_difference(name, got, shape))


@isolated()
@takes_options()
@compares(
    "rtol",
    "atol",
    hint="every returned value must be finite: look for an exponential of a large number "
    "that overflows, or a 0/0 in a row with nothing left to weigh",
)
def check_finite(item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions):
    """No returned value contains NaN or inf. ``rtol`` and ``atol`` are the tolerances with which the diagnosis of a
    failure finds a known mistake in the values (those of an overflow are ill-conditioned: the sandbox and the grader
    round them differently)."""
    call = options.call(item, "finite outputs", args, kwargs, compared.hint)
    for name, value in call.outputs(call.run_shared()).items():
        got = call.as_numpy(value, name)
        if not np.isfinite(got).all():
            call.fail(f"{name} contains NaN or inf")


@isolated()
@takes_options("seed")
@compares(
    hint="the arguments must be the same after the call: compute new arrays or "
    "tensors instead of writing into an argument in place",
)
def check_inputs_unchanged(item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions):
    """The item does not modify its arguments."""
    call = options.call(item, "inputs left unchanged", args, kwargs, compared.hint)
    inputs, keywords = specs.materialize(call.args, call.kwargs, options.seed)
    call.run(inputs=(inputs, keywords))
    fresh, fresh_kw = specs.materialize(call.args, call.kwargs, options.seed)
    names = parameter_names(item.obj)
    pairs = [(names[i] if i < len(names) else f"argument {i + 1}", a, b) for i, (a, b) in enumerate(zip(inputs, fresh))]
    pairs += [(k, keywords[k], fresh_kw[k]) for k in keywords]
    for name, used, original in pairs:
        if isinstance(original, (np.ndarray, torch.Tensor)) and not np.array_equal(
            np.asarray(used), np.asarray(original), equal_nan=True
        ):
            call.fail(f"argument {name} was modified")


@isolated()
@takes_options()
@compares(
    "outputs",
    hint="the outputs must have the dtype of the inputs: a tensor made with a "
    "fixed dtype, or with the default one, changes it",
)
def check_dtype_follows_input(item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions):
    """Every floating-point output (or those named in ``outputs``) has the dtype of the first floating-point input.
    It reads what the call returned only, and shares the call with the checks of its values on the same inputs."""
    call = options.call(item, "output dtype follows the inputs", args, kwargs, compared.hint)
    want = next(
        (
            v.dtype
            for v in [*call.inputs, *call.keywords.values()]
            if isinstance(v, (np.ndarray, torch.Tensor)) and v.dtype not in (torch.bool, np.bool_)
        ),
        None,
    )
    if want is None:
        raise ValueError("check_dtype_follows_input needs a floating-point input")
    returned = call.outputs(call.run_shared())
    for name in compared.outputs or returned:
        value = returned[name]
        call.as_numpy(value, name)  # checks the kind of value
        if value.dtype != want:
            call.fail(f"{name} has dtype {value.dtype}; the inputs have dtype {want}")


@isolated(diagnose=False)  # a dtype, which no known mistake's values explain
@takes_options()
@compares(hint="return each value in the dtype that the assignment names for it, whatever the inputs' dtype")
def check_output_dtypes(item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions, dtypes):
    """Each returned value named in ``dtypes`` has the dtype it maps to (by name: ``{"lse": "float32"}``), the one
    the contract names for it whatever the inputs' (chapter 11's log-sum-exp is float32 for float16 inputs). It reads
    what the call returned only, and shares the call with the checks of its values on the same inputs."""
    if not dtypes or not all(isinstance(dtype, str) for dtype in dtypes.values()):
        raise ValueError(f"dtypes must map output names to dtype names such as 'float32', got {dtypes!r}")
    for dtype in dtypes.values():
        if str(getattr(torch, dtype, None)) != f"torch.{dtype}":  # a dtype's own name, not an alias ("float")
            raise ValueError(f"dtypes: {dtype!r} is not the name of a dtype")
    call = options.call(item, "output dtypes", args, kwargs, compared.hint)
    returned = call.outputs(call.run_shared())
    for name, dtype in dtypes.items():
        if name not in returned:
            raise ValueError(f"dtypes names {name!r}, not one of the outputs {list(returned)}")
        value = returned[name]
        call.as_numpy(value, name)  # checks the kind of value
        got = str(value.dtype).removeprefix("torch.")
        if got != dtype:
            call.fail(f"{name} has dtype {got}; the assignment says {dtype}")


NUMBERS = {"int": "an int", "float": "a float"}  # the kinds of number a contract names as a return type


@isolated()
@takes_options()
@compares(hint="return the kind of number that the contract names")
def check_returns_number(item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions, kind: str):
    """The item returns one number of the ``kind`` its contract names: ``"int"``, an integer (Python's or
    NumPy's; not a bool, not a float that happens to be whole, not a tensor), or ``"float"``, a real number
    (an int is one as well). The message names the type returned (cut), never the value."""
    if kind not in NUMBERS:
        raise ValueError(f"kind must be one of {sorted(NUMBERS)}, got {kind!r}")
    call = options.call(item, f"the result is {NUMBERS[kind]}", args, kwargs, compared.hint)
    got = call.run()
    wanted = numbers.Integral if kind == "int" else numbers.Real
    if isinstance(got, (bool, np.bool_)) or not isinstance(got, wanted):
        call.fail(f"it returned a {type_name(got)}, not {NUMBERS[kind]}")


@isolated()
@takes_options()
@compares(hint="make the result on the device you are given, not on the default one")
def check_output_device(
    item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions, device: str = "meta"
):
    """Every returned tensor lies on ``device`` (``"meta"``: a device with no data, so the check runs on
    any machine, with or without a GPU)."""
    call = options.call(item, f"result on the device {device!r}", args, kwargs, compared.hint)
    for name, value in call.outputs(call.run()).items():
        if not isinstance(value, torch.Tensor):
            call.fail(f"{name} is a {type_name(value)}, not a torch tensor")
        if value.device.type != torch.device(device).type:
            call.fail(f"{name} is on the device {value.device.type!r}")


@isolated(diagnose=False)
@takes_options("init", required=("init",))
@compares(hint="keep it as a buffer of the module: saved and moved with it, but not trained")
def check_buffer(item: Item, name: str, *, options: CallOptions, compared: CompareOptions, shape=None):
    """A class item's object holds ``name`` as a buffer (in its state, not among its parameters), of
    ``shape`` where given."""
    call = options.call(item, f"{name} is a buffer", [], None, compared.hint)
    instance = call.instance(item.obj)
    try:
        value = instance.get_buffer(name)
    except Exception:
        try:
            instance.get_parameter(name)
            call.fail(f"{name} is a parameter, which the optimiser would train")
        except CheckFailed:
            raise
        except Exception:
            call.fail(f"{item.name} has no buffer {name!r}")
    if not isinstance(value, torch.Tensor):
        call.fail(f"{name} is a {type_name(value)}, not a tensor")
    if shape is not None and tuple(value.shape) != tuple(shape):
        call.fail(shape_difference(name, value.shape, shape))


@isolated(diagnose=False)
@takes_options()
@compares(hint="check the arguments first and raise an error that names the wrong one")
def check_raises(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    compared: CompareOptions,
    exception: str = "ValueError",
    mentions: tuple[str, ...] = (),
):
    """Calling the item raises ``exception`` (a builtin's name) whose message mentions each of ``mentions``.

    Without ``init`` the item itself is called (for a class: its constructor, with ``args``);
    with ``init`` an object is built first and its ``method`` (default: forward) gets ``args``.
    """
    expected = getattr(builtins, exception)
    call = options.call(item, f"{exception} for bad arguments", args, kwargs, compared.hint)
    inputs, keywords = specs.materialize(call.args, call.kwargs, options.seed)
    target = item.obj if options.init is None else call.build(item.obj)
    try:
        with seeded(options.seed, target):
            target(*inputs, **keywords)
    except expected as exc:
        missing = [word for word in mentions if word not in str(exc)]
        if missing:
            call.fail(f"its error ({quoted_error(exc)}) does not mention {', '.join(missing)}")
        return
    except NotImplementedError:
        call.not_written(f"it raised NotImplementedError, not {exception}")
    except Exception as exc:
        call.fail(f"it raised {quoted_error(exc)}; expected {exception}")
    call.fail(f"it raised no error; expected {exception}")
