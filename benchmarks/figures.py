"""The figures that README.md and the book quote: each measured by a command, recorded with the machine it
ran on, and written into the pages by this module, never typed by hand.

    python -m benchmarks.figures            # write every page's marked blocks from benchmarks/figures.json
    python -m benchmarks.figures --check    # exit 1 where a page's block differs from what the record gives,
                                            # or a record holds a machine's paths
    python -m benchmarks.figures --run transformer --d-model 128   # run a measuring program, record its lines

A measuring command (``make bench-book``, ``make bench-suite``, ``make bench-grading``, ...) calls
:func:`record` with its figures; the record keeps, beside them, the command, the day, the commit and
the machine (CPU, cores, load while it ran, Python, PyTorch), and no machine's paths (:mod:`benchmarks.scrub`:
a folder that the command names is ``OUT`` there and in its output). A timed run records what its time
includes (``setting``: a fresh clone, the venv created or not, the cache), and the page says it. A page holds a
block per figure::

    <!-- figures: book-build -->
    ... written by this module ...
    <!-- /figures -->

and ``make test`` fails while a block differs from what :data:`RENDER` writes from the record.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from benchmarks import scrub

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "benchmarks" / "figures.json"
PAGES = ("README.md", "book/instructor_guide.md")
BLOCK = re.compile(r"(<!-- figures: (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /figures -->)", re.S)


def machine() -> str:
    """The machine, as a figure's reader needs it: CPU, cores, load, OS, Python and PyTorch."""
    cpu = platform.processor() or platform.machine()
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = "none"
    return (
        f"{os.cpu_count()} cores of {cpu}, {_gpu()}, {platform.system()}, Python {platform.python_version()}, "
        f"PyTorch {torch}; load average {load:.1f} at the end"
    )


def _gpu() -> str:
    """The GPU a measurement could use, as ``nvidia-smi`` names it (without importing torch), or "no GPU"."""
    try:
        run = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return "no GPU"
    names = [line.strip() for line in run.stdout.splitlines() if line.strip()] if run.returncode == 0 else []
    return f"{len(names)} × {names[0]}" if names else "no GPU"


def _commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def load() -> dict:
    return json.loads(RECORD.read_text()) if RECORD.is_file() else {}


def _write(records: dict) -> None:
    RECORD.write_text(json.dumps(records, indent=2, sort_keys=True) + "\n")


def unscrubbed(records: dict | None = None) -> dict[str, list[str]]:
    """The machine's paths that each record still holds (one made before records were scrubbed as they were
    written): ``make figures`` scrubs them, ``--check`` fails on them."""
    records = load() if records is None else records
    return {name: found for name, entry in records.items() if (found := scrub.machine_paths(entry))}


def record(name: str, command: str, figures: dict, *, commit: str | None = None, measured: dict | None = None) -> dict:
    """Keep ``figures`` of the measurement ``name`` with its command and machine, in benchmarks/figures.json.
    ``measured`` (``day`` and ``machine``) is for figures measured elsewhere, by a program that recorded its
    own (benchmarks.gpu, on a GPU machine); by default they are this machine's, today. The command and the
    figures are kept without any machine's paths (:func:`benchmarks.scrub.scrubbed`): a folder that the command
    names (``--out /tmp/x``) is ``OUT`` in the command and wherever its output quotes it."""
    if name not in RENDER:
        raise ValueError(f"no page shows figures named {name!r}; known: {', '.join(sorted(RENDER))}")
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    measured = measured or {"day": today, "machine": machine()}
    entry = scrub.scrubbed(
        {
            "command": command,
            "day": measured["day"],
            "commit": commit or _commit(),
            "machine": measured["machine"],
            "figures": figures,
        }
    )
    records = load()
    records[name] = entry
    _write(records)
    print(f"Recorded {name} in {RECORD}; `python -m benchmarks.figures` writes it into the pages")
    return entry


def _minutes(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


def _measured(entry: dict) -> str:
    return f"Measured by `{entry['command']}` on {entry['day']} at commit {entry['commit']}, on {entry['machine']}"


def _setting(entry: dict, program: str) -> str:
    """What a timed run included (a fresh clone, the venv created or not, the cache), as its record says; a
    record made before records said so gives what ``program`` (benchmarks.book or benchmarks.suite) did then and
    does now, its :data:`SETTING`."""
    import importlib

    return "; ".join(entry["figures"].get("setting") or importlib.import_module(program).SETTING)


def _load(figures: dict, what: str) -> str:
    if "load_mean" not in figures:
        return ""
    return f"The load average over {what} was {figures['load_mean']:.1f} ({figures['load_peak']:.1f} at most). "


def _book_build(entry: dict) -> str:
    figures = entry["figures"]
    chapters = sorted(figures["chapters"].items(), key=lambda item: -item[1])
    slowest = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in chapters[:4])
    if "jobs" in figures:  # executed by course_site.execute, jobs chapters at a time, before the build
        executing = (
            f"executing the chapters' code, {figures['jobs']} at a time, took {_minutes(figures['execute_seconds'])} "
            f"({_minutes(sum(figures['chapters'].values()))} of the chapters' times added up)"
        )
    else:
        executing = f"executing the chapters' code took {_minutes(sum(figures['chapters'].values()))}"
    again = (
        f"A second build in the same clone, nothing changed (every chapter from the cache), took "
        f"{_minutes(figures['rebuild_seconds'])}. "
        if "rebuild_seconds" in figures
        else ""
    )
    return (
        f"A cold `make book` took {_minutes(figures['total_seconds'])} ({_setting(entry, 'benchmarks.book')}), "
        f"of which "
        f"{executing}; the slowest chapters: {slowest}. {again}{_load(figures, 'the builds')}{_busier(entry)}"
        f"{_measured(entry)}.\n"
    )


def _busier(entry: dict) -> str:
    """That a busier machine builds slower: the load average for which the build's times hold, against the
    machine's cores."""
    cores = re.match(r"(\d+) cores?", entry.get("machine", ""))
    on = f"its {cores.group(1)} cores" if cores else "its cores"
    load = entry["figures"].get("load_mean")
    at = f" than {load:.1f}" if isinstance(load, (int, float)) else ""
    return (
        f"These times hold at that load: where other work keeps {on} busier (a load average higher{at}), the "
        "chapters run slower and the build takes longer. "
    )


def _suite(entry: dict) -> str:
    figures = entry["figures"]
    slowest = "; ".join(f"`{name}` {seconds:.0f} s" for name, seconds in figures["slowest_files"][:5])
    workers = f" on {figures['workers']} pytest workers" if "workers" in figures else ""
    return (
        f"`make test` took {_minutes(figures['total_seconds'])} in all ({_setting(entry, 'benchmarks.suite')}): "
        f"{_minutes(figures['setup_seconds'])} to create the venv, install and lint, "
        f"{_minutes(figures['pytest_seconds'])} for {figures['tests']:,} tests{workers}; `make test-fast` took "
        f"{_minutes(figures['fast_seconds'])} for {figures['fast_tests']:,} tests. The longest test files (time on "
        f"their worker): {slowest}. {_load(figures, 'the run')}{_measured(entry)}.\n"
    )


_GRADE_PHASES = {  # make grade's phases, timed from one phase's line to the next (benchmarks.grading.cli_phases)
    "[1/6]": "1 (its imports; the tests recorded meanwhile)",
    "[2/6]": "2 (the preflight)",
    "[3/6]": "3 (the sandbox)",
    "[4/6]": "4 (nbgrader autograde)",
    "[5/6]": "5 (feedback)",
    "[6/6]": "6 (the CSV and summary)",
    "whole": "the whole command",
}


def _grading(entry: dict) -> str:
    figures = entry["figures"]
    rows = "\n".join(
        f"| {row['pipeline']} | {row['seconds']:.1f} | {row['per_notebook']:.2f} | {row.get('vs_plain', '')} |"
        for row in figures["rows"]
    )
    classes = " and of ".join(figures.get("assignments", [figures.get("assignment")]))
    again = (
        " first, then again with nothing changed and with one notebook changed (a notebook whose saved report "
        "fits it is not run again)"
        if "assignments" in figures
        else ""
    )
    profile = "".join(
        f"Where the first grade of {name} spent its time: make grade's phases, for the class, "
        + ", ".join(
            f"{_GRADE_PHASES.get(phase, phase)} {seconds:.1f} s" for phase, seconds in found["make_grade"].items()
        )
        + (
            "; again with nothing changed, "
            + ", ".join(f"{_GRADE_PHASES.get(p, p)} {t:.1f} s" for p, t in found["make_grade_again"].items())
            if "make_grade_again" in found
            else ""
        )
        + (
            "; the machine's cores busy in each phase of the first grade (%), "
            + ", ".join(f"{_GRADE_PHASES.get(p, p)} {100 * v:.0f}" for p, v in found["cores_busy"].items())
            + f" ({found['core_seconds']:.1f} core-seconds in all)"
            if "cores_busy" in found
            else ""
        )
        + "; each notebook's grading in the sandbox, mean seconds by phase, "
        + ", ".join(
            f"{'the whole' if phase == 'report' else phase} {seconds:.2f}"
            for phase, seconds in sorted(found["per_notebook"].items(), key=lambda item: -item[1])
        )
        + ".\n\n"
        for name, found in figures.get("profile", {}).items()
    )
    return (
        f"{figures['n']} correct submissions of {classes}, graded end to end as `make grade` "
        f"grades them (gradebook, autograde, feedback, CSV){again}:\n\n"
        f"| pipeline | seconds | per notebook | vs plain nbgrader |\n| --- | --- | --- | --- |\n{rows}\n\n"
        f"{profile}{_load(figures, 'the runs')}{_measured(entry)}.\n"
    )


def _output(entry: dict) -> str:
    """A measuring program's own lines, as it printed them for people (its JSON line, for programs, left out)."""
    lines = [line for line in entry["figures"]["output"].splitlines() if not line.startswith(("{", "["))]
    text = "\n".join(lines) if lines else entry["figures"]["output"]
    return f"{_measured(entry)}:\n\n```text\n{text.rstrip()}\n```\n"


def _train(entry: dict) -> str:
    """The trainer's final JSON line, in words."""
    final = json.loads(next(line for line in reversed(entry["figures"]["output"].splitlines()) if line.startswith("{")))
    if "exact_match" in final:
        quality = f"{final['exact_match']:.2%} exact match on {final['test_examples']:,} test dates"
    else:
        quality = f"validation loss {final['val_loss']:.3f}"
        if "val_bits_per_byte" in final:
            quality += f" ({final['val_bits_per_byte']:.3f} bits per byte)"
    return (
        f"{final['task']} on {final['device']}, {final['steps']:,} steps, {final['parameters']:,} parameters "
        f"({final['precision']}, {final['attention']} attention): {quality}; {_minutes(final['wall_seconds'])} "
        f"in all, {_minutes(final['train_seconds'])} of training at {final['tokens_per_second']:,.0f} tokens/s. "
        f"{_measured(entry)}.\n"
    )


def _spread(values: list[float], form: str) -> str:
    """The mean of ``values`` and, with more than one, their range: ``0.412 (0.380-0.455)``."""
    mean = sum(values) / len(values)
    if len(values) == 1:
        return format(mean, form)
    return f"{mean:{form}} ({min(values):{form}}-{max(values):{form}})"


def _seeds_table(entry: dict, what: str, columns: list[str], rows: list[list[str]]) -> str:
    """A replicated experiment's table: ``what`` was run, with how many seeds and where, then a row per model."""
    figures = entry["figures"]
    seeds = len({run["seed"] for run in figures["runs"]})
    lines = [columns, ["---"] * len(columns), *rows]
    return (
        f"{what}, {seeds} seeds per row (mean, and lowest-highest), on {figures['device']}:\n\n"
        + "\n".join(f"| {' | '.join(line)} |" for line in lines)
        + f"\n\n{_measured(entry)}.\n"
    )


def _replicate_bottleneck(entry: dict) -> str:
    """Chapter 1's substitution task over widths and seeds: per-symbol accuracy, shortest and longest strings."""
    figures = entry["figures"]
    runs, (first, last) = figures["runs"], (figures["buckets"][0], figures["buckets"][-1])
    rows = []
    for width in sorted({run["width"] for run in runs}):
        for attention in (False, True):
            chosen = [run for run in runs if run["width"] == width and run["attention"] == attention]
            rows.append(
                [
                    str(width),
                    "attention" if attention else "no attention",
                    f"{chosen[0]['parameters']:,}",
                    _spread([run["per_symbol"][0] for run in chosen], ".3f"),
                    _spread([run["per_symbol"][-1] for run in chosen], ".3f"),
                ]
            )
    what = (
        f"Chapter 1's substitution task, {figures['steps']} steps of {figures['batch_size']} strings, per-symbol "
        f"accuracy on {figures['test_strings']:,} test strings"
    )
    columns = ["width of the single vector", "decoder", "parameters"]
    columns += [f"strings of {first[0]}-{first[1]}", f"strings of {last[0]}-{last[1]}"]
    return _seeds_table(entry, what, columns, rows)


def _replicate_gqa(entry: dict) -> str:
    """Chapter 7's grouped-query experiment over seeds and budgets: test loss and exact match."""
    figures = entry["figures"]
    runs = figures["runs"]
    rows = []
    for steps in sorted({run["steps"] for run in runs}):
        for kv_heads in sorted({run["kv_heads"] for run in runs}, reverse=True):
            chosen = [run for run in runs if run["steps"] == steps and run["kv_heads"] == kv_heads]
            loss, match = [run["test_loss"] for run in chosen], [run["exact_match"] for run in chosen]
            rows.append([f"{steps:,}", str(kv_heads), _spread(loss, ".4f"), _spread(match, ".1%")])
    what = f"Chapter 7's date streams, batches of {figures['batch_size']}, {figures['test_dates']} test dates"
    return _seeds_table(entry, what, ["steps", "key/value heads", "test loss", "exact match"], rows)


def _replicate_tying(entry: dict) -> str:
    """Chapter 6's training run, separate or tied output layer, over seeds."""
    figures = entry["figures"]
    rows = []
    for tied in (False, True):
        chosen = [run for run in figures["runs"] if run["tied"] == tied]
        match, loss = [run["exact_match"] for run in chosen], [run["val_loss"] for run in chosen]
        name = "tied" if tied else "separate"
        rows.append([name, f"{chosen[0]['parameters']:,}", _spread(match, ".1%"), _spread(loss, ".4f")])
    what = f"Chapter 6's training run (`{' '.join(figures['arguments'])}`)"
    return _seeds_table(entry, what, ["output layer", "parameters", "exact match", "validation loss"], rows)


def _replicate_families(entry: dict) -> str:
    """Chapter 6's four families over seeds and budgets: exact match and the last steps' training loss."""
    runs = entry["figures"]["runs"]
    rows = []
    for steps in sorted({run["steps"] for run in runs}):
        for family in dict.fromkeys(run["family"] for run in runs):
            chosen = [run for run in runs if run["steps"] == steps and run["family"] == family]
            match, loss = [run["exact_match"] for run in chosen], [run["final_loss"] for run in chosen]
            rows.append([f"{steps:,}", family, _spread(match, ".1%"), _spread(loss, ".4f")])
    what = "Chapter 6's four families on the date task, with the chapter's settings"
    columns = ["steps", "family", "exact match", "training loss, last 20 steps"]
    return _seeds_table(entry, what, columns, rows)


def _gpu_measurements(entry: dict) -> str:
    """Chapter 8's measurements on a GPU (benchmarks/gpu.py): the training runs, and which steps ran."""
    figures = entry["figures"]
    rows, earlier = [], set()
    for name in ("train-fp32", "train-bf16", "train-bf16-compile", "shakespeare"):
        step = figures["steps"].get(name, {})
        final = step.get("result")
        if not final:
            rows.append([name, "did not finish", "", "", "", "", ""])
            continue
        if step.get("commit"):
            earlier.add(step["commit"])
            name += f" (at {step['commit']})"
        if "exact_match" in final:
            quality = f"{final['exact_match']:.1%} exact match"
        else:
            quality = f"{final['val_loss']:.3f} validation loss"
        mfu = f"{100 * final['mfu']:.2g}%" if final.get("mfu") is not None else "unknown"
        steady = f"{final['steady_tokens_per_second']:,.0f}" if "steady_tokens_per_second" in final else ""
        rows.append([name, f"{final['steps']:,}", f"{final['tokens_per_second']:,.0f}", steady, mfu, quality,
                     _minutes(final["wall_seconds"])])  # fmt: skip
    tests = figures["steps"].get("tests", {}).get("result") or {}
    counts = ", ".join(f"{n} {what}" for what, n in tests.get("counts", {}).items()) or "not run"
    table = "\n".join(f"| {' | '.join(row)} |" for row in rows)
    header = "| run | steps | tokens/s | steady tokens/s | MFU | result | wall time |\n" + "| --- " * 7 + "|\n"
    note = (
        " A run marked with a commit was measured at that commit, by another run of the same program on the same "
        "kind of machine (one that the recorded run did not repeat, or did not finish in its time)."
        if earlier
        else ""
    )
    return (
        f"On {figures['device']} (PyTorch {figures['torch']}): the tests that compute on a device, {counts}.\n\n"
        f"{header}{table}\n\n{_beside_nanogpt(figures['steps'].get('nanogpt'))}{_measured(entry)}.{note}\n"
    )


def _beside_nanogpt(step: dict | None) -> str:
    """The side-by-side table of the course's trainer and nanoGPT's (benchmarks/nanogpt.py), where it ran."""
    if not step or not step.get("result"):
        return ""
    rows = []
    for shape, row in step["result"]["shapes"].items():
        ours, theirs = row["course"], row["nanogpt"]
        rows.append(f"| {shape} ({row['layers']} × {row['d_model']}, {row['block']} × {row['batch']}) | "
                    f"{ours['steady_tokens_per_second']:,.0f} | {theirs['steady_tokens_per_second']:,.0f} | "
                    f"{row['ratio']:.2f}x | {ours['mfu']:.1%} / {theirs['mfu']:.1%} |")  # fmt: skip
    at = f" (at {step['commit']})" if step.get("commit") else ""
    return (
        f"Beside nanoGPT, steady tokens/s at the same shapes{at}, `{step['command']}`:\n\n"
        "| shape (layers × width, window × batch) | course | nanoGPT | ratio | MFU, course / nanoGPT |\n"
        "| --- | --- | --- | --- | --- |\n" + "\n".join(rows) + "\n\n"
    )


def _compile_cost(entry: dict) -> str:
    """What compiling costs a training run (benchmarks/compile_cost.py): each run's overhead and break-even step."""
    figures = entry["figures"]
    rows = []
    for run in figures["runs"]:
        name = run["name"]
        even = figures["break_even"].get(name)
        shown = "" if name not in figures["break_even"] else ("never" if even is None else f"step {even:,}")
        rows.append(f"| {name} | {run['train_seconds']:.1f} | {run['steady_tokens_per_second']:,.0f} | "
                    f"{run['overhead_seconds']:.1f} | {shown} |")  # fmt: skip
    options = f" `{figures['options']}`" if figures["options"] else ""
    return (
        f"`make train`{options} on {figures['device']} (PyTorch {figures['torch']}), compiled in "
        f"{figures['compiled_precision']} in torch.compile's `{figures['compile_mode']}` mode, each compiled run cold "
        "(empty caches) and warm (its cold run's caches):\n\n"
        "| run | seconds of training | steady tokens/s | overhead (s) | ahead of fp32 from |\n"
        "| --- | --- | --- | --- | --- |\n" + "\n".join(rows) + f"\n\n{_measured(entry)}.\n"
    )


def _grading_cluster(entry: dict) -> str:
    figures = entry["figures"]
    rows = "\n".join(
        f"| {row['assignment']} | {row['here_per_notebook']:.2f} | {row['cluster_per_notebook']:.2f} | "
        f"{row['phase3_here']:.1f} | {row['phase3_cluster']:.1f} | "
        f"{row['overhead_per_task']:+.2f} s ({100 * row['overhead']:+.1f}%) |"
        for row in figures["rows"]
    )
    return (
        f"A class of {figures['n']} correct notebooks, graded by `make grade` with `JOBS=2` here and on a scheduler "
        "with two workers of one notebook each on the same machine, in turns (the median of "
        f"{figures['rounds']} each). The whole command here also starts its grader and runs the preflight, which a "
        "worker did once when it started; phase 3 is where the notebooks are graded:\n\n"
        "| class | s/notebook here | s/notebook on the cluster | phase 3 here (s) | phase 3 on the cluster (s) "
        "| the cluster's overhead a notebook, in phase 3 |\n"
        "| --- | --- | --- | --- | --- | --- |\n"
        + rows
        + f"\n\nThe two workers joined in {figures['workers_joined_seconds']:.1f} s (once per term). "
        + f"{_measured(entry)}.\n"
    )


RENDER: dict[str, Callable[[dict], str]] = {
    "compile-cost": _compile_cost,
    "gpu": _gpu_measurements,
    "replicate-families": _replicate_families,
    "replicate-tying": _replicate_tying,
    "replicate-bottleneck": _replicate_bottleneck,
    "replicate-gqa": _replicate_gqa,
    "book-build": _book_build,
    "suite": _suite,
    "grading": _grading,
    "grading-cluster": _grading_cluster,
    "transformer": _output,
    "generate": _output,
    "pretrained": _output,
    "train": _train,
}
# The programs whose printed lines are the figures: `python -m benchmarks.figures --run NAME [ARGS]`.
PROGRAMS = {
    "transformer": "benchmarks.transformer",
    "generate": "benchmarks.generate",
    "pretrained": "benchmarks.pretrained",
    "train": "attention_course.trainer",
}
LAST_LINES = 12  # what is kept of a program's output


def render(name: str, records: dict) -> str:
    if name not in RENDER:
        raise KeyError(f"a page has a block of figures named {name!r}, which benchmarks.figures does not know")
    if name not in records:
        return f"(No measurement recorded yet: run the command that records `{name}`.)\n"
    return RENDER[name](records[name])


def written(text: str, records: dict) -> str:
    """``text`` with every block of figures written from ``records``."""
    return BLOCK.sub(lambda m: m.group(1) + render(m.group("name"), records) + m.group(4), text)


def stale_pages(records: dict | None = None) -> list[str]:
    """The pages whose blocks differ from what the record gives."""
    records = load() if records is None else records
    return [page for page in PAGES if (text := (ROOT / page).read_text()) != written(text, records)]


def run_and_record(name: str, arguments: list[str]) -> int:
    """Run the measuring program ``name`` with ``arguments``, show its output, and record its last lines."""
    command = [sys.executable, "-m", PROGRAMS[name], *arguments]
    run = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(run.stdout, end="")
    if run.returncode != 0:
        print(f"{PROGRAMS[name]} failed (exit {run.returncode}): nothing recorded")
        return run.returncode
    lines = [line for line in run.stdout.splitlines() if line.strip() and "\r" not in line]
    shown = scrub.shown_command(f"python -m {PROGRAMS[name]}", arguments)
    folders = scrub.named_folders([" ".join(arguments)])  # named in its output as in its command: --out OUT
    record(name, shown, scrub.scrubbed({"output": "\n".join(lines[-LAST_LINES:])}, folders))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 where a page's figures are out of date")
    parser.add_argument("--run", choices=sorted(PROGRAMS), help="run this measuring program and record its output")
    args, arguments = parser.parse_known_args(argv)  # the rest: the measuring program's own arguments
    if arguments and not args.run:
        parser.error(f"unrecognized arguments: {' '.join(arguments)}")
    if args.run:
        status = run_and_record(args.run, arguments)
        if status:
            return status
    records = load()
    with_paths = unscrubbed(records)
    if with_paths and not args.check:  # the records as record() now writes them: the same scrubber
        records = scrub.scrubbed(records)
        _write(records)
        print(f"Scrubbed the machine's paths from {', '.join(sorted(with_paths))} in {RECORD.name}")
    stale = stale_pages(records)
    if args.check:
        for name, found in sorted(with_paths.items()):
            paths = ", ".join(found)
            print(f"{RECORD.name}: {name} holds a machine's paths ({paths}); run `python -m benchmarks.figures`")
        for page in stale:
            print(f"{page}: its figures differ from benchmarks/figures.json; run `python -m benchmarks.figures`")
        return 1 if stale or with_paths else 0
    for page in stale:
        path = ROOT / page
        path.write_text(written(path.read_text(), records))
        print(f"Wrote the figures of {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
