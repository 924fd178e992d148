"""Four of the book's experiments, which their chapters run once with one seed while the page is built,
repeated over seeds (and, for chapter 1, over the width of the single vector), on a GPU when there is one.
The chapters plot what this records in benchmarks/figures.json.

    python -m benchmarks.replicate bottleneck   # chapter 1: plain vs attention, 4 widths x 5 seeds
    python -m benchmarks.replicate gqa          # chapter 7: 8, 2 and 1 key/value heads, 5 seeds, 2 budgets
    python -m benchmarks.replicate tying        # chapter 6: separate vs tied output layer, 5 seeds
    python -m benchmarks.replicate families --jobs 4   # chapter 6: the four families, 5 seeds, 2 budgets
    python -m benchmarks.replicate gqa --quick  # a few steps, to try the program (records nothing)

The models are the chapters' own: the code cells of the page that define them are executed here, so
that what is repeated is what the reader reads.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import importlib.util
import multiprocessing
import statistics
import sys
import tempfile
import time
import types

from markdown_it import MarkdownIt

from attention_course.tooling.syntax import parse
from benchmarks.figures import RENDER, ROOT, record

BOTTLENECK_WIDTHS = (32, 64, 128, 256)  # numbers in the plain decoder's single vector (2 x encoder GRU width)
BOTTLENECK_LENGTHS = (4, 31)  # the shortest and longest source strings, as the chapter's
GQA_KV_HEADS = (8, 2, 1)


def code_cells(text: str) -> list[str]:
    """The code of a MyST page's ``{code-cell}`` blocks, without their options (``:tags:`` lines, a ``---`` block)."""
    cells = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type != "fence" or not token.info.startswith("{code-cell}"):
            continue
        lines = token.content.splitlines()
        if lines and lines[0] == "---":
            lines = lines[lines.index("---", 1) + 1 :]
        while lines and lines[0].startswith(":"):
            lines = lines[1:]
        cells.append("\n".join(line for line in lines if not line.lstrip().startswith("%")))  # no magics
    return cells


def chapter_namespace(page: str, names: set[str]) -> dict:
    """Execute the page's first code cell (its imports) and each code cell that defines one of ``names``."""
    if importlib.util.find_spec("myst_nb") is None:
        # the pages glue figures into their text; a GPU host without the book's tools still runs their code
        sys.modules["myst_nb"] = types.SimpleNamespace(glue=lambda *args, **kwargs: None)
    namespace: dict = {"__name__": f"chapter_{page.removesuffix('.md')}"}
    missing = set(names)
    for index, code in enumerate(code_cells((ROOT / "book" / page).read_text())):
        defined = _defined(code)
        if index == 0 or defined & names:
            exec(compile(code, f"{page}, code cell {index + 1}", "exec"), namespace)  # the course's own page
            missing -= defined
    if missing:
        raise LookupError(f"{page} defines no {', '.join(sorted(missing))} in its code cells")
    return namespace


def chapter_constant(page: str, name: str):
    """The value of a page's top-level assignment ``name = <literal>``, read without running the cell."""
    for code in code_cells((ROOT / "book" / page).read_text()):
        for node in parse(code).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return ast.literal_eval(node.value)
    raise LookupError(f"{page} assigns no literal to {name} in its code cells")


def _defined(code: str) -> set[str]:
    names = set()
    for node in parse(code).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                elements = target.elts if isinstance(target, ast.Tuple) else [target]
                names.update(e.id for e in elements if isinstance(e, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def _in_processes(function, arguments: list[tuple], jobs: int) -> list:
    """``[function(*row) for row in arguments]``, ``jobs`` rows at a time, each in a process of its own
    (spawned: a CUDA context per process), or here when ``jobs`` is 1."""
    if jobs <= 1:
        return [function(*row) for row in arguments]
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(function, *zip(*arguments)))


def _device_name(torch) -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return "CPU"


def bottleneck(seeds: int, widths: tuple[int, ...], steps: int, batch_size: int, test_size: int, jobs: int) -> dict:
    """Chapter 1's substitution experiment: per-symbol accuracy by source length, for each width and seed;
    ``jobs`` widths at a time, each in a process of its own."""
    import torch

    arguments = [(width, seeds, steps, batch_size, test_size) for width in widths]
    per_width = _in_processes(_bottleneck_width, arguments, jobs)
    edges = list(range(BOTTLENECK_LENGTHS[0], BOTTLENECK_LENGTHS[1] + 2, 4))
    return {
        "device": _device_name(torch),
        "steps": steps,
        "batch_size": batch_size,
        "test_strings": test_size,
        "buckets": [[low, low + 3] for low in edges[:-1]],
        "runs": [run for runs in per_width for run in runs],
    }


def _bottleneck_width(width: int, seeds: int, steps: int, batch_size: int, test_size: int) -> list[dict]:
    ns = chapter_namespace(
        "ch01_bahdanau.md",
        {"task", "reverse_padded", "Encoder", "PlainDecoder", "BahdanauDecoder", "Seq2Seq", "final_states", "loss_fn"},
    )
    import torch

    from attention_course import accuracy_by_length, greedy_decode_rnn, seed_everything, to_device, train
    from attention_course.data.symbols import (
        SOURCE_VOCAB,
        TARGET_VOCAB,
        SubstitutionTask,
        batch,
        batches_by_length,
        token_accuracy,
    )

    device = ns["device"]
    min_len, max_len = BOTTLENECK_LENGTHS
    edges = list(range(min_len, max_len + 2, 4))
    task = SubstitutionTask(seed=0, min_len=min_len, max_len=max_len)
    train_pairs = task.examples("train", steps * batch_size)
    test_pairs = task.examples("test", test_size)
    test_batch = to_device(batch(test_pairs), device)
    lengths = [len(p.source) for p in test_pairs]
    targets = [p.target for p in test_pairs]

    def model(width: int, attention: bool):
        enc_hidden = width // 2
        encoder = ns["Encoder"](len(SOURCE_VOCAB), ns["EMB_DIM"], enc_hidden, width)
        if attention:
            decoder = ns["BahdanauDecoder"](len(TARGET_VOCAB), ns["OUT_EMB"], width, width, ns["ATTN_DIM"])
        else:
            decoder = ns["PlainDecoder"](len(TARGET_VOCAB), ns["OUT_EMB"], width, width)
        return ns["Seq2Seq"](encoder, decoder).to(device)

    runs = []
    for attention in (False, True):
        for seed in range(seeds):
            start = time.perf_counter()
            seed_everything(seed)
            net = model(width, attention)
            optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
            batches = batches_by_length(train_pairs, batch_size, seed=seed)
            train(net, batches, ns["loss_fn"], optimizer, steps, device, progress=False)
            net.eval()
            with torch.no_grad():
                tokens, _ = greedy_decode_rnn(
                    net, test_batch["src"], test_batch["src_mask"], bos_id=TARGET_VOCAB.bos_id,
                    eos_id=TARGET_VOCAB.eos_id, max_len=max_len + 1,
                )  # fmt: skip
            predictions = [TARGET_VOCAB.decode(row) for row in tokens.tolist()]
            per_symbol = token_accuracy(predictions, targets)
            exact = [p == t for p, t in zip(predictions, targets)]
            buckets = accuracy_by_length(lengths, exact, edges)
            symbol_rows = [
                statistics.fmean(a for n, a in zip(lengths, per_symbol) if b.low <= n < b.high) for b in buckets
            ]
            run = {
                "width": width,
                "attention": attention,
                "seed": seed,
                "parameters": sum(p.numel() for p in net.parameters()),
                "per_symbol": [round(a, 4) for a in symbol_rows],
                "exact": [round(b.accuracy, 4) for b in buckets],
                "seconds": round(time.perf_counter() - start, 1),
            }
            runs.append(run)
            name = "attention" if attention else "plain"
            print(
                f"width {width:3d} {name:9s} seed {seed}: per symbol {symbol_rows[0]:.3f} (4-7) -> "
                f"{symbol_rows[-1]:.3f} (28-31), {run['parameters']:,} parameters, {run['seconds']:.0f} s",
                flush=True,
            )
    return runs


def gqa(seeds: int, budgets: tuple[int, ...], batch_size: int) -> dict:
    """Chapter 7's question, does sharing key/value heads cost quality: test loss and exact match per seed."""
    ns = chapter_namespace(
        "ch07_efficient_attention.md", {"train_ids", "test_ids", "target_loss", "TARGET_LEN", "train_date_model"}
    )
    import torch

    from attention_course import best_device

    ns["train_ids"], ns["test_ids"] = ns["train_ids"].to(best_device()), ns["test_ids"].to(best_device())
    test_ids, source_len, target_len = ns["test_ids"], ns["SOURCE_LEN"], ns["TARGET_LEN"]
    runs = []
    for steps in budgets:
        for kv_heads in GQA_KV_HEADS:
            for seed in range(seeds):
                start = time.perf_counter()
                model = ns["train_date_model"](kv_heads, steps=steps, batch_size=batch_size, seed=seed)
                with torch.no_grad():
                    test_loss = ns["target_loss"](model, test_ids).item()
                    written = model.generate(test_ids[:, : source_len + 1], target_len - 1, temperature=0)
                correct = written[:, source_len + 1 :] == test_ids[:, source_len + 1 : -1]
                match = correct.all(dim=1).float().mean().item()
                runs.append(
                    {
                        "steps": steps,
                        "kv_heads": kv_heads,
                        "seed": seed,
                        "test_loss": round(test_loss, 5),
                        "exact_match": round(match, 4),
                        "seconds": round(time.perf_counter() - start, 1),
                    }
                )
                print(
                    f"{steps:5d} steps, H_kv = {kv_heads}, seed {seed}: test loss {test_loss:.4f}, "
                    f"exact match {match:.1%} ({runs[-1]['seconds']:.0f} s)",
                    flush=True,
                )
    return {
        "device": _device_name(torch),
        "batch_size": batch_size,
        "test_dates": len(test_ids),
        "runs": runs,
    }


def tying(seeds: int, steps: int | None = None) -> dict:
    """Chapter 6's training run with separate and with tied target embedding and output layer, per seed."""
    import torch

    from attention_course.trainer.command import main as train_main

    arguments = chapter_constant("ch06_transformer.md", "TRAIN_ARGS")
    if steps is not None:  # --quick
        arguments += ["--steps", str(steps), "--warmup", "1", "--eval-examples", "20"]
    runs = []
    for tied in (False, True):
        for seed in range(seeds):
            with tempfile.TemporaryDirectory() as out:
                extra = ["--seed", str(seed), "--out", out] + (["--tie-weights"] if tied else [])
                metrics = train_main(arguments + extra)
            keep = ("parameters", "exact_match", "val_loss", "train_seconds")
            runs.append({"tied": tied, "seed": seed, **{key: metrics[key] for key in keep}})
            print(
                f"{'tied' if tied else 'separate'} seed {seed}: exact match {metrics['exact_match']:.1%}, "
                f"validation loss {metrics['val_loss']:.4f}",
                flush=True,
            )
    return {"device": _device_name(torch), "arguments": arguments, "runs": runs}


def families(seeds: int, budgets: tuple[int, ...], jobs: int) -> dict:
    """Chapter 6's four families on the date task, with its settings, over seeds and budgets of steps;
    ``jobs`` families at a time, each in a process of its own."""
    import torch

    from attention_course.basics.families import FAMILIES

    per_family = _in_processes(_family_runs, [(family, seeds, budgets) for family in FAMILIES], jobs)
    return {"device": _device_name(torch), "runs": [run for runs in per_family for run in runs]}


def _family_runs(family: str, seeds: int, budgets: tuple[int, ...]) -> list[dict]:
    from attention_course import best_device
    from attention_course.basics import families

    device = best_device()
    runs = []
    for steps in budgets:
        for seed in range(seeds):
            result = families.train(family, steps, seed=seed, device=device)
            runs.append(
                {
                    "family": family,
                    "steps": steps,
                    "seed": seed,
                    "exact_match": result.exact_match,
                    "final_loss": round(statistics.fmean(result.losses[-20:]), 5),
                    "parameters": result.parameters,
                }
            )
            print(f"{family:15} {steps:5d} steps, seed {seed}: exact match {result.exact_match:.1%}", flush=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=("bottleneck", "gqa", "tying", "families"))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument(
        "--jobs", type=int, default=1, help="bottleneck, families: widths or families trained at a time, a process each"
    )
    parser.add_argument("--quick", action="store_true", help="a few steps and seeds; records nothing")
    args = parser.parse_args(argv)
    if f"replicate-{args.experiment}" not in RENDER:  # known before hours of training, not after
        parser.error(f"benchmarks.figures has no table for replicate-{args.experiment}: add one to RENDER")
    seeds = 2 if args.quick else args.seeds
    if args.experiment == "bottleneck":
        widths = (16, 32) if args.quick else BOTTLENECK_WIDTHS
        figures = bottleneck(seeds, widths, 5 if args.quick else 600, 64, 50 if args.quick else 1_000, args.jobs)
    elif args.experiment == "gqa":
        figures = gqa(seeds, (3,) if args.quick else (200, 1_000), 64)
    elif args.experiment == "tying":
        figures = tying(seeds, 3 if args.quick else None)
    else:
        figures = families(seeds, (2,) if args.quick else (300, 1_500), args.jobs)
    if not args.quick:
        shown = " ".join(["python -m benchmarks.replicate", *(argv if argv is not None else sys.argv[1:])])
        record(f"replicate-{args.experiment}", shown, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
