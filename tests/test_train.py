"""`make train` (attention_course.trainer): a real run end to end, resume, torchrun, and the corpora."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from attention_course.basics.schedule import learning_rate, lr_factor, scheduler
from attention_course.data import corpora
from attention_course.data.tokenization import train_bpe
from attention_course.models.transformer import DecoderOnly, EncoderDecoder
from attention_course.scale.flops import PEAK_BF16_FLOPS, peak_flops, training_flops
from attention_course.solutions.ch04_masking import causal_mask
from attention_course.trainer import command
from attention_course.trainer.command import SPEEDUPS, parse_args
from tests.support.devices import chosen_device

pytestmark = pytest.mark.slow

TINY = [
    "--d-model",
    "32",
    "--heads",
    "2",
    "--layers",
    "1",
    "--d-ff",
    "64",
    "--batch-size",
    "16",
    "--log-every",
    "4",
    "--checkpoint-every",
    "8",
    "--eval-examples",
    "40",
    "--no-progress",
    "--warmup",
    "4",
]


def run(args, *, launcher=(sys.executable, "-m")) -> dict:
    """The trainer's final JSON line, run on the tests' device (tests/support/devices.py) unless ``args`` name one."""
    device = [] if "--device" in args else ["--device", chosen_device()]
    argv = [*launcher, "attention_course.trainer", *args, *device]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_bad_arguments_are_refused_with_the_reason(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--d-model", "64", "--heads", "3"])
    assert "--heads (3) must divide --d-model (64)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--steps", "0"])
    assert "--steps must be positive" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--task", "lm", "--vocab-size", "100"])
    assert "--vocab-size must be at least 257" in capsys.readouterr().err


def test_schedules_warm_up_then_decay():
    args = parse_args(["--lr", "1e-3", "--warmup", "10", "--steps", "100"])
    rates = [learning_rate(step, args) for step in range(100)]
    assert rates[0] == pytest.approx(1e-4) and max(rates) == pytest.approx(1e-3) and rates.index(max(rates)) == 9
    assert rates[-1] < rates[50] < rates[10] and rates[-1] >= 1e-4 - 1e-12
    noam = parse_args(["--lr", "1e-3", "--warmup", "10", "--schedule", "noam"])
    assert learning_rate(9, noam) == pytest.approx(1e-3) and learning_rate(39, noam) == pytest.approx(5e-4)


def counted_flops(model, *inputs, target) -> int:
    """FLOPs of a forward and backward pass, as PyTorch's FlopCounterMode counts the matrix products."""
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(*inputs).flatten(0, 1), target.flatten()).backward()
    return counter.get_total_flops()


def test_training_flops_counts_each_stack_with_its_own_tokens_by_hand():
    # d = 8, 2 heads, 1 layer per stack, d_ff = 16, 5 target tokens: the weights of the matrix products are
    # encoder 4*8*8 + 2*8*16 = 512, decoder self-attention 256, cross-attention 256 (keys and values 128 of
    # them, applied to source tokens), feed-forward 256, output layer 5*8 = 40.
    model = EncoderDecoder(7, 5, 8, 2, 1, 16, dropout=0.0)
    per_source, per_target = 512 + 128, 256 + 128 + 256 + 40
    source, target = 9, 4
    attention = 12 * 8 * (source * source + target * target + target * source)
    assert training_flops(model, [source], [target]) == 6 * (source * per_source + target * per_target) + attention
    # Embeddings are look-ups, not matrix products: a larger source vocabulary costs nothing.
    assert training_flops(EncoderDecoder(700, 5, 8, 2, 1, 16), [source], [target]) == training_flops(
        model, [source], [target]
    )


@pytest.mark.parametrize("tie_weights", [False, True])
def test_training_flops_equals_pytorchs_count_of_the_matrix_products(tie_weights):
    torch.manual_seed(0)
    model = EncoderDecoder(20, 15, 32, 4, 2, 64, dropout=0.0, norm_first=True, tie_weights=tie_weights)
    src, tgt = torch.randint(3, 20, (3, 11)), torch.randint(3, 15, (3, 6))  # source and target of other lengths
    assert training_flops(model, [11] * 3, [6] * 3) == counted_flops(model, src, tgt, None, causal_mask(6), target=tgt)
    language_model = DecoderOnly(30, 32, 4, 3, 64, dropout=0.0, tie_weights=tie_weights)
    ids = torch.randint(30, (2, 10))
    assert training_flops(language_model, [10, 10]) == counted_flops(language_model, ids, target=ids)
    with pytest.raises(ValueError, match="target length"):
        training_flops(model, [11, 11], [6])


def test_the_peak_is_looked_up_by_the_exact_device_name(monkeypatch):
    cuda = torch.device("cuda")
    for name, expected in [
        ("NVIDIA H100 80GB HBM3", 989.5e12),
        ("NVIDIA H100 PCIe", 756.5e12),
        ("NVIDIA H100 NVL", 835.5e12),
        ("NVIDIA A100-SXM4-80GB", 312e12),
    ]:
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device, name=name: name)
        peak, source = peak_flops(cuda)
        assert peak == pytest.approx(expected) and name in source
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA H100 SXM5 64GB")
    peak, why = peak_flops(cuda)
    assert peak is None and "NVIDIA H100 SXM5 64GB" in why and "--peak-tflops" in why
    assert peak_flops(cuda, 500.0) == (500e12, "--peak-tflops")
    peak, why = peak_flops(torch.device("cpu"))
    assert peak is None and "--peak-tflops" in why
    assert all(name.startswith("NVIDIA ") for name in PEAK_BF16_FLOPS)


def test_a_dates_run_writes_checkpoint_metrics_plot_and_one_json_line(tmp_path):
    # A peak far above the achieved FLOP/s, as for a small model on a large GPU: its MFU is small, not zero.
    final = run([*TINY, "--steps", "12", "--out", str(tmp_path), "--peak-tflops", "5000"])
    for key in ("task", "device", "exact_match", "val_loss", "tokens_per_second", "wall_seconds"):
        assert key in final, key
    assert final["peak_source"] == "--peak-tflops" and final["flops_per_token"] > 0
    assert final["mfu"] == pytest.approx(final["tokens_per_second"] * final["flops_per_token"] / 5e15, rel=1e-2)
    assert final["task"] == "dates" and final["steps"] == 12 and final["tokens_per_second"] > 0
    assert 0.0 <= final["exact_match"] <= 1.0
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [4, 8, 12]
    assert (tmp_path / "checkpoint.pt").exists() and (tmp_path / "loss_curve.png").stat().st_size > 1000
    assert json.loads((tmp_path / "final.json").read_text()) == final


def test_resuming_gives_the_same_model_as_an_uninterrupted_run(tmp_path):
    common = [*TINY, "--dropout", "0"]
    straight = run([*common, "--steps", "16", "--out", str(tmp_path / "straight")])
    run([*common, "--steps", "16", "--stop-after", "8", "--out", str(tmp_path / "first")])
    resumed = run(
        [
            *common,
            "--steps",
            "16",
            "--out",
            str(tmp_path / "resumed"),
            "--resume",
            str(tmp_path / "first" / "checkpoint.pt"),
        ]
    )
    assert resumed["steps"] == 16
    assert resumed["val_loss"] == pytest.approx(straight["val_loss"], rel=1e-5)


def test_two_processes_under_torchrun_take_the_same_steps_as_one(tmp_path, monkeypatch):
    temporary = tmp_path / "tmp"  # the processes' TMPDIR
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    common = [*TINY, "--dropout", "0", "--steps", "12", "--device", "cpu"]
    single = run([*common, "--out", str(tmp_path / "one")])
    launcher = (sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2")
    launcher += ("--log-dir", str(tmp_path / "torchrun"), "-m")  # else a torchelastic_* folder is left in TMPDIR
    double = run([*common, "--out", str(tmp_path / "two")], launcher=launcher)
    assert double["processes"] == 2 and single["processes"] == 1
    assert double["val_loss"] == pytest.approx(single["val_loss"], rel=1e-4)
    assert double["exact_match"] == single["exact_match"]
    assert not list(temporary.glob("torchelastic_*")) and (tmp_path / "torchrun").is_dir(), "torchrun logged in TMPDIR"


def test_the_character_task_trains_on_a_text_file(tmp_path):
    text = tmp_path / "poem.txt"
    text.write_text("the cat sat on the mat, and the dog sat on the log.\n" * 40)
    final = run(
        [
            "--task",
            "chars",
            "--text",
            str(text),
            "--block-size",
            "16",
            *TINY,
            "--steps",
            "12",
            "--tie-weights",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    assert final["task"] == "chars" and final["val_loss"] > 0 and final["corpus"] == str(text)
    assert final["tie_weights"]
    if final["peak_tflops"] is None:  # the CPU, or a GPU whose data sheet the course does not hold
        assert final["mfu"] is None and "--peak-tflops" in final["peak_source"]
    else:
        assert 0 < final["mfu"] < 1 and "data sheet" in final["peak_source"]
    assert len(final["sample"]) == 200 and set(final["sample"]) <= set(text.read_text())
    assert final["val_bits_per_byte"] == pytest.approx(final["val_bits_per_char"]) and final["val_bytes_per_token"] == 1


def step_losses(args, out: Path) -> list[float]:
    """The training loss of every step of a short run of ``args``, in this process, on the tests' device."""
    command.main([*args, "--log-every", "1", "--out", str(out), "--device", chosen_device()])
    return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]


SPEEDUP_RUNS = {
    "dates": [*TINY, "--dropout", "0", "--steps", "6", "--eval-examples", "8"],
    "chars": ["--task", "chars", "--block-size", "16", *TINY, "--dropout", "0", "--steps", "6", "--eval-examples", "8"],
}


@pytest.fixture(scope="module")
def with_every_speedup(tmp_path_factory):
    return {task: step_losses(args, tmp_path_factory.mktemp(task)) for task, args in SPEEDUP_RUNS.items()}


@pytest.mark.parametrize("speedup", SPEEDUPS)
@pytest.mark.parametrize("task", SPEEDUP_RUNS)
def test_each_speedup_changes_how_a_step_is_computed_not_its_loss(task, speedup, with_every_speedup, tmp_path):
    """is_causal for the look-ahead mask, one QKV product, fused AdamW and TF32 (on CUDA), and batches gathered
    on the device (the dates padded to the pool's longest): the same losses, step by step, without each."""
    without = step_losses([*SPEEDUP_RUNS[task], "--without", speedup], tmp_path)
    assert len(without) == 6
    assert without == pytest.approx(with_every_speedup[task], rel=1e-4)


def test_a_run_records_the_speedups_it_went_without_and_its_compile_mode(tmp_path):
    args = [*SPEEDUP_RUNS["chars"], "--without", "is-causal", "tf32"]
    final = command.main([*args, "--out", str(tmp_path), "--device", chosen_device()])
    assert final["without"] == ["is-causal", "tf32"] and final["compile_mode"] is None
    with pytest.raises(SystemExit):
        parse_args(["--without", "flash"])


def test_no_bias_trains_the_language_model_without_biases_and_is_refused_for_dates(tmp_path, capsys):
    """--no-bias: nanoGPT's bias=False, the model that benchmarks.nanogpt trains beside nanoGPT's; it resumes from
    its checkpoint as the model it is. The date task's encoder-decoder has no such option: refused by name."""
    args = [*SPEEDUP_RUNS["chars"], "--no-bias"]
    final = command.main([*args, "--out", str(tmp_path), "--device", chosen_device()])
    biased = command.main([*SPEEDUP_RUNS["chars"], "--out", str(tmp_path / "biased"), "--device", chosen_device()])
    assert final["bias"] is False and biased["bias"] is True and final["val_loss"] > 0
    assert final["parameters"] < biased["parameters"]
    resumed = command.main([*args, "--steps", "8", "--resume", str(tmp_path / "checkpoint.pt"), "--out",
                            str(tmp_path / "resumed"), "--device", chosen_device()])  # fmt: skip
    assert resumed["steps"] == 8 and resumed["parameters"] == final["parameters"]
    biased_checkpoint = str(tmp_path / "biased" / "checkpoint.pt")
    for other, named in ((["--no-bias"], "--bias was True, is False"), (["--d-model", "64"], "--d-model was 32")):
        with pytest.raises(SystemExit, match=named):  # another model's checkpoint: refused by its options
            command.main([*SPEEDUP_RUNS["chars"], *other, "--steps", "8", "--resume", biased_checkpoint, "--out",
                          str(tmp_path / "refused"), "--device", chosen_device()])  # fmt: skip
    for wrong in ("--no-bias", "--compile-regions"):
        with pytest.raises(SystemExit) as refused:
            parse_args([wrong])
        assert refused.value.code == 2 and wrong in capsys.readouterr().err


def test_compiling_by_layers_gives_the_losses_of_the_model_not_compiled(with_every_speedup, tmp_path):
    """--compile --compile-regions compiles each layer on its own: the same losses step by step, two graphs
    compiled in all (the encoder's layer and the decoder's), none for the evaluation, which runs the layers
    uncompiled (its shapes and eval mode would each compile them again)."""
    torch._dynamo.utils.counters.clear()
    compiled = step_losses([*SPEEDUP_RUNS["dates"], "--compile", "--compile-regions"], tmp_path)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2
    assert compiled == pytest.approx(with_every_speedup["dates"], rel=1e-4)
    final = json.loads((tmp_path / "final.json").read_text())
    assert final["compile_regions"] is True and final["compile_mode"] == "default"


POEM = (
    "The cat sat on the mat; the dog sat on the log. Naïve café crème, déjà vu — résumé.\n"
    "Attention weighs the values by how well each key answers the query.\n"
) * 30


@pytest.fixture(scope="module")
def bpe_run(tmp_path_factory) -> tuple[list[str], dict]:
    """The options of a small lm run on a text file, and its final metrics (16 steps, in ``out``)."""
    folder = tmp_path_factory.mktemp("bpe")
    text = folder / "poem.txt"
    text.write_text(POEM)
    options = [
        "--task",
        "lm",
        "--text",
        str(text),
        "--vocab-size",
        "320",
        "--block-size",
        "16",
        *TINY,
        "--dropout",
        "0",
    ]
    return options, run([*options, "--steps", "16", "--out", str(folder / "out")])


def test_the_bpe_task_trains_on_a_text_file_and_saves_its_tokenizer(bpe_run):
    from tokenizers import Tokenizer

    _, final = bpe_run
    out = Path(final["out"])
    assert final["task"] == "lm" and final["corpus"].endswith("poem.txt") and final["vocab_size"] == 320
    assert final["val_loss"] > 0 and final["val_bits_per_byte"] > 0 and 1 < final["val_bytes_per_token"] < 8
    assert final["val_bits_per_byte"] == pytest.approx(final["val_loss"] / (math.log(2) * final["val_bytes_per_token"]))
    assert isinstance(final["sample"], str) and len(final["sample"]) >= 200  # 200 tokens of a byte or more
    assert json.loads((out / "final.json").read_text()) == final
    saved = Tokenizer.from_file(str(out / "tokenizer.json"))  # trained on the first 90% of the text alone
    assert saved.to_str() == train_bpe(POEM[: int(0.9 * len(POEM))], 320).to_str()
    assert saved.decode(saved.encode(POEM).ids) == POEM
    assert [m["step"] for m in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())] == [4, 8, 12, 16]


def test_a_resumed_bpe_run_has_the_same_tokens_and_model(bpe_run, tmp_path):
    options, straight = bpe_run
    run([*options, "--steps", "16", "--stop-after", "8", "--out", str(tmp_path / "first")])
    resume = ["--resume", str(tmp_path / "first" / "checkpoint.pt")]
    resumed = run([*options, "--steps", "16", "--out", str(tmp_path / "resumed"), *resume])
    assert resumed["steps"] == 16 and resumed["sample"] == straight["sample"]
    assert resumed["val_loss"] == pytest.approx(straight["val_loss"], rel=1e-5)
    tokenizers = [(Path(folder) / "tokenizer.json").read_text() for folder in (straight["out"], tmp_path / "resumed")]
    assert tokenizers[0] == tokenizers[1]


def test_downloads_are_cached_and_checked(tmp_path):
    source = tmp_path / "corpus.txt"
    source.write_text("to be or not to be\n")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    cache = tmp_path / "cache"
    path = corpora.download_cached(source.as_uri(), digest, "corpus.txt", cache)
    assert path.read_text() == "to be or not to be\n"
    source.unlink()  # a second call uses the cache
    assert corpora.download_cached(source.as_uri(), digest, "corpus.txt", cache) == path
    other = tmp_path / "other.txt"
    other.write_text("something else\n")
    with pytest.raises(corpora.ChecksumError, match="expected"):
        corpora.download_cached(other.as_uri(), digest, "other.txt", cache)
    assert sorted(p.name for p in cache.iterdir()) == ["corpus.txt"]  # nothing half-written is left
    with pytest.raises(corpora.ChecksumError, match="expected"):
        corpora.tiny_shakespeare(cache, url=other.as_uri())


def test_the_default_corpus_is_the_course_itself():
    """The kept snapshot holds chapters 1 to 10, each page's title in the course's order, and no later chapter."""
    text = corpora.course_text()
    assert len(text) > 100_000 and "attention" in text
    pages = sorted(corpora.BOOK.glob("ch*.md"))
    titles = [
        next(line[2:] for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("# "))
        for page in pages
    ]
    assert len(titles) == 11
    places = [text.find(f"# {title}\n") for title in titles[:10]]
    assert -1 not in places and places == sorted(places), places
    assert f"# {titles[10]}\n" not in text


def test_the_corpus_is_the_snapshot_and_not_the_pages_until_it_is_made_again(tmp_path):
    """Editing a page leaves the text chapters 9 and 10 train on alone; making the snapshot again takes the edit,
    chapters 1 to 10 only, in order, and the same text gives the same bytes."""
    book, snapshot = tmp_path / "book", tmp_path / "snapshot.txt.gz"
    book.mkdir()
    for name, body in [("ch02_b.md", "# B\n"), ("ch01_a.md", "# A\n"), ("ch10_c.md", "# C\n"), ("ch11_d.md", "# D\n")]:
        (book / name).write_text(body, encoding="utf-8")
    digest = corpora.write_snapshot(book, snapshot)
    assert corpora.course_text(snapshot) == "# A\n\n\n# B\n\n\n# C\n" == corpora.chapters_text(book)
    assert digest == hashlib.sha256(corpora.course_text(snapshot).encode()).hexdigest()
    first = snapshot.read_bytes()
    (book / "ch02_b.md").write_text("# B, edited\n", encoding="utf-8")
    assert "edited" not in corpora.course_text(snapshot) and "edited" in corpora.chapters_text(book)
    corpora.write_snapshot(book, snapshot)
    assert "# B, edited" in corpora.course_text(snapshot)
    (book / "ch02_b.md").write_text("# B\n", encoding="utf-8")
    corpora.write_snapshot(book, snapshot)
    assert snapshot.read_bytes() == first
    with pytest.raises(FileNotFoundError, match="snapshot"):
        corpora.course_text(tmp_path / "none.txt.gz")


@pytest.mark.parametrize("schedule", ["cosine", "noam"])
def test_the_optimizer_steps_at_the_schedule_s_rates_from_any_start(schedule):
    """The one schedule: a LambdaLR of lr_factor sets each step's rate, from the first step or a resumed one."""
    for start in (0, 7):
        weight = torch.nn.Parameter(torch.zeros(3))
        optimizer = torch.optim.SGD([weight], lr=123.0)
        steps = scheduler(optimizer, 0.01, steps=20, warmup=5, schedule=schedule, start=start)
        for step in range(start, 20):
            assert optimizer.param_groups[0]["lr"] == pytest.approx(0.01 * lr_factor(step, 20, 5, schedule), rel=1e-12)
            optimizer.step()
            steps.step()
    assert lr_factor(4, 20, 5, schedule) == pytest.approx(1.0)  # the peak at the end of the warm-up
