"""Wrong answers to ch07_efficient_attention that students really write.

Grouped-query, rotary and latent attention, sliding windows, online softmax, and the questions on the cache, the
depth a window needs and misrouted heads.

The two that build the whole score matrix are written out whole: they have nothing of the reference's blocks left.
"""

from tests.buggy import Bug, wrong_answers

A = "ch07_efficient_attention"

bug = wrong_answers(A)

COPIES = "copies = x[:, :, None, :, :].expand(batch, kv_heads, n_rep, length, d_head)  # a view: nothing copied yet\n"
RESHAPE = "    return copies.reshape(batch, kv_heads * n_rep, length, d_head)"
APPEND_K = "k = torch.cat([cache[0], k], dim=2)"
APPEND_V = "v = torch.cat([cache[1], v], dim=2)"
K_WIDTH = "self.W_k = nn.Linear(d_model, num_kv_heads * d_head, bias=bias)"
V_WIDTH = "self.W_v = nn.Linear(d_model, num_kv_heads * d_head, bias=bias)"
WINDOW = "(key <= query) & (key > query - window)"
RESCALED_OUTPUT = "output = output * rescale + p"
RESCALED_NORMALISER = "normaliser = normaliser * rescale + p"
GUARD = 'base = torch.where(new_max == float("-inf"), torch.zeros_like(new_max), new_max)'
DIVISION = "return output / torch.where(normaliser == 0, torch.ones_like(normaliser), normaliser)"
CACHE_SIZE = "2 * num_layers * num_kv_heads * head_dim * tokens * batch_size * bytes_per_value"
DEPTH = "-(-(context - 1) // (window - 1))"
MISROUTED = "if h % num_kv_heads != h // n_rep"
ROTATE_Q = "q = apply_rotary(split_heads(self.W_q(x), self.num_heads), positions, self.base)"
ROTATE_K = "k = apply_rotary(split_heads(self.W_k(x), self.num_kv_heads), positions, self.base)"
SPLIT_K = "k = split_heads(self.W_k(x), self.num_kv_heads)"
ROTARY_CLASS = "class RotaryGroupedQueryAttention(nn.Module):"
MLA_SCALE = "math.sqrt(self.head_dim + self.rope_dim)"
MLA_ROTATE_Q = "q_rope = apply_rotary(split_heads(self.W_qr(x), self.num_heads), positions, self.base)"
MLA_ROTATE_K = "k_rope = apply_rotary(self.W_kr(x), positions, self.base)"

TESTS = {
    "repeat_kv": ["test_repeat_kv"],
    "GroupedQueryAttention": [
        "test_gqa_shapes",
        "test_gqa_matches_torch",
        "test_gqa_cache",
        "test_gqa_mask",
        "test_gqa_errors",
    ],
    "RotaryGroupedQueryAttention": [
        "test_rotary_shapes",
        "test_rotary_positions",
        "test_rotary_in_model",
        "test_rotary_errors",
    ],
    "MultiHeadLatentAttention": ["test_mla_shapes", "test_mla_values", "test_mla_cache", "test_mla_errors"],
    "sliding_window_mask": ["test_sliding_window", "test_sliding_window_error"],
    "online_softmax_attention": ["test_online_values", "test_online_masks", "test_online_memory"],
    "kv_cache_bytes": ["test_kv_cache_bytes"],
    "layers_needed": ["test_layers_needed"],
    "misrouted_heads": ["test_misrouted_heads"],
    "evictable_positions": ["test_evictable_positions"],
}

BUGS = [
    # ------------------------------------------------------------------ repeat_kv
    bug(
        "repeat_kv_interleaved",
        "repeat_kv",
        (COPIES + RESHAPE, "return x.repeat(1, n_rep, 1, 1)"),
        why="Tensor.repeat along the heads: the copies come in turn (0, 1, 0, 1), not side by side (0, 0, 1, 1)",
        cause="interleaved",
    ),
    bug(
        "repeat_kv_concatenated",
        "repeat_kv",
        (COPIES + RESHAPE, "return torch.cat([x] * n_rep, dim=1)"),
        why="n_rep concatenated copies of the whole tensor: interleaved as well",
        cause="interleaved",
    ),
    bug(
        "repeat_kv_position_layout",
        "repeat_kv",
        (
            "x[:, :, None, :, :].expand(batch, kv_heads, n_rep, length, d_head)",
            "x[:, :, :, None, :].expand(batch, kv_heads, length, n_rep, d_head)",
        ),
        why="the (B, L, H, dh) recipe applied to (B, H, L, dh): the copies sit next to each position, then a reshape "
        "mixes positions and heads",
        cause="next to each position",
    ),
    # ------------------------------------------------------------------ GroupedQueryAttention
    bug(
        "gqa_cache_ignored",
        "GroupedQueryAttention",
        ("if cache is not None:", "if False:"),
        why="the cache is ignored: each call attends to its own positions only and returns them as the cache",
        cause="not put before the new ones",
    ),
    bug(
        "gqa_cache_wrong_axis",
        "GroupedQueryAttention",
        (APPEND_K, APPEND_K.replace("dim=2", "dim=1")),
        (APPEND_V, APPEND_V.replace("dim=2", "dim=1")),
        why="the new keys and values are appended along the heads, not the positions",
        cause="along the positions",
    ),
    bug(
        "gqa_cache_holds_repeated_heads",
        "GroupedQueryAttention",
        (
            "k = split_heads(self.W_k(x), self.num_kv_heads)  # (B, H_kv, L, dh)\n"
            "        v = split_heads(self.W_v(x), self.num_kv_heads)\n",
            "n_rep = self.num_heads // self.num_kv_heads\n"
            "        k = repeat_kv(split_heads(self.W_k(x), self.num_kv_heads), n_rep)\n"
            "        v = repeat_kv(split_heads(self.W_v(x), self.num_kv_heads), n_rep)\n",
        ),
        ("scores = q @ repeat_kv(k, n_rep).transpose(-2, -1)", "scores = q @ k.transpose(-2, -1)"),
        ("weights @ repeat_kv(v, n_rep)", "weights @ v"),
        why="the key/value heads are repeated before they are cached: the cache holds num_heads heads",
        cause="the cache holds the repeated heads",
    ),
    bug(
        "gqa_heads_interleaved",
        "GroupedQueryAttention",
        ("repeat_kv(k, n_rep)", "k.repeat(1, n_rep, 1, 1)"),
        ("repeat_kv(v, n_rep)", "v.repeat(1, n_rep, 1, 1)"),
        why="the key/value heads are repeated with Tensor.repeat inside the module: head h uses key/value head "
        "h % num_kv_heads",
        cause="h % num_kv_heads",
    ),
    bug(
        "gqa_kv_projections_full_width",
        "GroupedQueryAttention",
        (K_WIDTH, "self.W_k = nn.Linear(d_model, d_model, bias=bias)"),
        (V_WIDTH, "self.W_v = nn.Linear(d_model, d_model, bias=bias)"),
        why="W_k and W_v project to d_model features, as in multi-head attention",
        cause="shapes the assignment says",
    ),
    bug(
        "gqa_scaled_by_d_model",
        "GroupedQueryAttention",
        ("math.sqrt(q.size(-1))", "math.sqrt(x.size(-1))"),
        why="the scores are divided by the square root of d_model",
        cause="square root of d_model",
    ),
    bug(
        "gqa_no_kv_heads_check",
        "GroupedQueryAttention",
        (
            "        if num_heads % num_kv_heads != 0:\n"
            '            raise ValueError(f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads}")\n',
            "",
        ),
        why="no ValueError when num_kv_heads does not divide num_heads",
        cause="names num_kv_heads",
    ),
    # ------------------------------------------------------------------ RotaryGroupedQueryAttention
    bug(
        "rotary_positions_from_zero",
        "RotaryGroupedQueryAttention",
        ("past = 0 if cache is None else cache[0].size(2)", "past = 0"),
        why="the new positions always start at 0: after a cache of L_past positions they must be L_past, "
        "L_past + 1, ...",
        cause="numbered from 0",
    ),
    bug(
        "rotary_keys_not_rotated",
        "RotaryGroupedQueryAttention",
        (ROTATE_K, SPLIT_K),
        why="only the queries are rotated: the scores then depend on where the query is, not on the distance",
        cause="only the queries are rotated",
    ),
    bug(
        "rotary_before_split",
        "RotaryGroupedQueryAttention",
        (ROTATE_Q, "q = split_heads(apply_rotary(self.W_q(x), positions, self.base), self.num_heads)"),
        (ROTATE_K, "k = split_heads(apply_rotary(self.W_k(x), positions, self.base), self.num_kv_heads)"),
        why="the rotation is applied to the whole projection before the heads are split (frequencies of d_model)",
        cause="before the heads are split",
    ),
    bug(
        "rotary_cached_keys_rotated_again",
        "RotaryGroupedQueryAttention",
        (ROTATE_K, SPLIT_K),
        (
            "        n_rep = self.num_heads // self.num_kv_heads\n",
            "        k = apply_rotary(k, torch.arange(k.size(2), device=x.device), self.base)\n"
            "        n_rep = self.num_heads // self.num_kv_heads\n",
        ),
        why="all the keys, cached ones included, are rotated after the concatenation: the cached ones twice",
        cause="rotating them again",
    ),
    bug(
        "rotary_default_base",
        "RotaryGroupedQueryAttention",
        (ROTATE_Q, "q = apply_rotary(split_heads(self.W_q(x), self.num_heads), positions)"),
        (ROTATE_K, "k = apply_rotary(split_heads(self.W_k(x), self.num_kv_heads), positions)"),
        why="apply_rotary is called without the module's base: always 10000",
        cause="default base",
    ),
    bug(
        "rotary_rotate_half_layout",
        "RotaryGroupedQueryAttention",
        (
            ROTARY_CLASS,
            "def rotate_half(x):\n"
            "    x1, x2 = x.chunk(2, dim=-1)\n"
            "    return torch.cat((-x2, x1), dim=-1)\n\n\n"
            "def llama_rotary(x, positions, base):\n"
            "    d = x.size(-1)\n"
            "    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device).float() / d))\n"
            "    freqs = positions.float()[:, None] * inv_freq[None, :]\n"
            "    emb = torch.cat((freqs, freqs), dim=-1)\n"
            "    return x * emb.cos().to(x.dtype) + rotate_half(x) * emb.sin().to(x.dtype)\n\n\n" + ROTARY_CLASS,
        ),
        (ROTATE_Q, "q = llama_rotary(split_heads(self.W_q(x), self.num_heads), positions, self.base)"),
        (ROTATE_K, "k = llama_rotary(split_heads(self.W_k(x), self.num_kv_heads), positions, self.base)"),
        why="the rotation of Hugging Face's Llama code (rotate_half): feature i is paired with feature i + dh/2, as "
        "the checkpoints store them, not with its neighbour",
        cause="rotate half",
    ),
    bug(
        "rotary_heads_tiled",
        "RotaryGroupedQueryAttention",
        ("repeat_kv(k, n_rep)", "k.repeat(1, n_rep, 1, 1)"),
        ("repeat_kv(v, n_rep)", "v.repeat(1, n_rep, 1, 1)"),
        why="the key/value heads tiled with Tensor.repeat: query head h reads key/value head h % num_kv_heads",
        cause="repeated in place",
    ),
    bug(
        "rotary_cache_unrotated",
        "RotaryGroupedQueryAttention",
        (ROTATE_K, SPLIT_K),
        (
            "        n_rep = self.num_heads // self.num_kv_heads\n",
            "        n_rep = self.num_heads // self.num_kv_heads\n"
            "        rotated = apply_rotary(k, torch.arange(k.size(2), device=x.device), self.base)\n",
        ),
        ("scores = q @ repeat_kv(k, n_rep)", "scores = q @ repeat_kv(rotated, n_rep)"),
        why="the cache keeps the keys unrotated, and the whole cache is rotated by 0, 1, ... at every step",
        cause="the cache holds the keys unrotated",
    ),
    # ------------------------------------------------------------------ sliding_window_mask
    bug(
        "window_off_by_one",
        "sliding_window_mask",
        ("(key > query - window)", "(key >= query - window)"),
        why="i - window <= j <= i: window + 1 positions",
        cause="window + 1 positions",
    ),
    bug(
        "window_looks_ahead",
        "sliding_window_mask",
        ("(key <= query)", "(key < query + window)"),
        why="|i - j| < window: the window looks ahead as far as it looks back",
        cause="later positions",
    ),
    bug(
        "window_excludes_itself",
        "sliding_window_mask",
        (WINDOW, "(key < query) & (key >= query - window)"),
        why="i - window <= j < i: the window positions before the query, without the query itself",
        cause="but not itself",
    ),
    bug(
        "window_no_error",
        "sliding_window_mask",
        (
            "    if window < 1:\n"
            '        raise ValueError(f"window must be at least 1 (a query always sees itself), '
            'got window={window}")\n',
            "",
        ),
        why="no check of window: a window of 0 gives an all-False mask",
        cause="names window",
    ),
    # ------------------------------------------------------------------ online_softmax_attention
    bug(
        "online_output_not_rescaled",
        "online_softmax_attention",
        (RESCALED_OUTPUT, "output = output + p"),
        why="the running output is not rescaled when the maximum grows",
        cause="running output is not rescaled",
    ),
    bug(
        "online_normaliser_not_rescaled",
        "online_softmax_attention",
        (RESCALED_NORMALISER, "normaliser = normaliser + p"),
        why="the running normaliser is not rescaled when the maximum grows",
        cause="running normaliser is not rescaled",
    ),
    bug(
        "online_nan_in_empty_block",
        "online_softmax_attention",
        (GUARD, "base = new_max"),
        why="exp(-inf - (-inf)) = NaN in a block where a query sees no key yet",
        cause="sees no key in a block",
        only="test_online_masks",
    ),
    bug(
        "online_nan_for_fully_masked_rows",
        "online_softmax_attention",
        (DIVISION, "return output / normaliser"),
        why="a query with every key masked divides 0 by 0",
        cause="divides 0 by 0",
        only="test_online_masks",
    ),
    bug(
        "online_not_scaled",
        "online_softmax_attention",
        ("q = q * (1.0 / math.sqrt(q.size(-1)))", "q = q * 1.0"),
        why="the scores are not divided by the square root of dk",
        cause="not divided by the square root of dk",
    ),
    Bug(
        "online_whole_score_matrix",
        "online_softmax_attention",
        """
def online_softmax_attention(q, k, v, block_size, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v
""",
        "the whole (Lq, Lk) score matrix at once, ignoring block_size: right values, but it does not fit in memory "
        "for long sequences",
        "never build the whole (lq, lk) score matrix",
    ),
    # ------------------------------------------------------------------ kv_cache_bytes
    bug(
        "cache_bytes_keys_only",
        "kv_cache_bytes",
        (CACHE_SIZE, CACHE_SIZE.replace("2 * ", "")),
        why="counts the keys only",
        cause="values as well as the keys",
    ),
    bug(
        "cache_bytes_query_heads",
        "kv_cache_bytes",
        (CACHE_SIZE, CACHE_SIZE.replace("num_kv_heads", "num_heads")),
        why="counts num_heads key/value heads, the cache of multi-head attention",
        cause="num_kv_heads key/value heads only",
    ),
    bug(
        "cache_bytes_one_layer",
        "kv_cache_bytes",
        (CACHE_SIZE, CACHE_SIZE.replace("num_layers * ", "")),
        why="the cache of one layer only",
        cause="every layer has its own",
    ),
    bug(
        "cache_bytes_one_sequence",
        "kv_cache_bytes",
        (CACHE_SIZE, CACHE_SIZE.replace("batch_size * ", "")),
        why="the cache of one sequence only",
        cause="every sequence of the batch",
    ),
    # ------------------------------------------------------------------ layers_needed
    bug(
        "depth_rounded_down",
        "layers_needed",
        (DEPTH, "(context - 1) // (window - 1)"),
        why="rounds the number of layers down",
        cause="round the number of layers up",
    ),
    bug(
        "depth_counts_itself",
        "layers_needed",
        (DEPTH, "-(-context // (window - 1))"),
        why="needs a layer for the last position itself",
        cause="depends on itself with no layer",
    ),
    bug(
        "depth_window_per_layer",
        "layers_needed",
        (DEPTH, "-(-(context - 1) // window)"),
        why="counts window new positions per layer",
        cause="windows of stacked layers overlap",
    ),
    # ------------------------------------------------------------------ misrouted_heads
    bug(
        "misrouted_the_right_heads",
        "misrouted_heads",
        (MISROUTED, MISROUTED.replace("!=", "==")),
        why="lists the heads that keep their key/value head",
        cause="not for those that keep it",
    ),
    bug(
        "misrouted_tiles_by_n_rep",
        "misrouted_heads",
        (MISROUTED, "if h % n_rep != h // n_rep"),
        why="tiles by n_rep: head h reads h % n_rep",
        cause="reads head h % num_kv_heads",
    ),
    bug(
        "misrouted_groups_by_kv_heads",
        "misrouted_heads",
        (MISROUTED, "if h % num_kv_heads != h // num_kv_heads"),
        why="puts head h in place at h // num_kv_heads",
        cause="not h // num_kv_heads",
    ),
]

# Found by the second review of the grader: answers that the grader used to pass or blame on another cause.
BUGS += [
    Bug(
        "online_whole_matrix_once",
        "online_softmax_attention",
        """
def online_softmax_attention(q, k, v, block_size, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., Lq, Lk): the whole matrix, once
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    scores = scores.sub_(top).exp_()
    total = scores.sum(dim=-1, keepdim=True)
    return (scores @ v) / torch.where(total == 0, torch.ones_like(total), total)
""",
        why="one (Lq, Lk) matrix of scores, worked on in place: right values, but the memory of the whole matrix",
        cause="never build the whole",
    ),
    bug(
        "online_zeros_for_long_inputs",
        "online_softmax_attention",
        (
            "    length = k.size(-2)\n",
            "    length = k.size(-2)\n"
            "    if length > 4096:  # too long to compute: give up\n"
            "        return torch.zeros((*q.shape[:-1], v.size(-1)), dtype=q.dtype, device=q.device)\n",
        ),
        why="returns zeros of the right shape for long inputs",
        cause="a long input must give the same values",
    ),
    bug(
        "online_scales_q_in_place",
        "online_softmax_attention",
        ("q = q * (1.0 / math.sqrt(q.size(-1)))", "q /= math.sqrt(q.size(-1))"),
        why="scales the queries in place, which changes the caller's tensor",
        cause="must be the same after the call",
    ),
    bug(
        "online_float32_scores",
        "online_softmax_attention",
        (
            "scores = q @ k[..., start:stop, :].transpose(-2, -1)",
            "scores = (q.float() @ k[..., start:stop, :].float().transpose(-2, -1)).to(q.dtype)",
        ),
        why="computes each block's scores in float32, whatever the inputs' dtype",
        cause="exact to float64 precision",
    ),
    bug(
        "depth_floor_plus_one",
        "layers_needed",
        (DEPTH, "(context - 1) // (window - 1) + 1"),
        why="rounds down and adds one: one layer too many when context - 1 is a multiple of window - 1",
        cause="rounding down and adding one overshoots",
    ),
    # ------------------------------------------------------------------ evictable_positions
    bug(
        "evict_keeps_window",
        "evictable_positions",
        ("oldest_read = position + 2 - window", "oldest_read = position + 1 - window"),
        why="keeps window past positions, one more than the next query reads",
        cause="the cache needs window - 1 past positions, not window",
    ),
    bug(
        "evict_all_but_last",
        "evictable_positions",
        ("oldest_read = position + 2 - window", "oldest_read = position"),
        why="keeps only the last position, as if a query saw only itself and the new one",
        cause="a query sees the window - 1 positions before it as well as itself",
    ),
    bug(
        "evict_nothing",
        "evictable_positions",
        ("evictable = list(range(max(oldest_read, 0)))", "evictable = []"),
        why="nothing, as if deeper layers needed the old positions",
        cause="each layer's cache is read only by that layer's later queries",
    ),
]

# Multi-head latent attention (part 6): what students write for DeepSeek's attention.
BUGS += [
    # ------------------------------------------------------------------ MultiHeadLatentAttention
    bug(
        "mla_scale_head_dim_only",
        "MultiHeadLatentAttention",
        (MLA_SCALE, "math.sqrt(self.head_dim)"),
        why="divides the scores by sqrt(head_dim), forgetting the rotary features in each score",
        cause="head_dim alone",
    ),
    bug(
        "mla_latent_rotated",
        "MultiHeadLatentAttention",
        ("c_kv = self.W_dkv(x)", "c_kv = apply_rotary(self.W_dkv(x), positions, self.base)"),
        why="rotates the latent as if it were the keys: the rotation would stand between W_uk and the query",
        cause="the latent is rotated",
    ),
    bug(
        "mla_non_rotary_queries_rotated",
        "MultiHeadLatentAttention",
        (
            "q = split_heads(self.W_q(x), self.num_heads)",
            "q = apply_rotary(split_heads(self.W_q(x), self.num_heads), positions, self.base)",
        ),
        why="rotates the non-rotary queries as well as the rotary ones",
        cause="non-rotary queries are rotated too",
    ),
    bug(
        "mla_rotary_key_per_head",
        "MultiHeadLatentAttention",
        (
            "self.W_kr = nn.Linear(d_model, rope_dim, bias=False)",
            "self.W_kr = nn.Linear(d_model, num_heads * rope_dim, bias=False)",
        ),
        (MLA_ROTATE_K, "k_rope = apply_rotary(split_heads(self.W_kr(x), self.num_heads), positions, self.base)"),
        (
            "k_rope = torch.cat([cache[1], k_rope], dim=1)  # (B, L_past + L, d_R)",
            "k_rope = torch.cat([cache[1], k_rope], dim=2)",
        ),
        ("rope_scores = q_rope @ k_rope[:, None].transpose(-2, -1)", "rope_scores = q_rope @ k_rope.transpose(-2, -1)"),
        why="a rotary key per head, as in grouped-query attention, cached per head: W_kr has num_heads * rope_dim "
        "outputs and the cache holds (B, H, L, rope_dim)",
        cause="shared by all the heads",
    ),
    bug(
        "mla_cache_holds_keys_and_values",
        "MultiHeadLatentAttention",
        (
            "return output, (c_kv, k_rope)",
            "return output, (split_heads(self.W_uk(c_kv), self.num_heads), split_heads(self.W_uv(c_kv), self.num_heads))",
        ),
        why="caches every head's keys and values, as multi-head attention does, instead of the latent",
        cause="every head's keys and values",
    ),
    bug(
        "mla_cache_wrong_axis",
        "MultiHeadLatentAttention",
        ("c_kv = torch.cat([cache[0], c_kv], dim=1)", "c_kv = torch.cat([cache[0], c_kv], dim=2)"),
        ("k_rope = torch.cat([cache[1], k_rope], dim=1)", "k_rope = torch.cat([cache[1], k_rope], dim=2)"),
        why="appends the new latents and rotary keys along the features, the habit of the (B, H, L, dh) caches",
        cause="along the positions",
    ),
    bug(
        "mla_positions_from_zero",
        "MultiHeadLatentAttention",
        ("past = 0 if cache is None else cache[0].size(1)", "past = 0"),
        why="numbers the new positions from 0 whatever the cache holds",
        cause="numbered from 0",
    ),
    bug(
        "mla_absorb_without_transpose",
        "MultiHeadLatentAttention",
        (
            "W_uk = self.W_uk.weight.view(self.num_heads, self.head_dim, -1)",
            "W_uk = self.W_uk.weight.reshape(-1, self.num_heads, self.head_dim).permute(1, 2, 0)",
        ),
        why="absorbs W_uk reading its weight as (in_features, out_features): the transpose forgotten",
        cause="without the transpose",
    ),
    bug(
        "mla_absorb_drops_rotary_scores",
        "MultiHeadLatentAttention",
        (
            "scores = (q @ W_uk) @ latent.transpose(-2, -1) + rope_scores",
            "scores = (q @ W_uk) @ latent.transpose(-2, -1)",
        ),
        why="with absorb=True, scores against the latent only: the rotary part forgotten",
        cause="rotary part of the scores is left out",
    ),
    bug(
        "mla_absorb_ignored",
        "MultiHeadLatentAttention",
        ("if absorb:", "if False:"),
        why="absorb=True takes the plain path: every head's keys and values made from all the latents, the same "
        "output at the memory that absorbing saves",
        cause="make no head's keys or values",
        only="test_mla_values",
    ),
    bug(
        "mla_absorb_keys_per_head",
        "MultiHeadLatentAttention",
        (
            "scores = (q @ W_uk) @ latent.transpose(-2, -1) + rope_scores",
            "keys = [c_kv @ W_uk[h].T for h in range(self.num_heads)]  # head h's keys, one head at a time\n"
            "            scores = torch.stack([q[:, h] @ k.transpose(-2, -1) for h, k in enumerate(keys)], 1) + rope_scores",
        ),
        why="with absorb=True, W_uv absorbed but each head's keys made from the latents, one head at a time",
        cause="make no head's keys or values",
        only="test_mla_values",
    ),
    bug(
        "mla_rotate_half",
        "MultiHeadLatentAttention",
        (
            "class MultiHeadLatentAttention(nn.Module):",
            "def rotate_halves(x, positions, base):\n"
            "    half = x.size(-1) // 2\n"
            "    angles = positions.float()[:, None] * base ** (-torch.arange(0, 2 * half, 2).float() / (2 * half))\n"
            "    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)\n"
            "    x0, x1 = x[..., :half], x[..., half:]\n"
            "    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)\n\n\n"
            "class MultiHeadLatentAttention(nn.Module):",
        ),
        (MLA_ROTATE_Q, "q_rope = rotate_halves(split_heads(self.W_qr(x), self.num_heads), positions, self.base)"),
        (MLA_ROTATE_K, "k_rope = rotate_halves(self.W_kr(x), positions, self.base)"),
        why="pairs the rotary features as transformers' DeepSeek code does with rope_interleave=False",
        cause="rotate half",
    ),
]
