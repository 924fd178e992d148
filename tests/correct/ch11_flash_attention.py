"""Correct answers to ch11_flash_attention in other idioms than the reference's.

Triton 3.9 has no block pointers any more (``tl.make_block_ptr`` raises NotImplementedError, compiled or
interpreted): the idiom that took their place, tensor descriptors (``tl.make_tensor_descriptor``, whose loads read
zeros outside the tensor and whose stores write nothing there), is here instead.
"""

from tests.correct import Answer

A = "ch11_flash_attention"

ANSWERS: list[Answer] = [
    # ------------------------------------------------------------------ flash_attention_forward
    Answer(
        "forward_exp2",
        "flash_attention_forward",
        """
@triton.jit
def attention_forward_exp2(
    Q, K, V, Out, Lse, n_q, n_k, qk_scale, D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr
):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    offs_m = pid_m * BQ + tl.arange(0, BQ)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + bh * n_q * D + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < n_q, other=0.0)
    q = q * qk_scale  # 1/sqrt(d) and log2(e) together, once, before the loop
    m_i = tl.zeros((BQ,), tl.float32) - float("inf")
    l_i = tl.zeros((BQ,), tl.float32)
    acc = tl.zeros((BQ, D), tl.float32)
    hi = n_k
    if CAUSAL:
        hi = tl.minimum(n_k, (pid_m + 1) * BQ + n_k - n_q)  # causal: bottom-right
    for start_n in range(0, hi, BK):
        offs_n = start_n + tl.arange(0, BK)
        kv = bh * n_k * D + offs_n[:, None] * D + offs_d[None, :]
        k = tl.load(K + kv, mask=offs_n[:, None] < n_k, other=0.0)
        v = tl.load(V + kv, mask=offs_n[:, None] < n_k, other=0.0)
        qk = tl.dot(q, tl.trans(k))
        keep = offs_n[None, :] < n_k
        if CAUSAL:
            keep = keep & (offs_m[:, None] + n_k - n_q >= offs_n[None, :])
        qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_new = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row that sees no key: no -inf - (-inf)
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(Out + bh * n_q * D + offs_m[:, None] * D + offs_d[None, :], acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None], mask=offs_m[:, None] < n_q)
    # m_i and log2(l_i) are in base 2: times ln 2, a natural log-sum-exp
    tl.store(Lse + bh * n_q + offs_m, (m_i + tl.log2(l_i)) * 0.6931471805599453, mask=offs_m < n_q)


def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):
    d = q.shape[-1]
    for name, size in {"block_q": block_q, "block_k": block_k, "q": d}.items():
        if size < 16 or (size & (size - 1)) != 0:
            raise ValueError(f"{name} must be a power of two >= 16 (got {size})")
    batch = q.shape[:-2]
    n_q, n_k = q.shape[-2], k.shape[-2]
    qf = q.contiguous().view(-1, n_q, d)
    kf = k.contiguous().view(-1, n_k, d)
    vf = v.contiguous().view(-1, n_k, d)
    out = torch.empty_like(qf)
    lse = torch.empty(qf.shape[0], n_q, device=q.device, dtype=torch.float32)
    grid = (-(-n_q // block_q), qf.shape[0])
    attention_forward_exp2[grid](
        qf, kf, vf, out, lse, n_q, n_k, 1.4426950408889634 / d**0.5, D=d, BQ=block_q, BK=block_k, CAUSAL=causal
    )
    return out.view(q.shape), lse.view(*batch, n_q)
""",
        "exp2 with log2(e) folded into the scale, applied to q before the loop, lse brought back to a natural log "
        "with ln 2; the grid with -(-n // b)",
    ),
    Answer(
        "forward_tensor_descriptors",
        "flash_attention_forward",
        """
@triton.jit
def forward_with_descriptors(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, n_q, n_k, scale,
    HEAD_DIM: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr,
):
    start_m = tl.program_id(0) * BLOCK_Q
    seq = tl.program_id(1)
    # one descriptor per tensor of this sequence: loads outside [0, n) read zeros, stores outside write nothing
    q_desc = tl.make_tensor_descriptor(q_ptr + seq * n_q * HEAD_DIM, [n_q, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_Q, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(k_ptr + seq * n_k * HEAD_DIM, [n_k, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_K, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(v_ptr + seq * n_k * HEAD_DIM, [n_k, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_K, HEAD_DIM])
    o_desc = tl.make_tensor_descriptor(o_ptr + seq * n_q * HEAD_DIM, [n_q, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_Q, HEAD_DIM])
    q = q_desc.load([start_m, 0])
    rows = start_m + tl.arange(0, BLOCK_Q)
    m = tl.full((BLOCK_Q,), float("-inf"), tl.float32)
    l = tl.zeros((BLOCK_Q,), tl.float32)
    acc = tl.zeros((BLOCK_Q, HEAD_DIM), tl.float32)
    stop = n_k
    if CAUSAL:
        stop = tl.minimum(n_k, start_m + BLOCK_Q + n_k - n_q)
    for start_n in range(0, stop, BLOCK_K):
        k = k_desc.load([start_n, 0])
        v = v_desc.load([start_n, 0])
        cols = start_n + tl.arange(0, BLOCK_K)
        s = tl.dot(q, tl.trans(k)) * scale
        ok = cols[None, :] < n_k
        if CAUSAL:
            ok = ok & (cols[None, :] <= rows[:, None] + n_k - n_q)
        s = tl.where(ok, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        m_use = tl.where(m_new > float("-inf"), m_new, 0.0)  # the maximum stays -inf where a row sees no key
        p = tl.exp(s - m_use[:, None])
        correction = tl.exp(m - m_use)
        l = l * correction + tl.sum(p, axis=1)
        acc = acc * correction[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    o_desc.store([start_m, 0], acc / tl.where(l > 0, l, 1.0)[:, None])
    tl.store(lse_ptr + seq * n_q + rows, m + tl.log(l), mask=rows < n_q)


def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):
    def power_of_two(n):
        return n >= 16 and n == triton.next_power_of_2(n)

    if not power_of_two(block_q):
        raise ValueError(f"block_q={block_q} is not a power of two of at least 16")
    if not power_of_two(block_k):
        raise ValueError(f"block_k={block_k} is not a power of two of at least 16")
    if not power_of_two(q.shape[-1]):
        raise ValueError(f"the head size of q ({q.shape[-1]}) is not a power of two of at least 16")
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    q3, k3, v3 = (t.reshape(-1, t.shape[-2], d).contiguous() for t in (q, k, v))
    o = torch.empty_like(q3)
    lse = torch.empty(q3.shape[:2], dtype=torch.float32)
    forward_with_descriptors[(triton.cdiv(n_q, block_q), q3.shape[0])](
        q3, k3, v3, o, lse, n_q, n_k, d**-0.5, HEAD_DIM=d, BLOCK_Q=block_q, BLOCK_K=block_k, CAUSAL=causal
    )
    return o.reshape(q.shape), lse.reshape(q.shape[:-1])
""",
        "tensor descriptors (tl.make_tensor_descriptor, Triton's successor of block pointers): the tails padded and "
        "clipped by the descriptors, not masked by hand",
    ),
    Answer(
        "forward_full_blocks_then_diagonal",
        "flash_attention_forward",
        """
@triton.jit
def online_step(q, k, v, scores_ok, top, total, acc, scale, MASKED: tl.constexpr):
    scores = tl.dot(q, tl.trans(k)) * scale
    if MASKED:
        scores = tl.where(scores_ok, scores, float("-inf"))
    new_top = tl.maximum(top, tl.max(scores, axis=1))
    shift = tl.where(new_top == float("-inf"), 0.0, new_top)  # -inf for a row that sees no key yet
    weights = tl.exp(scores - shift[:, None])
    rescale = tl.exp(top - shift)
    return new_top, total * rescale + tl.sum(weights, axis=1), acc * rescale[:, None] + tl.dot(weights.to(v.dtype), v)


@triton.jit
def forward_split_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_queries, n_keys, scale,
    HEAD_DIM: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr,
):
    block = tl.program_id(0)
    seq = tl.program_id(1)
    rows = block * BLOCK_Q + tl.arange(0, BLOCK_Q)
    cols = tl.arange(0, HEAD_DIM)
    q_at = seq * n_queries * HEAD_DIM + rows[:, None] * HEAD_DIM + cols[None, :]
    q = tl.load(q_ptr + q_at, mask=rows[:, None] < n_queries, other=0.0)
    top = tl.full((BLOCK_Q,), float("-inf"), tl.float32)
    total = tl.zeros((BLOCK_Q,), tl.float32)
    acc = tl.zeros((BLOCK_Q, HEAD_DIM), tl.float32)
    # the blocks of keys that every query of this block sees whole and that lie inside the keys: no mask at all
    if CAUSAL:  # aligned bottom-right: query i sees the keys j <= i + n_keys - n_queries
        stop = tl.minimum(n_keys, (block + 1) * BLOCK_Q + n_keys - n_queries)
        full = tl.maximum(tl.minimum(block * BLOCK_Q + n_keys - n_queries, n_keys), 0) // BLOCK_K * BLOCK_K
    else:
        stop = n_keys
        full = n_keys // BLOCK_K * BLOCK_K
    for start in range(0, full, BLOCK_K):
        keys = start + tl.arange(0, BLOCK_K)
        kv_at = seq * n_keys * HEAD_DIM + keys[:, None] * HEAD_DIM + cols[None, :]
        k = tl.load(k_ptr + kv_at)
        v = tl.load(v_ptr + kv_at)
        top, total, acc = online_step(q, k, v, 0, top, total, acc, scale, MASKED=False)
    # then the diagonal block(s) and the tail of the keys, masked
    for start in range(full, stop, BLOCK_K):
        keys = start + tl.arange(0, BLOCK_K)
        kv_at = seq * n_keys * HEAD_DIM + keys[:, None] * HEAD_DIM + cols[None, :]
        k = tl.load(k_ptr + kv_at, mask=keys[:, None] < n_keys, other=0.0)
        v = tl.load(v_ptr + kv_at, mask=keys[:, None] < n_keys, other=0.0)
        ok = keys[None, :] < n_keys
        if CAUSAL:
            ok = ok & (keys[None, :] <= rows[:, None] + n_keys - n_queries)
        top, total, acc = online_step(q, k, v, ok, top, total, acc, scale, MASKED=True)
    tl.store(out_ptr + q_at, acc / tl.where(total > 0, total, 1.0)[:, None], mask=rows[:, None] < n_queries)
    tl.store(lse_ptr + seq * n_queries + rows, top + tl.log(total), mask=rows < n_queries)


def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):
    for name, size in [("block_q", block_q), ("block_k", block_k), ("q", q.size(-1))]:
        if size < 16 or math.log2(size) != int(math.log2(size)):
            raise ValueError(f"{name} has size {size}: it must be a power of two, at least 16")
    shape = q.shape
    n_queries, d = shape[-2], shape[-1]
    n_keys = k.shape[-2]
    q = q.reshape(-1, n_queries, d).contiguous()
    k = k.reshape(-1, n_keys, d).contiguous()
    v = v.reshape(-1, n_keys, d).contiguous()
    out = torch.zeros_like(q)
    lse = torch.zeros(q.shape[0], n_queries)
    forward_split_kernel[(triton.cdiv(n_queries, block_q), q.shape[0])](
        q, k, v, out, lse, n_queries, n_keys, 1.0 / math.sqrt(d),
        HEAD_DIM=d, BLOCK_Q=block_q, BLOCK_K=block_k, CAUSAL=causal,
    )
    return out.reshape(shape), lse.reshape(shape[:-1])
""",
        "the loop split in two: the blocks of keys that need no mask (loaded unmasked, not masked in the scores), "
        "then the diagonal and tail blocks with the masks; the step a @triton.jit helper",
    ),
    Answer(
        "forward_strides",
        "flash_attention_forward",
        """
@triton.jit
def strided_forward(
    Q, K, V, O, L,
    sq_b, sq_l, sq_d, sk_b, sk_l, sk_d, sv_b, sv_l, sv_d, so_b, so_l, so_d,
    n_q, n_k, scale,
    D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr,
):
    i = tl.program_id(0) * BLOCK_Q + tl.arange(0, BLOCK_Q)
    b = tl.program_id(1)
    e = tl.arange(0, D)
    q = tl.load(Q + b * sq_b + i[:, None] * sq_l + e[None, :] * sq_d, mask=i[:, None] < n_q, other=0.0)
    q = q.to(tl.float32)  # every tile in float32, whatever the inputs' dtype: slower on a GPU, as accurate
    m = tl.full([BLOCK_Q], -float("inf"), dtype=tl.float32)
    s = tl.zeros([BLOCK_Q], dtype=tl.float32)
    o = tl.zeros([BLOCK_Q, D], dtype=tl.float32)
    n_visit = n_k
    if CAUSAL:
        n_visit = tl.minimum(n_k, tl.program_id(0) * BLOCK_Q + BLOCK_Q + n_k - n_q)
    for j0 in tl.range(0, n_visit, BLOCK_K):
        j = j0 + tl.arange(0, BLOCK_K)
        k = tl.load(K + b * sk_b + j[:, None] * sk_l + e[None, :] * sk_d, mask=j[:, None] < n_k, other=0.0)
        v = tl.load(V + b * sv_b + j[:, None] * sv_l + e[None, :] * sv_d, mask=j[:, None] < n_k, other=0.0)
        k, v = k.to(tl.float32), v.to(tl.float32)
        # no tl.dot: the products of a block broadcast to [BLOCK_Q, BLOCK_K, D] and summed over d (the
        # tile of products is block_q x block_k x d numbers, never the whole matrix of scores)
        x = tl.sum(q[:, None, :] * k[None, :, :], axis=2) * scale
        if CAUSAL:
            x = tl.where((j[None, :] < n_k) & (j[None, :] <= i[:, None] + n_k - n_q), x, -float("inf"))
        else:
            x = tl.where(j[None, :] < n_k, x, -float("inf"))
        m_next = tl.maximum(tl.maximum(m, tl.max(x, axis=1)), -1e30)  # finite even where a row sees no key
        w = tl.exp(x - m_next[:, None])
        shrink = tl.exp(m - m_next)
        s = shrink * s + tl.sum(w, axis=1)
        o = shrink[:, None] * o + tl.sum(w[:, :, None] * v[None, :, :], axis=1)
        m = m_next
    o = o * (1.0 / tl.where(s > 0, s, 1.0))[:, None]  # 0 for a row that sees no key
    tl.store(O + b * so_b + i[:, None] * so_l + e[None, :] * so_d, o, mask=i[:, None] < n_q)
    tl.store(L + b * n_q + i, m + tl.log(s), mask=i < n_q)


def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):
    checks = {"block_q": block_q, "block_k": block_k, "q": q.shape[-1]}
    bad = [name for name, n in checks.items() if n < 16 or bin(n).count("1") != 1]
    if bad:
        raise ValueError(f"{bad[0]}: needs a power of two of at least 16, got {checks[bad[0]]}")
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    # views where the layout allows, with their strides passed to the kernel: no contiguous copies
    q3, k3, v3 = q.reshape(-1, n_q, d), k.reshape(-1, n_k, d), v.reshape(-1, n_k, d)
    out = torch.empty(q3.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(q3.shape[:2], dtype=torch.float32, device=q.device)
    grid = lambda meta: (triton.cdiv(n_q, meta["BLOCK_Q"]), q3.shape[0])
    strided_forward[grid](
        q3, k3, v3, out, lse, *q3.stride(), *k3.stride(), *v3.stride(), *out.stride(), n_q, n_k, d**-0.5,
        D=d, BLOCK_Q=block_q, BLOCK_K=block_k, CAUSAL=causal,
    )
    return out.view(q.shape), lse.view(q.shape[:-1])
""",
        "the strides passed to the kernel instead of contiguous copies, tl.range, a grid given as a function of the "
        "meta-parameters, one tl.where for both masks; every tile cast up to float32 in the kernel, the output cast "
        "down as it is stored; no tl.dot: the scores and the weighted sum of the values by broadcast products "
        "and tl.sum",
    ),
    Answer(
        "forward_padded_inputs",
        "flash_attention_forward",
        """
import torch.nn.functional as F


@triton.jit
def padded_forward(
    q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, rows_q, rows_k, n_keys, shift, scale,
    D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    block, seq = tl.program_id(0), tl.program_id(1)
    rows = block * BQ + tl.arange(0, BQ)
    cols = tl.arange(0, D)
    q = tl.load(q_ptr + seq * rows_q * D + rows[:, None] * D + cols[None, :])  # padded: no mask needed
    m = tl.full((BQ,), float("-inf"), tl.float32)
    l = tl.zeros((BQ,), tl.float32)
    acc = tl.zeros((BQ, D), tl.float32)
    end = rows_k
    if CAUSAL:
        end = tl.minimum(rows_k, (block + 1) * BQ + shift)
    for start in range(0, end, BK):
        keys = start + tl.arange(0, BK)
        at = seq * rows_k * D + keys[:, None] * D + cols[None, :]
        s = tl.dot(q, tl.trans(tl.load(k_ptr + at))) * scale
        seen = keys[None, :] < n_keys  # the padding's zeros are no keys
        if CAUSAL:
            seen = seen & (keys[None, :] <= rows[:, None] + shift)
        s = tl.where(seen, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        # the weights zeroed by the mask itself, and no rescaling while the maximum stays put (-inf included): a
        # row that sees no key keeps l = 0 and acc = 0
        p = tl.where(seen, tl.exp(s - m_new[:, None]), 0.0)
        alpha = tl.where(m_new == m, 1.0, tl.exp(m - m_new))
        l = l * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v_ptr.dtype.element_ty), tl.load(v_ptr + at))
        m = m_new
    tl.store(out_ptr + seq * rows_q * D + rows[:, None] * D + cols[None, :], acc / tl.where(l == 0.0, 1.0, l)[:, None])
    tl.store(lse_ptr + seq * rows_q + rows, m + tl.log(l))


def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):
    for name, size in (("block_q", block_q), ("block_k", block_k), ("q", q.shape[-1])):
        if size < 16 or size & (size - 1):
            raise ValueError(f"{name} must be a power of two of at least 16, got {size}")
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    # every sequence padded with zeros to whole blocks: the kernel loads and stores without masks
    q3 = F.pad(q.reshape(-1, n_q, d), (0, 0, 0, -n_q % block_q))
    k3, v3 = (F.pad(t.reshape(-1, n_k, d), (0, 0, 0, -n_k % block_k)) for t in (k, v))
    out = torch.empty_like(q3)
    lse = torch.empty(q3.shape[:2], dtype=torch.float32)
    grid = (q3.shape[1] // block_q, q3.shape[0])
    padded_forward[grid](
        q3, k3, v3, out, lse, q3.shape[1], k3.shape[1], n_k, n_k - n_q, 1 / math.sqrt(d),
        D=d, BQ=block_q, BK=block_k, CAUSAL=causal,
    )
    return out[:, :n_q].reshape(q.shape), lse[:, :n_q].reshape(q.shape[:-1])
""",
        "every sequence padded with zeros to whole blocks (F.pad), so that the kernel loads and stores without "
        "masks, the padding's keys given the score -inf, the outputs sliced back",
    ),
    # ------------------------------------------------------------------ flash_attention_backward
    Answer(
        "backward_delta_kernel",
        "flash_attention_backward",
        """
@triton.jit
def delta_kernel(o_ptr, do_ptr, delta_ptr, n_rows, D: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    at = rows[:, None] * D + cols[None, :]
    o = tl.load(o_ptr + at, mask=rows[:, None] < n_rows, other=0.0)
    do = tl.load(do_ptr + at, mask=rows[:, None] < n_rows, other=0.0)
    tl.store(delta_ptr + rows, tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1), mask=rows < n_rows)


@triton.jit
def dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV, n_q, n_k, sm_scale,
    D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    start_n = tl.program_id(0) * BK
    off = tl.program_id(1)
    offs_n = start_n + tl.arange(0, BK)
    offs_d = tl.arange(0, D)
    kv = off * n_k * D + offs_n[:, None] * D + offs_d[None, :]
    k = tl.load(K + kv, mask=offs_n[:, None] < n_k, other=0.0)
    v = tl.load(V + kv, mask=offs_n[:, None] < n_k, other=0.0)
    dk = tl.zeros([BK, D], dtype=tl.float32)
    dv = tl.zeros([BK, D], dtype=tl.float32)
    lo = 0
    if CAUSAL:
        lo = tl.maximum(start_n - (n_k - n_q), 0) // BQ * BQ  # the first query that sees key start_n
    for start_m in range(lo, n_q, BQ):
        offs_m = start_m + tl.arange(0, BQ)
        qo = off * n_q * D + offs_m[:, None] * D + offs_d[None, :]
        q = tl.load(Q + qo, mask=offs_m[:, None] < n_q, other=0.0)
        do = tl.load(DO + qo, mask=offs_m[:, None] < n_q, other=0.0)
        lse = tl.load(LSE + off * n_q + offs_m, mask=offs_m < n_q, other=float("inf"))
        delta = tl.load(DELTA + off * n_q + offs_m, mask=offs_m < n_q, other=0.0)
        p = tl.exp(tl.dot(q, tl.trans(k)) * sm_scale - lse[:, None])  # 0 for the rows past the end (lse = inf)
        keep = offs_n[None, :] < n_k
        if CAUSAL:
            keep = keep & (offs_m[:, None] + n_k - n_q >= offs_n[None, :])
        p = tl.where(keep, p, 0.0)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None]) * sm_scale
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q)
    tl.store(DK + kv, dk, mask=offs_n[:, None] < n_k)
    tl.store(DV + kv, dv, mask=offs_n[:, None] < n_k)


@triton.jit
def dq_kernel(
    Q, K, V, DO, LSE, DELTA, DQ, n_q, n_k, sm_scale,
    D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    start_m = tl.program_id(0) * BQ
    off = tl.program_id(1)
    offs_m = start_m + tl.arange(0, BQ)
    offs_d = tl.arange(0, D)
    qo = off * n_q * D + offs_m[:, None] * D + offs_d[None, :]
    q = tl.load(Q + qo, mask=offs_m[:, None] < n_q, other=0.0)
    do = tl.load(DO + qo, mask=offs_m[:, None] < n_q, other=0.0)
    lse = tl.load(LSE + off * n_q + offs_m, mask=offs_m < n_q, other=0.0)
    delta = tl.load(DELTA + off * n_q + offs_m, mask=offs_m < n_q, other=0.0)
    dq = tl.zeros([BQ, D], dtype=tl.float32)
    hi = n_k
    if CAUSAL:
        hi = tl.minimum(n_k, start_m + BQ + n_k - n_q)
    for start_n in range(0, hi, BK):
        offs_n = start_n + tl.arange(0, BK)
        kv = off * n_k * D + offs_n[:, None] * D + offs_d[None, :]
        k = tl.load(K + kv, mask=offs_n[:, None] < n_k, other=0.0)
        v = tl.load(V + kv, mask=offs_n[:, None] < n_k, other=0.0)
        keep = offs_n[None, :] < n_k
        if CAUSAL:
            keep = keep & (offs_m[:, None] + n_k - n_q >= offs_n[None, :])
        p = tl.where(keep, tl.exp(tl.dot(q, tl.trans(k)) * sm_scale - lse[:, None]), 0.0)
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    tl.store(DQ + qo, dq * sm_scale, mask=offs_m[:, None] < n_q)


def flash_attention_backward(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
    for name, size in (("block_q", block_q), ("block_k", block_k), ("q", q.shape[-1])):
        if size < 16 or size & (size - 1):
            raise ValueError(f"{name} must be a power of two >= 16, not {size}")
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    q3 = q.reshape(-1, n_q, d).contiguous()
    k3 = k.reshape(-1, n_k, d).contiguous()
    v3 = v.reshape(-1, n_k, d).contiguous()
    o3 = output.reshape(-1, n_q, d).contiguous()
    do3 = grad_output.reshape(-1, n_q, d).contiguous()
    lse2 = lse.reshape(-1, n_q).contiguous()
    rows = q3.shape[0] * n_q
    delta = torch.empty(q3.shape[0], n_q, dtype=torch.float32)
    delta_kernel[(triton.cdiv(rows, 32),)](o3, do3, delta, rows, D=d, BLOCK=32)  # Δ in a kernel of its own
    dq, dk, dv = torch.empty_like(q3), torch.empty_like(k3), torch.empty_like(v3)
    scale = d**-0.5
    meta = dict(D=d, BQ=block_q, BK=block_k, CAUSAL=causal)
    dkdv_kernel[(triton.cdiv(n_k, block_k), q3.shape[0])](q3, k3, v3, do3, lse2, delta, dk, dv, n_q, n_k, scale, **meta)
    dq_kernel[(triton.cdiv(n_q, block_q), q3.shape[0])](q3, k3, v3, do3, lse2, delta, dq, n_q, n_k, scale, **meta)
    return dq.view(q.shape), dk.view(k.shape), dv.view(v.shape)
""",
        "Δ computed in a Triton kernel of its own over all the rows; the scale folded into dS; lse = inf past the "
        "end instead of a mask on P's rows",
    ),
    Answer(
        "backward_one_kernel_atomic_dq",
        "flash_attention_backward",
        """
@triton.jit
def fused_backward(
    q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, dk_ptr, dv_ptr, n_q, n_k, scale,
    D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    kb = tl.program_id(0)
    seq = tl.program_id(1)
    keys = kb * BK + tl.arange(0, BK)
    dims = tl.arange(0, D)
    k_ok = keys < n_k
    kv_at = seq * n_k * D + keys[:, None] * D + dims[None, :]
    k = tl.load(k_ptr + kv_at, mask=k_ok[:, None], other=0.0)
    v = tl.load(v_ptr + kv_at, mask=k_ok[:, None], other=0.0)
    dk = tl.zeros((BK, D), tl.float32)
    dv = tl.zeros((BK, D), tl.float32)
    first = 0
    if CAUSAL:
        first = tl.maximum(kb * BK - (n_k - n_q), 0) // BQ * BQ
    for start in range(first, n_q, BQ):
        rows = start + tl.arange(0, BQ)
        r_ok = rows < n_q
        q_at = seq * n_q * D + rows[:, None] * D + dims[None, :]
        q = tl.load(q_ptr + q_at, mask=r_ok[:, None], other=0.0)
        do = tl.load(do_ptr + q_at, mask=r_ok[:, None], other=0.0)
        lse = tl.load(lse_ptr + seq * n_q + rows, mask=r_ok, other=0.0)
        delta = tl.load(delta_ptr + seq * n_q + rows, mask=r_ok, other=0.0)
        seen = r_ok[:, None] & k_ok[None, :]
        if CAUSAL:
            seen = seen & (keys[None, :] <= rows[:, None] + n_k - n_q)
        p = tl.where(seen, tl.exp(tl.dot(q, tl.trans(k)) * scale - lse[:, None]), 0.0)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do)
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q)
        # this block's share of dQ: other programs add theirs to the same rows, so atomically
        tl.atomic_add(dq_ptr + q_at, tl.dot(ds.to(k.dtype), k) * scale, mask=r_ok[:, None])
    tl.store(dk_ptr + kv_at, dk * scale, mask=k_ok[:, None])
    tl.store(dv_ptr + kv_at, dv, mask=k_ok[:, None])


def flash_attention_backward(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
    for name, size in (("block_q", block_q), ("block_k", block_k), ("q", q.shape[-1])):
        if size < 16 or size != 1 << (size.bit_length() - 1):
            raise ValueError(f"{name}={size}: not a power of two of at least 16")
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    flat = lambda t, n: t.reshape(-1, n, d).contiguous()
    q3, k3, v3, do3 = flat(q, n_q), flat(k, n_k), flat(v, n_k), flat(grad_output, n_q)
    delta = torch.einsum("...qd,...qd->...q", grad_output.float(), output.float()).reshape(-1, n_q).contiguous()
    lse2 = lse.reshape(-1, n_q).contiguous()
    dq = torch.zeros(q3.shape, dtype=torch.float32)  # summed into by atomic adds: starts at zero
    dk, dv = torch.empty_like(k3), torch.empty_like(v3)
    fused_backward[(triton.cdiv(n_k, block_k), q3.shape[0])](
        q3, k3, v3, do3, lse2, delta, dq, dk, dv, n_q, n_k, 1 / math.sqrt(d),
        D=d, BQ=block_q, BK=block_k, CAUSAL=causal,
    )
    return dq.to(q.dtype).reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)
""",
        "one kernel for dK, dV and dQ, dQ summed across programs with tl.atomic_add into zeros; Δ with einsum",
    ),
    Answer(
        "backward_exp2_unaligned_start",
        "flash_attention_backward",
        """
LOG2E = 1.4426950408889634


@triton.jit
def keys_backward(
    q_ptr, k_ptr, v_ptr, go_ptr, lse_ptr, delta_ptr, gk_ptr, gv_ptr, n_q, n_k, scale2, scale,
    HEAD_DIM: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr,
):
    block, seq = tl.program_id(0), tl.program_id(1)
    keys = block * BLOCK_K + tl.arange(0, BLOCK_K)
    cols = tl.arange(0, HEAD_DIM)
    kv_at = seq * n_k * HEAD_DIM + keys[:, None] * HEAD_DIM + cols[None, :]
    k = tl.load(k_ptr + kv_at, mask=keys[:, None] < n_k, other=0.0)
    v = tl.load(v_ptr + kv_at, mask=keys[:, None] < n_k, other=0.0)
    gk = tl.zeros((BLOCK_K, HEAD_DIM), tl.float32)
    gv = tl.zeros((BLOCK_K, HEAD_DIM), tl.float32)
    # causal: the queries before the first one that sees this block's first key (query key - (n_k - n_q)) see
    # none of its keys; start at that query itself, whatever the blocks of queries: every query from there on is
    # visited once
    first = tl.maximum(block * BLOCK_K - (n_k - n_q), 0) if CAUSAL else 0
    for start in range(first, n_q, BLOCK_Q):
        rows = start + tl.arange(0, BLOCK_Q)
        q_at = seq * n_q * HEAD_DIM + rows[:, None] * HEAD_DIM + cols[None, :]
        q = tl.load(q_ptr + q_at, mask=rows[:, None] < n_q, other=0.0)
        go = tl.load(go_ptr + q_at, mask=rows[:, None] < n_q, other=0.0)
        lse2 = tl.load(lse_ptr + seq * n_q + rows, mask=rows < n_q, other=0.0) * 1.4426950408889634
        delta = tl.load(delta_ptr + seq * n_q + rows, mask=rows < n_q, other=0.0)
        ok = (rows[:, None] < n_q) & (keys[None, :] < n_k)
        if CAUSAL:
            ok = ok & (keys[None, :] <= rows[:, None] + n_k - n_q)
        p = tl.where(ok, tl.exp2(tl.dot(q, tl.trans(k)) * scale2 - lse2[:, None]), 0.0)
        gv += tl.dot(tl.trans(p.to(go.dtype)), go)
        ds = p * (tl.dot(go, tl.trans(v)) - delta[:, None])
        gk += tl.dot(tl.trans(ds.to(q.dtype)), q)
    tl.store(gk_ptr + kv_at, gk * scale, mask=keys[:, None] < n_k)
    tl.store(gv_ptr + kv_at, gv, mask=keys[:, None] < n_k)


@triton.jit
def queries_backward(
    q_ptr, k_ptr, v_ptr, go_ptr, lse_ptr, delta_ptr, gq_ptr, n_q, n_k, scale2, scale,
    HEAD_DIM: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr,
):
    block, seq = tl.program_id(0), tl.program_id(1)
    rows = block * BLOCK_Q + tl.arange(0, BLOCK_Q)
    cols = tl.arange(0, HEAD_DIM)
    q_at = seq * n_q * HEAD_DIM + rows[:, None] * HEAD_DIM + cols[None, :]
    q = tl.load(q_ptr + q_at, mask=rows[:, None] < n_q, other=0.0)
    go = tl.load(go_ptr + q_at, mask=rows[:, None] < n_q, other=0.0)
    lse2 = tl.load(lse_ptr + seq * n_q + rows, mask=rows < n_q, other=0.0) * 1.4426950408889634
    delta = tl.load(delta_ptr + seq * n_q + rows, mask=rows < n_q, other=0.0)
    gq = tl.zeros((BLOCK_Q, HEAD_DIM), tl.float32)
    last = n_k
    if CAUSAL:
        last = tl.minimum(n_k, (block + 1) * BLOCK_Q + n_k - n_q)
    for start in range(0, last, BLOCK_K):
        keys = start + tl.arange(0, BLOCK_K)
        kv_at = seq * n_k * HEAD_DIM + keys[:, None] * HEAD_DIM + cols[None, :]
        k = tl.load(k_ptr + kv_at, mask=keys[:, None] < n_k, other=0.0)
        v = tl.load(v_ptr + kv_at, mask=keys[:, None] < n_k, other=0.0)
        ok = (rows[:, None] < n_q) & (keys[None, :] < n_k)
        if CAUSAL:
            ok = ok & (keys[None, :] <= rows[:, None] + n_k - n_q)
        p = tl.where(ok, tl.exp2(tl.dot(q, tl.trans(k)) * scale2 - lse2[:, None]), 0.0)
        ds = p * (tl.dot(go, tl.trans(v)) - delta[:, None])
        gq += tl.dot(ds.to(k.dtype), k)
    tl.store(gq_ptr + q_at, gq * scale, mask=rows[:, None] < n_q)


def flash_attention_backward(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
    sizes = {"block_q": block_q, "block_k": block_k, "q": q.shape[-1]}
    for name, size in sizes.items():
        if size < 16 or triton.next_power_of_2(size) != size:
            raise ValueError(f"{name} must be a power of two of at least 16; got {size}")
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    q3, go3 = q.reshape(-1, n_q, d).contiguous(), grad_output.reshape(-1, n_q, d).contiguous()
    k3, v3 = k.reshape(-1, n_k, d).contiguous(), v.reshape(-1, n_k, d).contiguous()
    lse2 = lse.reshape(-1, n_q).contiguous()
    delta = (grad_output.float() * output.float()).sum(dim=-1).reshape(-1, n_q).contiguous()
    gq, gk, gv = torch.empty_like(q3), torch.empty_like(k3), torch.empty_like(v3)
    scale = 1.0 / math.sqrt(d)
    meta = {"HEAD_DIM": d, "BLOCK_Q": block_q, "BLOCK_K": block_k, "CAUSAL": causal}
    args = (lse2, delta)
    keys_backward[(-(-n_k // block_k), q3.shape[0])](
        q3, k3, v3, go3, *args, gk, gv, n_q, n_k, scale * LOG2E, scale, **meta
    )
    queries_backward[(-(-n_q // block_q), q3.shape[0])](q3, k3, v3, go3, *args, gq, n_q, n_k, scale * LOG2E, scale, **meta)
    return gq.reshape(q.shape), gk.reshape(k.shape), gv.reshape(v.shape)
""",
        "P recomputed with exp2 (log2(e) in the scale and in lse); the keys' kernel starts at the first query that "
        "sees its first key, not at the start of a block of queries",
    ),
    Answer(
        "backward_transposed_strides",
        "flash_attention_backward",
        """
@triton.jit
def bwd_kv_transposed(
    Q, K, V, dO, LSE, Delta, dK, dV, stride_b, stride_l, kstride_b, kstride_l, n_q, n_k, scale,
    D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    j = tl.program_id(0) * BK + tl.arange(0, BK)
    b = tl.program_id(1)
    e = tl.arange(0, D)
    k = tl.load(K + b * kstride_b + j[:, None] * kstride_l + e[None, :], mask=j[:, None] < n_k, other=0.0)
    v = tl.load(V + b * kstride_b + j[:, None] * kstride_l + e[None, :], mask=j[:, None] < n_k, other=0.0)
    dk = tl.zeros((BK, D), tl.float32)
    dv = tl.zeros((BK, D), tl.float32)
    i0 = 0
    if CAUSAL:
        i0 = tl.maximum(tl.program_id(0) * BK - (n_k - n_q), 0)
        i0 = i0 - i0 % BQ
    for start in range(i0, n_q, BQ):
        i = start + tl.arange(0, BQ)
        q = tl.load(Q + b * stride_b + i[:, None] * stride_l + e[None, :], mask=i[:, None] < n_q, other=0.0)
        do = tl.load(dO + b * stride_b + i[:, None] * stride_l + e[None, :], mask=i[:, None] < n_q, other=0.0)
        lse = tl.load(LSE + b * n_q + i, mask=i < n_q, other=0.0)
        delta = tl.load(Delta + b * n_q + i, mask=i < n_q, other=0.0)
        # everything transposed: keys along the rows, queries along the columns
        s_t = tl.dot(k, tl.trans(q)) * scale
        valid = (j[:, None] < n_k) & (i[None, :] < n_q)
        if CAUSAL:
            valid = valid & (j[:, None] <= i[None, :] + n_k - n_q)
        p_t = tl.where(valid, tl.exp(s_t - lse[None, :]), 0.0)
        dv = dv + tl.dot(p_t.to(do.dtype), do)
        dp_t = tl.dot(v, tl.trans(do))
        ds_t = p_t * (dp_t - delta[None, :])
        dk = dk + tl.dot(ds_t.to(q.dtype), q)
    dk = dk * scale
    tl.store(dK + b * kstride_b + j[:, None] * kstride_l + e[None, :], dk, mask=j[:, None] < n_k)
    tl.store(dV + b * kstride_b + j[:, None] * kstride_l + e[None, :], dv, mask=j[:, None] < n_k)


@triton.jit
def bwd_q_plain(
    Q, K, V, dO, LSE, Delta, dQ, stride_b, stride_l, kstride_b, kstride_l, n_q, n_k, scale,
    D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    i = tl.program_id(0) * BQ + tl.arange(0, BQ)
    b = tl.program_id(1)
    e = tl.arange(0, D)
    q = tl.load(Q + b * stride_b + i[:, None] * stride_l + e[None, :], mask=i[:, None] < n_q, other=0.0)
    do = tl.load(dO + b * stride_b + i[:, None] * stride_l + e[None, :], mask=i[:, None] < n_q, other=0.0)
    lse = tl.load(LSE + b * n_q + i, mask=i < n_q, other=0.0)
    delta = tl.load(Delta + b * n_q + i, mask=i < n_q, other=0.0)
    dq = tl.zeros((BQ, D), tl.float32)
    j_end = n_k
    if CAUSAL:
        j_end = tl.minimum(n_k, tl.program_id(0) * BQ + BQ + n_k - n_q)
    for start in range(0, j_end, BK):
        j = start + tl.arange(0, BK)
        k = tl.load(K + b * kstride_b + j[:, None] * kstride_l + e[None, :], mask=j[:, None] < n_k, other=0.0)
        v = tl.load(V + b * kstride_b + j[:, None] * kstride_l + e[None, :], mask=j[:, None] < n_k, other=0.0)
        valid = (i[:, None] < n_q) & (j[None, :] < n_k)
        if CAUSAL:
            valid = valid & (j[None, :] <= i[:, None] + n_k - n_q)
        p = tl.where(valid, tl.exp(tl.dot(q, tl.trans(k)) * scale - lse[:, None]), 0.0)
        dq += tl.dot((p * (tl.dot(do, tl.trans(v)) - delta[:, None])).to(k.dtype), k)
    tl.store(dQ + b * stride_b + i[:, None] * stride_l + e[None, :], dq * scale, mask=i[:, None] < n_q)


def flash_attention_backward(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
    for what, n in (("block_q", block_q), ("block_k", block_k), ("q", q.shape[-1])):
        if n < 16 or n & (n - 1) != 0:
            raise ValueError("%s: %d is not a power of two of at least 16" % (what, n))
    *lead, n_q, d = q.shape
    n_k = k.shape[-2]
    q3, do3 = q.reshape(-1, n_q, d).contiguous(), grad_output.reshape(-1, n_q, d).contiguous()
    k3, v3 = k.reshape(-1, n_k, d).contiguous(), v.reshape(-1, n_k, d).contiguous()
    delta = (output.double() * grad_output.double()).sum(-1).float().reshape(-1, n_q).contiguous()
    lse2 = lse.reshape(-1, n_q).contiguous()
    dq, dk, dv = torch.zeros_like(q3), torch.zeros_like(k3), torch.zeros_like(v3)
    strides = (q3.stride(0), q3.stride(1), k3.stride(0), k3.stride(1))
    common = (n_q, n_k, 1.0 / math.sqrt(d))
    meta = dict(D=d, BQ=block_q, BK=block_k, CAUSAL=causal)
    bwd_kv_transposed[(triton.cdiv(n_k, block_k), q3.shape[0])](q3, k3, v3, do3, lse2, delta, dk, dv, *strides, *common, **meta)
    bwd_q_plain[(triton.cdiv(n_q, block_q), q3.shape[0])](q3, k3, v3, do3, lse2, delta, dq, *strides, *common, **meta)
    return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)
""",
        "the keys' kernel in transposed form (Sᵀ = k qᵀ, Pᵀ, dSᵀ, keys along the rows), strides passed to the "
        "kernels, Δ computed in float64",
    ),
    Answer(
        "backward_broadcast_products",
        "flash_attention_backward",
        """
@triton.jit
def keys_by_sums(
    Q, K, V, dO, LSE, DELTA, dK, dV, n_q, n_k, scale,
    D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    j = tl.program_id(0) * BK + tl.arange(0, BK)
    b = tl.program_id(1)
    e = tl.arange(0, D)
    kv = b * n_k * D + j[:, None] * D + e[None, :]
    k = tl.load(K + kv, mask=j[:, None] < n_k, other=0.0).to(tl.float32)
    v = tl.load(V + kv, mask=j[:, None] < n_k, other=0.0).to(tl.float32)
    dk = tl.zeros((BK, D), tl.float32)
    dv = tl.zeros((BK, D), tl.float32)
    lo = 0
    if CAUSAL:
        lo = tl.maximum(tl.program_id(0) * BK - (n_k - n_q), 0) // BQ * BQ
    for i0 in range(lo, n_q, BQ):
        i = i0 + tl.arange(0, BQ)
        at = b * n_q * D + i[:, None] * D + e[None, :]
        q = tl.load(Q + at, mask=i[:, None] < n_q, other=0.0).to(tl.float32)
        do = tl.load(dO + at, mask=i[:, None] < n_q, other=0.0).to(tl.float32)
        lse = tl.load(LSE + b * n_q + i, mask=i < n_q, other=0.0)
        delta = tl.load(DELTA + b * n_q + i, mask=i < n_q, other=0.0)
        seen = (i[:, None] < n_q) & (j[None, :] < n_k)
        if CAUSAL:
            seen = seen & (j[None, :] <= i[:, None] + n_k - n_q)
        # every product a broadcast over [BQ, BK, D] summed along one axis: no tl.dot
        p = tl.where(seen, tl.exp(tl.sum(q[:, None, :] * k[None, :, :], axis=2) * scale - lse[:, None]), 0.0)
        dv += tl.sum(p[:, :, None] * do[:, None, :], axis=0)
        ds = p * (tl.sum(do[:, None, :] * v[None, :, :], axis=2) - delta[:, None])
        dk += tl.sum(ds[:, :, None] * q[:, None, :], axis=0)
    tl.store(dK + kv, dk * scale, mask=j[:, None] < n_k)
    tl.store(dV + kv, dv, mask=j[:, None] < n_k)


@triton.jit
def queries_by_sums(
    Q, K, V, dO, LSE, DELTA, dQ, n_q, n_k, scale,
    D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    i = tl.program_id(0) * BQ + tl.arange(0, BQ)
    b = tl.program_id(1)
    e = tl.arange(0, D)
    at = b * n_q * D + i[:, None] * D + e[None, :]
    q = tl.load(Q + at, mask=i[:, None] < n_q, other=0.0).to(tl.float32)
    do = tl.load(dO + at, mask=i[:, None] < n_q, other=0.0).to(tl.float32)
    lse = tl.load(LSE + b * n_q + i, mask=i < n_q, other=0.0)
    delta = tl.load(DELTA + b * n_q + i, mask=i < n_q, other=0.0)
    dq = tl.zeros((BQ, D), tl.float32)
    hi = n_k
    if CAUSAL:
        hi = tl.minimum(n_k, (tl.program_id(0) + 1) * BQ + n_k - n_q)
    for j0 in range(0, hi, BK):
        j = j0 + tl.arange(0, BK)
        kv = b * n_k * D + j[:, None] * D + e[None, :]
        k = tl.load(K + kv, mask=j[:, None] < n_k, other=0.0).to(tl.float32)
        v = tl.load(V + kv, mask=j[:, None] < n_k, other=0.0).to(tl.float32)
        seen = (i[:, None] < n_q) & (j[None, :] < n_k)
        if CAUSAL:
            seen = seen & (j[None, :] <= i[:, None] + n_k - n_q)
        p = tl.where(seen, tl.exp(tl.sum(q[:, None, :] * k[None, :, :], axis=2) * scale - lse[:, None]), 0.0)
        ds = p * (tl.sum(do[:, None, :] * v[None, :, :], axis=2) - delta[:, None])
        dq += tl.sum(ds[:, :, None] * k[None, :, :], axis=1)
    tl.store(dQ + at, dq * scale, mask=i[:, None] < n_q)


def flash_attention_backward(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
    for name, size in (("block_q", block_q), ("block_k", block_k), ("q", q.shape[-1])):
        if size < 16 or size & (size - 1):
            raise ValueError(f"{name} must be a power of two of at least 16, got {size}")
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    q3, do3 = (t.reshape(-1, n_q, d).contiguous() for t in (q, grad_output))
    k3, v3 = (t.reshape(-1, n_k, d).contiguous() for t in (k, v))
    lse2 = lse.reshape(-1, n_q).float().contiguous()
    delta = (grad_output.float() * output.float()).sum(-1).reshape(-1, n_q).contiguous()
    dq, dk, dv = torch.empty_like(q3), torch.empty_like(k3), torch.empty_like(v3)
    meta = {"D": d, "BQ": block_q, "BK": block_k, "CAUSAL": causal}
    keys_by_sums[(triton.cdiv(n_k, block_k), q3.shape[0])](
        q3, k3, v3, do3, lse2, delta, dk, dv, n_q, n_k, 1 / math.sqrt(d), **meta
    )
    queries_by_sums[(triton.cdiv(n_q, block_q), q3.shape[0])](
        q3, k3, v3, do3, lse2, delta, dq, n_q, n_k, 1 / math.sqrt(d), **meta
    )
    return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)
""",
        "no tl.dot: every product (S, dP, and the sums into dV, dK and dQ) a broadcast product over a block_q x "
        "block_k x d tile summed by tl.sum, every tile in float32",
    ),
    # ------------------------------------------------------------------ causal_blocks_visited
    Answer(
        "blocks_math_ceil",
        "causal_blocks_visited",
        """
def causal_blocks_visited(length, block_q, block_k):
    return sum(math.ceil(min(length, (b + 1) * block_q) / block_k) for b in range(math.ceil(length / block_q)))
""",
        "math.ceil of float divisions, one sum over the blocks of queries",
    ),
    Answer(
        "blocks_every_pair",
        "causal_blocks_visited",
        """
def causal_blocks_visited(length, block_q, block_k):
    count = 0
    for qb in range(0, length, block_q):
        last_row = min(qb + block_q, length) - 1
        for kb in range(0, length, block_k):
            if kb <= last_row:  # the block's first key is seen by the block's last query
                count += 1
    return count
""",
        "every (query block, key block) pair tested: visited when the key block's first key is at most the query "
        "block's last row",
    ),
    Answer(
        "blocks_by_key_block",
        "causal_blocks_visited",
        """
def causal_blocks_visited(length, block_q, block_k):
    query_blocks = triton.cdiv(length, block_q)
    # key block j is visited by every block of queries from the one that holds its first key on
    return int(sum(query_blocks - (j * block_k) // block_q for j in range(triton.cdiv(length, block_k))))
""",
        "counted by key block (the blocks of queries that see each), with triton.cdiv",
    ),
    Answer(
        "blocks_numpy",
        "causal_blocks_visited",
        """
import numpy as np


def causal_blocks_visited(length, block_q, block_k):
    starts = np.arange(0, length, block_q)
    ends = np.minimum(starts + block_q, length)
    return int(np.sum((ends + block_k - 1) // block_k))
""",
        "NumPy arrays of the blocks' ends, the key blocks rounded up with (n + b - 1) // b, returned as an int",
    ),
    # ------------------------------------------------------------------ forward_bytes_read
    Answer(
        "bytes_per_program",
        "forward_bytes_read",
        """
def forward_bytes_read(length, head_dim, block_q):
    total = 0
    for start in range(0, length, block_q):
        rows = min(block_q, length - start)  # the last program loads only the rows inside the sequence
        total += 4 * rows * head_dim  # its queries
        total += 2 * 4 * length * head_dim  # every key and value
    return total
""",
        "a loop over the programs, each adding what it reads (the last one's queries cut at the end)",
    ),
    Answer(
        "bytes_factored",
        "forward_bytes_read",
        """
def forward_bytes_read(length, head_dim, block_q):
    return 4 * length * head_dim * (1 + 2 * triton.cdiv(length, block_q))
""",
        "one factored product, with triton.cdiv",
    ),
    Answer(
        "bytes_element_size",
        "forward_bytes_read",
        """
def forward_bytes_read(length, head_dim, block_q):
    size = torch.tensor([], dtype=torch.float32).element_size()
    programs = math.ceil(length / block_q)
    return size * (length * head_dim) + programs * size * (length * head_dim) * 2
""",
        "float32's size from torch.element_size, math.ceil for the programs",
    ),
    Answer(
        "bytes_float_then_int",
        "forward_bytes_read",
        """
def forward_bytes_read(length, head_dim, block_q):
    per_tensor = 4.0 * length * head_dim  # bytes of one (length, head_dim) float32 tensor
    reads_of_keys_and_values = -(-length // block_q)
    return int(per_tensor * (1 + 2 * reads_of_keys_and_values))
""",
        "float arithmetic (exact below 2**53), returned as an int",
    ),
]
