"""`make lab` is a student's lab: nbgrader's instructor tools (the Create Assignment sidebar, the Formgrader and
Course List menus and their server extensions) are off and JupyterLab asks no question about fetching news, for
that server only (autograder/nbgrader/student_lab, first on JUPYTER_CONFIG_PATH; `make formgrader` is the
instructor's lab). A tracked exercise opened there is not modified: it holds the kernel metadata that JupyterLab
writes as the kernel starts (autograder/cli/exercises.py), so that opening and saving it leaves git's copy as it
was."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import shutil
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.cli import exercises
from autograder.release import course
from tests.support.browser import chromium
from tests.support.formgrader import free_port, served

NOTEBOOK = course.exercise_path("ch02_scaled_dot_product")
TOKEN = "student-lab-test"
# nbgrader's lab plugins and menu items for instructors, and the students' own that stay.
INSTRUCTOR_ITEMS = ("Formgrader", "Course List")
STUDENT_ITEMS = ("Assignment List",)


@contextmanager
def make_lab(tmp_path: Path):
    """`make lab` on a free port, its Jupyter folders of the user (settings, workspaces, runtime) in ``tmp_path``:
    yields the server's base URL once it answers; then stopped, with what it started, and the checkpoints folder
    that opening the exercise made beside it removed (the suite leaves nothing in the checkout)."""
    checkpoints = (COURSE_ROOT / NOTEBOOK).parent / ".ipynb_checkpoints"
    made_checkpoints = not checkpoints.exists()
    port = free_port()
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("JUPYTER")}
    env.update(HOME=str(home), JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"))
    env.update(JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    options = (
        f"--no-browser --ip=127.0.0.1 --port={port} --ServerApp.port_retries=0 --IdentityProvider.token={TOKEN} "
        "--LabApp.expose_app_in_browser=True"
    )
    make = ["make", "-s", "-C", str(COURSE_ROOT), "--assume-old=.venv/.installed", "--assume-old=.venv/.bytecode"]
    base = f"http://127.0.0.1:{port}"
    try:
        with served(
            [*make, "lab", f"LAB_ARGS={options}"], env, tmp_path / "lab.log", f"{base}/api/status?token={TOKEN}"
        ):
            yield base
    finally:
        if made_checkpoints:
            shutil.rmtree(checkpoints, ignore_errors=True)


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def _json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.load(answer)


@pytest.mark.slow
@pytest.mark.browser
def test_make_lab_is_a_students_lab(tmp_path):
    """`make lab` in Chromium, the exercise opened: the Nbgrader menu holds the Assignment List and neither the
    Formgrader nor the Course List, the left sidebar has no Create Assignment, no question about news is shown
    (the notification settings say never), the formgrader's pages are not served; the exercise, its kernel
    started, is not modified (where this Python is the one its metadata records) and git's copy is unchanged."""
    tracked = (COURSE_ROOT / NOTEBOOK).read_bytes()
    recorded = json.loads(tracked)["metadata"]["language_info"].get("version")
    with make_lab(tmp_path) as base, chromium() as browser:
        settings = _json(f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification?token={TOKEN}")
        formgrader = _status(f"{base}/formgrader?token={TOKEN}")
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={TOKEN}")
        page.wait_for_function(
            "() => window.jupyterapp?.shell.currentWidget?.context?.model?.getMetadata('language_info')?.version",
            timeout=120_000,
        )
        page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=120_000)
        dirty = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty")
        running = page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.context.model.getMetadata('language_info')"
        )
        sidebar = page.locator(".jp-SideBar .lm-TabBar-tab").evaluate_all("tabs => tabs.map(t => t.title)")
        toasts = page.locator(".Toastify__toast").all_inner_texts()
        page.locator(".lm-MenuBar-item", has_text="Nbgrader").click()
        items = page.locator(".lm-Menu-itemLabel").all_inner_texts()
    assert not [title for title in sidebar if "Create Assignment" in title], sidebar
    assert any("File Browser" in title for title in sidebar), sidebar
    assert not [text for text in toasts if "news" in text], toasts
    assert all(item in items for item in STUDENT_ITEMS), items
    assert not [item for item in items if item in INSTRUCTOR_ITEMS], items
    defaults = {name: value.get("default") for name, value in settings["schema"]["properties"].items()}
    assert defaults["fetchNews"] == "false" and defaults["checkForUpdates"] is False, defaults
    assert formgrader == 404, formgrader
    assert dirty == (running["version"] != recorded), (running, recorded)
    assert (COURSE_ROOT / NOTEBOOK).read_bytes() == tracked


def _as_lab_saves(metadata: dict, kernel: dict) -> dict:
    """The notebook's metadata as JupyterLab sets it once the kernel has started: the kernelspec from the
    kernel's spec, language_info from its kernel_info reply (NotebookPanel's _updateSpec, _updateLanguage)."""
    return {**metadata, "kernelspec": kernel["kernelspec"], "language_info": kernel["language_info"]}


async def _running_kernel() -> dict:
    """What the course's kernel gives JupyterLab: its spec (name, display name, language) and kernel_info."""
    from jupyter_client.manager import AsyncKernelManager

    manager = AsyncKernelManager(kernel_name="python3")
    await manager.start_kernel()
    try:
        client = manager.client()
        client.start_channels()
        await client.wait_for_ready(timeout=120)
        reply = await client.kernel_info(reply=True, timeout=60)
        client.stop_channels()
    finally:
        await manager.shutdown_kernel(now=True)
    spec = manager.kernel_spec
    return {
        "kernelspec": {"name": manager.kernel_name, "display_name": spec.display_name, "language": spec.language},
        "language_info": reply["content"]["language_info"],
    }


async def _round_trip(exercise: Path, folder: Path, kernel: dict) -> bytes:
    """``exercise`` loaded and saved through Jupyter's own ContentsManager, as JupyterLab does, the kernel's
    metadata set in between; the bytes saved."""
    from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

    (folder / exercise.parent.name).mkdir(parents=True)
    source = AsyncLargeFileManager(root_dir=str(COURSE_ROOT))
    model = await source.get(exercise.relative_to(COURSE_ROOT).as_posix(), content=True, type="notebook")
    content = copy.deepcopy(model["content"])
    content["metadata"] = _as_lab_saves(content["metadata"], kernel)
    saved = f"{exercise.parent.name}/{exercise.name}"
    await AsyncLargeFileManager(root_dir=str(folder)).save(
        {"type": "notebook", "format": "json", "content": content}, saved
    )
    return (folder / saved).read_bytes()


def test_an_exercise_saved_once_its_kernel_started_is_the_tracked_file(tmp_path):
    """Every exercise, loaded through Jupyter's ContentsManager, given the metadata that JupyterLab writes as the
    course's kernel starts (from a real kernel's kernel_info), and saved: the tracked file, byte for byte, but
    for the Python version, where this Python is not the one the exercise records."""
    kernel = asyncio.run(_running_kernel())
    found = sorted((COURSE_ROOT / "exercises").glob("*/*.ipynb"))
    assert len(found) == len(course.assignments())
    for exercise in found:
        tracked = exercise.read_bytes()
        recorded = json.loads(tracked)["metadata"]["language_info"].get("version", "")
        expected = tracked.replace(
            f'"version": "{recorded}"'.encode(), f'"version": "{kernel["language_info"]["version"]}"'.encode()
        )
        saved = asyncio.run(_round_trip(exercise, tmp_path / "saved", kernel))
        assert saved == expected, f"{exercise.relative_to(COURSE_ROOT)} changes when JupyterLab opens and saves it"


def test_kernel_metadata_is_current_whichever_python_recorded_it():
    """A notebook holding the kernel's metadata is current with another Python's version recorded (students and
    instructors differ), not with nbformat's bare `{"name": "python"}`, another display name or no version."""
    kernel = exercises.kernel_metadata()
    assert kernel["kernelspec"]["name"] == "python3" and kernel["language_info"]["version"]
    other = copy.deepcopy(kernel)
    other["language_info"]["version"] = "3.10.0"
    assert exercises.holds_kernel_metadata(nbformat.from_dict({"metadata": other}), kernel)
    stale = [
        {**kernel, "language_info": {"name": "python"}},
        {**kernel, "kernelspec": {**kernel["kernelspec"], "display_name": "Python 3"}},
        {**kernel, "language_info": {k: v for k, v in kernel["language_info"].items() if k != "version"}},
        {},
    ]
    for metadata in stale:
        assert not exercises.holds_kernel_metadata(nbformat.from_dict({"metadata": metadata}), kernel), metadata


def test_the_check_of_exercises_leaves_jupyterlabs_checkpoints_alone(tmp_path):
    """Saving an exercise in JupyterLab writes .ipynb_checkpoints/ beside it (git ignores it): not a file that
    `make check-exercises` calls "not generated from solutions/"; any other file there is one."""
    notebook = tmp_path / "ch02" / "ch02.ipynb"
    checkpoint = tmp_path / "ch02" / ".ipynb_checkpoints" / "ch02-checkpoint.ipynb"
    stray = tmp_path / "ch02" / "notes.txt"
    for path in (notebook, checkpoint, stray):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    assert exercises.released_files(tmp_path) == {Path("ch02/ch02.ipynb"), Path("ch02/notes.txt")}
    assert exercises.released_files(tmp_path / "missing") == set()
