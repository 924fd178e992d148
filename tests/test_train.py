"""`make train` (attention_course.trainer): a real run end to end, resume, torchrun, and the corpora."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from attention_course import corpora
from attention_course.trainer import learning_rate, parse_args

pytestmark = pytest.mark.slow

TINY = ["--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--batch-size", "16", "--log-every", "4",
        "--checkpoint-every", "8", "--eval-examples", "40", "--no-progress", "--warmup", "4"]


def run(args, *, launcher=(sys.executable, "-m")) -> dict:
    result = subprocess.run([*launcher, "attention_course.trainer", *args], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_bad_arguments_are_refused_with_the_reason(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--d-model", "64", "--heads", "3"])
    assert "--heads (3) must divide --d-model (64)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--steps", "0"])
    assert "--steps must be positive" in capsys.readouterr().err


def test_schedules_warm_up_then_decay():
    args = parse_args(["--lr", "1e-3", "--warmup", "10", "--steps", "100"])
    rates = [learning_rate(step, args) for step in range(100)]
    assert rates[0] == pytest.approx(1e-4) and max(rates) == pytest.approx(1e-3) and rates.index(max(rates)) == 9
    assert rates[-1] < rates[50] < rates[10] and rates[-1] >= 1e-4 - 1e-12
    noam = parse_args(["--lr", "1e-3", "--warmup", "10", "--schedule", "noam"])
    assert learning_rate(9, noam) == pytest.approx(1e-3) and learning_rate(39, noam) == pytest.approx(5e-4)


def test_a_dates_run_writes_checkpoint_metrics_plot_and_one_json_line(tmp_path):
    final = run([*TINY, "--steps", "12", "--out", str(tmp_path)])
    for key in ("task", "device", "exact_match", "val_loss", "tokens_per_second", "wall_seconds"):
        assert key in final, key
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
    resumed = run([*common, "--steps", "16", "--out", str(tmp_path / "resumed"), "--resume",
                   str(tmp_path / "first" / "checkpoint.pt")])
    assert resumed["steps"] == 16
    assert resumed["val_loss"] == pytest.approx(straight["val_loss"], rel=1e-5)


def test_two_processes_under_torchrun_take_the_same_steps_as_one(tmp_path):
    common = [*TINY, "--dropout", "0", "--steps", "12", "--device", "cpu"]
    single = run([*common, "--out", str(tmp_path / "one")])
    launcher = (sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m")
    double = run([*common, "--out", str(tmp_path / "two")], launcher=launcher)
    assert double["processes"] == 2 and single["processes"] == 1
    assert double["val_loss"] == pytest.approx(single["val_loss"], rel=1e-4)
    assert double["exact_match"] == single["exact_match"]


def test_the_character_task_trains_on_a_text_file(tmp_path):
    text = tmp_path / "poem.txt"
    text.write_text("the cat sat on the mat, and the dog sat on the log.\n" * 40)
    final = run(["--task", "chars", "--text", str(text), "--block-size", "16", *TINY, "--steps", "12",
                 "--out", str(tmp_path / "run")])
    assert final["task"] == "chars" and final["val_loss"] > 0 and final["corpus"] == str(text)
    assert len(final["sample"]) == 200 and set(final["sample"]) <= set(text.read_text())


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
    text = corpora.course_text()
    assert len(text) > 100_000 and "attention" in text
