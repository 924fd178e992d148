"""The checks that test cells call, one property each, in a module for each kind of property.

The kinds: the values an item returns (:mod:`.values`), what attention may weigh and look at
(:mod:`.attention`), the form of what an item returns and does (:mod:`.form`), a self-attention module with
a key/value cache (:mod:`.generation`), multiple-choice questions (:mod:`.questions`), and how an item
computes: in Triton kernels it launches, skipping the blocks a causal mask hides (:mod:`.kernels`). Test cells import
them from :mod:`autograder` (``from autograder import *``).

Every check takes an :class:`~autograder.api.items.Item` (the student's object and its name in the
course contract), inputs described as plain data (see :mod:`autograder.api.specs`), and keyword options
that are plain data too, those that checks share declared once: the seed and how a class item is built
and called (:class:`~autograder.calls.call.CallOptions`), and how the check compares, its tolerances, the
outputs it looks at and its hint (:class:`~autograder.api.options.CompareOptions`). It makes the inputs,
calls the student's code (:class:`~autograder.calls.call.Call`), and raises :class:`~autograder.api.items.CheckFailed`
with a message that names

* the item,
* the property that failed,
* the shapes of the inputs,
* and a hint,

and never prints an expected value (:mod:`autograder.calls.compare` says how values differ). Because
everything but the student's object is plain data, a check call can be recorded and replayed by a
grader that runs the student's code in another process.

Each check grades its item's own code (:mod:`autograder.calls.isolation`): graded in the sandbox, an item that
uses other graded items runs with the grader's stand-ins for them (:mod:`autograder.calls.standins`), and a
failure's hint says whose fault it is (:mod:`autograder.calls.attribution`), naming one of the item's known
mistakes where one explains it (:mod:`autograder.calls.diagnosis`).
"""
