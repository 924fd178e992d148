"""Faults that the cluster tests inject into a grading worker (`make grade-worker`'s `--preload`, a Dask preload).

`COURSE_CLUSTER_FAULTS` in the worker's environment lists them, comma-separated; a notebook is picked by a
marker string in its bytes (a comment in one of its cells):

- `kill:MARKER`: the worker's process dies (as a grader that crashes does) when it is given that notebook;
- `hold:MARKER:FOLDER`: once the worker has started grading that notebook (the instructor was told so), it writes
  FOLDER/started-<pid> and waits until FOLDER/go exists, once per FOLDER (the next worker given it grades it at
  once): the tests' barrier;
- `stale`: the worker's grader code is another commit's (its digest differs from the instructor's).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import autograder.cluster.worker as worker_side
import autograder.grading.notebook as notebook_side
import autograder.grading.saved as saved


def dask_setup(worker) -> None:
    faults = [fault.split(":") for fault in os.environ.get("COURSE_CLUSTER_FAULTS", "").split(",") if fault]
    if ["stale"] in faults:
        saved.grader_digest = lambda root=None: "0" * 64
    given, grading = worker_side.grade, notebook_side.grade_notebook

    def grade(assignment, notebook, data, *args):
        if any(fault[0] == "kill" and fault[1].encode() in data for fault in faults):
            os._exit(1)
        return given(assignment, notebook, data, *args)

    def grade_notebook(assignment, path, **options):
        data = Path(path).read_bytes()
        for kind, *rest in faults:
            if kind == "hold" and rest[0].encode() in data and not any(Path(rest[1]).glob("started-*")):
                (Path(rest[1]) / f"started-{os.getpid()}").write_text(str(os.getpid()))
                while not (Path(rest[1]) / "go").exists():
                    time.sleep(0.05)
        return grading(assignment, path, **options)

    worker_side.grade, notebook_side.grade_notebook = grade, grade_notebook
