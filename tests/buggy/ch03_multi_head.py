"""Wrong answers to ch03_multi_head that students really write."""

from tests.buggy import Bug

TESTS = {
    "split_heads": ["test_split_heads_shapes", "test_split_heads_values", "test_split_heads_error"],
    "merge_heads": ["test_merge_heads"],
    "MultiHeadAttention": ["test_mha_shapes", "test_mha_matches_torch", "test_mha_mask", "test_mha_error"],
}

MHA_INIT = '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
'''


def mha(body: str) -> str:
    return MHA_INIT + body


BUGS = [
    # ------------------------------------------------------------------ split_heads
    Bug("split_without_transpose", "split_heads", why="a single view to (B, H, L, dh) mixes positions and heads",
        code='''
def split_heads(x, num_heads):
    batch, length, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} does not divide {d_model}")
    return x.reshape(batch, num_heads, length, d_model // num_heads)
'''),
    Bug("split_strided_features", "split_heads", why="head h gets every H-th feature instead of a slice",
        code='''
def split_heads(x, num_heads):
    batch, length, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} does not divide {d_model}")
    return x.view(batch, length, d_model // num_heads, num_heads).permute(0, 3, 1, 2)
'''),
    Bug("split_forgets_to_transpose", "split_heads", why="returns (B, L, H, dh)", code='''
def split_heads(x, num_heads):
    batch, length, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} does not divide {d_model}")
    return x.view(batch, length, num_heads, d_model // num_heads)
'''),
    Bug("split_no_value_error", "split_heads", why="lets view raise a RuntimeError", code='''
def split_heads(x, num_heads):
    batch, length, d_model = x.shape
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)
'''),
    Bug("split_error_without_name", "split_heads", why="a ValueError that does not say which argument",
        code='''
def split_heads(x, num_heads):
    batch, length, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError("bad shape")
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)
'''),
    # ------------------------------------------------------------------ merge_heads
    Bug("merge_without_transpose", "merge_heads", why="reshapes (B, H, L, dh) straight to (B, L, D)", code='''
def merge_heads(x):
    batch, heads, length, d_head = x.shape
    return x.reshape(batch, length, heads * d_head)
'''),
    Bug("merge_view_after_transpose", "merge_heads", why="view on a non-contiguous tensor raises", code='''
def merge_heads(x):
    batch, heads, length, d_head = x.shape
    return x.transpose(1, 2).view(batch, length, heads * d_head)
'''),
    Bug("merge_wrong_permute", "merge_heads", why="puts dh before H: interleaves the heads' features", code='''
def merge_heads(x):
    batch, heads, length, d_head = x.shape
    return x.permute(0, 2, 3, 1).reshape(batch, length, heads * d_head)
'''),
    # ------------------------------------------------------------------ MultiHeadAttention
    Bug("mha_scale_by_d_model", "MultiHeadAttention", why="divides by sqrt(d_model), not sqrt(d_head)",
        code=mha('''
        q = split_heads(self.W_q(query), self.num_heads)
        k = split_heads(self.W_k(key), self.num_heads)
        v = split_heads(self.W_v(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(query.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return self.W_o(merge_heads(weights @ v)), weights
''')),
    Bug("mha_no_output_projection", "MultiHeadAttention", why="forgets W_o", code=mha('''
        q = split_heads(self.W_q(query), self.num_heads)
        k = split_heads(self.W_k(key), self.num_heads)
        v = split_heads(self.W_v(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return merge_heads(weights @ v), weights
''')),
    Bug("mha_heads_without_transpose", "MultiHeadAttention", why="splits heads with one view", code=mha('''
        B, Lq, D = query.shape
        Lk, H = key.size(1), self.num_heads
        q = self.W_q(query).view(B, H, Lq, D // H)
        k = self.W_k(key).view(B, H, Lk, D // H)
        v = self.W_v(value).view(B, H, Lk, D // H)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // H)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return self.W_o((weights @ v).reshape(B, Lq, D)), weights
''')),
    Bug("mha_keys_projected_with_W_q", "MultiHeadAttention", why="copy-paste: W_q for the keys", code=mha('''
        q = split_heads(self.W_q(query), self.num_heads)
        k = split_heads(self.W_q(key), self.num_heads)
        v = split_heads(self.W_v(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return self.W_o(merge_heads(weights @ v)), weights
''')),
    Bug("mha_mask_inverted", "MultiHeadAttention", why="uses nn.MultiheadAttention's True = ignore", code=mha('''
        q = split_heads(self.W_q(query), self.num_heads)
        k = split_heads(self.W_k(key), self.num_heads)
        v = split_heads(self.W_v(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        weights = torch.nan_to_num(torch.softmax(scores, dim=-1))
        return self.W_o(merge_heads(weights @ v)), weights
''')),
    Bug("mha_weights_averaged", "MultiHeadAttention", why="returns weights averaged over the heads", code=mha('''
        q = split_heads(self.W_q(query), self.num_heads)
        k = split_heads(self.W_k(key), self.num_heads)
        v = split_heads(self.W_v(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return self.W_o(merge_heads(weights @ v)), weights.mean(dim=1)
''')),
    Bug("mha_nan_on_full_mask", "MultiHeadAttention", why="a query with no visible key gets NaN", code=mha('''
        q = split_heads(self.W_q(query), self.num_heads)
        k = split_heads(self.W_k(key), self.num_heads)
        v = split_heads(self.W_v(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return self.W_o(merge_heads(weights @ v)), weights
''')),
    Bug("mha_always_bias", "MultiHeadAttention", why="ignores bias=False", code='''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.W_q(query), self.num_heads)
        k = split_heads(self.W_k(key), self.num_heads)
        v = split_heads(self.W_v(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return self.W_o(merge_heads(weights @ v)), weights
'''),
    Bug("mha_no_value_error", "MultiHeadAttention", why="accepts d_model that num_heads does not divide", code='''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.W_q(query), self.num_heads)
        k = split_heads(self.W_k(key), self.num_heads)
        v = split_heads(self.W_v(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return self.W_o(merge_heads(weights @ v)), weights
'''),
]
