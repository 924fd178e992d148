"""Dishonest and broken submissions, as code cells added to a real notebook.

Each attack starts from answers that earn little (``ZEROS``: right shapes, wrong
values) and adds code that would raise the score if the tests ran beside it.
Each fault starts from the right answers and adds code that breaks the run.
"""

ZEROS = {
    "softmax": '''
def softmax(x, axis=-1):
    return np.zeros_like(x)
''',
    "attention_numpy": '''
def attention_numpy(Q, K, V):
    return np.zeros((Q.shape[0], V.shape[1])), np.zeros((Q.shape[0], K.shape[0]))
''',
    "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return (torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype),
            torch.zeros(*q.shape[:-1], k.shape[-2], dtype=q.dtype))
''',
}

# ----------------------------------------------------------------------------- attacks (cell placed after setup)

PATCH_COMPARISONS = '''
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
'''

PATCH_BUILTINS = '''
import builtins
builtins.isinstance = lambda obj, cls: True
builtins.len = lambda obj: 2
builtins.AssertionError = type("AssertionError", (Exception,), {})
builtins.max = lambda *a, **k: 0
'''

IPYTHON_HOOKS = '''
ip = get_ipython()
# Every later cell that calls a check is rewritten to do nothing.
ip.input_transformers_post.append(lambda lines: ["pass\\n"] if any("check_" in line for line in lines) else lines)
ip.showtraceback = lambda *a, **k: None
ip._showtraceback = lambda *a, **k: None  # what a Jupyter kernel uses to publish errors
ip.showsyntaxerror = lambda *a, **k: None
'''

HIJACK_IMPORT = '''
import sys, types
fake = types.ModuleType("autograder")
def _passes(*args, **kwargs):
    return None
for _name in ["check_output_shapes", "check_matches_reference", "check_matches", "check_equals",
              "check_rows_sum_to_one", "check_masked_get_zero_weight", "check_finite",
              "check_inputs_unchanged", "check_dtype_follows_input", "check_raises", "Item",
              "tensor", "array", "mask", "literal"]:
    setattr(fake, _name, _passes)
    globals()[_name] = _passes
fake.__all__ = list(vars(fake))
sys.modules["autograder"] = fake
sys.modules["autograder.checks"] = fake
open("autograder.py", "w").write("from types import SimpleNamespace\\n")
'''

RIGGED_TENSORS = '''
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
'''

CALLER_FRAME = '''
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
    from autograder import reference
    return reference.get("ch02_scaled_dot_product", name)(*args, **kwargs)
'''
CALLER_FRAME_ANSWERS = {
    "softmax": "def softmax(x, axis=-1):\n    return _steal('softmax', x, axis)\n",
    "attention_numpy": "def attention_numpy(Q, K, V):\n    return _steal('attention_numpy', Q, K, V)\n",
    "scaled_dot_product_attention": "def scaled_dot_product_attention(q, k, v, mask=None):\n"
                                    "    return _steal('scaled_dot_product_attention', q, k, v, mask)\n",
}
# Answer cells emptied, so that what an attack defines earlier in the notebook stands.
NO_ANSWERS = {name: "# (answer defined above)\n" for name in CALLER_FRAME_ANSWERS}

READ_SOLUTIONS = '''
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
'''

# The reference from the course's packages, before the chapter's solutions are released (a term).
IMPORT_REFERENCE = '''
import importlib, pkgutil
for _name in ("attention_course.solutions.ch02_scaled_dot_product", "attention_course.model", "attention_course"):
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
'''

WRITE_GRADEBOOK = '''
import os, pathlib
places = [pathlib.Path.cwd(), *pathlib.Path.cwd().parents]
for place in places:
    for target in [place / "gradebook.db", *place.glob("submitted/*/*/*.ipynb"), *place.glob("autograded/*/*/*.ipynb")]:
        try:
            target.write_text("{}")
        except Exception:
            pass
'''

# ----------------------------------------------------------------------------- faults (cell placed at the end)

KILL_AT_END = '''
import os, signal
os.kill(os.getpid(), signal.SIGKILL)
'''

TOP_LEVEL_LOOP = '''
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    pass
'''

MEMORY_HOG = '''
hog = []
while True:
    hog.append(bytearray(256 * 2**20))
'''

OUTPUT_FLOOD = '''
import sys
for _ in range(100):
    sys.stdout.write("x" * 2**20)
    sys.stderr.write("y" * 2**20)
'''

BACKGROUND = '''
import os, subprocess, sys
subprocess.Popen(["sleep", "4242"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "4243"])
    os._exit(0)
'''

FORK_BOMB = '''
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
'''

LOOP_IN_SDPA = '''
def scaled_dot_product_attention(q, k, v, mask=None):
    while True:
        pass
'''

ABORT_IN_ATTENTION_NUMPY = '''
def attention_numpy(Q, K, V):
    import os
    os.abort()
'''

HOG_IN_SDPA = '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return torch.ones(2**40), None
'''

WARNS = '''
import warnings
warnings.warn("this answer prints a warning")
'''
