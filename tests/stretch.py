"""Answers to the stretch problems at the end of the exercises: one right answer each, and wrong ones that their
self-checks must catch (tests/test_stretch.py). The stretch problems are not graded; their self-checks are what a
student has, so they are tested as the graded items' checks are: right work passes, wrong work fails."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Stretch:
    assignment: str
    cell: str  # the id of the cell a student writes in; its self-check is the cell `<cell>-check`
    right: str
    wrong: dict[str, str] = field(default_factory=dict)  # what is wrong -> code


LUONG = """
class LuongAttention(nn.Module):
    def __init__(self, query_dim, key_dim, score="general"):
        super().__init__()
        if score == "dot" and query_dim != key_dim:
            raise ValueError(f"the dot score needs query_dim == key_dim, got {query_dim} and {key_dim}")
        self.score = score
        if score == "general":
            self.W_a = nn.Linear(key_dim, query_dim, bias=False)

    def forward(self, query, keys, values, mask=None):
        if self.score == "general":
            keys = self.W_a(keys)
        scores = (keys @ query.unsqueeze(-1)).squeeze(-1)  # (B, S)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return (weights.unsqueeze(1) @ values).squeeze(1), weights
"""

KERNEL = """
def nadaraya_watson(x, x_train, y_train, width):
    # -(x - x_i)^2 / 2w^2 = x x_i / w^2 - x_i^2 / 2w^2 - x^2 / 2w^2, and the last term is the same for every key
    queries = np.stack([x / width, np.ones_like(x)], axis=1) * np.sqrt(2)  # attention_numpy divides by sqrt(2)
    keys = np.stack([x_train / width, -(x_train**2) / (2 * width**2)], axis=1)
    return attention_numpy(queries, keys, y_train)[0]
"""

FUSED = """
class FusedSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        q, k, v = (split_heads(t, self.num_heads) for t in self.in_proj(x).chunk(3, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return self.out_proj(merge_heads(weights @ v)), weights
"""

CONVENTIONS = """
def to_key_padding_mask(mask):
    return ~mask


def to_additive_mask(mask, dtype=torch.float32):
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, float("-inf"))
"""

LOSS_SCALE = """
def update_scale(scale, good_steps, found_inf, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
    if found_inf:
        return scale * backoff_factor, 0
    good_steps += 1
    if good_steps == growth_interval:
        return scale * growth_factor, 0
    return scale, good_steps
"""

ALIBI = """
def alibi_bias(num_heads, length):
    slopes = 2.0 ** (-8.0 * torch.arange(1, num_heads + 1) / num_heads)
    position = torch.arange(length)
    distance = (position[:, None] - position[None, :]).float()
    bias = -slopes[:, None, None] * distance
    return bias.masked_fill(distance < 0, float("-inf"))
"""

SINKS = """
def sink_window_mask(size, window, sinks):
    i, j = torch.arange(size)[:, None], torch.arange(size)[None, :]
    return (j <= i) & ((i - window < j) | (j < sinks))


def evict(cache, window, sinks):
    k, v = cache
    length = k.size(2)
    if length <= sinks + window - 1:
        return k, v
    keep = torch.cat([torch.arange(sinks), torch.arange(length - (window - 1), length)])
    return k[:, :, keep], v[:, :, keep]
"""

PENALTY = """
def length_penalty(lengths, alpha):
    return ((5 + lengths.double()) / 6) ** alpha


def rerank(scores, lengths, alpha):
    return (scores / length_penalty(lengths, alpha)).argsort(dim=-1, descending=True)
"""

ENCODER_DECODER_CACHE = """
def split(x, num_heads):  # (B, L, D) -> (B, H, L, D / H)
    batch, length, d_model = x.shape
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)


def attend(attn, q, k, v, mask=None):  # the heads' outputs, merged and projected by W_o
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    batch, heads, length, head_size = out.shape
    return attn.W_o(out.transpose(1, 2).reshape(batch, length, heads * head_size))


@torch.no_grad()
def cached_greedy_decode(model, src, src_mask, bos_id, eos_id, max_len):
    memory = model.encode(src, src_mask)
    memory_mask = src_mask[:, None, None, :]
    layers = model.decoder_layers
    heads = layers[0].self_attn.num_heads
    cross = [
        (split(layer.cross_attn.W_k(memory), heads), split(layer.cross_attn.W_v(memory), heads)) for layer in layers
    ]
    past = [None] * len(layers)
    token = torch.full((src.size(0),), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    tokens = []
    for t in range(max_len):
        x = model.tgt_embedding(token)[:, None] * model.scale + model.positions.pe[t]
        for i, layer in enumerate(layers):
            attn = layer.self_attn
            k, v = split(attn.W_k(x), heads), split(attn.W_v(x), heads)
            if past[i] is not None:
                k, v = torch.cat([past[i][0], k], dim=2), torch.cat([past[i][1], v], dim=2)
            past[i] = (k, v)
            x = layer.norm1(x + attend(attn, split(attn.W_q(x), heads), k, v))
            q = split(layer.cross_attn.W_q(x), heads)
            x = layer.norm2(x + attend(layer.cross_attn, q, *cross[i], memory_mask))
            x = layer.norm3(x + layer.ff(x))
        token = model.generator(x[:, -1]).argmax(dim=-1).masked_fill(finished, eos_id)
        tokens.append(token)
        finished |= token == eos_id
        if finished.all():
            break
    return torch.stack(tokens, dim=1)
"""

UNCACHED = """
def cached_greedy_decode(model, src, src_mask, bos_id, eos_id, max_len):
    return greedy_decode(model, src, src_mask, bos_id, eos_id, max_len)
"""

STRETCHES = [
    Stretch(
        "ch01_bahdanau",
        "stretch-luong",
        LUONG,
        {
            "keys and queries swapped in W_a": LUONG.replace(
                "nn.Linear(key_dim, query_dim", "nn.Linear(query_dim, key_dim"
            ),
            "no zeros for a fully masked row": LUONG.replace("weights = weights.masked_fill(~mask, 0.0)", "pass"),
            "scaled by the square root of the size": LUONG.replace(
                ".squeeze(-1)  # (B, S)", ".squeeze(-1) / query.size(-1) ** 0.5"
            ),
            "no error for a dot score of mismatched sizes": LUONG.replace('score == "dot" and', "False and"),
        },
    ),
    Stretch(
        "ch02_scaled_dot_product",
        "stretch-kernel-regression",
        KERNEL,
        {
            "the sqrt(d_k) forgotten": KERNEL.replace(" * np.sqrt(2)", ""),
            "the square of the key left out": KERNEL.replace(
                "-(x_train**2) / (2 * width**2)", "np.zeros_like(x_train)"
            ),
            "the width not squared": KERNEL.replace("(2 * width**2)", "(2 * width)"),
        },
    ),
    Stretch(
        "ch03_multi_head",
        "stretch-fused",
        FUSED,
        {
            "keys and values swapped": FUSED.replace("q, k, v = (", "q, v, k = ("),
            "no scaling": FUSED.replace(" / math.sqrt(q.size(-1))", ""),
            "the heads cut before the three": FUSED.replace(
                "(split_heads(t, self.num_heads) for t in self.in_proj(x).chunk(3, dim=-1))",
                "split_heads(self.in_proj(x), self.num_heads).chunk(3, dim=-1)",
            ),
        },
    ),
    Stretch(
        "ch04_masking",
        "stretch-conventions",
        CONVENTIONS,
        {
            "the padding mask passed on as it is": CONVENTIONS.replace("return ~mask", "return mask"),
            "a large negative number for -inf": CONVENTIONS.replace('float("-inf")', "-1e9"),
            "the dtype ignored": CONVENTIONS.replace("torch.zeros(mask.shape, dtype=dtype)", "torch.zeros(mask.shape)"),
        },
    ),
    Stretch(
        "ch08_training_fast",
        "stretch-loss-scale",
        LOSS_SCALE,
        {
            "the count kept after an overflow": LOSS_SCALE.replace(
                "return scale * backoff_factor, 0", "return scale * backoff_factor, good_steps"
            ),
            "grows one step late": LOSS_SCALE.replace(
                "if good_steps == growth_interval:", "if good_steps > growth_interval:"
            ),
            "the count kept after growing": LOSS_SCALE.replace(
                "return scale * growth_factor, 0", "return scale * growth_factor, good_steps"
            ),
        },
    ),
    Stretch(
        "ch05_positional_encoding",
        "stretch-alibi",
        ALIBI,
        {
            "slopes counted from h = 0": ALIBI.replace("torch.arange(1, num_heads + 1)", "torch.arange(num_heads)"),
            "no causal mask": ALIBI.replace('bias.masked_fill(distance < 0, float("-inf"))', "bias"),
            "a bonus for distance, not a penalty": ALIBI.replace("bias = -slopes", "bias = slopes"),
            "the absolute distance on both sides": ALIBI.replace(
                "(position[:, None] - position[None, :]).float()",
                "(position[:, None] - position[None, :]).abs().float()",
            ),
        },
    ),
    Stretch(
        "ch06_transformer",
        "stretch-length-penalty",
        PENALTY,
        {
            "the penalty multiplies the score": PENALTY.replace("(scores / length_penalty", "(scores * length_penalty"),
            "worst first": PENALTY.replace("descending=True", "descending=False"),
            "without the 5": PENALTY.replace("(5 + lengths.double()) / 6", "lengths.double()"),
        },
    ),
    Stretch(
        "ch06_transformer",
        "stretch-kv-cache",
        ENCODER_DECODER_CACHE,
        {
            "the memory projected again at every step": ENCODER_DECODER_CACHE.replace(
                "*cross[i]", "split(layer.cross_attn.W_k(memory), heads), split(layer.cross_attn.W_v(memory), heads)"
            ),
            "no self-attention cache: the new position attends to itself only": ENCODER_DECODER_CACHE.replace(
                "if past[i] is not None:", "if False:"
            ),
            "every step at position 0": ENCODER_DECODER_CACHE.replace("model.positions.pe[t]", "model.positions.pe[0]"),
            "the memory's padding attended": ENCODER_DECODER_CACHE.replace("*cross[i], memory_mask)", "*cross[i])"),
            "the embedding not scaled": ENCODER_DECODER_CACHE.replace(" * model.scale", ""),
            "finished sequences not padded with eos_id": ENCODER_DECODER_CACHE.replace(
                ".masked_fill(finished, eos_id)", ""
            ),
            "model.decode on the whole prefix": UNCACHED,
        },
    ),
    Stretch(
        "ch07_efficient_attention",
        "stretch-sinks",
        SINKS,
        {
            "no sinks in the mask": SINKS.replace("((i - window < j) | (j < sinks))", "(i - window < j)"),
            "sinks visible to earlier queries too": SINKS.replace(
                "(j <= i) & ((i - window < j) | (j < sinks))", "((j <= i) & (i - window < j)) | (j < sinks)"
            ),
            "evicts the sinks": SINKS.replace("torch.arange(sinks), ", ""),
            "keeps one position too few": SINKS.replace(
                "length - (window - 1), length", "length - (window - 2), length"
            ),
            "never evicts": SINKS.replace("if length <= sinks + window - 1:", "if True:"),
        },
    ),
]
