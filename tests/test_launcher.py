"""The sandbox's launcher (autograder/sandbox/launcher.py), without bubblewrap: what it does to the process
it becomes (cgroups joined, resource limits, the uid dropped, binds in a private mount namespace), and that
a step that fails stops it with LAUNCH_FAILED and a line that says which. The launcher is run as the sandbox
runs it (python -I -S, by path), with a small program in place of bwrap that reports what it got."""

from __future__ import annotations

import ast
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.sandbox import launcher
from autograder.sandbox.limits import Limits

AS_ROOT = os.geteuid() == 0
LIMITS = Limits(memory_mb=3072, cpu_seconds=321, file_mb=7, processes=77)
MB = 2**20
REPORT = """
import json, os, resource
limits = {name: resource.getrlimit(getattr(resource, name)) for name in
          ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NPROC")}
print(json.dumps({"pid": os.getpid(), "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(),
                  "groups": os.getgroups(), "limits": limits, "marker": os.environ.get("LAUNCHER_MARKER")}))
"""


def config(**changes) -> dict:
    return {"limits": LIMITS.__dict__.copy(), "cgroups": [], "stage": [], "uid": None, **changes}


def launch(settings: dict, command: list[str] | None = None) -> subprocess.CompletedProcess:
    command = command or [sys.executable, "-I", "-S", "-c", REPORT]
    return subprocess.run(
        launcher.command_line(sys.executable, settings, command),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "LAUNCHER_MARKER": "passed on"},
    )


def test_it_is_run_isolated_by_path_and_imports_only_the_standard_library():
    line = launcher.command_line("/usr/bin/python3", {"uid": None}, ["/usr/bin/bwrap", "--x"])
    assert line[:4] == ["/usr/bin/python3", "-I", "-S", str(Path(launcher.__file__).resolve())]
    assert json.loads(line[4]) == {"uid": None} and line[5:] == ["/usr/bin/bwrap", "--x"]
    tree = ast.parse(Path(launcher.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported and all(name.split(".")[0] in sys.stdlib_module_names for name in imported - {"__future__"})
    functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
    late = [node for f in functions for node in ast.walk(f) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert late == []  # everything it needs is imported before it drops privileges


def test_the_command_gets_the_limits_the_environment_and_the_same_process():
    result = launch(config())
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    limits = {name: tuple(value) for name, value in got["limits"].items()}
    assert limits["RLIMIT_AS"] == (LIMITS.memory_mb * MB,) * 2
    assert limits["RLIMIT_CPU"] == (LIMITS.cpu_seconds, LIMITS.cpu_seconds + 5)
    assert limits["RLIMIT_FSIZE"] == (LIMITS.file_mb * MB,) * 2
    assert limits["RLIMIT_CORE"] == (0, 0)
    if AS_ROOT:  # root is exempt from RLIMIT_NPROC: the launcher leaves it to the cgroup
        assert limits["RLIMIT_NPROC"] == resource.getrlimit(resource.RLIMIT_NPROC)
    else:
        assert limits["RLIMIT_NPROC"] == (LIMITS.processes,) * 2
    assert got["marker"] == "passed on"


def test_it_joins_each_cgroup_with_the_pid_the_command_runs_as(tmp_path):
    procs = [tmp_path / "a.procs", tmp_path / "b.procs"]
    result = launch(config(cgroups=[str(p) for p in procs]))
    assert result.returncode == 0, result.stderr
    pid = json.loads(result.stdout)["pid"]
    assert [p.read_text() for p in procs] == [str(pid)] * 2  # execve keeps the pid


def test_a_cgroup_it_cannot_join_stops_it_before_the_command_runs(tmp_path):
    result = launch(config(cgroups=[str(tmp_path / "missing" / "cgroup.procs")]))
    assert result.returncode == launcher.LAUNCH_FAILED
    assert result.stdout == ""
    assert result.stderr.startswith("sandbox launcher: cannot join the cgroup ") and "missing" in result.stderr


def test_join_cgroups_writes_the_pid_and_says_which_cgroup_failed(tmp_path):
    launcher.join_cgroups([str(tmp_path / "procs")], 4321)
    assert (tmp_path / "procs").read_text() == "4321"
    with pytest.raises(launcher.LaunchError, match="cannot join the cgroup .*/nowhere/procs"):
        launcher.join_cgroups([str(tmp_path / "nowhere" / "procs")], 4321)


def test_it_never_goes_on_as_root(monkeypatch):
    """A drop that the kernel ignores (the ids do not change) is refused."""
    for name in ("setgroups", "setgid", "setuid"):
        monkeypatch.setattr(os, name, lambda *args: None)
    monkeypatch.setattr(os, "getuid", lambda: 0)
    with pytest.raises(launcher.LaunchError, match="still root after dropping privileges"):
        launcher.drop_privileges(61000)
    monkeypatch.setattr(os, "getuid", lambda: 61000)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(launcher.LaunchError, match="still root"):
        launcher.drop_privileges(61000)


def test_a_failed_drop_says_which_uid(monkeypatch):
    def refuse(uid):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "setgroups", lambda groups: None)
    monkeypatch.setattr(os, "setgid", refuse)
    with pytest.raises(launcher.LaunchError, match="dropping to uid 61000: .*Operation not permitted"):
        launcher.drop_privileges(61000)


@pytest.mark.skipif(not AS_ROOT, reason="only root may drop to another uid")
def test_as_root_it_drops_to_the_sandboxs_uid_with_no_groups_and_a_process_limit():
    result = launch(config(uid=65534), ["/bin/sh", "-c", "id -u; id -g; id -G; grep 'Max processes' /proc/self/limits"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "65534",
        "65534",
        "65534",
        "Max",
        "processes",
        *[str(LIMITS.processes)] * 2,
        "processes",
    ]


@pytest.mark.skipif(not AS_ROOT, reason="only root may bind")
def test_as_root_its_binds_are_seen_by_the_command_and_never_by_the_host(tmp_path):
    source, point = tmp_path / "source", tmp_path / "point"
    source.mkdir()
    point.mkdir()
    (source / "seen").write_text("bound")
    result = launch(config(stage=[[str(source), str(point)]]), [shutil.which("cat"), str(point / "seen")])
    assert result.returncode == 0, result.stderr
    assert result.stdout == "bound"
    assert list(point.iterdir()) == []  # the bind lived in the launcher's own mount namespace


@pytest.mark.skipif(not AS_ROOT, reason="only root may bind")
def test_a_bind_that_fails_stops_it(tmp_path):
    result = launch(config(stage=[[str(tmp_path / "missing"), str(tmp_path)]]))
    assert result.returncode == launcher.LAUNCH_FAILED
    assert result.stdout == "" and f"sandbox launcher: binding {tmp_path / 'missing'}: " in result.stderr
