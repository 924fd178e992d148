"""A student's Triton kernels read as Triton code, before the grader runs them again (:mod:`autograder.calls.launches`).

The grader replays a student's kernels in a sandbox of its own, where none of the student's other code runs, to
see what they compute. It runs them only once it has read them as what a Triton kernel may be, and nothing more:
functions whose statements are assignments, loops over ``range`` or ``tl.range``, branches and returns; whose
expressions are numbers, arithmetic, comparisons, indexing, and calls of ``triton.language``'s functions (and
``tl.math``'s), of a few of Python's (``range``, ``min``, ``float``, ...), of the program's other kernels, and of the
methods of what those return (``x.to(tl.float32)``, ``desc.load([...])``); whose names are their parameters, their
own variables, ``tl``, ``triton``, ``math``, the program's other kernels and the numbers the program's module defines.
No import, no attribute that starts with ``_``, no other name: a kernel cannot reach the process it runs in, so
what it writes depends only on the arguments the grader gives it. A kernel that needs more than that is refused,
with what it uses (:class:`KernelRefused`); compiled Triton accepts no more than this either.

:func:`program` reads the recorded sources (:mod:`autograder.sandbox.launch_log`) and returns one module's source,
the kernels undecorated, for :mod:`autograder.sandbox.replay` to define and run. The record is untrusted: no source
longer than :data:`MAX_SOURCE`, nor more than :data:`MAX_SOURCES` in all, is parsed (a parse costs the grader's
process memory and time far beyond the text, and holds the lock every parse shares). A message quotes of the record
only what :class:`Names` allows: the student's process writes it with the hidden inputs at hand. Standard library
only.
"""

from __future__ import annotations

import ast
import math
import numbers
import re
from dataclasses import dataclass

from attention_course.tooling import syntax


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# triton.language's names a kernel may use (3.x): every public function, type and constant, but its modules (other
# than tl.math) and inline assembly
TL_NAMES = _words(
    """
    PropagateNan TRITON_MAX_TENSOR_NUMEL abs add advance arange argmax argmin associative_scan assume atomic_add
    atomic_and atomic_cas atomic_max atomic_min atomic_or atomic_xchg atomic_xor bfloat16 bitonic_merge
    block_type broadcast broadcast_to cast cat cdiv ceil clamp condition const constexpr constexpr_type cos
    cumprod cumsum debug_barrier device_assert device_print div_rn dot dot_scaled dtype erf exp exp2 expand_dims
    fdiv flip float16 float32 float64 float8e4b15 float8e4b8 float8e4nv float8e5 float8e5b16 floor fma full
    gather histogram int1 int16 int32 int64 int8 interleave join load load_tensor_descriptor log log2
    make_block_ptr make_tensor_descriptor map_elementwise max max_constancy max_contiguous maximum min minimum
    mul multiple_of num_programs pair_uniform_to_normal permute philox pi32_t pointer_type program_id rand
    rand4x randint randint4x randn randn4x range ravel reduce reduce_or reshape rsqrt sigmoid sin slice softmax
    sort split sqrt sqrt_rn squeeze static_assert static_print static_range store store_tensor_descriptor sub
    sum swizzle2d tensor tensor_descriptor tensor_descriptor_type to_tensor topk trans tuple tuple_type uint16
    uint32 uint64 uint8 uint_to_uniform_float umulhi unsqueeze view void where xor_sum zeros zeros_like
    """
)
TL_MATH_NAMES = _words("abs ceil cos div_rn erf exp exp2 fdiv floor fma log log2 rsqrt sin sqrt sqrt_rn umulhi")
MATH_NAMES = _words("sqrt log log2 log10 exp e pi inf nan ceil floor isqrt pow cos sin tanh fabs")
TRITON_NAMES = frozenset({"cdiv", "next_power_of_2", "language"})
# the attributes and methods of what a kernel computes: tensors, dtypes, tensor descriptors, constexprs
VALUE_ATTRIBUTES = _words(
    """
    T abs advance argmax argmin associative_scan atomic_add atomic_and atomic_cas atomic_max atomic_min
    atomic_or atomic_xchg atomic_xor broadcast_to cast cdiv ceil cos cumprod cumsum erf exp exp2 expand_dims
    flip floor gather histogram log log2 logical_and logical_or max min permute ravel reduce reduce_or reshape
    rsqrt sigmoid sin softmax sort split sqrt sqrt_rn store sum to trans view xor_sum load scatter block_shape
    block_type dtype shape element_ty primitive_bitwidth numel value type scalar is_floating is_int is_fp16
    is_fp32 is_bf16 is_fp64
    """
)
BUILTINS = frozenset({"range", "min", "max", "abs", "float", "int", "bool", "len", "print", "round", "pow", "divmod"})
ROOTS = frozenset({"tl", "triton", "math"})

STATEMENTS = (
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.For,
    ast.While,
    ast.If,
    ast.Break,
    ast.Continue,
    ast.Pass,
    ast.Return,
    ast.Expr,
    ast.Assert,
)
EXPRESSIONS = (
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.IfExp,
    ast.Compare,
    ast.Call,
    ast.Constant,
    ast.Attribute,
    ast.Subscript,
    ast.Name,
    ast.Tuple,
    ast.List,
    ast.Slice,
    ast.JoinedStr,
    ast.FormattedValue,
)
GRAMMAR = (ast.keyword, ast.arguments, ast.arg, ast.operator, ast.cmpop, ast.unaryop, ast.boolop, ast.expr_context)
MAX_FUNCTIONS = 32
MAX_CONSTANTS = 64
MAX_SOURCE = 20_000  # characters of one kernel's source (autograder.sandbox.launch_log records no more)
MAX_SOURCES = 40_000  # characters of all of them (the reference's kernels of one pass: about 7,000)
TOO_LONG = (
    f"its kernels' source is longer than the grader reads ({MAX_SOURCE:,} characters of one kernel, "
    f"{MAX_SOURCES:,} in all): a kernel of this course is a few hundred lines at most"
)
DEFINED = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
UNQUOTED = "[a name not in your notebook]"


class KernelRefused(ValueError):
    """A kernel the grader does not run: the message says which and what it uses that a kernel may not."""


@dataclass(frozen=True)
class Names:
    """What a message may quote of a record of launches: a kernel's name where the submission's source defines a
    function of that name (``kernels``), another name (an argument's, one a kernel uses) where that source holds it
    (``words``). The record is written by the student's process, which holds the hidden inputs while it writes it:
    a name made at run time could carry them to the feedback page. None (a notebook's own process, which holds no
    hidden input): any identifier. Nothing else of the record is quoted (a dtype, a type, a number)."""

    kernels: frozenset[str] | None = None
    words: frozenset[str] | None = None

    @classmethod
    def of(cls, source: str | None) -> Names:
        """The names the submission's program ``source`` defines and holds (None: any)."""
        if source is None:
            return cls()
        return cls(frozenset(DEFINED.findall(source)), frozenset(IDENTIFIER.findall(source)))

    def kernel(self, name, launch: int | None = None) -> str:
        """The kernel ``name`` (of launch ``launch``, counted from 0) as a message names it: by its name where the
        submission defines it, by its launch otherwise."""
        if isinstance(name, str) and name.isidentifier() and (self.kernels is None or name in self.kernels):
            return name
        return "a kernel" if launch is None else f"the kernel of launch {launch + 1}"

    def word(self, name) -> str:
        """Another name of the record (an argument, a name a kernel uses), as a message quotes it."""
        if isinstance(name, str) and name.isidentifier() and (self.words is None or name in self.words):
            return name
        return UNQUOTED


def bounded(functions, constants) -> None:
    """:class:`KernelRefused` unless ``functions`` (name -> source or None) and ``constants`` (name -> number) are
    what a record holds, within :data:`MAX_FUNCTIONS`, :data:`MAX_CONSTANTS`, :data:`MAX_SOURCE` and
    :data:`MAX_SOURCES`: checked before any of it is parsed."""
    unreadable = KernelRefused("the record of your kernels' source could not be read")
    if not isinstance(functions, dict) or not isinstance(constants, dict):
        raise unreadable
    if len(functions) > MAX_FUNCTIONS or len(constants) > MAX_CONSTANTS:
        raise unreadable
    if any(not isinstance(name, str) or len(name) > 80 or not name.isidentifier() for name in (*functions, *constants)):
        raise unreadable
    if any(source is not None and not isinstance(source, str) for source in functions.values()):
        raise unreadable
    lengths = [len(source) for source in functions.values() if source is not None]
    if any(length > MAX_SOURCE for length in lengths) or sum(lengths) > MAX_SOURCES:
        raise KernelRefused(TOO_LONG)


def scrubbed(text: str, source: str | None, record) -> str:
    """``text`` (a failure's message) without a name that only ``record`` holds, where the call ran in the sandbox
    (``source``: the submission's program; None: a notebook's own process, which holds no hidden input, and ``text``
    is left as it is): the record comes from the student's process, which has the check's inputs when it writes it,
    so a name in it that the submission's source does not hold (a kernel, an argument, a dtype named at run time)
    could carry them to the feedback. A second guard behind :class:`Names`. What it reads of the record is bounded:
    its names (a string of at most 80 characters) and, where they are within :func:`bounded`, its kernels' sources."""
    if source is None:
        return text
    written = set(IDENTIFIER.findall(source))
    recorded: set[str] = set()
    functions = record.get("functions") if isinstance(record, dict) else None

    def collect(value) -> None:
        if isinstance(value, str) and len(value) <= 80:
            recorded.update(IDENTIFIER.findall(value))
        elif isinstance(value, dict):
            for item in value.values():
                if item is not functions:
                    collect(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                collect(item)

    collect(record)
    if isinstance(record, dict):  # their keys are the student's names too (the record's others are the grader's)
        for named in (functions, record.get("constants")):
            collect(list(named) if isinstance(named, dict) else None)
    try:
        bounded(functions, record.get("constants"))
        for code in functions.values():
            recorded.update(IDENTIFIER.findall(code or ""))
    except (KernelRefused, AttributeError):  # not read, nor quoted: the messages about it are the grader's own
        pass
    hidden = recorded - written
    return IDENTIFIER.sub(lambda found: UNQUOTED if found[0] in hidden else found[0], text)


def program(functions: dict, constants: dict, launched: list[str], names: Names | None = None) -> str:
    """One module's source: the kernels ``launched`` and the kernels they call (from ``functions``, name -> source),
    undecorated, and the numbers they read from ``constants``; :class:`KernelRefused` where the record is larger than
    the grader reads (:func:`bounded`, before any parse), a kernel is missing, cannot be read, or uses what a kernel
    may not. A message names a kernel, or a name it uses, only as ``names`` allows (by default: any)."""
    bounded(functions, constants)
    names = names or Names()
    numbers_ = {str(name): value for name, value in constants.items() if _is_number(value) and str(name).isidentifier()}
    definitions: dict[str, ast.FunctionDef] = {}
    todo = list(dict.fromkeys(launched))
    while todo:
        name = todo.pop(0)
        if name in definitions:
            continue
        quoted = names.kernel(name, launched.index(name) if name in launched else None)  # its first launch
        label = f"the kernel {quoted}" if quoted == name else quoted
        source = functions.get(name)
        if not isinstance(source, str):
            raise KernelRefused(f"the source of {label} could not be read: define it with def in a cell")
        tree = _function(name, source, label)
        calls = _Reader(tree, set(functions), set(numbers_), label, names).read()
        definitions[name] = tree
        todo += [called for called in calls if called not in definitions]
    used = {node.id for tree in definitions.values() for node in ast.walk(tree) if isinstance(node, ast.Name)}
    lines = [f"{name} = {numbers_[name]!r}" for name in sorted(numbers_) if name in used and name not in definitions]
    bodies = [ast.unparse(tree) for tree in definitions.values()]
    return "\n".join(lines) + "\n\n\n" + "\n\n\n".join(bodies) + "\n"


def _is_number(value) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, numbers.Integral):
        return abs(int(value)) < 2**63
    return isinstance(value, float) and (math.isfinite(value) or math.isinf(value))


def _function(name: str, source: str, label: str) -> ast.FunctionDef:
    """The one function ``name`` that ``source`` defines, decorators and return annotation dropped (``label``: the
    kernel as a message names it)."""
    try:
        module = syntax.parse(source)
    except (SyntaxError, ValueError):
        raise KernelRefused(f"the source of {label} could not be read as Python") from None
    if len(module.body) != 1 or not isinstance(module.body[0], ast.FunctionDef) or module.body[0].name != name:
        raise KernelRefused(f"the source of {label} is not one function of that name")
    tree = module.body[0]
    tree.decorator_list, tree.returns = [], None
    return tree


class _Reader:
    """One kernel read as Triton code (:meth:`read`): every statement and expression of the kinds a kernel may hold,
    every name one it may use."""

    def __init__(self, tree: ast.FunctionDef, functions: set[str], constants: set[str], label: str, names: Names):
        self.tree, self.functions, self.constants = tree, functions, constants
        self.label, self.quote = label, names.word
        self.called: list[str] = []
        arguments = tree.args
        if arguments.vararg or arguments.kwarg or arguments.kwonlyargs or arguments.posonlyargs:
            self.refuse("takes *args, **kwargs or keyword-only parameters")
        self.local = {arg.arg for arg in arguments.args}
        self.local |= {
            target.id for node in ast.walk(tree) for target in _targets(node) if isinstance(target, ast.Name)
        }
        if any(not isinstance(target, ast.Name) for node in ast.walk(tree) for target in _targets(node)):
            self.refuse("assigns to an attribute or an element; a kernel assigns to its own variables only")
        reserved = self.local & (ROOTS | BUILTINS)
        if reserved:
            self.refuse(f"names a variable {sorted(reserved)[0]}, which a kernel must leave as it is")

    def refuse(self, what: str):
        raise KernelRefused(f"{self.label} {what}; the grader runs a kernel again only where it is Triton code alone")

    def read(self) -> list[str]:
        for arg in self.tree.args.args:
            if arg.annotation is not None:
                self.expression(arg.annotation)
        for default in self.tree.args.defaults:
            self.expression(default)
        for statement in self.tree.body:
            self.statement(statement)
        return self.called

    def statement(self, node: ast.stmt) -> None:
        if not isinstance(node, STATEMENTS):
            self.refuse(f"holds a statement of the kind {type(node).__name__}")
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                self.statement(child)
            elif isinstance(child, ast.expr):
                self.expression(child)
            elif not isinstance(child, GRAMMAR):
                self.refuse(f"holds a {type(child).__name__}")

    def expression(self, node: ast.expr) -> None:
        if not isinstance(node, EXPRESSIONS):
            self.refuse(f"holds an expression of the kind {type(node).__name__}")
        if isinstance(node, ast.Constant):
            value = node.value
            if not (
                value is None or isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) < 200)
            ):
                self.refuse("holds a constant of the kind " + type(value).__name__)
            return
        if isinstance(node, ast.Name):
            self.name(node)
            return
        if isinstance(node, ast.Attribute):
            self.attribute(node)
            return
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in self.functions and node.func.id not in self.local:
                self.called.append(node.func.id)
            if isinstance(node.func, ast.Name) and node.func.id in self.constants:
                self.refuse(f"calls {self.quote(node.func.id)}, a number")
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expression(child)
            elif isinstance(child, ast.keyword):
                if child.arg is None:
                    self.refuse("passes **keywords")
                self.expression(child.value)
            elif not isinstance(child, GRAMMAR):
                self.refuse(f"holds a {type(child).__name__}")

    def name(self, node: ast.Name) -> None:
        name = node.id
        if isinstance(node.ctx, ast.Store):
            return
        if name in self.local or name in ROOTS or name in BUILTINS or name in self.constants:
            return
        if name in self.functions:
            self.called.append(name)
            return
        self.refuse(
            f"uses {self.quote(name)}, which is neither its own, a number of its module, another kernel nor Triton's"
        )

    def attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr.startswith("_"):
            self.refuse(f"reads the attribute {self.quote(attr)}")
        root = node.value
        if isinstance(root, ast.Name) and root.id not in self.local:
            allowed = {"tl": TL_NAMES | {"math"}, "math": MATH_NAMES, "triton": TRITON_NAMES}.get(root.id)
            if allowed is not None:
                if attr not in allowed:
                    self.refuse(f"uses {root.id}.{self.quote(attr)}")
                return
        if _is_tl_math(root):
            if attr not in TL_MATH_NAMES:
                self.refuse(f"uses tl.math.{self.quote(attr)}")
            return
        if _is_triton_language(root):
            if attr not in TL_NAMES:
                self.refuse(f"uses triton.language.{self.quote(attr)}")
            return
        self.expression(root)
        if attr not in VALUE_ATTRIBUTES:
            self.refuse(f"uses the attribute {self.quote(attr)}")


def _is_tl_math(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "math"
        and ((isinstance(node.value, ast.Name) and node.value.id == "tl") or _is_triton_language(node.value))
    )


def _is_triton_language(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "language"
        and isinstance(node.value, ast.Name)
        and node.value.id == "triton"
    )


def _targets(node: ast.AST) -> list[ast.expr]:
    """The names a statement binds (assignment targets, loop variables), unpacked."""
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
        targets = [node.target]
    else:
        return []
    unpacked = []
    while targets:
        target = targets.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            targets += target.elts
        else:
            unpacked.append(target)
    return unpacked
