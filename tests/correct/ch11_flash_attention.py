"""Correct answers to ch11_flash_attention in other idioms than the reference's.

Triton 3.9 has no block pointers any more (``tl.make_block_ptr`` raises NotImplementedError, compiled or
interpreted): the idiom that took their place, tensor descriptors (``tl.make_tensor_descriptor``, whose loads read
zeros outside the tensor and whose stores write nothing there), is here instead, given each tensor's own strides.

Every answer reads a strided q, k or v (a (B, H, L, d) view of a (B, L, H, d) tensor) through its strides, with no
copy, and grouped-query heads by finding the key/value head in the kernel: the contract since issue 85, which
retired an idiom that copied its inputs by design (zero-padding every sequence to whole blocks). The grouped heads'
grad_k and grad_v are summed in two ways: a loop over the query heads of the group inside the keys' program, and
atomic adds from one program per query head.
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
    Q, K, V, Out, Lse, stride_qz, stride_qh, stride_qm, stride_kz, stride_kh, stride_kn, stride_vz, stride_vh, stride_vn,
    H, GROUP, n_q, n_k, qk_scale, D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr
):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    off_z, off_h = bh // H, bh % H
    off_kv = off_h // GROUP  # the key/value head of this query head
    offs_m = pid_m * BQ + tl.arange(0, BQ)
    offs_d = tl.arange(0, D)
    q_ptrs = Q + off_z * stride_qz + off_h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :]
    q = tl.load(q_ptrs, mask=offs_m[:, None] < n_q, other=0.0)
    q = q * qk_scale  # 1/sqrt(d) and log2(e) together, once, before the loop
    K += off_z * stride_kz + off_kv * stride_kh
    V += off_z * stride_vz + off_kv * stride_vh
    m_i = tl.zeros((BQ,), tl.float32) - float("inf")
    l_i = tl.zeros((BQ,), tl.float32)
    acc = tl.zeros((BQ, D), tl.float32)
    hi = n_k
    if CAUSAL:
        hi = tl.minimum(n_k, (pid_m + 1) * BQ + n_k - n_q)  # causal: bottom-right
    for start_n in range(0, hi, BK):
        offs_n = start_n + tl.arange(0, BK)
        k = tl.load(K + offs_n[:, None] * stride_kn + offs_d[None, :], mask=offs_n[:, None] < n_k, other=0.0)
        v = tl.load(V + offs_n[:, None] * stride_vn + offs_d[None, :], mask=offs_n[:, None] < n_k, other=0.0)
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
    n_q, n_k = q.shape[-2], k.shape[-2]
    # (Z, H, L, d) views: no copies of strided inputs
    qf, kf, vf = (t.view(-1, *t.shape[-3:]) if t.dim() > 2 else t.view(1, 1, *t.shape) for t in (q, k, v))
    H, H_kv = qf.shape[1], kf.shape[1]
    if H % H_kv:
        raise ValueError(f"k has {H_kv} heads, which do not divide the {H} heads of q")
    out = torch.empty(qf.shape, device=q.device, dtype=q.dtype)
    lse = torch.empty(qf.shape[:3], device=q.device, dtype=torch.float32)
    grid = (-(-n_q // block_q), qf.shape[0] * H)
    attention_forward_exp2[grid](
        qf, kf, vf, out, lse, *qf.stride()[:3], *kf.stride()[:3], *vf.stride()[:3], H, H // H_kv,
        n_q, n_k, 1.4426950408889634 / d**0.5, D=d, BQ=block_q, BK=block_k, CAUSAL=causal
    )
    return out.view(q.shape), lse.view(q.shape[:-1])
""",
        "exp2 with log2(e) folded into the scale, applied to q before the loop, lse brought back to a natural log "
        "with ln 2; the grid with -(-n // b); the strides passed as the tutorial's stride_qz, stride_qh, stride_qm, the "
        "key/value pointers moved to their head once",
    ),
    Answer(
        "forward_tensor_descriptors",
        "flash_attention_forward",
        """
@triton.jit
def forward_with_descriptors(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, sq_b, sq_h, sq_l, sk_b, sk_h, sk_l, sv_b, sv_h, sv_l, n_heads, group, n_q, n_k, scale,
    HEAD_DIM: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr,
):
    start_m = tl.program_id(0) * BLOCK_Q
    seq = tl.program_id(1)
    batch, head = seq // n_heads, seq % n_heads
    kv_head = head // group
    # one descriptor per tensor of this head, with the tensor's own strides: loads outside [0, n) read zeros, stores
    # outside write nothing
    q_desc = tl.make_tensor_descriptor(
        q_ptr + batch * sq_b + head * sq_h, [n_q, HEAD_DIM], [sq_l, 1], [BLOCK_Q, HEAD_DIM]
    )
    k_desc = tl.make_tensor_descriptor(
        k_ptr + batch * sk_b + kv_head * sk_h, [n_k, HEAD_DIM], [sk_l, 1], [BLOCK_K, HEAD_DIM]
    )
    v_desc = tl.make_tensor_descriptor(
        v_ptr + batch * sv_b + kv_head * sv_h, [n_k, HEAD_DIM], [sv_l, 1], [BLOCK_K, HEAD_DIM]
    )
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
    # (B, H, L, d) views, strided where the inputs are: the descriptors take the strides
    q4, k4, v4 = (t.reshape(-1, *t.shape[-3:]) if t.dim() > 2 else t[None, None] for t in (q, k, v))
    n_heads, kv_heads = q4.shape[1], k4.shape[1]
    if n_heads % kv_heads or q4.shape[0] != k4.shape[0]:
        raise ValueError(f"k: {kv_heads} key/value heads cannot serve {n_heads} query heads")
    o = torch.empty(q4.shape, dtype=q.dtype)
    lse = torch.empty(q4.shape[:3], dtype=torch.float32)
    forward_with_descriptors[(triton.cdiv(n_q, block_q), q4.shape[0] * n_heads)](
        q4, k4, v4, o, lse, *q4.stride()[:3], *k4.stride()[:3], *v4.stride()[:3], n_heads, n_heads // kv_heads,
        n_q, n_k, d**-0.5, HEAD_DIM=d, BLOCK_Q=block_q, BLOCK_K=block_k, CAUSAL=causal
    )
    return o.reshape(q.shape), lse.reshape(q.shape[:-1])
""",
        "tensor descriptors (tl.make_tensor_descriptor, Triton's successor of block pointers) built on each head's "
        "base with the tensor's own row stride: the tails padded and clipped by the descriptors, not masked by hand",
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
    q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, q_b, q_h, q_l, k_b, k_h, k_l, v_b, v_h, v_l, heads, group,
    n_queries, n_keys, scale,
    HEAD_DIM: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr,
):
    block = tl.program_id(0)
    seq = tl.program_id(1)
    b, h = seq // heads, seq % heads
    q_ptr += b * q_b + h * q_h
    k_ptr += b * k_b + (h // group) * k_h  # the key/value head that this query head shares
    v_ptr += b * v_b + (h // group) * v_h
    rows = block * BLOCK_Q + tl.arange(0, BLOCK_Q)
    cols = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + rows[:, None] * q_l + cols[None, :], mask=rows[:, None] < n_queries, other=0.0)
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
        k = tl.load(k_ptr + keys[:, None] * k_l + cols[None, :])
        v = tl.load(v_ptr + keys[:, None] * v_l + cols[None, :])
        top, total, acc = online_step(q, k, v, 0, top, total, acc, scale, MASKED=False)
    # then the diagonal block(s) and the tail of the keys, masked
    for start in range(full, stop, BLOCK_K):
        keys = start + tl.arange(0, BLOCK_K)
        k = tl.load(k_ptr + keys[:, None] * k_l + cols[None, :], mask=keys[:, None] < n_keys, other=0.0)
        v = tl.load(v_ptr + keys[:, None] * v_l + cols[None, :], mask=keys[:, None] < n_keys, other=0.0)
        ok = keys[None, :] < n_keys
        if CAUSAL:
            ok = ok & (keys[None, :] <= rows[:, None] + n_keys - n_queries)
        top, total, acc = online_step(q, k, v, ok, top, total, acc, scale, MASKED=True)
    out_at = seq * n_queries * HEAD_DIM + rows[:, None] * HEAD_DIM + cols[None, :]
    tl.store(out_ptr + out_at, acc / tl.where(total > 0, total, 1.0)[:, None], mask=rows[:, None] < n_queries)
    tl.store(lse_ptr + seq * n_queries + rows, top + tl.log(total), mask=rows < n_queries)


def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):
    for name, size in [("block_q", block_q), ("block_k", block_k), ("q", q.size(-1))]:
        if size < 16 or math.log2(size) != int(math.log2(size)):
            raise ValueError(f"{name} has size {size}: it must be a power of two, at least 16")
    shape = q.shape
    n_queries, d = shape[-2], shape[-1]
    n_keys = k.shape[-2]
    q, k, v = (x.reshape(-1, *x.shape[-3:]) if x.dim() > 2 else x.reshape(1, 1, *x.shape) for x in (q, k, v))
    if q.shape[1] % k.shape[1] or q.shape[0] != k.shape[0]:
        raise ValueError(f"k has {k.shape[1]} heads, which do not divide q's {q.shape[1]}")
    out = torch.zeros(q.shape, dtype=q.dtype)
    lse = torch.zeros(q.shape[:3])
    forward_split_kernel[(triton.cdiv(n_queries, block_q), q.shape[0] * q.shape[1])](
        q, k, v, out, lse, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], q.shape[1], q.shape[1] // k.shape[1],
        n_queries, n_keys, 1.0 / math.sqrt(d),
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
    sq_b, sq_h, sq_l, sq_d, sk_b, sk_h, sk_l, sk_d, sv_b, sv_h, sv_l, sv_d, so_b, so_l, so_d,
    n_heads, n_kv_heads, n_q, n_k, scale,
    D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr,
):
    i = tl.program_id(0) * BLOCK_Q + tl.arange(0, BLOCK_Q)
    b = tl.program_id(1)
    z, h = b // n_heads, b % n_heads
    h_kv = h * n_kv_heads // n_heads  # grouped-query heads: the key/value head this query head reads
    e = tl.arange(0, D)
    q = tl.load(Q + z * sq_b + h * sq_h + i[:, None] * sq_l + e[None, :] * sq_d, mask=i[:, None] < n_q, other=0.0)
    q = q.to(tl.float32)  # every tile in float32, whatever the inputs' dtype: slower on a GPU, as accurate
    m = tl.full([BLOCK_Q], -float("inf"), dtype=tl.float32)
    s = tl.zeros([BLOCK_Q], dtype=tl.float32)
    o = tl.zeros([BLOCK_Q, D], dtype=tl.float32)
    n_visit = n_k
    if CAUSAL:
        n_visit = tl.minimum(n_k, tl.program_id(0) * BLOCK_Q + BLOCK_Q + n_k - n_q)
    for j0 in tl.range(0, n_visit, BLOCK_K):
        j = j0 + tl.arange(0, BLOCK_K)
        k = tl.load(K + z * sk_b + h_kv * sk_h + j[:, None] * sk_l + e[None, :] * sk_d, mask=j[:, None] < n_k, other=0.0)
        v = tl.load(V + z * sv_b + h_kv * sv_h + j[:, None] * sv_l + e[None, :] * sv_d, mask=j[:, None] < n_k, other=0.0)
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
    # (batch, heads, L, d) views where the layout allows, with their strides passed to the kernel: no copies
    q4, k4, v4 = (x.reshape(-1, *x.shape[-3:]) if x.dim() > 2 else x.reshape(1, 1, *x.shape) for x in (q, k, v))
    if q4.shape[1] % k4.shape[1]:
        raise ValueError(f"k: {k4.shape[1]} key/value heads do not divide {q4.shape[1]} query heads")
    out = torch.empty(q4.shape[0] * q4.shape[1], n_q, d, dtype=q.dtype, device=q.device)
    lse = torch.empty(out.shape[:2], dtype=torch.float32, device=q.device)
    grid = lambda meta: (triton.cdiv(n_q, meta["BLOCK_Q"]), out.shape[0])
    strided_forward[grid](
        q4, k4, v4, out, lse, *q4.stride(), *k4.stride(), *v4.stride(), *out.stride(), q4.shape[1], k4.shape[1],
        n_q, n_k, d**-0.5,
        D=d, BLOCK_Q=block_q, BLOCK_K=block_k, CAUSAL=causal,
    )
    return out.view(q.shape), lse.view(q.shape[:-1])
""",
        "the strides passed to the kernel instead of contiguous copies, tl.range, a grid given as a function of the "
        "meta-parameters, one tl.where for both masks; every tile cast up to float32 in the kernel, the output cast "
        "down as it is stored; no tl.dot: the scores and the weighted sum of the values by broadcast products "
        "and tl.sum",
    ),
    # ------------------------------------------------------------------ flash_attention_backward
    Answer(
        "backward_delta_kernel",
        "flash_attention_backward",
        """
@triton.jit
def delta_kernel(o_ptr, do_ptr, delta_ptr, so_z, so_h, so_l, sd_z, sd_h, sd_l, H, n_rows, D: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    seq = tl.program_id(1)
    z, h = seq // H, seq % H
    cols = tl.arange(0, D)
    o = tl.load(o_ptr + z * so_z + h * so_h + rows[:, None] * so_l + cols[None, :], mask=rows[:, None] < n_rows, other=0.0)
    do = tl.load(do_ptr + z * sd_z + h * sd_h + rows[:, None] * sd_l + cols[None, :], mask=rows[:, None] < n_rows, other=0.0)
    tl.store(delta_ptr + seq * n_rows + rows, tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1), mask=rows < n_rows)


@triton.jit
def dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV, sq_z, sq_h, sq_m, sk_z, sk_h, sk_n, sv_z, sv_h, sv_n, sd_z, sd_h, sd_m,
    H_KV, GROUP, n_q, n_k, sm_scale, D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    start_n = tl.program_id(0) * BK
    off = tl.program_id(1)
    z, hk = off // H_KV, off % H_KV
    offs_n = start_n + tl.arange(0, BK)
    offs_d = tl.arange(0, D)
    k = tl.load(K + z * sk_z + hk * sk_h + offs_n[:, None] * sk_n + offs_d[None, :], mask=offs_n[:, None] < n_k, other=0.0)
    v = tl.load(V + z * sv_z + hk * sv_h + offs_n[:, None] * sv_n + offs_d[None, :], mask=offs_n[:, None] < n_k, other=0.0)
    dk = tl.zeros([BK, D], dtype=tl.float32)
    dv = tl.zeros([BK, D], dtype=tl.float32)
    lo = 0
    if CAUSAL:
        lo = tl.maximum(start_n - (n_k - n_q), 0) // BQ * BQ  # the first query that sees key start_n
    for g in range(GROUP):  # every query head of this key/value head adds to dk and dv
        h = hk * GROUP + g
        row0 = (z * H_KV * GROUP + h) * n_q
        for start_m in range(lo, n_q, BQ):
            offs_m = start_m + tl.arange(0, BQ)
            q = tl.load(Q + z * sq_z + h * sq_h + offs_m[:, None] * sq_m + offs_d[None, :], mask=offs_m[:, None] < n_q, other=0.0)
            do = tl.load(DO + z * sd_z + h * sd_h + offs_m[:, None] * sd_m + offs_d[None, :], mask=offs_m[:, None] < n_q, other=0.0)
            lse = tl.load(LSE + row0 + offs_m, mask=offs_m < n_q, other=float("inf"))
            delta = tl.load(DELTA + row0 + offs_m, mask=offs_m < n_q, other=0.0)
            p = tl.exp(tl.dot(q, tl.trans(k)) * sm_scale - lse[:, None])  # 0 for the rows past the end (lse = inf)
            keep = offs_n[None, :] < n_k
            if CAUSAL:
                keep = keep & (offs_m[:, None] + n_k - n_q >= offs_n[None, :])
            p = tl.where(keep, p, 0.0)
            dv += tl.dot(tl.trans(p.to(do.dtype)), do)
            dp = tl.dot(do, tl.trans(v))
            ds = p * (dp - delta[:, None]) * sm_scale
            dk += tl.dot(tl.trans(ds.to(q.dtype)), q)
    kv = off * n_k * D + offs_n[:, None] * D + offs_d[None, :]
    tl.store(DK + kv, dk, mask=offs_n[:, None] < n_k)
    tl.store(DV + kv, dv, mask=offs_n[:, None] < n_k)


@triton.jit
def dq_kernel(
    Q, K, V, DO, LSE, DELTA, DQ, sq_z, sq_h, sq_m, sk_z, sk_h, sk_n, sv_z, sv_h, sv_n, sd_z, sd_h, sd_m,
    H, GROUP, n_q, n_k, sm_scale, D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    start_m = tl.program_id(0) * BQ
    off = tl.program_id(1)
    z, h = off // H, off % H
    hk = h // GROUP
    offs_m = start_m + tl.arange(0, BQ)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + z * sq_z + h * sq_h + offs_m[:, None] * sq_m + offs_d[None, :], mask=offs_m[:, None] < n_q, other=0.0)
    do = tl.load(DO + z * sd_z + h * sd_h + offs_m[:, None] * sd_m + offs_d[None, :], mask=offs_m[:, None] < n_q, other=0.0)
    lse = tl.load(LSE + off * n_q + offs_m, mask=offs_m < n_q, other=0.0)
    delta = tl.load(DELTA + off * n_q + offs_m, mask=offs_m < n_q, other=0.0)
    dq = tl.zeros([BQ, D], dtype=tl.float32)
    hi = n_k
    if CAUSAL:
        hi = tl.minimum(n_k, start_m + BQ + n_k - n_q)
    for start_n in range(0, hi, BK):
        offs_n = start_n + tl.arange(0, BK)
        k = tl.load(K + z * sk_z + hk * sk_h + offs_n[:, None] * sk_n + offs_d[None, :], mask=offs_n[:, None] < n_k, other=0.0)
        v = tl.load(V + z * sv_z + hk * sv_h + offs_n[:, None] * sv_n + offs_d[None, :], mask=offs_n[:, None] < n_k, other=0.0)
        keep = offs_n[None, :] < n_k
        if CAUSAL:
            keep = keep & (offs_m[:, None] + n_k - n_q >= offs_n[None, :])
        p = tl.where(keep, tl.exp(tl.dot(q, tl.trans(k)) * sm_scale - lse[:, None]), 0.0)
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    tl.store(DQ + off * n_q * D + offs_m[:, None] * D + offs_d[None, :], dq * sm_scale, mask=offs_m[:, None] < n_q)


def flash_attention_backward(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
    for name, size in (("block_q", block_q), ("block_k", block_k), ("q", q.shape[-1])):
        if size < 16 or size & (size - 1):
            raise ValueError(f"{name} must be a power of two >= 16, not {size}")
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    # (Z, H, L, d) views of the inputs, strided as they come: the kernels take the strides
    q4, k4, v4, o4, do4 = (t.reshape(-1, *t.shape[-3:]) if t.dim() > 2 else t[None, None] for t in (q, k, v, output, grad_output))
    Z, H, H_KV = q4.shape[0], q4.shape[1], k4.shape[1]
    if H % H_KV:
        raise ValueError(f"k has {H_KV} heads, which do not divide the {H} heads of q")
    lse2 = lse.reshape(-1, n_q).contiguous()
    delta = torch.empty(Z * H, n_q, dtype=torch.float32)
    delta_kernel[(triton.cdiv(n_q, 32), Z * H)](o4, do4, delta, *o4.stride()[:3], *do4.stride()[:3], H, n_q, D=d, BLOCK=32)  # Δ in a kernel of its own
    dq = torch.empty(q4.shape, dtype=q.dtype)
    dk, dv = torch.empty(k4.shape, dtype=k.dtype), torch.empty(v4.shape, dtype=v.dtype)
    scale = d**-0.5
    strides = (*q4.stride()[:3], *k4.stride()[:3], *v4.stride()[:3], *do4.stride()[:3])
    meta = dict(D=d, BQ=block_q, BK=block_k, CAUSAL=causal)
    dkdv_kernel[(triton.cdiv(n_k, block_k), Z * H_KV)](q4, k4, v4, do4, lse2, delta, dk, dv, *strides, H_KV, H // H_KV, n_q, n_k, scale, **meta)
    dq_kernel[(triton.cdiv(n_q, block_q), Z * H)](q4, k4, v4, do4, lse2, delta, dq, *strides, H, H // H_KV, n_q, n_k, scale, **meta)
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
    q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, dk_ptr, dv_ptr,
    sq_z, sq_h, sq_l, sk_z, sk_h, sk_l, sv_z, sv_h, sv_l, sd_z, sd_h, sd_l, H, H_KV, n_q, n_k, scale,
    D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    kb = tl.program_id(0)
    seq = tl.program_id(1)  # one program per query head: a key/value head shared by several gets their sums
    z, h = seq // H, seq % H
    hk = h * H_KV // H
    keys = kb * BK + tl.arange(0, BK)
    dims = tl.arange(0, D)
    k_ok = keys < n_k
    k = tl.load(k_ptr + z * sk_z + hk * sk_h + keys[:, None] * sk_l + dims[None, :], mask=k_ok[:, None], other=0.0)
    v = tl.load(v_ptr + z * sv_z + hk * sv_h + keys[:, None] * sv_l + dims[None, :], mask=k_ok[:, None], other=0.0)
    dk = tl.zeros((BK, D), tl.float32)
    dv = tl.zeros((BK, D), tl.float32)
    first = 0
    if CAUSAL:
        first = tl.maximum(kb * BK - (n_k - n_q), 0) // BQ * BQ
    for start in range(first, n_q, BQ):
        rows = start + tl.arange(0, BQ)
        r_ok = rows < n_q
        q_at = seq * n_q * D + rows[:, None] * D + dims[None, :]
        q = tl.load(q_ptr + z * sq_z + h * sq_h + rows[:, None] * sq_l + dims[None, :], mask=r_ok[:, None], other=0.0)
        do = tl.load(do_ptr + z * sd_z + h * sd_h + rows[:, None] * sd_l + dims[None, :], mask=r_ok[:, None], other=0.0)
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
    # the query heads of a group add to the same dK and dV rows, so atomically too
    kv_at = (z * H_KV + hk) * n_k * D + keys[:, None] * D + dims[None, :]
    tl.atomic_add(dk_ptr + kv_at, dk * scale, mask=k_ok[:, None])
    tl.atomic_add(dv_ptr + kv_at, dv, mask=k_ok[:, None])


def flash_attention_backward(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
    for name, size in (("block_q", block_q), ("block_k", block_k), ("q", q.shape[-1])):
        if size < 16 or size != 1 << (size.bit_length() - 1):
            raise ValueError(f"{name}={size}: not a power of two of at least 16")
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    heads = lambda t: t.reshape(-1, *t.shape[-3:]) if t.dim() > 2 else t[None, None]  # a view: no copy
    q4, k4, v4, do4 = heads(q), heads(k), heads(v), heads(grad_output)
    H, H_KV = q4.shape[1], k4.shape[1]
    if H % H_KV:
        raise ValueError(f"k: {H_KV} heads for {H} query heads, which it does not divide")
    delta = torch.einsum("...qd,...qd->...q", grad_output.float(), output.float()).reshape(-1, n_q).contiguous()
    lse2 = lse.reshape(-1, n_q).contiguous()
    dq = torch.zeros(q4.shape, dtype=torch.float32)  # summed into by atomic adds: starts at zero
    dk, dv = torch.zeros(k4.shape, dtype=torch.float32), torch.zeros(v4.shape, dtype=torch.float32)
    strides = [s for t in (q4, k4, v4, do4) for s in t.stride()[:3]]
    fused_backward[(triton.cdiv(n_k, block_k), q4.shape[0] * H)](
        q4, k4, v4, do4, lse2, delta, dq, dk, dv, *strides, H, H_KV, n_q, n_k, 1 / math.sqrt(d),
        D=d, BQ=block_q, BK=block_k, CAUSAL=causal,
    )
    return dq.to(q.dtype).reshape(q.shape), dk.to(k.dtype).reshape(k.shape), dv.to(v.dtype).reshape(v.shape)
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
    q_ptr, k_ptr, v_ptr, go_ptr, lse_ptr, delta_ptr, gk_ptr, gv_ptr, q_st0, q_st1, q_st2, k_st0, k_st1, k_st2,
    v_st0, v_st1, v_st2, go_st0, go_st1, go_st2, n_kv_heads, group, n_q, n_k, scale2, scale,
    HEAD_DIM: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr,
):
    block, seq = tl.program_id(0), tl.program_id(1)
    batch, kv_head = seq // n_kv_heads, seq % n_kv_heads
    keys = block * BLOCK_K + tl.arange(0, BLOCK_K)
    cols = tl.arange(0, HEAD_DIM)
    k = tl.load(k_ptr + batch * k_st0 + kv_head * k_st1 + keys[:, None] * k_st2 + cols[None, :], mask=keys[:, None] < n_k, other=0.0)
    v = tl.load(v_ptr + batch * v_st0 + kv_head * v_st1 + keys[:, None] * v_st2 + cols[None, :], mask=keys[:, None] < n_k, other=0.0)
    gk = tl.zeros((BLOCK_K, HEAD_DIM), tl.float32)
    gv = tl.zeros((BLOCK_K, HEAD_DIM), tl.float32)
    # causal: the queries before the first one that sees this block's first key (query key - (n_k - n_q)) see
    # none of its keys; start at that query itself, whatever the blocks of queries: every query from there on is
    # visited once
    first = tl.maximum(block * BLOCK_K - (n_k - n_q), 0) if CAUSAL else 0
    # the query heads of the group, one after another (head_start: the first row of each, counted over the group)
    for head_start in range(0, group * n_q, n_q):
        head = kv_head * group + head_start // n_q
        saved = (batch * n_kv_heads * group + head) * n_q
        for start in range(first, n_q, BLOCK_Q):
            rows = start + tl.arange(0, BLOCK_Q)
            q = tl.load(q_ptr + batch * q_st0 + head * q_st1 + rows[:, None] * q_st2 + cols[None, :], mask=rows[:, None] < n_q, other=0.0)
            go = tl.load(go_ptr + batch * go_st0 + head * go_st1 + rows[:, None] * go_st2 + cols[None, :], mask=rows[:, None] < n_q, other=0.0)
            lse2 = tl.load(lse_ptr + saved + rows, mask=rows < n_q, other=0.0) * 1.4426950408889634
            delta = tl.load(delta_ptr + saved + rows, mask=rows < n_q, other=0.0)
            ok = (rows[:, None] < n_q) & (keys[None, :] < n_k)
            if CAUSAL:
                ok = ok & (keys[None, :] <= rows[:, None] + n_k - n_q)
            p = tl.where(ok, tl.exp2(tl.dot(q, tl.trans(k)) * scale2 - lse2[:, None]), 0.0)
            gv += tl.dot(tl.trans(p.to(go.dtype)), go)
            ds = p * (tl.dot(go, tl.trans(v)) - delta[:, None])
            gk += tl.dot(tl.trans(ds.to(q.dtype)), q)
    kv_at = seq * n_k * HEAD_DIM + keys[:, None] * HEAD_DIM + cols[None, :]
    tl.store(gk_ptr + kv_at, gk * scale, mask=keys[:, None] < n_k)
    tl.store(gv_ptr + kv_at, gv, mask=keys[:, None] < n_k)


@triton.jit
def queries_backward(
    q_ptr, k_ptr, v_ptr, go_ptr, lse_ptr, delta_ptr, gq_ptr, q_st0, q_st1, q_st2, k_st0, k_st1, k_st2,
    v_st0, v_st1, v_st2, go_st0, go_st1, go_st2, n_kv_heads, group, n_q, n_k, scale2, scale,
    HEAD_DIM: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr,
):
    block, seq = tl.program_id(0), tl.program_id(1)
    batch, head = seq // (n_kv_heads * group), seq % (n_kv_heads * group)
    rows = block * BLOCK_Q + tl.arange(0, BLOCK_Q)
    cols = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + batch * q_st0 + head * q_st1 + rows[:, None] * q_st2 + cols[None, :], mask=rows[:, None] < n_q, other=0.0)
    go = tl.load(go_ptr + batch * go_st0 + head * go_st1 + rows[:, None] * go_st2 + cols[None, :], mask=rows[:, None] < n_q, other=0.0)
    k_ptr += batch * k_st0 + (head // group) * k_st1
    v_ptr += batch * v_st0 + (head // group) * v_st1
    lse2 = tl.load(lse_ptr + seq * n_q + rows, mask=rows < n_q, other=0.0) * 1.4426950408889634
    delta = tl.load(delta_ptr + seq * n_q + rows, mask=rows < n_q, other=0.0)
    gq = tl.zeros((BLOCK_Q, HEAD_DIM), tl.float32)
    last = n_k
    if CAUSAL:
        last = tl.minimum(n_k, (block + 1) * BLOCK_Q + n_k - n_q)
    for start in range(0, last, BLOCK_K):
        keys = start + tl.arange(0, BLOCK_K)
        k = tl.load(k_ptr + keys[:, None] * k_st2 + cols[None, :], mask=keys[:, None] < n_k, other=0.0)
        v = tl.load(v_ptr + keys[:, None] * v_st2 + cols[None, :], mask=keys[:, None] < n_k, other=0.0)
        ok = (rows[:, None] < n_q) & (keys[None, :] < n_k)
        if CAUSAL:
            ok = ok & (keys[None, :] <= rows[:, None] + n_k - n_q)
        p = tl.where(ok, tl.exp2(tl.dot(q, tl.trans(k)) * scale2 - lse2[:, None]), 0.0)
        ds = p * (tl.dot(go, tl.trans(v)) - delta[:, None])
        gq += tl.dot(ds.to(k.dtype), k)
    tl.store(gq_ptr + seq * n_q * HEAD_DIM + rows[:, None] * HEAD_DIM + cols[None, :], gq * scale, mask=rows[:, None] < n_q)


def flash_attention_backward(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
    sizes = {"block_q": block_q, "block_k": block_k, "q": q.shape[-1]}
    for name, size in sizes.items():
        if size < 16 or triton.next_power_of_2(size) != size:
            raise ValueError(f"{name} must be a power of two of at least 16; got {size}")
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    q4, k4, v4, go4 = (t.reshape(-1, *t.shape[-3:]) if t.dim() > 2 else t[None, None] for t in (q, k, v, grad_output))
    n_kv_heads = k4.shape[1]
    if q4.shape[1] % n_kv_heads:
        raise ValueError(f"k: {n_kv_heads} heads do not divide q's {q4.shape[1]}")
    group = q4.shape[1] // n_kv_heads
    strides = [st for t in (q4, k4, v4, go4) for st in t.stride()[:3]]
    lse2 = lse.reshape(-1, n_q).contiguous()
    delta = (grad_output.float() * output.float()).sum(dim=-1).reshape(-1, n_q).contiguous()
    gq, gk, gv = (torch.empty(t.shape, dtype=t.dtype) for t in (q4, k4, v4))
    scale = 1.0 / math.sqrt(d)
    meta = {"HEAD_DIM": d, "BLOCK_Q": block_q, "BLOCK_K": block_k, "CAUSAL": causal}
    args = (lse2, delta)
    keys_backward[(-(-n_k // block_k), k4.shape[0] * n_kv_heads)](
        q4, k4, v4, go4, *args, gk, gv, *strides, n_kv_heads, group, n_q, n_k, scale * LOG2E, scale, **meta
    )
    queries_backward[(-(-n_q // block_q), q4.shape[0] * q4.shape[1])](
        q4, k4, v4, go4, *args, gq, *strides, n_kv_heads, group, n_q, n_k, scale * LOG2E, scale, **meta
    )
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
    Q, K, V, dO, LSE, Delta, dK, dV, qs_b, qs_h, qs_l, ks_b, ks_h, ks_l, vs_b, vs_h, vs_l, os_b, os_h, os_l,
    kv_heads, group, n_q, n_k, scale, D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    j = tl.program_id(0) * BK + tl.arange(0, BK)
    b = tl.program_id(1)  # (batch, key/value head)
    z, hk = b // kv_heads, b % kv_heads
    e = tl.arange(0, D)
    k = tl.load(K + z * ks_b + hk * ks_h + j[:, None] * ks_l + e[None, :], mask=j[:, None] < n_k, other=0.0)
    v = tl.load(V + z * vs_b + hk * vs_h + j[:, None] * vs_l + e[None, :], mask=j[:, None] < n_k, other=0.0)
    dk = tl.zeros((BK, D), tl.float32)
    dv = tl.zeros((BK, D), tl.float32)
    i0 = 0
    if CAUSAL:
        i0 = tl.maximum(tl.program_id(0) * BK - (n_k - n_q), 0)
        i0 = i0 - i0 % BQ
    for g in range(group):  # the query heads that share this key/value head, one after another
        h = hk * group + g
        for start in range(i0, n_q, BQ):
            i = start + tl.arange(0, BQ)
            q = tl.load(Q + z * qs_b + h * qs_h + i[:, None] * qs_l + e[None, :], mask=i[:, None] < n_q, other=0.0)
            do = tl.load(dO + z * os_b + h * os_h + i[:, None] * os_l + e[None, :], mask=i[:, None] < n_q, other=0.0)
            lse = tl.load(LSE + (z * kv_heads * group + h) * n_q + i, mask=i < n_q, other=0.0)
            delta = tl.load(Delta + (z * kv_heads * group + h) * n_q + i, mask=i < n_q, other=0.0)
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
    tl.store(dK + b * n_k * D + j[:, None] * D + e[None, :], dk, mask=j[:, None] < n_k)
    tl.store(dV + b * n_k * D + j[:, None] * D + e[None, :], dv, mask=j[:, None] < n_k)


@triton.jit
def bwd_q_plain(
    Q, K, V, dO, LSE, Delta, dQ, qs_b, qs_h, qs_l, ks_b, ks_h, ks_l, vs_b, vs_h, vs_l, os_b, os_h, os_l,
    kv_heads, group, n_q, n_k, scale, D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    i = tl.program_id(0) * BQ + tl.arange(0, BQ)
    b = tl.program_id(1)  # (batch, query head)
    z, h = b // (kv_heads * group), b % (kv_heads * group)
    hk = h // group
    e = tl.arange(0, D)
    q = tl.load(Q + z * qs_b + h * qs_h + i[:, None] * qs_l + e[None, :], mask=i[:, None] < n_q, other=0.0)
    do = tl.load(dO + z * os_b + h * os_h + i[:, None] * os_l + e[None, :], mask=i[:, None] < n_q, other=0.0)
    lse = tl.load(LSE + b * n_q + i, mask=i < n_q, other=0.0)
    delta = tl.load(Delta + b * n_q + i, mask=i < n_q, other=0.0)
    dq = tl.zeros((BQ, D), tl.float32)
    j_end = n_k
    if CAUSAL:
        j_end = tl.minimum(n_k, tl.program_id(0) * BQ + BQ + n_k - n_q)
    for start in range(0, j_end, BK):
        j = start + tl.arange(0, BK)
        k = tl.load(K + z * ks_b + hk * ks_h + j[:, None] * ks_l + e[None, :], mask=j[:, None] < n_k, other=0.0)
        v = tl.load(V + z * vs_b + hk * vs_h + j[:, None] * vs_l + e[None, :], mask=j[:, None] < n_k, other=0.0)
        valid = (i[:, None] < n_q) & (j[None, :] < n_k)
        if CAUSAL:
            valid = valid & (j[None, :] <= i[:, None] + n_k - n_q)
        p = tl.where(valid, tl.exp(tl.dot(q, tl.trans(k)) * scale - lse[:, None]), 0.0)
        dq += tl.dot((p * (tl.dot(do, tl.trans(v)) - delta[:, None])).to(k.dtype), k)
    tl.store(dQ + b * n_q * D + i[:, None] * D + e[None, :], dq * scale, mask=i[:, None] < n_q)


def flash_attention_backward(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):
    for what, n in (("block_q", block_q), ("block_k", block_k), ("q", q.shape[-1])):
        if n < 16 or n & (n - 1) != 0:
            raise ValueError("%s: %d is not a power of two of at least 16" % (what, n))
    *lead, n_q, d = q.shape
    n_k = k.shape[-2]
    q4, k4, v4, do4 = (t.reshape(-1, *t.shape[-3:]) if t.dim() > 2 else t[None, None] for t in (q, k, v, grad_output))
    if q4.shape[1] % k4.shape[1]:
        raise ValueError(f"k: {k4.shape[1]} key/value heads do not divide the {q4.shape[1]} query heads")
    delta = (output.double() * grad_output.double()).sum(-1).float().reshape(-1, n_q).contiguous()
    lse2 = lse.reshape(-1, n_q).contiguous()
    dq, dk, dv = (torch.zeros(t.shape, dtype=t.dtype) for t in (q4, k4, v4))
    strides = sum((t.stride()[:3] for t in (q4, k4, v4, do4)), ())
    common = (k4.shape[1], q4.shape[1] // k4.shape[1], n_q, n_k, 1.0 / math.sqrt(d))
    meta = dict(D=d, BQ=block_q, BK=block_k, CAUSAL=causal)
    kv_grid = (triton.cdiv(n_k, block_k), k4.shape[0] * k4.shape[1])
    bwd_kv_transposed[kv_grid](q4, k4, v4, do4, lse2, delta, dk, dv, *strides, *common, **meta)
    bwd_q_plain[(triton.cdiv(n_q, block_q), q4.shape[0] * q4.shape[1])](q4, k4, v4, do4, lse2, delta, dq, *strides, *common, **meta)
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
    Q, K, V, dO, LSE, DELTA, dK, dV, sq0, sq1, sq2, sk0, sk1, sk2, sv0, sv1, sv2, so0, so1, so2, n_heads, n_kv, n_q, n_k, scale,
    D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    j = tl.program_id(0) * BK + tl.arange(0, BK)
    b = tl.program_id(1)  # (batch, key/value head)
    z, hk = b // n_kv, b % n_kv
    e = tl.arange(0, D)
    kv = b * n_k * D + j[:, None] * D + e[None, :]
    k = tl.load(K + z * sk0 + hk * sk1 + j[:, None] * sk2 + e[None, :], mask=j[:, None] < n_k, other=0.0)
    v = tl.load(V + z * sv0 + hk * sv1 + j[:, None] * sv2 + e[None, :], mask=j[:, None] < n_k, other=0.0)
    k, v = k.to(tl.float32), v.to(tl.float32)
    dk = tl.zeros((BK, D), tl.float32)
    dv = tl.zeros((BK, D), tl.float32)
    lo = 0
    if CAUSAL:
        lo = tl.maximum(tl.program_id(0) * BK - (n_k - n_q), 0) // BQ * BQ
    # the rows of every query head of the group, one head after another (h: the head, i: its rows)
    for r0 in range(0, (n_heads // n_kv) * n_q, n_q):
        h = hk * (n_heads // n_kv) + r0 // n_q
        for i0 in range(lo, n_q, BQ):
            i = i0 + tl.arange(0, BQ)
            q = tl.load(Q + z * sq0 + h * sq1 + i[:, None] * sq2 + e[None, :], mask=i[:, None] < n_q, other=0.0)
            do = tl.load(dO + z * so0 + h * so1 + i[:, None] * so2 + e[None, :], mask=i[:, None] < n_q, other=0.0)
            q, do = q.to(tl.float32), do.to(tl.float32)
            lse = tl.load(LSE + (z * n_heads + h) * n_q + i, mask=i < n_q, other=0.0)
            delta = tl.load(DELTA + (z * n_heads + h) * n_q + i, mask=i < n_q, other=0.0)
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
    Q, K, V, dO, LSE, DELTA, dQ, sq0, sq1, sq2, sk0, sk1, sk2, sv0, sv1, sv2, so0, so1, so2, n_heads, n_kv, n_q, n_k, scale,
    D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr, CAUSAL: tl.constexpr,
):
    i = tl.program_id(0) * BQ + tl.arange(0, BQ)
    b = tl.program_id(1)  # (batch, query head)
    z, h = b // n_heads, b % n_heads
    hk = h // (n_heads // n_kv)
    e = tl.arange(0, D)
    at = b * n_q * D + i[:, None] * D + e[None, :]
    q = tl.load(Q + z * sq0 + h * sq1 + i[:, None] * sq2 + e[None, :], mask=i[:, None] < n_q, other=0.0)
    do = tl.load(dO + z * so0 + h * so1 + i[:, None] * so2 + e[None, :], mask=i[:, None] < n_q, other=0.0)
    q, do = q.to(tl.float32), do.to(tl.float32)
    lse = tl.load(LSE + b * n_q + i, mask=i < n_q, other=0.0)
    delta = tl.load(DELTA + b * n_q + i, mask=i < n_q, other=0.0)
    dq = tl.zeros((BQ, D), tl.float32)
    hi = n_k
    if CAUSAL:
        hi = tl.minimum(n_k, (tl.program_id(0) + 1) * BQ + n_k - n_q)
    for j0 in range(0, hi, BK):
        j = j0 + tl.arange(0, BK)
        k = tl.load(K + z * sk0 + hk * sk1 + j[:, None] * sk2 + e[None, :], mask=j[:, None] < n_k, other=0.0)
        v = tl.load(V + z * sv0 + hk * sv1 + j[:, None] * sv2 + e[None, :], mask=j[:, None] < n_k, other=0.0)
        k, v = k.to(tl.float32), v.to(tl.float32)
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
    q4, k4, v4, do4 = (t.reshape(-1, *t.shape[-3:]) if t.dim() > 2 else t[None, None] for t in (q, k, v, grad_output))
    n_heads, n_kv = q4.shape[1], k4.shape[1]
    if n_heads % n_kv:
        raise ValueError(f"k: {n_kv} heads must divide the {n_heads} of q")
    lse2 = lse.reshape(-1, n_q).float().contiguous()
    delta = (grad_output.float() * output.float()).sum(-1).reshape(-1, n_q).contiguous()
    dq, dk, dv = (torch.empty(t.shape, dtype=t.dtype) for t in (q4, k4, v4))
    strides = [st for t in (q4, k4, v4, do4) for st in t.stride()[:3]]
    meta = {"D": d, "BQ": block_q, "BK": block_k, "CAUSAL": causal}
    keys_by_sums[(triton.cdiv(n_k, block_k), k4.shape[0] * n_kv)](
        q4, k4, v4, do4, lse2, delta, dk, dv, *strides, n_heads, n_kv, n_q, n_k, 1 / math.sqrt(d), **meta
    )
    queries_by_sums[(triton.cdiv(n_q, block_q), q4.shape[0] * n_heads)](
        q4, k4, v4, do4, lse2, delta, dq, *strides, n_heads, n_kv, n_q, n_k, 1 / math.sqrt(d), **meta
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
