"""Chapter 11's library (attention_course.kernels): the plain attention that the kernels must reproduce, the choice of
Triton's interpreter, the reference kernels against it, and the timing of a student's kernel compiled, tried here
in the interpreter (tests/test_gpu.py times it compiled, on a GPU)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from attention_course.kernels import costs, interpreter, plain, timing
from attention_course.scale import flops
from attention_course.solutions import register_source


@pytest.fixture(scope="module")
def kernels():
    """The reference kernels, in Triton's interpreter (load_triton switches a worker where torch imported it)."""
    interpreter.load_triton(interpret=True)
    from attention_course.solutions import ch11_flash_attention

    return ch11_flash_attention


def qkv(batch_heads, lq, lk, d, dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch_heads, lq, d, generator=generator, dtype=dtype)
    k, v = (torch.randn(*batch_heads, lk, d, generator=generator, dtype=dtype) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lengths", [(6, 6), (5, 9), (9, 4)])
def test_attention_is_sdpas_and_its_gradients_are_autograds(causal, lengths):
    """Causal is aligned bottom-right (query i sees keys j <= i + Lk - Lq, FlashAttention >= 2.1): SDPA with that
    mask, for the queries that see a key; a query that sees none (Lq > Lk) gets output 0, lse -inf, gradient 0."""
    q, k, v = qkv((2, 3), *lengths, 8)
    lq, lk = lengths
    visible = torch.ones(lengths, dtype=torch.bool)
    if causal:
        visible = visible.tril(lk - lq)
    seen = visible.any(-1)
    assert not causal or lq <= lk or not seen.all()  # (9, 4): its first 5 queries see no key
    output, lse = plain.attention(q, k, v, causal)
    want = F.scaled_dot_product_attention(q[..., seen, :], k, v, attn_mask=visible[seen])
    torch.testing.assert_close(output[..., seen, :], want)
    assert not output[..., ~seen, :].any()
    scores = (q @ k.transpose(-2, -1) / 8**0.5).masked_fill(~visible, float("-inf"))
    assert lse.dtype == torch.float32
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1).float())  # -inf where a query sees no key
    grad_output = torch.randn_like(output)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    builtin = F.scaled_dot_product_attention(leaves[0][..., seen, :], *leaves[1:], attn_mask=visible[seen])
    expected = torch.autograd.grad(builtin, leaves, grad_output[..., seen, :])
    for got, want in zip(plain.attention_gradients(q, k, v, grad_output, causal), expected):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, want)


def test_attention_answers_in_the_inputs_dtype():
    q, k, v = qkv((1,), 4, 4, 16, dtype=torch.float32)
    output, lse = plain.attention(q, k, v)
    grads = plain.attention_gradients(q, k, v, torch.ones_like(q))
    assert output.dtype == lse.dtype == torch.float32 and all(g.dtype == torch.float32 for g in grads)


LOAD_TWICE = """
import os
from attention_course.kernels.interpreter import load_triton
triton, tl = load_triton({first})
print(os.environ["TRITON_INTERPRET"], triton.knobs.runtime.interpret, tl.__name__)
load_triton({first})  # the same choice again
try:
    load_triton({second})
except RuntimeError as error:
    print(error)
else:
    print("switched:", triton.knobs.runtime.interpret)
"""

# A grader that graded another chapter first: a first operation on the "meta" device loads torch's compiler, which
# imports triton compiled; chapter 11's reference then switches the process to the interpreter, and its kernels run.
COMPILED_FIRST = """
import sys
import torch
(torch.arange(4, device="meta")[:, None] < 2).any()
print("imported first:", "triton" in sys.modules)
from attention_course.solutions import ch11_flash_attention as kernels
from attention_course.kernels.plain import attention
q = torch.randn(2, 40, 16, generator=torch.Generator().manual_seed(0))
output, lse = kernels.flash_attention_forward(q, q, q, causal=True)
want = attention(q, q, q, causal=True)
print("largest difference:", max(float((a - b).abs().max()) for a, b in zip((output, lse), want)))
"""


def test_the_choice_of_the_interpreter_holds_or_switches_to_the_interpreter():
    """Each order in a process of its own, all at once: triton imported in the interpreter stays there (compiled
    kernels are refused), and triton imported compiled is switched to the interpreter where asked, even by torch
    before the course asked anything."""
    environment = {name: value for name, value in os.environ.items() if name != interpreter.INTERPRET}
    scripts = {
        order: LOAD_TWICE.format(first=order[0], second=order[1]) for order in (("None", "False"), ("False", "True"))
    }
    scripts["compiled first"] = COMPILED_FIRST
    runs = {
        name: subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
        )
        for name, script in scripts.items()
    }
    said = {}
    for name, run in runs.items():
        out, err = run.communicate(timeout=180)
        assert run.returncode == 0, err
        said[name] = out.splitlines()
    # Nothing said: the interpreter, and the variable that says so for whatever imports triton after.
    assert said[("None", "False")][0] == "1 True triton.language"
    assert said[("None", "False")][1].startswith("triton was imported in its interpreter already in this process")
    assert said[("False", "True")] == ["0 False triton.language", "switched: True"]
    assert said["compiled first"][0] == "imported first: True"
    assert float(said["compiled first"][1].split(": ")[1]) < 1e-5
    assert "in a process of their own" in said[("None", "False")][1]


@pytest.mark.parametrize(
    ("shape", "causal", "blocks"),
    [
        (((1, 2), 40, 40, 16), True, (16, 16)),
        (((2,), 24, 33, 32), False, (16, 32)),
        (((1,), 33, 20, 16), True, (32, 16)),  # causal, Lq > Lk: queries 0-12 see no key
        (((2,), 8, 40, 16), True, (16, 16)),  # causal, Lq < Lk: decoding after a cache of 32
    ],
)
def test_the_reference_kernels_compute_the_plain_attention_and_its_gradients(kernels, shape, causal, blocks):
    q, k, v = qkv(*shape, dtype=torch.float32, seed=1)
    block_q, block_k = blocks
    output, lse = kernels.flash_attention_forward(q, k, v, causal, block_q, block_k)
    want_output, want_lse = plain.attention(q, k, v, causal)
    torch.testing.assert_close(output, want_output, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse, want_lse, atol=1e-5, rtol=1e-5)
    grad_output = torch.randn(output.shape, generator=torch.Generator().manual_seed(2))
    grads = kernels.flash_attention_backward(q, k, v, output, lse, grad_output, causal, block_q, block_k)
    for got, want in zip(grads, plain.attention_gradients(q, k, v, grad_output, causal)):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_the_benchmarks_autograd_function_runs_both_kernels(kernels):
    """benchmarks.attention's triton row (a GPU only), here in the interpreter: forward and backward, causal."""
    from benchmarks.attention import TritonAttention

    q, k, v = qkv((1, 2), 40, 40, 16, dtype=torch.float32, seed=3)
    leaves = [t.requires_grad_() for t in (q, k, v)]
    output = TritonAttention.apply(kernels, *leaves)
    grad_output = torch.randn(output.shape, generator=torch.Generator().manual_seed(4))
    output.backward(grad_output)
    torch.testing.assert_close(output.detach(), plain.attention(q, k, v, causal=True)[0], atol=1e-5, rtol=1e-5)
    for leaf, want in zip(leaves, plain.attention_gradients(q, k, v, grad_output, causal=True)):
        torch.testing.assert_close(leaf.grad, want, atol=1e-4, rtol=1e-4)


# A student's notebook, as its cells define it: a kernel that calls a helper kernel, a Python helper, constants, an
# alias of a module, a function imported from the course, and names that the forward does not use.
NOTEBOOK = """
import math
from math import sqrt

import torch
import torch.nn.functional as F

from attention_course.kernels.plain import attention
from attention_course.kernels.interpreter import load_triton

triton, tl = load_triton()
BLOCK = 16
LOG2E = tl.constexpr(1.4426950408889634)
NOT_USED = object()
scale = {"a dict": "left out"}


@triton.jit
def _halve(x):
    return x * 0.5


@triton.jit
def double_kernel(src, dst, n, FACTOR: tl.constexpr, BLOCK: tl.constexpr):
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = at < n
    tl.store(dst + at, _halve(tl.load(src + at, mask=ok)) * FACTOR * 4 + LOG2E * 0, mask=ok)


def _checked(q):
    if q.shape[-1] < BLOCK:
        raise ValueError("q: too small")
    return q.contiguous()


def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):
    q = _checked(q)
    out = torch.empty_like(q)
    doubled = torch.empty_like(q)
    double_kernel[(triton.cdiv(q.numel(), BLOCK),)](q, doubled, q.numel(), FACTOR=1, BLOCK=BLOCK)
    out.copy_(F.scaled_dot_product_attention(doubled / 2, k, v, is_causal=causal))
    return out, attention(q, k, v, causal)[1] + 0 * math.pi * sqrt(4)
"""


@pytest.fixture(scope="module")
def notebook(kernels):
    """The namespace of NOTEBOOK's cells, run as a notebook runs them (their source registered, as IPython does)."""
    namespace = {"__name__": "__main__"}
    register_source(NOTEBOOK, "<notebook-cell>")
    exec(compile(NOTEBOOK, "<notebook-cell>", "exec"), namespace)
    return namespace


def test_a_forwards_module_holds_what_it_uses_and_runs_alone(notebook):
    source = timing.module_source(notebook["flash_attention_forward"])
    imported = (
        "from attention_course.kernels.plain import attention\n",
        "import torch.nn.functional as F\n",
        "from math import sqrt\n",
    )
    assert all(line in source for line in imported)
    assert "BLOCK = 16\n" in source and "LOG2E = tl.constexpr(1.4426950408889634)\n" in source
    assert "load_triton" not in source and "NOT_USED" not in source and "a dict" not in source
    # each function after those it uses: the helper kernel, then the kernel, then the forward, the last
    names = ("_checked", "_halve", "double_kernel", "flash_attention_forward")
    checked, halve, kernel, forward = (source.index(f"def {name}(") for name in names)
    assert halve < kernel < forward and checked < forward and source.count("@triton.jit\n") == 2
    assert source.rstrip().endswith("return out, attention(q, k, v, causal)[1] + 0 * math.pi * sqrt(4)")
    # The module alone computes what the notebook's forward does (here, in the interpreter: this process's triton).
    alone = {"__name__": "timed_kernels"}
    register_source(source, "<timed-kernels>")
    exec(compile(source, "<timed-kernels>", "exec"), alone)
    q, k, v = qkv((1,), 8, 8, 16, dtype=torch.float32, seed=5)
    for got, want in zip(alone["flash_attention_forward"](q, k, v), notebook["flash_attention_forward"](q, k, v)):
        torch.testing.assert_close(got, want)


def test_a_forward_without_source_is_refused():
    with pytest.raises(TypeError, match="defined with `def`"):
        timing.module_source(lambda q, k, v: (q, q))
    namespace = {}
    exec(compile("def forward(q, k, v):\n    return q\n", "<nowhere>", "exec"), namespace)
    with pytest.raises(ValueError, match="cannot read the source of forward"):
        timing.module_source(namespace["forward"])
    with pytest.raises(ValueError, match="device must be 'cuda' or 'cpu'"):
        timing.run_timing(namespace["forward"], device="mps")


def test_the_timing_module_tabulates_each_length_and_says_what_failed(notebook, tmp_path, capsys):
    """`python -m attention_course.kernels.timing`'s main, in this process (its triton: the interpreter), on the CPU."""
    path = tmp_path / "timed_kernels.py"
    path.write_text(timing.module_source(notebook["flash_attention_forward"]))
    assert timing.main([str(path), "--device", "cpu", "--lengths", "8", "--heads", "1", "--head-dim", "16"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("Causal attention on the CPU: 1 sequence, 1 head of size 16; median milliseconds")
    header = table.index(next(line for line in table if line.split()[:1] == ["length"]))
    assert table[header].split()[1:] == [
        "yours",
        "(fp32)",
        "yours",
        "(bf16)",
        "efficient",
        "(fp32)",
        "plain",
        "(fp32)",
        "flash",
        "(bf16)",
        "|Δ|",
    ]  # each column's dtype, the fused fp32 one beside yours
    assert any("compare it with yours in bfloat16" in line for line in table[:header])  # like with like
    length, yours, yours_bf16, efficient, plain, sdpa_flash, difference = table[header + 1].split()
    assert length == "8" and min(float(yours), float(sdpa_flash), float(plain)) > 0 and float(difference) < 1e-5
    # The interpreter's bfloat16 is partial: this forward's arithmetic with a constant fails there (no get_bf16), and
    # the table says so below itself; compiled on a GPU, it runs (tests/test_gpu.py).
    assert float(yours_bf16) > 0 if yours_bf16 != "failed" else any("yours in bfloat16 at length 8" in x for x in table)
    assert efficient == "failed" or float(efficient) > 0  # PyTorch may have no memory-efficient kernel on the CPU
    # A forward that fails: its cell says so, and why, below the table.
    assert timing.main([str(path), "--device", "cpu", "--lengths", "8", "--heads", "1", "--head-dim", "8"]) == 0
    table = capsys.readouterr().out
    assert "   failed " in table and "yours at length 8: ValueError: q: too small" in table
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            timing.main([str(path), "--device", "cuda"])
        assert "no CUDA GPU here" in capsys.readouterr().err


def test_the_timing_runs_in_a_process_of_its_own(kernels):
    """run_timing, the path of time_on_gpu, on the CPU: the reference forward's module written, then run by
    `python -m attention_course.kernels.timing` in Triton's interpreter, whatever this process's triton."""
    table = timing.run_timing(kernels.flash_attention_forward, "cpu", (24,), 1, 16, 16, 16, timeout=120)
    assert (
        "  yours: flash_attention_forward in Triton's interpreter, in float32 and in bfloat16 (whose tl.dot it gets "
        "wrong: times only), block_q=16, block_k=16" in table
    )
    row = next(line.split() for line in table.splitlines() if line.split()[:1] == ["24"])
    assert float(row[-1]) < 1e-5 and float(row[2]) > 0, table  # the reference runs in bfloat16 in the interpreter


def test_without_a_gpu_time_on_gpu_says_so(monkeypatch, capsys, kernels):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    timing.time_on_gpu(kernels.flash_attention_forward)
    assert capsys.readouterr().out.startswith("No CUDA GPU here: on one (Colab's included), this runs your kernel")


def test_causal_alignments_differ_only_where_the_lengths_do():
    assert torch.equal(costs.causal_mask(4, 4), costs.causal_mask(4, 4, "bottom-right"))
    top, bottom = costs.causal_mask(3, 5), costs.causal_mask(3, 5, "bottom-right")
    assert top[0].tolist() == [True, False, False, False, False]  # query 0 sees key 0 alone
    assert bottom[-1].all() and bottom[0].tolist() == [True, True, True, False, False]
    with pytest.raises(ValueError, match="align"):
        costs.causal_mask(3, 5, "left")


@pytest.mark.parametrize("chunks", [1, 3, 7])
def test_split_kv_attention_combines_to_plain_attention(chunks):
    q, k, v = qkv((2,), 1, 50, 8, dtype=torch.float32)
    output, lse = costs.split_kv_attention(q, k, v, chunks)
    want, want_lse = plain.attention(q, k, v)
    torch.testing.assert_close(output, want)
    torch.testing.assert_close(lse, want_lse)
    # averaging the chunks' outputs (no lse weights) is not attention
    plain_mean = torch.stack(
        [plain.attention(q, kc, vc)[0] for kc, vc in zip(k.tensor_split(chunks, -2), v.tensor_split(chunks, -2))]
    ).mean(0)
    assert chunks == 1 or not torch.allclose(plain_mean, want)
    with pytest.raises(ValueError, match="chunks"):
        costs.split_kv_attention(q, k, v, 51)


def test_attention_flops_count_two_products_forward_and_five_or_seven_backward():
    full = costs.attention_flops(1024, 1024, 64)
    assert full["forward"] == 4 * 1024 * 1024 * 64
    assert full["backward_five"] / full["forward"] == 2.5 and full["backward_seven"] / full["forward"] == 3.5
    causal = costs.attention_flops(1024, 1024, 64, causal=True)
    assert causal["forward"] == 4 * 64 * 1024 * 1025 // 2  # the diagonal's pairs are kept: a little over half
    assert costs.fused_forward_bytes(8, 8, 4, 2) == 4 * 8 * 4 * 2 + 4 * 8
    with pytest.raises(ValueError, match="head_dim"):
        costs.attention_flops(8, 8, 0)


def test_the_kernel_requests_about_block_q_flops_a_byte_below_the_h100s_ridge():
    """Chapter 11's cost argument: counted with the bytes a program requests (every key and value again for each
    block of queries), the forward pass makes about B_q FLOPs a byte in bf16 (63 at 64, 124 at 128, L = 4096,
    d = 64), below the H100's ridge of 295, where the fewest bytes give 2032: the L2 cache makes up the difference."""
    ridge = flops.PEAK_BF16_FLOPS["NVIDIA H100 80GB HBM3"] / flops.PEAK_MEMORY_BANDWIDTH["NVIDIA H100 80GB HBM3"]
    assert round(ridge) == 295
    requested = {bq: costs.forward_program_intensity(bq, 4096, 64, 2) for bq in (64, 128)}
    assert round(requested[64]) == 63 and round(requested[128]) == 124 and max(requested.values()) < ridge
    fewest = costs.attention_flops(4096, 4096, 64)["forward"] / costs.fused_forward_bytes(4096, 4096, 64, 2)
    assert round(fewest) == 2032
    # the programs together request what the exercise's question counts (reads), plus their writes
    whole = 4096 // 64 * 4 * 64 * 4096 * 64 / requested[64]
    assert whole == pytest.approx(4096 // 64 * ((2 * 64 + 2 * 4096) * 64 * 2 + 4 * 64), rel=1e-12)
    with pytest.raises(ValueError, match="block_q"):
        costs.forward_program_intensity(0, 8, 8, 2)


def test_the_h100s_tensor_cores_are_256_times_its_exponential_units():
    """FlashAttention-3's figures from the SM's rates: 989 TFLOP/s of bf16 products (the peak that chapter 8's
    table holds) and 3.9 T/s of special functions, one exponential per 256 FLOPs: 4 d at d = 64."""
    h100 = costs.H100_SXM
    matmul = h100["sms"] * h100["tensor_flops_per_clock_per_sm"] * h100["clock_hz"]
    special = h100["sms"] * h100["special_functions_per_clock_per_sm"] * h100["clock_hz"]
    assert abs(matmul / flops.PEAK_BF16_FLOPS["NVIDIA H100 80GB HBM3"] - 1) < 1e-3
    assert round(special / 1e11) == 39 and round(matmul / special) == 4 * 64


def test_a_128_tile_on_4_warps_needs_more_registers_than_a_thread_has():
    """The registers of a program's float32 scores and accumulator, per thread: 128 x 128 and 128 x 128 on 4 warps
    is 256, past the 255 a thread can have; on 8 warps, 128."""
    assert costs.tile_registers(128, 128, 128, 4) == 256 > costs.H100_SXM["max_registers_per_thread"]
    assert costs.tile_registers(128, 128, 128, 8) == 128
    assert costs.tile_registers(64, 64, 64, 4) == 64
    assert costs.tile_registers(16, 16, 16, 1) == 16  # (256 + 256) / 32
    with pytest.raises(ValueError, match="num_warps"):
        costs.tile_registers(64, 64, 64, 0)


def test_the_interpreter_multiplies_float16_tiles_but_not_bfloat16_ones(kernels):
    """What the grader can grade on the CPU (the exercise and the page say so): Triton's interpreter runs tl.dot of
    two float16 tiles as a GPU does (products summed in float32), and loads, stores and casts bfloat16, but its tl.dot
    of two bfloat16 tiles gives wrong numbers (NumPy has no bfloat16). When a Triton release mends it, this fails:
    then grade bfloat16 too (the exercise's precision tests, and their words)."""
    triton, tl = interpreter.load_triton(interpret=True)

    @triton.jit
    def product(a_ptr, b_ptr, out_ptr, copy_ptr, N: tl.constexpr):
        at = tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]
        a, b = tl.load(a_ptr + at), tl.load(b_ptr + at)
        tl.store(out_ptr + at, tl.dot(a, tl.trans(b)))
        tl.store(copy_ptr + at, a.to(tl.float32))

    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, 16, 16, generator=generator).unbind(0)
    gaps = {}
    for dtype in (torch.float16, torch.bfloat16):
        low_a, low_b = a.to(dtype), b.to(dtype)
        out, copy = torch.empty(16, 16), torch.empty(16, 16)
        product[(1,)](low_a, low_b, out, copy, N=16)
        assert torch.equal(copy, low_a.float())  # loads and casts are right in both
        gaps[dtype] = (out.double() - low_a.double() @ low_b.double().T).abs().max().item()
    assert gaps[torch.float16] < 1e-5  # float32 sums of exact products
    assert gaps[torch.bfloat16] > 1.0  # wrong, not rounded


def test_the_reference_kernels_keep_float16_and_sum_in_float32(kernels):
    """float16 in, float16 out, lse in float32, within float16's rounding of the float64 answer; and the exercise's
    hidden input for the accumulator (values near 1,000 over 128 keys, whose weighted sum passes float16's 65,504):
    right here, inf for a kernel that keeps the sum in float16."""
    q, k, v = qkv((2,), 37, 53, 32, dtype=torch.float16, seed=3)
    output, lse = kernels.flash_attention_forward(q, k, v, True, 16, 32)
    assert output.dtype == torch.float16 and lse.dtype == torch.float32
    want_output, want_lse = plain.attention(q, k, v, True)
    torch.testing.assert_close(output, want_output, atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(lse, want_lse, atol=1e-4, rtol=1e-4)
    q, k, v = qkv((1,), 16, 128, 16, dtype=torch.float32, seed=4)
    q, k, v = (q * 0.1).half(), k.half(), (v + 1000).half()
    assert (v.float().sum(-2) > torch.finfo(torch.float16).max).all()  # the unnormalised sum overflows float16
    output, _ = kernels.flash_attention_forward(q, k, v, False, 16, 32)
    torch.testing.assert_close(output, plain.attention(q, k, v)[0], atol=2e-3, rtol=2e-3)
    q, k, v = qkv((2,), 45, 45, 32, dtype=torch.float16, seed=6)
    output, lse = kernels.flash_attention_forward(q, k, v, True, 32, 16)
    grad_output = torch.randn(output.shape, generator=torch.Generator().manual_seed(5)).half()
    grads = kernels.flash_attention_backward(q, k, v, output, lse, grad_output, True, 32, 16)
    for got, want in zip(grads, plain.attention_gradients(q, k, v, grad_output, True)):
        assert got.dtype == torch.float16
        torch.testing.assert_close(got, want, atol=4e-3, rtol=4e-3)
