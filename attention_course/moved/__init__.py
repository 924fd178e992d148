"""The modules' earlier names, which earlier terms' notebooks and commands use: each a module here, the new one's.

Until the package was grouped into folders, its modules lay in its root: ``attention_course.model``,
``attention_course.flash``, ... ``attention_course/__init__`` puts this folder on the package's ``__path__``, after
the package's own, so that ``import attention_course.model`` finds ``moved/model.py``, which makes that name the
module's new one (:mod:`attention_course.models.transformer`): a notebook of an earlier term, a hidden test that names
``"attention_course.flash.output_of"`` and ``python -m attention_course.flash_timing`` still work. Nothing in the course
imports these names (``tests/test_layout.py``).
"""

import runpy
import sys
from types import ModuleType


def alias(name: str, module: ModuleType) -> None:
    """Make the earlier name ``name``, being imported, the module ``module``: ``sys.modules`` gives it from now on."""
    sys.modules[name] = module


def run_as_main(name: str) -> None:
    """Run the module ``name`` as ``python -m name`` would (the earlier name was run as ``__main__``)."""
    runpy.run_module(name, run_name="__main__", alter_sys=True)
