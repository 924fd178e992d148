"""The training loop, decoding and metrics of the helper package (attention_course.basics.training)."""

import math

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from attention_course import (  # noqa: E402
    LengthBucket,
    accuracy_by_length,
    epoch_batches,
    exact_match,
    greedy_decode_rnn,
    plot_loss_curve,
    seed_everything,
    sequence_cross_entropy,
    to_device,
    train,
)
from attention_course.basics.training import warmup_cosine  # noqa: E402


def test_exact_match_counts_whole_strings():
    assert exact_match(["2026-11-21", "2026-11-22", "x"], ["2026-11-21", "2026-11-21", "x"]) == pytest.approx(2 / 3)
    assert exact_match(["a"], ["a"]) == 1.0
    assert exact_match(["ab"], ["abc"]) == 0.0


@pytest.mark.parametrize(
    "predictions, targets, error",
    [
        (["a", "b"], ["a"], "same length"),
        ([], [], "targets must not be empty"),
        ("abc", "abc", "not single strings"),
    ],
)
def test_exact_match_refuses_bad_arguments(predictions, targets, error):
    with pytest.raises(ValueError, match=error):
        exact_match(predictions, targets)


def test_accuracy_by_length_buckets_and_keeps_empty_ones():
    buckets = accuracy_by_length([8, 9, 12, 13, 13, 20], [True, False, True, True, False, True], [8, 11, 14, 17, 21])
    assert buckets[0] == LengthBucket(8, 11, 0.5, 2)
    assert buckets[1].accuracy == pytest.approx(2 / 3) and buckets[1].count == 3
    assert buckets[2].count == 0 and math.isnan(buckets[2].accuracy)
    assert buckets[3] == LengthBucket(17, 21, 1.0, 1)
    assert sum(b.count for b in buckets) == 6


@pytest.mark.parametrize(
    "lengths, correct, edges, error",
    [
        ([1, 2], [True], [0, 5], "lengths .* and correct"),
        ([1], [True], [0], "edges must be"),
        ([1], [True], [0, 5, 5], "edges must be"),
        ([7], [True], [0, 5], "do not cover"),
    ],
)
def test_accuracy_by_length_refuses_bad_arguments(lengths, correct, edges, error):
    with pytest.raises(ValueError, match=error):
        accuracy_by_length(lengths, correct, edges)


def test_epoch_batches_cover_every_item_once_per_epoch_and_reshuffle():
    batches_fn = epoch_batches(list(range(10)), 4, collate=lambda chunk: torch.tensor(chunk))
    first, second = list(batches_fn()), list(batches_fn())
    assert [len(b) for b in first] == [4, 4, 2]
    assert sorted(torch.cat(first).tolist()) == list(range(10)) == sorted(torch.cat(second).tolist())
    assert torch.cat(first).tolist() != torch.cat(second).tolist()
    again = epoch_batches(list(range(10)), 4, collate=lambda chunk: torch.tensor(chunk))
    assert torch.cat(list(again())).tolist() == torch.cat(first).tolist()  # seeded
    assert list(epoch_batches([1, 2, 3], 2, shuffle=False)()) == [[1, 2], [3]]


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"items": [], "batch_size": 2}, "items must not be empty"),
        ({"items": [1], "batch_size": 0}, "batch_size must be a positive int"),
        ({"items": [1], "batch_size": 1, "collate": 3}, "collate must be callable"),
    ],
)
def test_epoch_batches_refuses_bad_arguments(kwargs, error):
    with pytest.raises(ValueError, match=error):
        epoch_batches(**kwargs)


def test_to_device_moves_nested_tensors_and_keeps_the_rest(device):
    moved = to_device({"a": torch.ones(2), "b": [torch.zeros(1), 3], "c": "text"}, device)
    assert moved["a"].device.type == moved["b"][0].device.type == torch.device(device).type
    assert isinstance(moved["b"], list)
    assert moved["b"][1] == 3 and moved["c"] == "text"


def test_sequence_cross_entropy_skips_padding():
    logits = torch.randn(2, 3, 5)
    targets = torch.tensor([[1, 2, 0], [3, 0, 0]])
    expected = nn.functional.cross_entropy(logits[targets != 0], targets[targets != 0])
    torch.testing.assert_close(sequence_cross_entropy(logits, targets), expected)
    with pytest.raises(ValueError, match="targets must have shape"):
        sequence_cross_entropy(logits, targets[:, :2])
    with pytest.raises(ValueError, match="logits must have shape"):
        sequence_cross_entropy(logits[0], targets[0])


class TinyCopier(nn.Module):
    """A minimal RNN encoder-decoder with the encode / decoder.step interface, and attention by dot product."""

    def __init__(self, vocab=6, hidden=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.encoder = nn.GRU(hidden, hidden, batch_first=True)
        self.decoder = TinyDecoder(vocab, hidden)

    def encode(self, src, src_mask):
        outputs, last = self.encoder(self.embed(src))
        return outputs, last[0]

    def forward(self, src, src_mask, tgt_in):
        outputs, hidden = self.encode(src, src_mask)
        logits = []
        for t in range(tgt_in.size(1)):
            step_logits, hidden, _ = self.decoder.step(tgt_in[:, t], hidden, outputs, src_mask)
            logits.append(step_logits)
        return torch.stack(logits, dim=1)


class TinyDecoder(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rnn = nn.GRUCell(2 * hidden, hidden)
        self.out = nn.Linear(2 * hidden, vocab)

    def step(self, prev, hidden, enc_outputs, src_mask):
        scores = (enc_outputs @ hidden[:, :, None]).squeeze(-1)
        if src_mask is not None:
            scores = scores.masked_fill(~src_mask, float("-inf"))
        weights = scores.softmax(-1)
        context = (weights[:, :, None] * enc_outputs).sum(1)
        hidden = self.rnn(torch.cat([self.embed(prev), context], -1), hidden)
        return self.out(torch.cat([hidden, context], -1)), hidden, weights


def copy_batch(n, generator):
    """Sources of 3 symbols from {3, 4, 5}; targets <bos>=1, the same symbols, <eos>=2."""
    src = torch.randint(3, 6, (n, 3), generator=generator)
    tgt = torch.cat([torch.ones(n, 1, dtype=torch.long), src, torch.full((n, 1), 2)], dim=1)
    return {"src": src, "src_mask": torch.ones_like(src, dtype=torch.bool), "tgt": tgt}


def copy_loss(model, b):
    return sequence_cross_entropy(model(b["src"], b["src_mask"], b["tgt"][:, :-1]), b["tgt"][:, 1:])


def test_train_lowers_the_loss_of_a_tiny_model_and_returns_one_loss_per_step(capsys, device):
    seed_everything(0)
    model = TinyCopier().to(device)
    generator = torch.Generator().manual_seed(0)
    data = [copy_batch(32, generator) for _ in range(4)]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = train(model, lambda: iter(data), copy_loss, optimizer, steps=60, device=device)
    assert len(losses) == 60 and all(isinstance(x, float) for x in losses)
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5
    assert not model.training
    captured = capsys.readouterr()
    assert "60/60" in captured.out and captured.err == ""  # the bar goes to stdout, not stderr


def test_train_can_run_silently_and_refuses_bad_arguments(capsys, device):
    model = TinyCopier().to(device)
    data = [copy_batch(4, torch.Generator().manual_seed(1))]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train(model, lambda: data, copy_loss, optimizer, steps=3, device=device, progress=False)
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="steps must be a positive int"):
        train(model, lambda: data, copy_loss, optimizer, steps=0, device=device)
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        train("model", lambda: data, copy_loss, optimizer, steps=1, device=device)
    with pytest.raises(ValueError, match="batches_fn"):
        train(model, data, copy_loss, optimizer, steps=1, device=device)
    with pytest.raises(ValueError, match="batches_fn returned no batches"):
        train(model, lambda: [], copy_loss, optimizer, steps=1, device=device, progress=False)
    with pytest.raises(ValueError, match="clip_grad_norm must be positive"):
        train(model, lambda: data, copy_loss, optimizer, steps=1, device=device, clip_grad_norm=0)


def test_train_steps_a_schedule_after_each_optimiser_step(device):
    model = TinyCopier().to(device)
    data = [copy_batch(4, torch.Generator().manual_seed(2))]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_cosine(step, 20, 4))
    rates = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: rates.append(opt.param_groups[0]["lr"]))
    train(model, lambda: data, copy_loss, optimizer, steps=20, device=device, progress=False, schedule=schedule)
    assert rates == pytest.approx([0.5 * warmup_cosine(step, 20, 4) for step in range(20)])
    assert rates[:4] == pytest.approx([0.125, 0.25, 0.375, 0.5]) and rates[-1] > 0.05


def test_greedy_decode_stops_at_eos_and_pads_after_it():
    class Scripted(nn.Module):
        """Emits 3, 2 (eos) for the first sequence and 4, 4, 2 for the second, with uniform weights."""

        def __init__(self):
            super().__init__()
            self.decoder = ScriptedDecoder()

        def encode(self, src, src_mask):
            return torch.zeros(src.size(0), src.size(1), 1), torch.zeros(src.size(0), 1)

    class ScriptedDecoder(nn.Module):
        script = torch.tensor([[3, 2, 5], [4, 4, 2]])

        def step(self, prev, hidden, enc_outputs, src_mask):
            t = int(hidden[0, 0])
            logits = nn.functional.one_hot(self.script[:, t], 6).float()
            weights = torch.full(enc_outputs.shape[:2], 1 / enc_outputs.size(1))
            return logits, hidden + 1, weights

    src = torch.tensor([[3, 4, 0], [5, 5, 5]])
    tokens, weights = greedy_decode_rnn(Scripted(), src, src != 0, bos_id=1, eos_id=2, max_len=8)
    assert tokens.tolist() == [[3, 2, 0], [4, 4, 2]]
    assert weights.shape == (2, 3, 3)


def test_greedy_decode_of_a_trained_copier_and_its_arguments(device):
    seed_everything(0)
    model = TinyCopier().to(device)
    generator = torch.Generator().manual_seed(0)
    data = [copy_batch(64, generator) for _ in range(8)]
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-2)
    train(model, lambda: iter(data), copy_loss, optimizer, steps=150, device=device, progress=False)
    test = to_device(copy_batch(64, torch.Generator().manual_seed(99)), device)
    tokens, weights = greedy_decode_rnn(model, test["src"], test["src_mask"], bos_id=1, eos_id=2, max_len=6)
    assert tokens.shape[0] == 64 and tokens.shape[1] <= 6 and weights.shape[::2] == (64, 3)
    assert exact_match(tokens[:, :4].tolist(), test["tgt"][:, 1:5].tolist()) > 0.8
    with pytest.raises(ValueError, match="src must have shape"):
        greedy_decode_rnn(model, test["src"][0], None, bos_id=1, eos_id=2, max_len=6)
    with pytest.raises(ValueError, match="src_mask must have the shape"):
        greedy_decode_rnn(model, test["src"], test["src_mask"][:, :2], bos_id=1, eos_id=2, max_len=6)
    with pytest.raises(ValueError, match="max_len must be a positive int"):
        greedy_decode_rnn(model, test["src"], None, bos_id=1, eos_id=2, max_len=0)


def test_plot_loss_curve_returns_axes_and_draws_raw_and_smoothed_lines():
    import matplotlib.pyplot as plt

    ax = plot_loss_curve([3.0, 2.0, 1.5, 1.0, 0.5], window=2, label="run")
    assert ax.get_yscale() == "log" and len(ax.lines) == 2 and len(ax.lines[1].get_xdata()) == 4
    _, own = plt.subplots()
    assert plot_loss_curve([1.0], ax=own, log=False) is own and own.get_yscale() == "linear"
    with pytest.raises(ValueError, match="losses must be a non-empty"):
        plot_loss_curve([])
    with pytest.raises(ValueError, match="window must be a positive int"):
        plot_loss_curve([1.0], window=0)
    plt.close("all")
