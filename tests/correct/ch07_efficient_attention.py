"""Correct answers to ch07_efficient_attention in other idioms than the reference's."""

from tests.catalogue import reference_head
from tests.correct import Answer, fill_in

A = "ch07_efficient_attention"

# Every idiom of MultiHeadLatentAttention builds the seven layers the assignment names; CHECKS (the checks of its
# arguments and what it keeps of them) and REST (the rest of the class) are its own.
LATENT = """
class MultiHeadLatentAttention(nn.Module):
    def __init__(self, d_model, num_heads, kv_latent_dim, head_dim, rope_dim, base=10000.0):
        super().__init__()
CHECKS
        self.W_q = nn.Linear(d_model, num_heads * head_dim, bias=False)
        self.W_qr = nn.Linear(d_model, num_heads * rope_dim, bias=False)
        self.W_dkv = nn.Linear(d_model, kv_latent_dim, bias=False)
        self.W_kr = nn.Linear(d_model, rope_dim, bias=False)
        self.W_uk = nn.Linear(kv_latent_dim, num_heads * head_dim, bias=False)
        self.W_uv = nn.Linear(kv_latent_dim, num_heads * head_dim, bias=False)
        self.W_o = nn.Linear(num_heads * head_dim, d_model, bias=False)
REST
"""

ANSWERS: list[Answer] = [
    # ------------------------------------------------------------------ repeat_kv
    Answer(
        "repeat_kv_repeat_interleave",
        "repeat_kv",
        """
def repeat_kv(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=1)
""",
        "torch.repeat_interleave along the heads (a copy even for n_rep == 1)",
    ),
    Answer(
        "repeat_kv_index",
        "repeat_kv",
        """
def repeat_kv(x, n_rep):
    heads = torch.arange(x.size(1) * n_rep, device=x.device) // n_rep
    return x[:, heads]
""",
        "advanced indexing with the key/value head of every query head",
    ),
    Answer(
        "repeat_kv_stack",
        "repeat_kv",
        """
def repeat_kv(x, n_rep):
    if n_rep == 1:
        return x
    return torch.stack([x] * n_rep, dim=2).flatten(1, 2)
""",
        "n_rep copies stacked after the head axis, then the two axes flattened",
    ),
    Answer(
        "repeat_kv_loop",
        "repeat_kv",
        """
def repeat_kv(x, n_rep):
    heads = []
    for head in range(x.shape[1]):
        for _ in range(n_rep):
            heads.append(x[:, head])
    return torch.stack(heads, dim=1)
""",
        "a loop over the heads and their copies",
    ),
    Answer(
        "repeat_kv_ones",
        "repeat_kv",
        """
def repeat_kv(x, n_rep):
    ones = torch.ones(1, 1, n_rep, 1, 1, dtype=x.dtype, device=x.device)
    return (x.unsqueeze(2) * ones).reshape(x.size(0), x.size(1) * n_rep, x.size(2), x.size(3))
""",
        "broadcasting against a tensor of ones",
    ),
    # ------------------------------------------------------------------ GroupedQueryAttention
    Answer(
        "gqa_grouped_einsum",
        "GroupedQueryAttention",
        """
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not a multiple of num_heads={num_heads}")
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
        self.h, self.g, self.dh = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.dh, bias=bias)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.dh, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None, cache=None):
        b, length, _ = x.shape
        group = self.h // self.g
        q = self.W_q(x).view(b, length, self.g, group, self.dh).permute(0, 2, 3, 1, 4)  # (B, G, n, L, dh)
        k = self.W_k(x).view(b, length, self.g, self.dh).transpose(1, 2)
        v = self.W_v(x).view(b, length, self.g, self.dh).transpose(1, 2)
        if cache is not None:
            k, v = torch.cat((cache[0], k), -2), torch.cat((cache[1], v), -2)
        scores = torch.einsum("bgnqd,bgkd->bgnqk", q, k) / self.dh ** 0.5
        if mask is not None:
            keep = mask.expand(b, self.h, length, k.size(-2)).reshape(b, self.g, group, length, k.size(-2))
            scores = scores.masked_fill(~keep, float("-inf"))
        weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
        out = torch.einsum("bgnqk,bgkd->bgnqd", weights, v)  # query heads grouped, never repeated
        out = out.permute(0, 3, 1, 2, 4).reshape(b, length, self.h * self.dh)
        return self.W_o(out), (k, v)
""",
        "query heads grouped by their key/value head with einsum, no repetition; nan_to_num for empty rows",
    ),
    Answer(
        "gqa_sdpa_repeat",
        "GroupedQueryAttention",
        """
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("num_heads must divide d_model")
        if num_heads % num_kv_heads != 0:
            raise ValueError("num_kv_heads must divide num_heads")
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        kv_width = num_kv_heads * (d_model // num_heads)
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, kv_width, bias=bias)
        self.W_v = nn.Linear(d_model, kv_width, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None, cache=None):
        q = split_heads(self.W_q(x), self.num_heads)
        k = split_heads(self.W_k(x), self.num_kv_heads)
        v = split_heads(self.W_v(x), self.num_kv_heads)
        if cache is not None:
            past_k, past_v = cache
            k = torch.cat([past_k, k], dim=-2)
            v = torch.cat([past_v, v], dim=-2)
        n = self.num_heads // self.num_kv_heads
        out = F.scaled_dot_product_attention(q, repeat_kv(k, n), repeat_kv(v, n), attn_mask=mask)
        if mask is not None:  # rows with no visible key: zeros whatever the PyTorch version does
            out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        return self.W_o(merge_heads(out)), (k, v)
""",
        "F.scaled_dot_product_attention on the repeated heads, rows with no visible key zeroed afterwards",
    ),
    Answer(
        "gqa_loop_over_heads",
        "GroupedQueryAttention",
        """
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"{d_model} features cannot be split into num_heads={num_heads} heads")
        if num_kv_heads <= 0 or num_heads % num_kv_heads:
            raise ValueError(f"num_kv_heads={num_kv_heads} key/value heads cannot be shared by {num_heads} query heads")
        self.num_heads, self.num_kv_heads, self.d_head = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_head, bias=bias)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_head, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long), persistent=False)

    def forward(self, x, mask=None, cache=None):
        self.calls += 1
        d = self.d_head
        k_new = torch.stack([self.W_k(x)[..., g * d:(g + 1) * d] for g in range(self.num_kv_heads)], dim=1)
        v_new = torch.stack([self.W_v(x)[..., g * d:(g + 1) * d] for g in range(self.num_kv_heads)], dim=1)
        k = k_new if cache is None else torch.cat([cache[0], k_new], dim=2)
        v = v_new if cache is None else torch.cat([cache[1], v_new], dim=2)
        queries = self.W_q(x)
        group = self.num_heads // self.num_kv_heads
        heads = []
        for h in range(self.num_heads):
            q_h = queries[..., h * d:(h + 1) * d].double()
            scores = q_h @ k[:, h // group].double().transpose(-2, -1) / math.sqrt(d)
            if mask is not None:
                keep = mask.expand(x.size(0), self.num_heads, x.size(1), k.size(2))[:, h]
                scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
                weights = torch.softmax(scores, dim=-1) * keep
            else:
                weights = torch.softmax(scores, dim=-1)
            heads.append((weights @ v[:, h // group].double()).to(x.dtype))
        return self.W_o(torch.cat(heads, dim=-1)), (k, v)
""",
        "a loop over the query heads in float64, finfo.min masking, an extra buffer",
    ),
    Answer(
        "gqa_sdpa_enable_gqa",
        "GroupedQueryAttention",
        """
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads}")
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        dh = d_model // num_heads
        self.W_q, self.W_o = nn.Linear(d_model, d_model, bias=bias), nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, num_kv_heads * dh, bias=bias)
        self.W_v = nn.Linear(d_model, num_kv_heads * dh, bias=bias)

    def forward(self, x, mask=None, cache=None):
        b, length, d_model = x.shape
        dh = d_model // self.num_heads
        q = self.W_q(x).reshape(b, length, self.num_heads, dh).transpose(1, 2)
        k = self.W_k(x).reshape(b, length, self.num_kv_heads, dh).transpose(1, 2)
        v = self.W_v(x).reshape(b, length, self.num_kv_heads, dh).transpose(1, 2)
        if cache:
            k = torch.cat((cache[0], k), dim=2)
            v = torch.cat((cache[1], v), dim=2)
        scores_mask = None
        if mask is not None:
            scores_mask = torch.zeros(mask.shape, dtype=x.dtype, device=x.device).masked_fill(~mask, float("-inf"))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=scores_mask, enable_gqa=True)
        out = torch.nan_to_num(out, nan=0.0)
        return self.W_o(out.transpose(1, 2).reshape(b, length, d_model)), (k, v)
""",
        "the built-in's enable_gqa, an additive -inf float mask, reshape instead of view",
    ),
    # ------------------------------------------------------------------ RotaryGroupedQueryAttention
    Answer(
        "rotary_complex",
        "RotaryGroupedQueryAttention",
        """
class RotaryGroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, bias=False, base=10000.0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"num_heads ({num_heads}) does not divide d_model ({d_model})")
        if num_heads % num_kv_heads:
            raise ValueError(f"num_kv_heads ({num_kv_heads}) does not divide num_heads ({num_heads})")
        self.h, self.g, self.dh, self.base = num_heads, num_kv_heads, d_model // num_heads, base
        if self.dh % 2:
            raise ValueError(f"rotary embeddings need an even head size, got {self.dh}")
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.dh, bias=bias)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.dh, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def rotate(self, x, start):
        # each pair (x[2i], x[2i+1]) as the complex number x[2i] + i x[2i+1], turned by e^(i p theta_i)
        pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
        theta = self.base ** (-torch.arange(0, self.dh, 2, dtype=torch.float64, device=x.device) / self.dh)
        p = torch.arange(start, start + x.size(-2), dtype=torch.float64, device=x.device)
        turned = pairs * torch.polar(torch.ones(len(p), len(theta), dtype=torch.float64, device=x.device), p[:, None] * theta)
        return torch.view_as_real(turned).flatten(-2).to(x.dtype)

    def forward(self, x, mask=None, cache=None):
        start = 0 if cache is None else cache[0].shape[2]
        q = self.rotate(split_heads(self.W_q(x), self.h), start)
        k = self.rotate(split_heads(self.W_k(x), self.g), start)
        v = split_heads(self.W_v(x), self.g)
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        scores = q @ repeat_kv(k, self.h // self.g).transpose(2, 3) / math.sqrt(self.dh)
        out = masked_softmax(scores, mask) @ repeat_kv(v, self.h // self.g)
        return self.W_o(merge_heads(out)), (k, v)
""",
        "its own rotation, as complex multiplication in float64 (view_as_complex, polar), not apply_rotary",
    ),
    Answer(
        "rotary_every_two",
        "RotaryGroupedQueryAttention",
        """
def rotate_every_two(x):
    # (x0, x1) -> (-x1, x0) in every pair of neighbouring features
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


class RotaryGroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, bias=False, base=10000.0):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("num_heads must divide d_model")
        if num_heads % num_kv_heads != 0:
            raise ValueError("num_kv_heads must divide num_heads")
        if (d_model // num_heads) % 2 != 0:
            raise ValueError("the head size must be even")
        self.num_heads, self.num_kv_heads, self.base = num_heads, num_kv_heads, base
        head = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, num_kv_heads * head, bias=bias)
        self.W_v = nn.Linear(d_model, num_kv_heads * head, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None, cache=None):
        q = split_heads(self.W_q(x), self.num_heads)
        k = split_heads(self.W_k(x), self.num_kv_heads)
        v = split_heads(self.W_v(x), self.num_kv_heads)
        past = 0 if cache is None else cache[1].size(-2)
        d = q.size(-1)
        inv_freq = torch.exp(-math.log(self.base) * torch.arange(0, d, 2, device=x.device).float() / d)
        angles = torch.arange(past, past + x.size(1), device=x.device).float()[:, None] * inv_freq
        cos = torch.repeat_interleave(torch.cos(angles), 2, dim=-1).to(x.dtype)
        sin = torch.repeat_interleave(torch.sin(angles), 2, dim=-1).to(x.dtype)
        q = q * cos + rotate_every_two(q) * sin
        k = k * cos + rotate_every_two(k) * sin
        if cache is not None:
            k = torch.cat((cache[0], k), dim=-2)
            v = torch.cat((cache[1], v), dim=-2)
        n_rep = self.num_heads // self.num_kv_heads
        scores = torch.matmul(q, repeat_kv(k, n_rep).transpose(-1, -2)) * d**-0.5
        return self.W_o(merge_heads(torch.matmul(masked_softmax(scores, mask), repeat_kv(v, n_rep)))), (k, v)
""",
        "the rotation written out with cos/sin repeated per pair and a rotate-every-two helper; the offset from the "
        "cached values; exp-log frequencies",
    ),
    Answer(
        "rotary_sdpa",
        "RotaryGroupedQueryAttention",
        """
class RotaryGroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, bias=False, base=10000.0):
        super().__init__()
        for name, whole, part in (("num_heads", d_model, num_heads), ("num_kv_heads", num_heads, num_kv_heads)):
            if whole % part:
                raise ValueError(f"{name}={part} must divide {whole}")
        if d_model // num_heads % 2:
            raise ValueError(f"d_model // num_heads = {d_model // num_heads} is odd; rotary needs it even")
        self.num_heads, self.num_kv_heads, self.base = num_heads, num_kv_heads, base
        kv = num_kv_heads * (d_model // num_heads)
        self.W_q, self.W_o = nn.Linear(d_model, d_model, bias=bias), nn.Linear(d_model, d_model, bias=bias)
        self.W_k, self.W_v = nn.Linear(d_model, kv, bias=bias), nn.Linear(d_model, kv, bias=bias)

    def forward(self, x, mask=None, cache=None):
        past_k, past_v = cache if cache is not None else (None, None)
        start = 0 if past_k is None else past_k.size(2)
        where = torch.arange(start, start + x.size(1), device=x.device)
        q = apply_rotary(split_heads(self.W_q(x), self.num_heads), positions=where, base=self.base)
        k = apply_rotary(split_heads(self.W_k(x), self.num_kv_heads), positions=where, base=self.base)
        v = split_heads(self.W_v(x), self.num_kv_heads)
        if past_k is not None:
            k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        n = self.num_heads // self.num_kv_heads
        out = F.scaled_dot_product_attention(q, repeat_kv(k, n), repeat_kv(v, n), attn_mask=mask)
        out = torch.nan_to_num(out, nan=0.0)  # a query with no visible key: zeros, not NaN
        return self.W_o(merge_heads(out)), (k, v)
""",
        "F.scaled_dot_product_attention with the boolean mask, NaN rows zeroed; apply_rotary by keyword",
    ),
    Answer(
        "rotary_einsum_grouped",
        "RotaryGroupedQueryAttention",
        """
class RotaryGroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, bias=False, base=10000.0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not a multiple of num_heads={num_heads}")
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
        self.h, self.g, self.dh, self.base = num_heads, num_kv_heads, d_model // num_heads, float(base)
        if self.dh % 2:
            raise ValueError(f"head size {self.dh} is not even")
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.dh, bias=bias)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.dh, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None, cache=None):
        b, length, _ = x.shape
        group = self.h // self.g
        offset = 0 if cache is None else cache[0].size(-2)
        positions = offset + torch.arange(length, device=x.device)
        q = apply_rotary(self.W_q(x).view(b, length, self.h, self.dh).transpose(1, 2), positions, self.base)
        k = apply_rotary(self.W_k(x).view(b, length, self.g, self.dh).transpose(1, 2), positions, self.base)
        v = self.W_v(x).view(b, length, self.g, self.dh).transpose(1, 2)
        if cache is not None:
            k, v = torch.cat((cache[0], k), -2), torch.cat((cache[1], v), -2)
        q = q.reshape(b, self.g, group, length, self.dh)  # query heads grouped by their key/value head
        scores = torch.einsum("bgnqd,bgkd->bgnqk", q, k) / math.sqrt(self.dh)
        if mask is not None:
            keep = mask.expand(b, self.h, length, k.size(-2)).reshape(b, self.g, group, length, k.size(-2))
            scores = scores.masked_fill(~keep, float("-inf"))
        weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
        out = torch.einsum("bgnqk,bgkd->bgnqd", weights, v).reshape(b, self.h, length, self.dh)
        return self.W_o(out.transpose(1, 2).reshape(b, length, self.h * self.dh)), (k, v)
""",
        "query heads grouped with einsum, never repeated; heads split with view/transpose; masked_fill and nan_to_num",
    ),
    # ------------------------------------------------------------------ MultiHeadLatentAttention
    Answer(
        "mla_sdpa_concatenated",
        "MultiHeadLatentAttention",
        fill_in(
            LATENT,
            CHECKS="""\
        if num_heads < 1 or kv_latent_dim < 1 or head_dim < 1:
            bad = [n for n, v in (("num_heads", num_heads), ("kv_latent_dim", kv_latent_dim), ("head_dim", head_dim)) if v < 1]
            raise ValueError(f"{', '.join(bad)} must be positive")
        if rope_dim <= 0 or rope_dim % 2:
            raise ValueError(f"rope_dim={rope_dim} must be positive and even")
        self.h, self.dn, self.dr, self.base = num_heads, head_dim, rope_dim, base
""",
            REST="""
    def forward(self, x, mask=None, cache=None, absorb=False):
        b, length, _ = x.shape
        start = 0 if cache is None else cache[1].shape[-2]
        where = torch.arange(start, start + length, device=x.device)
        latent, key_rope = self.W_dkv(x), apply_rotary(self.W_kr(x), positions=where, base=self.base)
        if cache is not None:
            latent, key_rope = torch.cat((cache[0], latent), 1), torch.cat((cache[1], key_rope), 1)
        total = latent.size(1)
        q = self.W_q(x).view(b, length, self.h, self.dn).transpose(1, 2)
        q_rope = apply_rotary(self.W_qr(x).view(b, length, self.h, self.dr).transpose(1, 2), where, self.base)
        k_rope = key_rope[:, None].expand(b, self.h, total, self.dr)
        scale = 1.0 / math.sqrt(self.dn + self.dr)
        if absorb:  # as DeepSeek's own inference code: queries in the latent's space, the latent as keys and values
            q_latent = torch.einsum("bhld,hdc->bhlc", q, self.W_uk.weight.view(self.h, self.dn, -1))
            keys = torch.cat([latent[:, None].expand(b, self.h, total, latent.size(-1)), k_rope], dim=-1)
            values = latent[:, None].expand(b, self.h, total, latent.size(-1))
            out = F.scaled_dot_product_attention(torch.cat([q_latent, q_rope], -1), keys, values, attn_mask=mask, scale=scale)
            out = torch.einsum("bhlc,hdc->bhld", out, self.W_uv.weight.view(self.h, self.dn, -1))
        else:  # as transformers' code: the non-rotary and rotary parts side by side in every head
            k = self.W_uk(latent).view(b, total, self.h, self.dn).transpose(1, 2)
            v = self.W_uv(latent).view(b, total, self.h, self.dn).transpose(1, 2)
            out = F.scaled_dot_product_attention(
                torch.cat([q, q_rope], -1), torch.cat([k, k_rope], -1), v, attn_mask=mask, scale=scale
            )
        out = torch.nan_to_num(out, nan=0.0)  # a query with no visible key: zeros, not NaN
        return self.W_o(out.transpose(1, 2).reshape(b, length, self.h * self.dn)), (latent, key_rope)
""",
        ),
        "F.scaled_dot_product_attention on the non-rotary and rotary parts concatenated (transformers' way), and on "
        "the latent with the absorbed queries (DeepSeek's inference code); W_uv applied per head before W_o",
    ),
    Answer(
        "mla_einsum_precomputed",
        "MultiHeadLatentAttention",
        fill_in(
            LATENT,
            CHECKS="""\
        for name, value in dict(num_heads=num_heads, kv_latent_dim=kv_latent_dim, head_dim=head_dim).items():
            if value <= 0:
                raise ValueError(f"{name} must be positive, not {value}")
        if rope_dim < 2 or rope_dim % 2 == 1:
            raise ValueError(f"rotary pairs need an even rope_dim, got {rope_dim}")
        self.num_heads, self.head_dim, self.rope_dim, self.base = num_heads, head_dim, rope_dim, base
""",
            REST="""
    def absorbed(self):
        # per head h: the (d_model, kv_latent_dim) matrix W_q_h^T W_uk_h and the (kv_latent_dim, d_model) W_uv_h^T W_o_h^T
        h, dh = self.num_heads, self.head_dim
        w_q = self.W_q.weight.view(h, dh, -1)
        w_uk, w_uv = self.W_uk.weight.view(h, dh, -1), self.W_uv.weight.view(h, dh, -1)
        w_o = self.W_o.weight.view(-1, h, dh)
        return torch.einsum("hkd,hkc->hdc", w_q, w_uk), torch.einsum("hkc,ohk->hco", w_uv, w_o)

    def forward(self, x, mask=None, cache=None, absorb=False):
        h, dh, dr = self.num_heads, self.head_dim, self.rope_dim
        past = cache[0].shape[1] if cache is not None else 0
        pos = torch.arange(past, past + x.shape[1], device=x.device)
        c = self.W_dkv(x)
        kr = apply_rotary(self.W_kr(x), pos, self.base)
        if cache is not None:
            c, kr = torch.cat([cache[0], c], dim=1), torch.cat([cache[1], kr], dim=1)
        qr = apply_rotary(split_heads(self.W_qr(x), h), pos, self.base)
        rotary = torch.einsum("bhqr,bkr->bhqk", qr, kr)
        if absorb:
            w_qk, w_vo = self.absorbed()
            content = torch.einsum("bqd,hdc,bkc->bhqk", x, w_qk, c)  # x scored against the latent directly
        else:
            q = split_heads(self.W_q(x), h)
            k = split_heads(self.W_uk(c), h)
            content = torch.einsum("bhqd,bhkd->bhqk", q, k)
        scores = (content + rotary) * (dh + dr) ** -0.5
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        if absorb:
            out = torch.einsum("bhqk,bkc,hco->bqo", weights, c, w_vo)
        else:
            out = self.W_o(merge_heads(weights @ split_heads(self.W_uv(c), h)))
        return out, (c, kr)
""",
        ),
        "absorbed the whole way: W_q with W_uk and W_uv with W_o multiplied into one matrix per head, einsum with "
        "three operands; masked_fill before and after the softmax",
    ),
    Answer(
        "mla_loop_complex_rotation",
        "MultiHeadLatentAttention",
        """
def turn(x, start, base):
    # each pair (x[2i], x[2i+1]) as a complex number, turned by e^(i p theta_i), in float64
    d = x.size(-1)
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    p = torch.arange(start, start + x.size(-2), dtype=torch.float64, device=x.device)
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(p[:, None] * theta), p[:, None] * theta)).flatten(-2).to(x.dtype)

"""
        + fill_in(
            LATENT,
            CHECKS="""\
        if num_heads < 1:
            raise ValueError("num_heads must be at least 1")
        if kv_latent_dim < 1:
            raise ValueError("kv_latent_dim must be at least 1")
        if head_dim < 1:
            raise ValueError("head_dim must be at least 1")
        if rope_dim < 1 or rope_dim % 2:
            raise ValueError("rope_dim must be even and positive")
        self.H, self.dh, self.dr, self.base = num_heads, head_dim, rope_dim, base
""",
            REST="""
    def forward(self, x, mask=None, cache=None, absorb=False):
        old_c, old_kr = cache if cache is not None else (x.new_zeros(x.size(0), 0, self.W_dkv.out_features), x.new_zeros(x.size(0), 0, self.dr))
        start = old_c.size(1)
        c = torch.cat([old_c, self.W_dkv(x)], dim=1)
        kr = torch.cat([old_kr, turn(self.W_kr(x), start, self.base)], dim=1)
        q_all, qr_all = self.W_q(x), self.W_qr(x)
        heads = []
        for h in range(self.H):  # one head at a time
            rows = slice(h * self.dh, (h + 1) * self.dh)
            q = q_all[..., rows]
            qr = turn(qr_all[..., h * self.dr : (h + 1) * self.dr], start, self.base)
            if absorb:
                content = (q @ self.W_uk.weight[rows]) @ c.transpose(1, 2)
            else:
                content = q @ self.W_uk(c)[..., rows].transpose(1, 2)
            scores = (content + qr @ kr.transpose(1, 2)) / math.sqrt(self.dh + self.dr)
            if mask is not None:
                keep = mask.expand(x.size(0), self.H, x.size(1), c.size(1))[:, h]
                scores = scores.masked_fill(~keep, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            weights = torch.where(torch.isnan(weights), torch.zeros_like(weights), weights)
            if absorb:
                heads.append((weights @ c) @ self.W_uv.weight[rows].T)
            else:
                heads.append(weights @ self.W_uv(c)[..., rows])
        return self.W_o(torch.cat(heads, dim=-1)), (c, kr)
""",
        ),
        "a loop over the heads, slicing each head's rows of the weights; its own rotation as complex numbers in "
        "float64; an empty cache made of zero-length tensors",
    ),
    Answer(
        "mla_float64_masked_softmax",
        "MultiHeadLatentAttention",
        fill_in(
            LATENT,
            CHECKS="""\
        sizes = {"num_heads": num_heads, "kv_latent_dim": kv_latent_dim, "head_dim": head_dim}
        for name in sizes:
            if sizes[name] < 1:
                raise ValueError(f"{name} = {sizes[name]} < 1")
        if not (rope_dim > 0 and rope_dim % 2 == 0):
            raise ValueError(f"rope_dim = {rope_dim} is not a positive even number")
        self.num_heads, self.head_dim, self.rope_dim, self.base = num_heads, head_dim, rope_dim, base
""",
            REST="""
    def forward(self, x, mask=None, cache=None, absorb=False):
        B, L, _ = x.shape
        H, dh = self.num_heads, self.head_dim
        n_cached = 0 if cache is None else len(cache[0][0])
        positions = n_cached + torch.arange(L, device=x.device)
        new_c = self.W_dkv(x)
        new_kr = apply_rotary(self.W_kr(x)[:, None], positions, self.base)[:, 0]
        c_kv = new_c if cache is None else torch.cat([cache[0], new_c], 1)
        k_rope = new_kr if cache is None else torch.cat([cache[1], new_kr], 1)
        q = self.W_q(x).double().reshape(B, L, H, dh).permute(0, 2, 1, 3)
        q_rope = apply_rotary(split_heads(self.W_qr(x), H), positions, self.base).double()
        c, kr = c_kv.double(), k_rope.double()
        w_uk = self.W_uk.weight.double().reshape(H, dh, -1)
        w_uv = self.W_uv.weight.double().reshape(H, dh, -1)
        if absorb:
            scores = torch.matmul(torch.matmul(q, w_uk), c.unsqueeze(1).transpose(2, 3))
        else:
            scores = torch.matmul(q, torch.matmul(c.unsqueeze(1), w_uk.transpose(1, 2)).transpose(2, 3))
        scores = scores + torch.matmul(q_rope, kr.unsqueeze(1).transpose(2, 3))
        weights = masked_softmax(scores / (dh + self.rope_dim) ** 0.5, mask)
        if absorb:
            heads = torch.matmul(torch.matmul(weights, c.unsqueeze(1)), w_uv.transpose(1, 2))
        else:
            heads = torch.matmul(weights, torch.matmul(c.unsqueeze(1), w_uv.transpose(1, 2)))
        out = heads.permute(0, 2, 1, 3).reshape(B, L, H * dh).to(x.dtype)
        return self.W_o(out), (c_kv, k_rope)
""",
        ),
        "the scores and the average in float64 with matmul and reshape/permute; the up-projections as weight "
        "matrices in both ways; the rotary key rotated as a head of its own",
    ),
    Answer(
        "mla_heads_loop_masked_softmax",
        "MultiHeadLatentAttention",
        reference_head(A, "MultiHeadLatentAttention", "    def forward")
        + """
    def forward(self, x, mask=None, cache=None, absorb=False):
        B, L, _ = x.shape
        H, dh, dr = self.num_heads, self.head_dim, self.rope_dim
        past = 0 if cache is None else cache[0].size(1)
        positions = torch.arange(past, past + L, device=x.device)
        c_kv = self.W_dkv(x)
        k_rope = apply_rotary(self.W_kr(x), positions, self.base)
        if cache is not None:
            c_kv, k_rope = torch.cat([cache[0], c_kv], dim=1), torch.cat([cache[1], k_rope], dim=1)
        q = split_heads(self.W_q(x), H)
        q_rope = apply_rotary(split_heads(self.W_qr(x), H), positions, self.base)
        if mask is not None:  # one mask per head, so that head h's is mask[:, h]
            mask = torch.broadcast_to(mask, (B, H, L, c_kv.size(1)))
        heads = []
        for h in range(H):
            rows = slice(h * dh, (h + 1) * dh)
            if absorb:
                content = (q[:, h] @ self.W_uk.weight[rows]) @ c_kv.transpose(1, 2)
            else:
                content = q[:, h] @ self.W_uk(c_kv)[..., rows].transpose(1, 2)
            scores = (content + q_rope[:, h] @ k_rope.transpose(1, 2)) / math.sqrt(dh + dr)
            weights = masked_softmax(scores, None if mask is None else mask[:, h])  # (B, L, L_past + L) each
            if absorb:
                heads.append((weights @ c_kv) @ self.W_uv.weight[rows].T)
            else:
                heads.append(weights @ self.W_uv(c_kv)[..., rows])
        return self.W_o(torch.cat(heads, dim=-1)), (c_kv, k_rope)
""",
        "a loop over the heads, each head's 3-D scores and its own mask, mask[:, h] of the mask broadcast to every "
        "head, through masked_softmax",
    ),
    # ------------------------------------------------------------------ sliding_window_mask
    Answer(
        "window_tril_triu",
        "sliding_window_mask",
        """
def sliding_window_mask(size, window, device=None):
    if window < 1:
        raise ValueError(f"window={window}: a query must see at least itself")
    ones = torch.ones(size, size, dtype=torch.bool, device=device)
    return torch.tril(ones) & torch.triu(ones, diagonal=1 - window)
""",
        "a lower triangle and an upper triangle intersected",
    ),
    Answer(
        "window_distance",
        "sliding_window_mask",
        """
def sliding_window_mask(size, window, device=None):
    if not window >= 1:
        raise ValueError("window must be 1 or more")
    positions = torch.arange(size, device=device)
    distance = positions.view(-1, 1) - positions.view(1, -1)
    return (distance >= 0) & (distance < window)
""",
        "the distance from query to key",
    ),
    Answer(
        "window_loop",
        "sliding_window_mask",
        """
def sliding_window_mask(size, window, device=None):
    if window < 1:
        raise ValueError(f"bad window {window}")
    rows = []
    for i in range(size):
        rows.append([max(0, i - window + 1) <= j <= i for j in range(size)])
    return torch.tensor(rows, dtype=torch.bool).reshape(size, size).to(device if device is not None else "cpu")
""",
        "a loop over rows and keys, moved to the device at the end",
    ),
    Answer(
        "window_numpy",
        "sliding_window_mask",
        """
import numpy as np


def sliding_window_mask(size, window, device=None):
    if window < 1:
        raise ValueError("window < 1: each query sees itself at least")
    i, j = np.indices((size, size))
    return torch.as_tensor((j <= i) & (i - j < window), device=device)
""",
        "NumPy index grids, converted at the end",
    ),
    Answer(
        "window_causal_minus_old",
        "sliding_window_mask",
        """
def sliding_window_mask(size, window, device=None):
    if window < 1:
        raise ValueError(f"window must be positive, got {window}")
    causal = torch.ones(size, size, device=device).tril()
    too_old = torch.ones(size, size, device=device).tril(diagonal=-window)
    return (causal - too_old).bool()
""",
        "the look-ahead mask minus the positions that fell out of the window, as floats",
    ),
    # ------------------------------------------------------------------ online_softmax_attention
    Answer(
        "online_split",
        "online_softmax_attention",
        """
def online_softmax_attention(q, k, v, block_size, mask=None):
    scale = q.shape[-1] ** -0.5
    m = q.new_full(q.shape[:-1] + (1,), -math.inf)
    l = q.new_zeros(q.shape[:-1] + (1,))
    acc = q.new_zeros(q.shape[:-1] + (v.shape[-1],))
    if mask is None:
        masks = [None] * math.ceil(k.shape[-2] / block_size)
    else:
        masks = torch.broadcast_to(mask, mask.shape[:-1] + (k.shape[-2],)).split(block_size, dim=-1)
    for k_b, v_b, mask_b in zip(k.split(block_size, dim=-2), v.split(block_size, dim=-2), masks):
        s = torch.matmul(q, k_b.transpose(-1, -2)) * scale
        if mask_b is not None:
            s = torch.where(mask_b, s, torch.tensor(-math.inf, dtype=s.dtype, device=s.device))
        m_new = torch.maximum(m, s.max(dim=-1, keepdim=True).values)
        safe = torch.nan_to_num(m_new, neginf=0.0)
        correction = torch.exp(m - safe)
        p = torch.exp(s - safe)
        l = correction * l + p.sum(-1, keepdim=True)
        acc = correction * acc + torch.matmul(p, v_b)
        m = m_new
    return torch.where(l > 0, acc / l.clamp_min(1e-30), torch.zeros_like(acc))
""",
        "Tensor.split into blocks, torch.where masking, nan_to_num for the -inf maximum",
    ),
    Answer(
        "online_float64_accumulators",
        "online_softmax_attention",
        """
def online_softmax_attention(q, k, v, block_size, mask=None):
    Lk = k.size(-2)
    scores_scale = 1 / math.sqrt(q.size(-1))
    run_max = run_sum = out = None
    for start in range(0, Lk, block_size):
        end = min(Lk, start + block_size)
        s = torch.einsum("...qd,...kd->...qk", q, k[..., start:end, :]) * scores_scale
        if mask is not None:
            m = mask if mask.size(-1) == 1 else mask[..., start:end]
            s = s.masked_fill(torch.logical_not(m), float("-inf"))
        block_max = s.amax(-1, keepdim=True)
        new_max = block_max if run_max is None else torch.maximum(run_max, block_max)
        ref = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        w = torch.exp(s - ref)
        block_sum = w.sum(-1, keepdim=True, dtype=torch.float64)
        block_out = (w @ v[..., start:end, :]).double()
        if run_max is None:  # the first block: nothing to rescale yet
            run_sum, out = block_sum, block_out
        else:
            factor = torch.exp(run_max - ref).double()
            run_sum = run_sum * factor + block_sum
            out = out * factor + block_out
        run_max = new_max
    result = torch.where(run_sum == 0, torch.zeros_like(out), out / run_sum)
    return result.to(q.dtype)
""",
        "einsum, the first block handled on its own, sums and outputs accumulated in float64",
    ),
    Answer(
        "online_logsumexp",
        "online_softmax_attention",
        '''
def online_softmax_attention(q, k, v, block_size, mask=None):
    """Keeps the log of the normaliser (a running logsumexp) instead of a maximum and a sum."""
    q = q / math.sqrt(q.shape[-1])
    lse = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype, device=q.device)
    out = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype, device=q.device)
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1)
        if mask is not None:
            keep = mask.expand(*mask.shape[:-1], k.shape[-2])[..., start:start + block_size]
            s = s.masked_fill(~keep, float("-inf"))
        block_lse = torch.logsumexp(s, dim=-1, keepdim=True)
        new_lse = torch.logaddexp(lse, block_lse)
        finite = torch.isfinite(new_lse)
        base = torch.where(finite, new_lse, torch.zeros_like(new_lse))
        weights = torch.exp(s - base)  # already normalised by everything seen so far
        out = out * torch.exp(lse - base) + weights @ v[..., start:start + block_size, :]
        lse = new_lse
    return out
''',
        "a running log-sum-exp in place of the maximum and the normaliser",
    ),
    Answer(
        "online_transposed_keys",
        "online_softmax_attention",
        """
def online_softmax_attention(q, k, v, block_size, mask=None):
    kt = k.transpose(-1, -2) / math.sqrt(q.size(-1))  # scale the keys instead of the scores
    n_keys = kt.size(-1)
    best = None
    denominator = numerator = 0.0
    start = 0
    while start < n_keys:
        block = slice(start, start + block_size)
        s = q @ kt[..., block]
        if mask is not None:
            s = s + torch.zeros_like(s).masked_fill(~mask.expand(*mask.shape[:-1], n_keys)[..., block], float("-inf"))
        top = s.amax(dim=-1, keepdim=True)
        new_best = top if best is None else torch.maximum(best, top)
        shift = new_best.clone()
        shift[torch.isneginf(shift)] = 0.0
        e = (s - shift).exp()
        if best is not None:
            factor = (best - shift).exp()
            denominator = denominator * factor
            numerator = numerator * factor
        denominator = denominator + e.sum(dim=-1, keepdim=True)
        numerator = numerator + e @ v[..., block, :]
        best = new_best
        start += block_size
    empty = denominator == 0
    return numerator / denominator.masked_fill(empty, 1.0)
""",
        "scaled keys, an additive -inf mask, a while loop, in-place assignment into a copy",
    ),
    # ------------------------------------------------------------------ kv_cache_bytes
    Answer(
        "cache_bytes_meta_tensors",
        "kv_cache_bytes",
        """
def kv_cache_bytes(num_layers, num_heads, num_kv_heads, head_dim, tokens, batch_size, bytes_per_value):
    keys = torch.empty(batch_size, num_kv_heads, tokens, head_dim, device="meta")
    values = torch.empty_like(keys)
    return num_layers * (keys.numel() + values.numel()) * bytes_per_value
""",
        "the cache's tensors made on the meta device, their numbers counted",
    ),
    Answer(
        "cache_bytes_math_prod",
        "kv_cache_bytes",
        """
def kv_cache_bytes(num_layers, num_heads, num_kv_heads, head_dim, tokens, batch_size, bytes_per_value):
    shape = (batch_size, num_kv_heads, tokens, head_dim)  # one of the two tensors of one layer
    return math.prod((num_layers, 2, *shape, bytes_per_value))
""",
        "math.prod over the shape of the cached tensors",
    ),
    Answer(
        "cache_bytes_loop",
        "kv_cache_bytes",
        """
def kv_cache_bytes(num_layers, num_heads, num_kv_heads, head_dim, tokens, batch_size, bytes_per_value):
    per_token = num_kv_heads * head_dim * bytes_per_value
    total = 0
    for layer in range(num_layers):
        for cached in ("keys", "values"):
            total += per_token * tokens * batch_size
    return total
""",
        "a loop over the layers and over keys and values",
    ),
    Answer(
        "cache_bytes_from_module",
        "kv_cache_bytes",
        """
def kv_cache_bytes(num_layers, num_heads, num_kv_heads, head_dim, tokens, batch_size, bytes_per_value):
    with torch.device("meta"):  # only the shapes of the projections are needed
        layer = GroupedQueryAttention(num_heads * head_dim, num_heads, num_kv_heads)
    per_position = layer.W_k.out_features + layer.W_v.out_features
    return per_position * tokens * batch_size * num_layers * bytes_per_value
""",
        "reads the widths of W_k and W_v off a GroupedQueryAttention built on the meta device",
    ),
    Answer(
        "cache_bytes_numpy",
        "kv_cache_bytes",
        """
import numpy as np


def kv_cache_bytes(num_layers, num_heads, num_kv_heads, head_dim, tokens, batch_size, bytes_per_value):
    factors = np.array([2, num_layers, num_kv_heads, head_dim, tokens, batch_size, bytes_per_value], dtype=np.int64)
    return factors.prod()
""",
        "a NumPy int64 product, returned as a NumPy integer",
    ),
    # ------------------------------------------------------------------ layers_needed
    Answer(
        "depth_ceil",
        "layers_needed",
        """
import math


def layers_needed(window, context):
    return math.ceil((context - 1) / (window - 1))
""",
        "math.ceil of a float division",
    ),
    Answer(
        "depth_loop",
        "layers_needed",
        """
def layers_needed(window, context):
    layers, reach = 0, 1
    while reach < context:
        layers += 1
        reach += window - 1
    return layers
""",
        "adds layers until the reach is enough",
    ),
    Answer(
        "depth_floor_plus_one",
        "layers_needed",
        """
def layers_needed(window, context):
    return (context - 2) // (window - 1) + 1
""",
        "integer division, shifted by one",
    ),
    Answer(
        "depth_divmod",
        "layers_needed",
        """
def layers_needed(window, context):
    full, rest = divmod(context - 1, window - 1)
    return full + (1 if rest else 0)
""",
        "divmod, with one more layer for a remainder",
    ),
    # ------------------------------------------------------------------ misrouted_heads
    Answer(
        "misrouted_compared_tensors",
        "misrouted_heads",
        """
def misrouted_heads(num_heads, num_kv_heads):
    n_rep = num_heads // num_kv_heads
    kv = torch.arange(num_kv_heads)
    in_place, tiled = kv.repeat_interleave(n_rep), kv.repeat(n_rep)
    return torch.nonzero(in_place != tiled).flatten().tolist()
""",
        "both orders built with torch and compared: the check itself",
    ),
    Answer(
        "misrouted_through_repeat_kv",
        "misrouted_heads",
        """
def misrouted_heads(num_heads, num_kv_heads):
    n_rep = num_heads // num_kv_heads
    heads = torch.arange(num_kv_heads, dtype=torch.float32).view(1, num_kv_heads, 1, 1)
    right = repeat_kv(heads, n_rep).flatten()
    slipped = heads.repeat(1, n_rep, 1, 1).flatten()
    return torch.nonzero(right != slipped).flatten()
""",
        "Part 1's repeat_kv beside Tensor.repeat, on head numbers; returns a tensor",
    ),
    Answer(
        "misrouted_numpy",
        "misrouted_heads",
        """
import numpy as np


def misrouted_heads(num_heads, num_kv_heads):
    n_rep = num_heads // num_kv_heads
    kv = np.arange(num_kv_heads)
    return np.flatnonzero(np.repeat(kv, n_rep) != np.tile(kv, n_rep))
""",
        "np.repeat against np.tile; returns a NumPy array",
    ),
    Answer(
        "misrouted_loop_set",
        "misrouted_heads",
        """
def misrouted_heads(num_heads, num_kv_heads):
    group = num_heads // num_kv_heads
    wrong = set()
    for head in range(num_heads):
        contract, tiled = divmod(head, group)[0], head - (head // num_kv_heads) * num_kv_heads
        if contract != tiled:
            wrong.add(head)
    return sorted(wrong)
""",
        "a loop collecting a set, then sorted",
    ),
    # ------------------------------------------------------------------ evictable_positions
    Answer(
        "evictable_masked",
        "evictable_positions",
        """
def evictable_positions(position, window):
    later = sliding_window_mask(position + window + 1, window)[position + 1 :]  # the queries after `position`
    read = later.any(dim=0)  # the keys one of them sees
    return [p for p in range(position + 1) if not read[p]]
""",
        "the check itself: Part 3's mask, the keys no later query sees",
    ),
    Answer(
        "evictable_arange",
        "evictable_positions",
        """
def evictable_positions(position, window):
    return torch.arange(position + 1)[: max(0, position - window + 2)]
""",
        "a tensor, sliced",
    ),
    Answer(
        "evictable_loop",
        "evictable_positions",
        """
def evictable_positions(position, window):
    kept = set(range(position + 2 - window, position + 1))  # what query position + 1 still reads
    return tuple(p for p in range(position + 1) if p not in kept)
""",
        "a tuple of what the next query does not read",
    ),
    Answer(
        "evictable_distance",
        "evictable_positions",
        idiom="the distance of each cached position from the next query, a comprehension",
        code="""
def evictable_positions(position, window):
    next_query = position + 1
    return [p for p in range(position + 1) if next_query - p >= window]
""",
    ),
]
