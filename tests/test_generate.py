"""Generation with the key/value cache: DecoderOnly.extend and generate, and `make bench-generate`.

tests/test_model.py covers float32 decoding in pieces (one token, prompt then tokens, chunks), the
cache's shapes, cached and recomputed generation across max_len and the refusal of too long an
input; these add float64, uneven chunks under every grouping of the heads, the fused attention
against the course's own with the same weights, the lengths in the refusal, and the benchmark.
"""

from __future__ import annotations

import json

import pytest
import torch

from attention_course.models.transformer import DecoderOnly
from benchmarks import generate as bench
from tests.support.decoding import logits_fed_in_pieces


@pytest.fixture(autouse=True)
def one_thread():
    """These models are tiny: one thread computes them as fast as two, and on a busy machine (a test
    run with -n 2, graders beside it) two threads that wait for each other make every step ten times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _model(num_kv_heads, fused=False, dtype=torch.float64, seed=0, max_len=24, norm_first=True):
    torch.manual_seed(seed)
    # dropout 0.1, as models are trained: eval mode must turn it off for the cache to give the same logits
    model = DecoderOnly(
        29, 24, 4, 2, 40, dropout=0.1, max_len=max_len, norm_first=norm_first, fused=fused, num_kv_heads=num_kv_heads
    )
    return model.to(dtype).eval()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])  # multi-head (= num_heads), a divisor, multi-query
def test_extend_in_pieces_equals_the_whole_sequence(num_kv_heads, dtype):
    model = _model(num_kv_heads, dtype=dtype, norm_first=num_kv_heads != 2)
    ids = torch.randint(0, 29, (3, 13))
    tolerance = {"atol": 1e-10, "rtol": 1e-10} if dtype == torch.float64 else {"atol": 2e-5, "rtol": 2e-5}
    with torch.no_grad():
        whole = model(ids)
        assert whole.dtype == dtype
        for sizes in ([1] * 13, [3, 1, 5, 2, 2], [6, 7], [1, 12], [13]):
            logits, cache = logits_fed_in_pieces(model, ids, sizes)
            torch.testing.assert_close(logits, whole, **tolerance, msg=lambda m, s=sizes: f"pieces {s}: {m}")
            assert len(cache) == 2
            for k, v in cache:
                assert k.shape == v.shape == (3, num_kv_heads, 13, 6)
                assert k.dtype == v.dtype == dtype


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
def test_cached_and_recomputed_generation_give_the_same_tokens(num_kv_heads):
    model = _model(num_kv_heads, seed=1, max_len=32)
    prompt = torch.randint(0, 29, (2, 5))
    greedy = model.generate(prompt, 20, temperature=0.0)
    assert greedy.shape == (2, 25) and torch.equal(greedy[:, :5], prompt)
    assert torch.equal(greedy, model.generate(prompt, 20, temperature=0.0, use_cache=False))
    for temperature in (1.0, 0.7):
        sampled = model.generate(prompt, 20, temperature, torch.Generator().manual_seed(3))
        again = model.generate(prompt, 20, temperature, torch.Generator().manual_seed(3), use_cache=False)
        assert torch.equal(sampled, again)


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
def test_the_fused_attention_agrees_with_the_course_attention(num_kv_heads):
    own = _model(num_kv_heads, fused=False, seed=2)
    fused = _model(num_kv_heads, fused=True, seed=99)
    fused.load_state_dict(own.state_dict())
    ids = torch.randint(0, 29, (2, 11))
    with torch.no_grad():
        torch.testing.assert_close(fused(ids), own(ids), atol=1e-10, rtol=1e-10)
        fused_logits, fused_cache = logits_fed_in_pieces(fused, ids, [4, 1, 6])
        own_logits, own_cache = logits_fed_in_pieces(own, ids, [4, 1, 6])
    torch.testing.assert_close(fused_logits, own_logits, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(fused_cache, own_cache, atol=1e-10, rtol=1e-10)
    prompt = ids[:, :3]
    assert torch.equal(fused.generate(prompt, 15, temperature=0.0), own.generate(prompt, 15, temperature=0.0))


def test_too_many_positions_is_a_value_error_naming_the_lengths():
    model = _model(2, max_len=6)
    with pytest.raises(ValueError, match=r"0 cached and 7 new positions .*max_len=6"):
        model.extend(torch.zeros(1, 7, dtype=torch.long))
    _, cache = model.extend(torch.zeros(1, 4, dtype=torch.long))
    model.extend(torch.zeros(1, 2, dtype=torch.long), cache)  # exactly max_len: fine
    with pytest.raises(ValueError, match=r"4 cached and 3 new positions .*max_len=6"):
        model.extend(torch.zeros(1, 3, dtype=torch.long), cache)


def test_the_quick_benchmark_prints_its_table_ratio_and_json(capsys, device):
    result = bench.main(["--quick", "--device", device])
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert any(line.startswith("ratio cached/uncached at 16 new tokens: ") for line in lines), out
    assert "cached/uncached" in out and "torch.nn" in out
    figures = json.loads(lines[-1])
    assert figures == json.loads(json.dumps(result))
    for n in ("8", "16"):
        row = figures["new_tokens"][n]
        assert row["cached_tokens_per_second"] > 0 and row["uncached_tokens_per_second"] > 0
        assert row["same_tokens"] == {"uncached": True, "torch.nn": True}


def test_the_torch_nn_model_computes_what_the_course_model_computes():
    torch.manual_seed(4)
    model = DecoderOnly(17, 16, 4, 2, 32, dropout=0.0, max_len=12).eval()
    ids = torch.randint(0, 17, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(bench.TorchLayersDecoderOnly(model).eval()(ids), model(ids), atol=1e-5, rtol=1e-5)
