"""Wrong answers to ch11_flash_attention that students really write.

FlashAttention's forward kernel (the online softmax's running maximum and sums, the causal skip and mask, the tails of
lengths that are not multiples of the blocks, the log-sum-exp it saves), its backward kernels (the weights recomputed
from lse, Δ, the scale, the causal skip of each kernel), and the question's count of the blocks the causal kernel
visits.

A tail whose loads have no mask reads, in Triton's interpreter, whatever memory follows the tensor (no error): its values
are those of that memory, wrong or by chance right. The grader's replay of the launches stops at such a load, and
test_forward_tails says so first (check_accesses_in_bounds), whatever the values. A store without a mask writes past
the tensor's memory, in the student's process: it is left out here.

Three wrong answers give values so ill-conditioned (exponentials near float32's overflow, or sums of huge terms that
cancel) that the same code rounds differently in the sandbox and in the grader's process, which runs the known
mistakes: the diagnosis may then not recognise its known mistake, and the check's own hint stands. Their causes are
words that both hints hold.
"""

from tests.buggy import Bug, wrong_answers

A = "ch11_flash_attention"

bug = wrong_answers(A)

# ------------------------------------------------------------------ the forward kernel
RESCALED_ACC = "acc = acc * rescale[:, None] + tl.dot(weights.to(v.dtype), v)"
RESCALED_TOTAL = "total = total * rescale + tl.sum(weights, axis=1)"
NEW_TOP = "new_top = tl.maximum(top, tl.max(scores, axis=1))"
RESCALE = "rescale = tl.exp(top - new_top)"
CAUSAL_END = "tl.minimum(n_keys, (block + 1) * BLOCK_Q + shift)"
CAUSAL_MASK = "visible = visible & (keys[None, :] <= rows[:, None] + shift)"
SCORES = "scores = tl.dot(q, tl.trans(k)) * scale"
LSE = "top + tl.log(total)"
KEY_MASK = "        visible = key_ok[None, :]\n"
CAUSAL_MASK_LINE = "            visible = visible & (keys[None, :] <= rows[:, None] + shift)\n"
DIAGONAL_IF = "        if DIAGONAL:  # the causal mask, aligned bottom-right: query i sees the keys j <= i + shift\n"
BELOW = "tl.minimum(n_keys, block * BLOCK_Q + shift + 1)"
Q4 = "q4, k4, v4 = heads_of(q), heads_of(k), heads_of(v)"
SCALE_ARG = "        1 / math.sqrt(d),\n"
GRID = "grid = (triton.cdiv(n_queries, block_q), q4.shape[0] * n_heads)"
EMPTY_OUT = "out = torch.empty(q4.shape, dtype=q.dtype, device=q.device)"
EMPTY_LSE = "lse = torch.empty(q4.shape[:3], dtype=torch.float32, device=q.device)"
KEY_LOOP = "    for start in range(begin, end, BLOCK_K):\n        keys = start + tl.arange(0, BLOCK_K)\n"
SIZES = '(("block_q", block_q), ("block_k", block_k), ("q", q.shape[-1]))'
SIZE_TEST = "if size < 16 or size & (size - 1):"
FORWARD_RETURN = "return out.reshape(q.shape), lse.reshape(*lead, n_queries)"

Q_LOAD = "q = tl.load(q_ptr + q_at, mask=row_ok[:, None], other=0.0)"
K_LOAD = "k = tl.load(k_start + keys[:, None] * k_row + cols[None, :], mask=key_ok[:, None], other=0.0)"
V_LOAD = "v = tl.load(v_start + keys[:, None] * v_row + cols[None, :], mask=key_ok[:, None], other=0.0)"
ACC_ZEROS = "acc = tl.zeros((BLOCK_Q, HEAD_DIM), tl.float32)"

# ------------------------------------------------------------------ the backward kernels
KV_WEIGHTS = (
    "weights = tl.where(visible, tl.exp(tl.dot(q, tl.trans(k)) * scale - lse[:, None]), 0.0)\n            grad_v"
)
Q_WEIGHTS = (
    "weights = tl.where(visible, tl.exp(tl.dot(q, tl.trans(k)) * scale - lse[:, None]), 0.0)\n        grad_scores"
)
KV_DS = "grad_scores = weights * (tl.dot(grad_out, tl.trans(v)) - delta[:, None])\n            grad_k"
Q_DS = "grad_scores = weights * (tl.dot(grad_out, tl.trans(v)) - delta[:, None])\n        grad_q"
DELTA = "delta = (grad_output.float() * output.float()).sum(-1)"
FIRST = "first = tl.maximum(block * BLOCK_K - shift, 0) // BLOCK_Q * BLOCK_Q"
Q_END = (
    "end = tl.minimum(n_keys, (block + 1) * BLOCK_Q + shift)\n    for start in range(0, end, BLOCK_K):\n        keys"
)
GRAD_V = "grad_v += tl.dot(tl.trans(weights.to(grad_out.dtype)), grad_out)"

# ------------------------------------------------------------------ the question
LAST_KEY = "last_key = min(length, (block + 1) * block_q)"
COUNTED = "visited += -(-last_key // block_k)"
QUERY_BLOCKS = "for block in range(-(-length // block_q)):"
VALUES_READ = "values_read = length * head_dim + blocks * 2 * length * head_dim"

TESTS = {
    "flash_attention_forward": [
        "test_forward_shapes",
        "test_forward_output",
        "test_forward_lse",
        "test_forward_tails",
        "test_forward_causal",
        "test_forward_stable",
        "test_forward_precision",
        "test_forward_errors",
        "test_forward_kernel",
        "test_forward_skips",
    ],
    "flash_attention_backward": [
        "test_backward_shapes",
        "test_backward_grad_v",
        "test_backward_grad_k",
        "test_backward_grad_q",
        "test_backward_causal",
        "test_backward_precision",
        "test_backward_kernel",
        "test_backward_skips",
    ],
    "causal_blocks_visited": ["test_causal_blocks_visited"],
    "forward_bytes_read": ["test_forward_bytes_read"],
}

BUGS = [
    # ------------------------------------------------------------------ flash_attention_forward: the running sums
    bug(
        "forward_accumulator_not_rescaled",
        "flash_attention_forward",
        (RESCALED_ACC, "acc = acc + tl.dot(weights.to(v.dtype), v)"),
        why="the running weighted sum of the values is not rescaled when the maximum grows (the sum of the "
        "exponentials is)",
        cause="exp(old m - new m)",
        every_hint=True,  # it fails several test cells: each one's hint names the rescaling
    ),
    bug(
        "forward_normaliser_not_rescaled",
        "flash_attention_forward",
        (RESCALED_TOTAL, "total = total + tl.sum(weights, axis=1)"),
        why="the running sum of the exponentials is not rescaled when the maximum grows",
        cause="running sum of the exponentials is not rescaled",
    ),
    bug(
        "forward_no_rescaling",
        "flash_attention_forward",
        (RESCALED_ACC, "acc = acc + tl.dot(weights.to(v.dtype), v)"),
        (RESCALED_TOTAL, "total = total + tl.sum(weights, axis=1)"),
        why="neither running sum is rescaled: each block's terms are taken under its own maximum and added as they are",
        cause="multiply both sums by exp(old m - new m)",
    ),
    bug(
        "forward_rescale_inverted",
        "flash_attention_forward",
        (RESCALE, "rescale = tl.exp(new_top - top)"),
        why="the rescaling factor upside down, exp(new maximum - old maximum): the sums grow when they must shrink "
        "(and the first block gives exp(inf))",
        cause="exp(old maximum - new maximum), at most 1",
    ),
    bug(
        "forward_max_not_carried",
        "flash_attention_forward",
        (NEW_TOP, "new_top = tl.max(scores, axis=1)"),
        why="the maximum after a block is the block's own, not the larger of it and the running one",
        cause="block's own",  # in both hints (the module's docstring)
    ),
    bug(
        "forward_exp_before_max",
        "flash_attention_forward",
        ("weights = tl.exp(scores - new_top[:, None])", "weights = tl.exp(scores) * tl.exp(-new_top[:, None])"),
        why="exp(score) times exp(-m): the same number on paper, but exp(score) overflows float32 above 88",
        cause="score - m",  # in both hints (the module's docstring)
    ),
    # ------------------------------------------------------------------ the scale and the output
    bug(
        "forward_scale_twice",
        "flash_attention_forward",
        (Q4, "q4, k4, v4 = heads_of(q / math.sqrt(d)), heads_of(k), heads_of(v)"),
        why="the launcher scales the queries and the kernel scales the scores as well",
        cause="applied twice",
    ),
    bug(
        "forward_not_scaled",
        "flash_attention_forward",
        (SCORES, "scores = tl.dot(q, tl.trans(k))"),
        why="the kernel is given the scale and never uses it",
        cause="the scores are not scaled",
    ),
    bug(
        "forward_keys_not_transposed",
        "flash_attention_forward",
        (SCORES, "scores = tl.dot(q, k) * scale"),
        why="tl.dot(q, k): the keys not transposed, which runs (with the wrong numbers) only where the tiles are square "
        "(d equal to both block sizes) and stops tl.dot everywhere else",
        cause="tl.dot(q, tl.trans(k))",
        visible="test_forward_shapes",
    ),
    bug(
        "forward_scaled_by_d",
        "flash_attention_forward",
        (SCALE_ARG, "        1 / d,\n"),
        why="the launcher passes 1/d, not 1/√d: the values of the scale applied twice, (1/√d)², which the hint says too",
        cause="d is used where √d belongs",
    ),
    bug(
        "forward_output_not_normalised",
        "flash_attention_forward",
        ("acc / total[:, None]", "acc"),
        why="stores the weighted sum of the values without dividing it by the sum of the weights",
        cause="divide once, at the end",
    ),
    # ------------------------------------------------------------------ lse
    bug(
        "forward_lse_without_max",
        "flash_attention_forward",
        (LSE, "tl.log(total)"),
        why="lse = log(l): the maximum that the sum was taken under is not added back",
        cause="adds back the maximum",
    ),
    bug(
        "forward_lse_base_two",
        "flash_attention_forward",
        (SCALE_ARG, "        1.4426950408889634 / math.sqrt(d),  # log2(e) folded in, for exp2\n"),
        (RESCALE, "rescale = tl.exp2(top - new_top)"),
        ("weights = tl.exp(scores - new_top[:, None])", "weights = tl.exp2(scores - new_top[:, None])"),
        (LSE, "top + tl.log2(total)"),
        why="exp2 with log2(e) folded into the scale, as fast kernels do, and lse left in base 2",
        cause="lse is a natural logarithm",
    ),
    # ------------------------------------------------------------------ the tails
    bug(
        "forward_tail_keys_in_scores",
        "flash_attention_forward",
        (
            KEY_MASK + DIAGONAL_IF + CAUSAL_MASK_LINE + '        scores = tl.where(visible, scores, float("-inf"))\n',
            "        if DIAGONAL:\n"
            '            scores = tl.where(keys[None, :] <= rows[:, None] + shift, scores, float("-inf"))\n',
        ),
        why="loads masked (zeros past the end), but the padded keys are not masked out of the scores: each gets the "
        "score 0 and a weight",
        cause="not masked out of the scores",
    ),
    bug(
        "forward_tail_query_blocks_rounded_down",
        "flash_attention_forward",
        (GRID, "grid = (n_queries // block_q, q4.shape[0] * n_heads)"),
        (EMPTY_OUT, "out = torch.zeros(q4.shape, dtype=q.dtype, device=q.device)"),
        (EMPTY_LSE, "lse = torch.zeros(q4.shape[:3], dtype=torch.float32, device=q.device)"),
        why="one program per whole block of queries: the last, partial block gets none and its rows stay zero",
        cause="rounds the number of blocks of queries down",
    ),
    bug(
        "forward_tail_key_blocks_rounded_down",
        "flash_attention_forward",
        (
            KEY_LOOP,
            "    for j in range(begin // BLOCK_K, end // BLOCK_K):\n        start = j * BLOCK_K\n"
            "        keys = start + tl.arange(0, BLOCK_K)\n",
        ),
        why="the loop counts the whole blocks of keys: the last, partial block of keys is left out",
        cause="leaves out the last, partial block of keys",
    ),
    bug(
        "forward_tail_loads_unmasked",
        "flash_attention_forward",
        (Q_LOAD, "q = tl.load(q_ptr + q_at)"),
        (K_LOAD, "k = tl.load(k_start + keys[:, None] * k_row + cols[None, :])"),
        (V_LOAD, "v = tl.load(v_start + keys[:, None] * v_row + cols[None, :])"),
        why="loads without masks (the scores of the keys past Lk still set to -inf, the stores masked): the last "
        "blocks read past the end of the tensors, whatever memory is there",
        cause="loads past the end of the last block are not masked",
        visible="test_forward_tails",
    ),
    # ------------------------------------------------------------------ causal
    bug(
        "forward_causal_stops_a_block_early",
        "flash_attention_forward",
        (CAUSAL_END, "tl.minimum(n_keys, block * BLOCK_Q + shift)"),
        why="the loop over the keys stops at the block's first row",
        cause="stops one block of queries too early",
    ),
    bug(
        "forward_causal_end_is_the_last_key",
        "flash_attention_forward",
        (CAUSAL_END, "tl.minimum(n_keys, (block + 1) * BLOCK_Q - 1 + shift)"),
        why="the loop's end is the index of the last key the block's last row sees, used as an exclusive bound: "
        "range stops before it, which drops a whole block of keys when Lk - Lq is one more than a multiple of the "
        "block (and no key otherwise)",
        cause="taken as an exclusive bound",
    ),
    bug(
        "forward_causal_end_in_key_blocks",
        "flash_attention_forward",
        (CAUSAL_END, "tl.minimum(n_keys, (block + 1) * BLOCK_K + shift)"),
        why="the loop's end counted in blocks of keys: with BLOCK_K < BLOCK_Q the later rows miss keys they see",
        cause="the block that holds the last key its last row sees",
    ),
    bug(
        "forward_causal_diagonal_unmasked",
        "flash_attention_forward",
        (CAUSAL_MASK, "visible = visible"),
        why="skips the blocks after the diagonal but does not mask inside the diagonal block",
        cause="the keys after it are not masked",
    ),
    bug(
        "forward_causal_mask_strict",
        "flash_attention_forward",
        (CAUSAL_MASK, "visible = visible & (keys[None, :] < rows[:, None] + shift)"),
        why="j < i: a query does not see itself",
        cause="causal mask is off by one",
    ),
    bug(
        "forward_causal_mask_transposed",
        "flash_attention_forward",
        (CAUSAL_MASK, "visible = visible & (keys[None, :] >= rows[:, None] + shift)"),
        why="j >= i: the upper triangle, the mask of the wrong side",
        cause="the wrong way round",
    ),
    bug(
        "forward_causal_aligned_top_left",
        "flash_attention_forward",
        (CAUSAL_MASK, "visible = visible & (keys[None, :] <= rows[:, None])"),
        (BELOW, "tl.minimum(n_keys, block * BLOCK_Q + 1)"),
        (CAUSAL_END, "tl.minimum(n_keys, (block + 1) * BLOCK_Q)"),
        why="the mask and the loop's end aligned top-left, query i sees the keys j <= i (SDPA's is_causal): right "
        "when Lq == Lk, wrong for decoding's few queries after a cache of keys (Lq < Lk) and for Lq > Lk",
        cause="aligned bottom-right",
    ),
    bug(
        "forward_causal_hidden_rows_nan",
        "flash_attention_forward",
        ('        new_top = tl.where(new_top == float("-inf"), 0.0, new_top)\n', ""),
        ("    total = tl.where(seen, total, 1.0)  # not 0 / 0\n", ""),
        why="a query that sees no key (causal, Lq > Lk) is not handled: its maximum stays -inf, exp(-inf - (-inf)) "
        "and 0 / 0 give NaN where the output must be 0",
        cause="a query that sees no key",
    ),
    # ------------------------------------------------------------------ precision (float16 inputs)
    bug(
        "forward_accumulator_in_input_dtype",
        "flash_attention_forward",
        (ACC_ZEROS, "acc = tl.zeros((BLOCK_Q, HEAD_DIM), q.dtype)"),
        (RESCALED_ACC, "acc = (acc * rescale[:, None] + tl.dot(weights.to(v.dtype), v)).to(q.dtype)"),
        why="the weighted sum of the values kept in the inputs' dtype: float32 for float32 inputs (every value test "
        "passes), float16 for float16 ones, where it rounds every block's terms and overflows past 65,504",
        cause="keep the running maximum, both running sums and the scores in float32",
        only="test_forward_precision",
    ),
    bug(
        "forward_probabilities_not_cast",
        "flash_attention_forward",
        (RESCALED_ACC, "acc = acc * rescale[:, None] + tl.dot(weights, v)"),
        why="the float32 kernel: P, float32, multiplied by float16 values, which tl.dot refuses (two dtypes)",
        cause="tl.dot(p.to(v.dtype), v)",
        only="test_forward_precision",
    ),
    bug(
        "forward_output_float32",
        "flash_attention_forward",
        (EMPTY_OUT, "out = torch.empty(q4.shape, dtype=torch.float32, device=q.device)"),
        why="the output allocated in float32 whatever the inputs' dtype: right values, the wrong dtype",
        cause="the output to the input's dtype",
        only="test_forward_precision",
    ),
    bug(
        "forward_lse_in_input_dtype",
        "flash_attention_forward",
        (EMPTY_LSE, "lse = torch.empty(q4.shape[:3], dtype=q.dtype, device=q.device)"),
        why="lse allocated in the inputs' dtype: float16 for float16 inputs (the kernel's float32 stored rounded), "
        "values within float16's tolerance, the dtype the contract names not",
        cause="lse is float32 whatever the inputs' dtype",
        only="test_forward_precision",
    ),
    # ------------------------------------------------------------------ the shapes and errors
    bug(
        "forward_lse_flattened",
        "flash_attention_forward",
        (FORWARD_RETURN, "return out.reshape(q.shape), lse"),
        why="returns lse with the leading dimensions flattened, (B * H, Lq)",
        cause="one number per query, (..., Lq)",
    ),
    bug(
        "forward_head_size_unchecked",
        "flash_attention_forward",
        (SIZES, '(("block_q", block_q), ("block_k", block_k))'),
        why="checks the block sizes but not d: tl.arange then fails inside the kernel, with no ValueError",
        cause="raise a ValueError whose message names the argument",
    ),
    bug(
        "forward_sizes_multiple_of_16",
        "flash_attention_forward",
        (SIZE_TEST, "if size < 16 or size % 16:"),
        why="accepts any multiple of 16 (48 passes), not only powers of two",
        cause="need powers of two of at least 16",
    ),
    # ------------------------------------------------------------------ flash_attention_backward
    bug(
        "backward_delta_missing",
        "flash_attention_backward",
        (KV_DS, "grad_scores = weights * tl.dot(grad_out, tl.trans(v))\n            grad_k"),
        (Q_DS, "grad_scores = weights * tl.dot(grad_out, tl.trans(v))\n        grad_q"),
        why="dS = P ∘ dP in both kernels: Δ, the softmax's own share of the gradient, left out",
        cause="Δ is missing from dS",
    ),
    bug(
        "backward_delta_of_grad_output_alone",
        "flash_attention_backward",
        (DELTA, "delta = grad_output.float().sum(-1)"),
        why="Δ as the sum of grad_output's features, without the output",
        cause="not of grad_output alone",
    ),
    bug(
        "backward_probabilities_not_cast",
        "flash_attention_backward",
        (GRAD_V, "grad_v += tl.dot(tl.trans(weights), grad_out)"),
        ("grad_k += tl.dot(tl.trans(grad_scores.to(q.dtype)), q)", "grad_k += tl.dot(tl.trans(grad_scores), q)"),
        ("grad_q += tl.dot(grad_scores.to(k.dtype), k)", "grad_q += tl.dot(grad_scores, k)"),
        why="the float32 kernels: P and dS, float32, multiplied by float16 tiles, which tl.dot refuses (two dtypes)",
        cause="cast P and dS down",
        only="test_backward_precision",
    ),
    bug(
        "backward_grad_k_unscaled",
        "flash_attention_backward",
        ("tl.store(grad_k_ptr + kv_at, grad_k * scale,", "tl.store(grad_k_ptr + kv_at, grad_k,"),
        why="grad_k = dSᵀ q, without the scale",
        cause="grad_k is dSᵀ · q times the scale",
    ),
    bug(
        "backward_grad_q_unscaled",
        "flash_attention_backward",
        ("tl.store(grad_q_ptr + q_at, grad_q * scale,", "tl.store(grad_q_ptr + q_at, grad_q,"),
        why="grad_q = dS k, without the scale",
        cause="grad_q is dS · k times the scale",
    ),
    bug(
        "backward_weights_unscaled",
        "flash_attention_backward",
        (KV_WEIGHTS, KV_WEIGHTS.replace(" * scale", "")),
        (Q_WEIGHTS, Q_WEIGHTS.replace(" * scale", "")),
        why="P recomputed as exp(q kᵀ - lse) in both kernels: the scores unscaled",
        cause="p = exp(q kᵀ / √d - lse)",  # in both hints (the module's docstring)
    ),
    bug(
        "backward_weights_without_lse",
        "flash_attention_backward",
        (KV_WEIGHTS, KV_WEIGHTS.replace(" - lse[:, None]", "")),
        (Q_WEIGHTS, Q_WEIGHTS.replace(" - lse[:, None]", "")),
        why="P recomputed as exp(q kᵀ / √d): lse loaded but not subtracted",
        cause="subtract each query's saved lse",
    ),
    bug(
        "backward_weights_block_max",
        "flash_attention_backward",
        (
            KV_WEIGHTS,
            'scores = tl.where(visible, tl.dot(q, tl.trans(k)) * scale, float("-inf"))\n'
            "            weights = tl.exp(scores - tl.max(scores, axis=1)[:, None])\n            weights = tl.where("
            "visible, weights / tl.sum(weights, axis=1)[:, None], 0.0)\n            grad_v",
        ),
        why="P recomputed as each block's own softmax, the forward pass's habit: normalised over one block of keys, "
        "not over every key the query sees",
        cause="the saved lse of each query",
    ),
    bug(
        "backward_causal_starts_a_block_late",
        "flash_attention_backward",
        (FIRST, FIRST + " + BLOCK_Q"),
        why="the keys' kernel starts at the block of queries after the one that holds its first key",
        cause="starts one block of queries too late",
    ),
    bug(
        "backward_causal_q_kernel_stops_early",
        "flash_attention_backward",
        (Q_END, Q_END.replace("(block + 1) * BLOCK_Q", "block * BLOCK_Q + 1")),
        why="the queries' kernel stops at the block of keys that holds its first query, not its last",
        cause="stops one block of queries too early",
    ),
    bug(
        "backward_causal_mask_missing",
        "flash_attention_backward",
        (
            "        if CAUSAL:\n" + CAUSAL_MASK_LINE,
            "",
        ),
        why="the causal blocks are skipped, but P is recomputed without the mask inside the blocks visited",
        cause="recompute p with the causal mask",
    ),
]

BUGS += [
    # ------------------------------------------------------------------ causal_blocks_visited
    bug(
        "blocks_first_row_only",
        "causal_blocks_visited",
        (LAST_KEY, "last_key = min(length, block * block_q + 1)"),
        why="counts the key blocks up to the one that holds the block's first row, not its last",
        cause="not only those before its first row",
    ),
    bug(
        "blocks_key_blocks_rounded_down",
        "causal_blocks_visited",
        (COUNTED, "visited += last_key // block_k"),
        why="counts the whole key blocks only: the partly hidden one on the diagonal is left out",
        cause="round the key blocks up",
    ),
    bug(
        "blocks_past_the_end",
        "causal_blocks_visited",
        (LAST_KEY, "last_key = (block + 1) * block_q"),
        why="the last block of queries counts keys past the end of the sequence",
        cause="it sees at most length keys",
    ),
    bug(
        "blocks_last_key_index_plus_one",
        "causal_blocks_visited",
        (COUNTED, "visited += last_key // block_k + 1"),
        why="takes the number of keys seen for the index of the last one: one block too many when it is a multiple "
        "of block_k",
        cause="(last_key - 1) // block_k",
    ),
    bug(
        "blocks_query_blocks_rounded_down",
        "causal_blocks_visited",
        (QUERY_BLOCKS, "for block in range(length // block_q):"),
        why="counts the whole blocks of queries only: the last, partial one is a program too",
        cause="round the blocks of queries up",
    ),
    bug(
        "blocks_half_of_all",
        "causal_blocks_visited",
        (
            "    visited = 0\n",
            "    visited = -(-length // block_q) * -(-length // block_k) // 2  # half the pairs\n    return visited\n",
        ),
        why="half of all the pairs: the blocks on the diagonal, visited although partly masked, are left out",
        cause="for each block of queries, count the key blocks",
    ),
]

BUGS += [
    # ------------------------------------------------------------------ forward_bytes_read
    bug(
        "bytes_keys_read_once",
        "forward_bytes_read",
        (VALUES_READ, "values_read = length * head_dim + 2 * length * head_dim"),
        why="the keys and values read once in all, as if the programs shared them",
        cause="once per block of queries, not once in all",
    ),
    bug(
        "bytes_keys_only",
        "forward_bytes_read",
        (VALUES_READ, "values_read = length * head_dim + blocks * length * head_dim"),
        why="each program reads the keys, but the values are forgotten",
        cause="the values as well as the keys",
    ),
    bug(
        "bytes_query_blocks_rounded_down",
        "forward_bytes_read",
        ("blocks = -(-length // block_q)", "blocks = length // block_q"),
        why="counts the whole blocks of queries only: the last, partial one is a program too",
        cause="round the blocks up",
    ),
    bug(
        "bytes_numbers_not_bytes",
        "forward_bytes_read",
        ("read = 4 * values_read", "read = values_read"),
        why="counts the numbers read, not their bytes",
        cause="count bytes, not numbers",
    ),
    bug(
        "bytes_queries_left_out",
        "forward_bytes_read",
        (VALUES_READ, "values_read = blocks * 2 * length * head_dim"),
        why="counts the keys and values that each program reads, but not the queries",
        cause="its queries, then every key and value",
    ),
]

# ------------------------------------------------------------------ how the passes compute: kernels, blocks skipped
# The values of these are right: each loses the test cells of how its pass computes, and those alone.
SIZES_CHECKED = """    for name, size in (("block_q", block_q), ("block_k", block_k), ("q", q.shape[-1])):
        if size < 16 or size & (size - 1):
            raise ValueError(f"{name}: must be a power of two of at least 16, got {size}")
"""
NO_KERNEL = "Triton kernel that flash_attention_forward launches"
BUGS += [
    Bug(
        "forward_pytorchs_attention",
        "flash_attention_forward",
        "import torch.nn.functional as F\n\n\n"
        "def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):\n"
        + SIZES_CHECKED
        + "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
        "    if causal:\n"
        "        hidden = torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1)\n"
        "        scores = scores.masked_fill(hidden, float('-inf'))\n"
        "    return F.scaled_dot_product_attention(q, k, v, is_causal=causal), torch.logsumexp(scores, dim=-1)\n",
        why="PyTorch's attention (F.scaled_dot_product_attention) and the log-sum-exp of the whole matrix of scores: "
        "the right values, and no kernel",
        cause=NO_KERNEL,
    ),
    Bug(
        "forward_courses_attention",
        "flash_attention_forward",
        "def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):\n"
        + SIZES_CHECKED
        + "    return attention(q, k, v, causal)\n",
        why="returns the course's own attention (imported by the setup cell for trying the kernel): the right values, "
        "and no kernel",
        cause=NO_KERNEL,
    ),
    bug(
        "forward_kernel_copies_pytorchs_result",
        "flash_attention_forward",
        (
            "def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):",
            "@triton.jit\n"
            "def copy_kernel(src, dst, n, BLOCK: tl.constexpr):\n"
            "    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
            "    tl.store(dst + at, tl.load(src + at, mask=at < n), mask=at < n)\n\n\n"
            "def flash_attention_forward(q, k, v, causal=False, block_q=16, block_k=16):",
        ),
        (
            "    return out.reshape(q.shape), lse.reshape(*lead, n_queries)",
            "    want, want_lse = attention(q, k, v, causal)\n"
            "    copy_kernel[(triton.cdiv(out.numel(), 64),)](want.reshape(out.shape).contiguous(), out, out.numel(), "
            "BLOCK=64)\n"
            "    copy_kernel[(triton.cdiv(lse.numel(), 64),)](want_lse.reshape(lse.shape).contiguous(), lse, "
            "lse.numel(), BLOCK=64)\n"
            "    return out.reshape(q.shape), lse.reshape(*lead, n_queries)",
        ),
        why="launches its kernel, then a kernel that copies the plain computation's result into the outputs: the "
        "kernels compute nothing of what is returned",
        cause=NO_KERNEL,
    ),
    bug(
        "forward_one_tile_per_head",
        "flash_attention_forward",
        (GRID, "grid = (1, q4.shape[0] * n_heads)"),
        (
            "        BLOCK_Q=block_q,\n        BLOCK_K=block_k,\n",
            "        BLOCK_Q=max(16, triton.next_power_of_2(n_queries)),\n"
            "        BLOCK_K=max(16, triton.next_power_of_2(n_keys)),\n",
        ),
        why="one program per sequence holding all its queries and all its keys at once: the whole matrix of scores "
        "in one tile, whatever the blocks asked for",
        cause="one block of scores at a time",
    ),
    bug(
        "forward_causal_skips_nothing",
        "flash_attention_forward",
        ("        end = tl.minimum(n_keys, (block + 1) * BLOCK_Q + shift)", "        end = n_keys"),
        why="with causal=True every program walks through every block of keys and masks the hidden ones: right "
        "values, and none of the work the causal kernel saves",
        cause="end each program's loop over the keys",
        only="test_forward_skips",
    ),
    bug(
        "forward_causal_masks_the_loads",
        "flash_attention_forward",
        ("        end = tl.minimum(n_keys, (block + 1) * BLOCK_Q + shift)", "        end = n_keys"),
        (
            "        key_ok = keys < n_keys\n",
            "        key_ok = (keys < n_keys) & ((keys <= tl.max(rows, axis=0) + shift) | (DIAGONAL == 0))\n",
        ),
        why="with causal=True every program still walks through every block of keys, the hidden ones masked out of "
        "the loads: the loop, and its products, are not skipped",
        cause="end each program's loop over the keys",
        only="test_forward_skips",
    ),
]

# ------------------------------------------------------------------ strided inputs, grouped-query heads, two stages
# Right values: each loses the kernel test cell (where the replay reads how the kernels were handed the inputs), or
# the causal values, and nothing else.
BUGS += [
    bug(
        "forward_strided_views_copied",
        "flash_attention_forward",
        (Q4, "q4, k4, v4 = (heads_of(t.contiguous()) for t in (q, k, v))"),
        why="the launcher makes every input contiguous before the launch (the habit of a kernel that assumes "
        "contiguous tensors): a (B, H, L, d) view of a (B, L, H, d) tensor is copied, which the strides avoid",
        cause="no .contiguous() copy before the launch",
    ),
    bug(
        "forward_kv_expanded_per_query_head",
        "flash_attention_forward",
        (
            Q4,
            Q4 + "\n    if k4.shape[1] != q4.shape[1]:  # grouped-query heads: one key/value head for each query head\n"
            "        k4, v4 = (t.repeat_interleave(q4.shape[1] // t.shape[1], dim=1) for t in (k4, v4))",
        ),
        why="grouped-query heads handled by repeating each key/value head for its query heads in memory "
        "(repeat_interleave) before the launch: the right values, and H_q / H_kv copies of K and V",
        cause="do not repeat k and v for each query head",
    ),
    bug(
        "forward_two_stage_diagonal_unmasked",
        "flash_attention_forward",
        ("            BLOCK_K,\n            True,\n", "            BLOCK_K,\n            False,\n"),
        why="the tutorial's two-stage causal loop with its second stage, the blocks the diagonal cuts, unmasked: "
        "the keys after each query's diagonal get weight",
        cause="the keys after it are not masked",
    ),
    bug(
        "backward_strided_views_copied",
        "flash_attention_backward",
        (
            "t.reshape(-1, *t.shape[-3:]) if t.dim() > 2 else t[None, None] for t in (q, k, v, grad_output)",
            "t.contiguous().reshape(-1, *t.shape[-3:]) if t.dim() > 2 else t[None, None] for t in (q, k, v, grad_output)",
        ),
        why="the backward's launcher makes q, k, v and grad_output contiguous before the launches: strided views "
        "copied",
        cause="no .contiguous() copy before the launch",
    ),
]

NO_KERNELS = "in the Triton kernels that flash_attention_backward launches"
BUGS += [
    Bug(
        "backward_autograd",
        "flash_attention_backward",
        "def flash_attention_backward(q, k, v, output, lse, grad_output, causal=False, block_q=16, block_k=16):\n"
        + SIZES_CHECKED
        + "    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]\n"
        "    torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal).backward(grad_output)\n"
        "    return tuple(leaf.grad for leaf in leaves)\n",
        why="autograd through PyTorch's attention: the right gradients, and no kernel",
        cause=NO_KERNELS,
    ),
    bug(
        "backward_keys_kernel_skips_nothing",
        "flash_attention_backward",
        ("        " + FIRST, "        first = 0"),
        why="with causal=True the keys' kernel walks through every block of queries, the ones before its keys masked",
        cause="the keys' kernel starts its loop",
        only="test_backward_skips",
    ),
    bug(
        "backward_queries_kernel_skips_nothing",
        "flash_attention_backward",
        (Q_END, Q_END.replace("tl.minimum(n_keys, (block + 1) * BLOCK_Q + shift)", "n_keys")),
        why="with causal=True the queries' kernel walks through every block of keys, the ones past its queries masked",
        cause="the queries' kernel stops",
        only="test_backward_skips",
    ),
]
