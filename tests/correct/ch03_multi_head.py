"""Correct answers to ch03_multi_head in other idioms than the reference's."""

from tests.correct import Answer, fill_in

WEIGHT_PARTS = """
WEIGHT_PARTS = (
    "a row of W_q.weight",
    "a row of W_k.weight",
    "a row of W_v.weight",
    "a column of W_q.weight",
    "a row of W_o.weight",
)
"""

# Every idiom of MultiHeadAttention builds the four projections the assignment names; CHECKS (the checks of its
# arguments and what it keeps of them) and REST (the rest of the class) are its own.
MULTI_HEAD = """
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
CHECKS
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
REST
"""

ANSWERS: list[Answer] = [
    # ------------------------------------------------------------------ split_heads
    Answer(
        "split_chunk_stack",
        "split_heads",
        idiom="torch.chunk over the features, stacked as dimension 1",
        code="""
def split_heads(x, num_heads):
    if x.size(-1) % num_heads:
        raise ValueError(f"num_heads ({num_heads}) must divide the last dimension of x ({x.size(-1)})")
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)
""",
    ),
    Answer(
        "split_unflatten_permute",
        "split_heads",
        idiom="unflatten the features, then permute",
        code="""
def split_heads(x, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)
""",
    ),
    Answer(
        "split_slices_loop",
        "split_heads",
        idiom="a loop over the heads, slicing the features",
        code="""
def split_heads(x, num_heads):
    batch, length, d_model = x.shape
    if num_heads <= 0 or d_model % num_heads:
        raise ValueError("num_heads must be a positive divisor of the feature size")
    d_head = d_model // num_heads
    return torch.stack([x[:, :, h * d_head:(h + 1) * d_head] for h in range(num_heads)], dim=1)
""",
    ),
    Answer(
        "split_reshape_contiguous",
        "split_heads",
        idiom="divmod, reshape, transpose(2, 1), a contiguous copy",
        code="""
def split_heads(x, num_heads):
    batch, length, d_model = x.size()
    head_size, rest = divmod(d_model, num_heads)
    if rest:
        raise ValueError(f"cannot split {d_model} features into num_heads={num_heads} equal heads")
    return x.reshape(batch, length, num_heads, head_size).transpose(2, 1).contiguous()
""",
    ),
    # ------------------------------------------------------------------ merge_heads
    Answer(
        "merge_unbind_cat",
        "merge_heads",
        idiom="the heads unbound and concatenated along the features",
        code="""
def merge_heads(x):
    return torch.cat(x.unbind(dim=1), dim=-1)
""",
    ),
    Answer(
        "merge_permute_view",
        "merge_heads",
        idiom="permute, a contiguous copy, then view",
        code="""
def merge_heads(x):
    return x.permute(0, 2, 1, 3).contiguous().view(x.size(0), x.size(2), -1)
""",
    ),
    Answer(
        "merge_flatten",
        "merge_heads",
        idiom="transpose, then flatten the last two dimensions",
        code="""
def merge_heads(x):
    return x.transpose(1, 2).flatten(start_dim=2)
""",
    ),
    Answer(
        "merge_loop_cat",
        "merge_heads",
        idiom="a loop over the heads",
        code="""
def merge_heads(x):
    return torch.cat([x[:, h] for h in range(x.size(1))], dim=-1)
""",
    ),
    Answer(
        "merge_movedim",
        "merge_heads",
        idiom="movedim, then reshape with -1",
        code="""
def merge_heads(x):
    return x.movedim(1, 2).reshape(x.shape[0], x.shape[2], -1)
""",
    ),
    # ------------------------------------------------------------------ MultiHeadAttention
    Answer(
        "mha_einsum_large_negative",
        "MultiHeadAttention",
        idiom="its own reshapes and einsum; masked scores set to -1e9, weights multiplied by the mask",
        code=fill_in(
            MULTI_HEAD,
            CHECKS="""\
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not a multiple of num_heads={num_heads}")
        self.h, self.d_head = num_heads, d_model // num_heads
""",
            REST="""
    def forward(self, query, key, value, mask=None):
        batch = query.size(0)
        q = self.W_q(query).view(batch, -1, self.h, self.d_head)
        k = self.W_k(key).view(batch, -1, self.h, self.d_head)
        v = self.W_v(value).view(batch, -1, self.h, self.d_head)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / self.d_head ** 0.5
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        weights = scores.softmax(-1)
        if mask is not None:
            weights = weights * mask
        heads = torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, query.size(1), -1)
        return self.W_o(heads), weights
""",
        ),
    ),
    Answer(
        "mha_loop_over_heads_with_buffer",
        "MultiHeadAttention",
        idiom="a loop over the heads with torch.nn.functional.linear; the scale kept as an extra buffer",
        code=fill_in(
            MULTI_HEAD,
            CHECKS="""\
        if d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
        self.num_heads = num_heads
""",
            REST="""\
        self.register_buffer("scale", torch.tensor(1.0 / math.sqrt(d_model // num_heads)))

    def forward(self, query, key, value, mask=None):
        d_head = query.size(-1) // self.num_heads
        q = F.linear(query, self.W_q.weight, self.W_q.bias)
        k = F.linear(key, self.W_k.weight, self.W_k.bias)
        v = F.linear(value, self.W_v.weight, self.W_v.bias)
        if mask is not None:
            mask = mask.expand(query.size(0), self.num_heads, query.size(1), key.size(1))
        outputs, maps = [], []
        for h in range(self.num_heads):
            part = slice(h * d_head, (h + 1) * d_head)
            scores = q[..., part] @ k[..., part].transpose(1, 2) * self.scale
            if mask is not None:
                scores = scores.masked_fill(~mask[:, h], float("-inf"))
            weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
            outputs.append(weights @ v[..., part])
            maps.append(weights)
        return self.W_o(torch.cat(outputs, dim=-1)), torch.stack(maps, dim=1)
""",
        ),
    ),
    Answer(
        "mha_float64_where",
        "MultiHeadAttention",
        idiom="split_heads and merge_heads with float64 intermediates; torch.where with the dtype's minimum",
        code=fill_in(
            MULTI_HEAD,
            CHECKS="""\
        if d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
        self.num_heads = num_heads
""",
            REST="""
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.W_q(query), self.num_heads).double()
        k = split_heads(self.W_k(key), self.num_heads).double()
        v = split_heads(self.W_v(value), self.num_heads).double()
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(k.shape[-1])
        if mask is not None:
            scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = torch.where(mask, weights, 0.0)
        heads = merge_heads(torch.matmul(weights, v)).to(query.dtype)
        return self.W_o(heads), weights.to(query.dtype)
""",
        ),
    ),
    Answer(
        "mha_output_projection_per_head",
        "MultiHeadAttention",
        idiom="queries scaled first; an additive -inf mask; W_o applied head by head and summed",
        code=fill_in(
            MULTI_HEAD,
            CHECKS="""\
        if d_model % num_heads != 0:
            raise ValueError(f"d_model must be divisible by num_heads (got {d_model} and {num_heads})")
        self.heads = num_heads
""",
            REST="""
    def forward(self, query, key, value, mask=None):
        batch, length, d_model = query.shape
        d_head = d_model // self.heads
        q = self.W_q(query).reshape(batch, length, self.heads, d_head).permute(0, 2, 1, 3)
        k = self.W_k(key).reshape(batch, -1, self.heads, d_head).permute(0, 2, 3, 1)  # (B, H, dh, Lk)
        v = self.W_v(value).reshape(batch, -1, self.heads, d_head).permute(0, 2, 1, 3)
        scores = torch.matmul(q / math.sqrt(d_head), k)
        if mask is not None:
            scores = scores + torch.zeros_like(scores).masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        per_head = weights @ v  # (B, H, Lq, dh)
        W_o = self.W_o.weight.view(d_model, self.heads, d_head)  # output feature, head, head feature
        output = torch.einsum("bhqd,ehd->bqe", per_head, W_o)
        if self.W_o.bias is not None:
            output = output + self.W_o.bias
        return output, weights
""",
        ),
    ),
    Answer(
        "mha_sdpa_broadcast_mask",
        "MultiHeadAttention",
        idiom="the heads' outputs from F.scaled_dot_product_attention, the mask broadcast to the scores' shape first",
        code=fill_in(
            MULTI_HEAD,
            CHECKS="""\
        if d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
        self.num_heads = num_heads
""",
            REST="""
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.W_q(query), self.num_heads)
        k = split_heads(self.W_k(key), self.num_heads)
        v = split_heads(self.W_v(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            mask = torch.broadcast_to(mask, scores.shape)  # SDPA takes no mask of shape (Lk,)
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).nan_to_num(0.0)
        return self.W_o(merge_heads(heads)), weights
""",
        ),
    ),
    # ------------------------------------------------------------------ multi_head_parameters
    Answer(
        "mh_parameters_built",
        "multi_head_parameters",
        idiom="builds the module and counts its parameters",
        code="""
def multi_head_parameters(d_model, num_heads, bias):
    module = MultiHeadAttention(d_model, num_heads, bias=bias)
    return sum(p.numel() for p in module.parameters())
""",
    ),
    Answer(
        "mh_parameters_factored",
        "multi_head_parameters",
        idiom="one factored formula with int(bias)",
        code="""
def multi_head_parameters(d_model, num_heads, bias):
    return 4 * d_model * (d_model + int(bias))
""",
    ),
    Answer(
        "mh_parameters_loop",
        "multi_head_parameters",
        idiom="a loop over the four layers' shapes",
        code="""
def multi_head_parameters(d_model, num_heads, bias):
    total = 0
    for name in ["W_q", "W_k", "W_v", "W_o"]:
        total += d_model * d_model
        if bias:
            total += d_model
    return total
""",
    ),
    Answer(
        "mh_parameters_nn_linear",
        "multi_head_parameters",
        idiom="counts one nn.Linear on the meta device, times four",
        code="""
def multi_head_parameters(d_model, num_heads, bias):
    layer = nn.Linear(d_model, d_model, bias=bias, device="meta")
    return 4 * sum(p.numel() for p in layer.parameters())
""",
    ),
    # ------------------------------------------------------------------ score_multiplications
    Answer(
        "multiplications_per_head",
        "score_multiplications",
        idiom="a loop over the heads",
        code="""
def score_multiplications(batch, len_q, len_k, d_model, num_heads):
    head_size = d_model // num_heads
    total = 0
    for _ in range(num_heads):
        total += batch * len_q * len_k * head_size
    return total
""",
    ),
    Answer(
        "multiplications_simplified",
        "score_multiplications",
        idiom="the heads cancel: batch * len_q * len_k * d_model",
        code="""
def score_multiplications(batch, len_q, len_k, d_model, num_heads):
    return batch * len_q * len_k * d_model
""",
    ),
    Answer(
        "multiplications_meta_shapes",
        "score_multiplications",
        idiom="the shapes of meta tensors of the split queries and the scores",
        code="""
def score_multiplications(batch, len_q, len_k, d_model, num_heads):
    q = torch.empty(batch, num_heads, len_q, d_model // num_heads, device="meta")
    scores = torch.empty(batch, num_heads, len_q, len_k, device="meta")
    return scores.numel() * q.size(-1)
""",
    ),
    Answer(
        "multiplications_math_prod",
        "score_multiplications",
        idiom="math.prod, as a float",
        code="""
def score_multiplications(batch, len_q, len_k, d_model, num_heads):
    return float(math.prod([batch, num_heads, len_q, len_k])) * (d_model / num_heads)
""",
    ),
    # ------------------------------------------------------------------ right_slices
    Answer(
        "slices_compared",
        "right_slices",
        """
def right_slices(length, num_heads):
    head_size = 2
    x = torch.arange(length * num_heads * head_size).view(1, length, num_heads * head_size)
    right = split_heads(x, num_heads)
    slip = x.view(1, num_heads, length, head_size)
    same = (right == slip).all(dim=-1)[0]  # (H, L)
    return same.nonzero().tolist()
""",
        "the check itself: Part 1 beside the slip on distinct numbers, nonzero() for the pairs",
    ),
    Answer(
        "slices_memory_offsets",
        "right_slices",
        """
def right_slices(length, num_heads):
    found = set()
    for head in range(num_heads):
        for position in range(length):
            slip_start = head * length + position  # in units of one head's features
            part_1_start = position * num_heads + head
            if slip_start == part_1_start:
                found.add((head, position))
    return found
""",
        "the start of each slice in memory, in units of a head's features; a set of tuples",
    ),
    Answer(
        "slices_numpy",
        "right_slices",
        """
import numpy as np


def right_slices(length, num_heads):
    heads, rows = np.meshgrid(np.arange(num_heads), np.arange(length), indexing="ij")
    keep = heads * (length - 1) == rows * (num_heads - 1)
    return np.argwhere(keep)
""",
        "a NumPy grid and argwhere (an (n, 2) array)",
    ),
    Answer(
        "slices_gcd",
        "right_slices",
        """
import math


def right_slices(length, num_heads):
    if length == 1 or num_heads == 1:
        return [[h, row] for h in range(num_heads) for row in range(length)]
    step = math.gcd(length - 1, num_heads - 1)  # h (L - 1) = l (H - 1): h and l move in steps
    dh, dl = (num_heads - 1) // step, (length - 1) // step
    return [[k * dh, k * dl] for k in range(step + 1)]
""",
        "the solutions of h (L - 1) = l (H - 1) stepped out with the gcd",
    ),
    # ------------------------------------------------------------------ reweighted_heads
    Answer(
        "reweighted_measured",
        "reweighted_heads",
        WEIGHT_PARTS
        + """


def reweighted_heads(part, index, d_model, num_heads):
    torch.manual_seed(0)
    attention = MultiHeadAttention(d_model, num_heads).double()
    x = torch.randn(2, 5, d_model, dtype=torch.float64)
    _, before = attention(x, x, x)
    kind, matrix = part.split()[1], part.split()[-1].split(".")[0]  # "a row of W_q.weight": "row", "W_q"
    weight = getattr(attention, matrix).weight
    with torch.no_grad():
        if kind == "row":
            weight[index] += torch.randn(d_model, dtype=torch.float64)
        else:
            weight[:, index] += torch.randn(d_model, dtype=torch.float64)
    _, after = attention(x, x, x)
    changed = (after - before).abs().amax(dim=(0, 2, 3)) > 1e-9  # (H,)
    return changed.nonzero().flatten().tolist()
""",
        "the check itself: Part 3 before and after a random change of that row or column, per head",
    ),
    Answer(
        "reweighted_slices",
        "reweighted_heads",
        WEIGHT_PARTS
        + """


def reweighted_heads(part, index, d_model, num_heads):
    dh = d_model // num_heads
    if "W_v" in part or "W_o" in part:
        return []
    if "column" in part:
        return list(range(num_heads))
    return [h for h in range(num_heads) if h * dh <= index < (h + 1) * dh]
""",
        "the head whose slice of features holds the index",
    ),
    Answer(
        "reweighted_numpy",
        "reweighted_heads",
        WEIGHT_PARTS
        + """
import numpy as np



def reweighted_heads(part, index, d_model, num_heads):
    owner = np.repeat(np.arange(num_heads), d_model // num_heads)  # the head of each output feature
    return {
        WEIGHT_PARTS[0]: owner[[index]],
        WEIGHT_PARTS[1]: owner[[index]],
        WEIGHT_PARTS[2]: np.array([], dtype=int),
        WEIGHT_PARTS[3]: np.unique(owner),
        WEIGHT_PARTS[4]: np.array([], dtype=int),
    }[part]
""",
        "a NumPy array of the head of each feature",
    ),
    Answer(
        "reweighted_view",
        "reweighted_heads",
        idiom="PyTorch: the features viewed as (num_heads, head_size), the rows that hold the index, a tensor",
        code=WEIGHT_PARTS
        + """

def reweighted_heads(part, index, d_model, num_heads):
    if part.endswith(("W_v.weight", "W_o.weight")):
        return torch.empty(0, dtype=torch.long)
    features = torch.arange(d_model).view(num_heads, -1)  # row h: the features of head h
    if part.startswith("a column"):
        return torch.arange(num_heads)
    return (features == index).any(dim=1).nonzero().flatten()
""",
    ),
]
