"""The pins that the Colab cell installs with: constraints.txt without the packages of Colab's own runtime.

    python -m autograder.release.colab_pins    # make lock: constraints.txt -> constraints-colab.txt

A Colab runtime comes with its own torch (built for its GPU, with the Triton it needs), NumPy, matplotlib and
the Jupyter kernel that runs the notebook; replacing any of them, or a package they need, under a running kernel
breaks it or downloads gigabytes. Every other package that the course's packages install on Colab (transformers,
tokenizers, nbformat, plotly, ...) is pinned at the version the course was tested with.
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as canonical

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release.colab import PINS_FILE

# triton is named as well as torch: Colab's torch (a CUDA build) requires the triton it was built with, exactly, but
# the torch that `make lock` installs here may be the CPU build, which names no triton; either way it comes with
# Colab's torch, and a pin of the course's own would replace it under the running kernel.
COLAB_RUNTIME = (
    "torch",
    "triton",
    "numpy",
    "matplotlib",
    "ipython",
    "ipykernel",
    "jupyter-client",
    "jupyter-core",
)
SOURCE = "constraints.txt"
HEADER = (
    "# constraints.txt without the packages of Colab's own runtime (its torch, NumPy, matplotlib and Jupyter\n"
    "# kernel, and what they need). Written by `make lock` (python -m autograder.release.colab_pins); the exercises'\n"
    "# Colab cell installs with it.\n"
)


def runtime_closure(roots=COLAB_RUNTIME) -> set[str]:
    """The canonical names of ``roots`` and of every package they need, as the installed distributions say
    (their requirements without extras, whatever the markers)."""
    found, todo = set(), [canonical(root) for root in roots]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or "extra" not in str(requirement.marker):
                todo.append(canonical(requirement.name))
    return found


def colab_constraints(locked: str, runtime: set[str]) -> str:
    """The lines of ``locked`` (constraints.txt) whose package is not in ``runtime``, under HEADER."""
    kept = [
        line
        for line in locked.splitlines()
        if line and not line.startswith("#") and canonical(line.split("==")[0]) not in runtime
    ]
    return HEADER + "\n".join(kept) + "\n"


def main(root: Path = COURSE_ROOT) -> int:
    (root / PINS_FILE).write_text(colab_constraints((root / SOURCE).read_text(), runtime_closure()))
    print(f"wrote {PINS_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
