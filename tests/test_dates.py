"""The date-translation task of the helper package."""

import datetime

import pytest
import torch

from attention_course.data.dates import FORMATS, SOURCE_VOCAB, TARGET_VOCAB, DateTask, batch

SAT = datetime.date(2026, 11, 21)


@pytest.mark.parametrize(
    "fmt, text",
    [
        ("weekday_day_month_year", "saturday 21 november 2026"),
        ("mon_day_year", "Nov 21, 2026"),
        ("dd.mm.yy", "21.11.26"),
        ("full_us", "Saturday, November 21, 2026"),
        ("ordinal_of_month", "the 21st of November 2026"),
        ("dd-Mon-yyyy", "21-Nov-2026"),
    ],
)
def test_formats_render_as_people_write_dates(fmt, text):
    assert DateTask.render(SAT, fmt) == text


def test_every_format_determines_the_date():
    # Two-digit years pivot at 50, so rendering is one-to-one on the whole range in every format.
    days = [datetime.date(1950, 1, 1) + datetime.timedelta(days=k) for k in range(0, 36524, 7)]
    for fmt in FORMATS:
        rendered = [DateTask.render(d, fmt) for d in days]
        assert len(set(rendered)) == len(days), fmt
        assert all(SOURCE_VOCAB.unk_id not in SOURCE_VOCAB.encode(r) for r in rendered), fmt


def test_examples_are_seeded_and_splits_share_no_date():
    task = DateTask(seed=3)
    assert task.examples("train", 50) == DateTask(seed=3).examples("train", 50)
    assert task.examples("train", 50) != DateTask(seed=4).examples("train", 50)
    dates = {split: {e.target for e in task.examples(split, 2000)} for split in ("train", "val", "test")}
    assert not (dates["train"] & dates["test"]) and not (dates["train"] & dates["val"])
    assert all(e.target == datetime.date.fromisoformat(e.target).isoformat() for e in task.examples("test", 100))


def test_vocab_round_trip_and_batch_shapes():
    examples = DateTask(seed=0).examples("val", 5)
    b = batch(examples)
    assert b["src"].shape[0] == 5 and b["src_mask"].dtype == torch.bool
    assert b["tgt"].shape == (5, 12) and (b["tgt"][:, 0] == TARGET_VOCAB.bos_id).all()
    for i, e in enumerate(examples):
        assert SOURCE_VOCAB.decode(b["src"][i]) == e.source
        assert TARGET_VOCAB.decode(b["tgt"][i]) == e.target
        assert b["src_mask"][i].sum() == len(e.source)


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: DateTask(formats=["nope"]), "unknown formats"),
        (lambda: DateTask().examples("dev", 3), "split must be"),
        (lambda: DateTask().examples("train", -1), "n must be non-negative"),
        (lambda: batch([]), "examples must not be empty"),
    ],
)
def test_bad_arguments_are_refused_clearly(call, error):
    with pytest.raises(ValueError, match=error):
        call()
