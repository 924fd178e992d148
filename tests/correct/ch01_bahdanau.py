"""Correct answers to ch01_bahdanau in other idioms than the reference's."""

from tests.correct import Answer

ATTENTION_INIT = """class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)
"""

DECODER_INIT = """class BahdanauDecoder(nn.Module):
    def __init__(self, vocab_size, emb_dim, enc_dim, hidden_dim, attn_dim):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        self.attention = AdditiveAttention(hidden_dim, enc_dim, attn_dim)
        self.rnn = nn.GRUCell(emb_dim + enc_dim, hidden_dim)
        self.out = nn.Linear(hidden_dim + enc_dim + emb_dim, vocab_size)
"""

GRADIENTS = """GRADIENT_NAMES = ("W_q", "W_k", "v")
GRADIENT_SITUATIONS = (
    "random inputs and no mask",
    "every query is all zeros",
    "the weights of v are all zeros",
    "every position holds the same value vector (the keys differ)",
    "the mask leaves one visible position in each sequence",
)
"""

ANSWERS: list[Answer] = [
    # ------------------------------------------------------------------ AdditiveAttention
    Answer(
        "additive_einsum_large_negative",
        "AdditiveAttention",
        idiom="einsum with v's weight; masked scores set to -1e9, weights multiplied by the mask",
        code=ATTENTION_INIT
        + """
    def forward(self, query, keys, values, mask=None):
        energy = torch.tanh(self.W_q(query)[:, None, :] + self.W_k(keys))  # (B, S, H)
        scores = torch.einsum("bsh,h->bs", energy, self.v.weight[0])
        if mask is not None:
            scores = torch.where(mask, scores, torch.full_like(scores, -1e9))
        weights = F.softmax(scores, dim=1)
        if mask is not None:
            weights = weights * mask
        return torch.einsum("bs,bsd->bd", weights, values), weights
""",
    ),
    Answer(
        "additive_expand_nan_to_num",
        "AdditiveAttention",
        idiom="the query expanded over the positions; NaN rows cleaned with nan_to_num; a broadcast sum",
        code=ATTENTION_INIT
        + """
    def forward(self, query, keys, values, mask=None):
        projected = self.W_q(query).unsqueeze(1).expand(-1, keys.size(1), -1)
        scores = self.v(torch.tanh(projected + self.W_k(keys))).squeeze(2)
        if mask is not None:
            scores = scores.masked_fill(mask.logical_not(), float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        context = (weights.unsqueeze(-1) * values).sum(dim=1)
        return context, weights
""",
    ),
    Answer(
        "additive_float64_finfo_min",
        "AdditiveAttention",
        idiom="float64 intermediates, cast back; masked scores set to float64's most negative number",
        code=ATTENTION_INIT
        + """
    def forward(self, query, keys, values, mask=None):
        scores = self.v(torch.tanh(self.W_q(query).unsqueeze(-2) + self.W_k(keys))).squeeze(-1).double()
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(torch.float64).min)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        context = torch.matmul(weights.unsqueeze(-2), values.double()).squeeze(-2)
        return context.to(values.dtype), weights.to(values.dtype)
""",
    ),
    Answer(
        "additive_loop_with_buffer",
        "AdditiveAttention",
        idiom="a loop over the batch with its own stable softmax; an extra buffer for a fully masked row's weight",
        code=ATTENTION_INIT
        + """        self.register_buffer("nothing_visible", torch.tensor(0.0))

    def forward(self, query, keys, values, mask=None):
        contexts, maps = [], []
        for b in range(query.size(0)):
            scores = self.v(torch.tanh(self.W_q(query[b]) + self.W_k(keys[b]))).squeeze(-1)  # (S,)
            visible = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask[b]
            if visible.any():
                shifted = scores - scores[visible].max()
                exps = torch.where(visible, torch.exp(shifted), torch.zeros_like(shifted))
                weights = exps / exps.sum()
            else:
                weights = self.nothing_visible.expand_as(scores).to(scores.dtype)
            maps.append(weights)
            contexts.append(weights @ values[b])
        return torch.stack(contexts), torch.stack(maps)
""",
    ),
    # ------------------------------------------------------------------ BahdanauDecoder
    Answer(
        "decoder_gru_by_hand",
        "BahdanauDecoder",
        idiom="the GRU cell's equations written out with its weights; torch.nn.functional.embedding and linear",
        code=DECODER_INIT
        + """
    def step(self, prev_tokens, hidden, enc_outputs, src_mask=None):
        embedded = F.embedding(prev_tokens, self.embedding.weight)
        context, weights = self.attention(hidden, enc_outputs, enc_outputs, src_mask)
        gates_x = F.linear(torch.cat((embedded, context), 1), self.rnn.weight_ih, self.rnn.bias_ih)
        gates_h = F.linear(hidden, self.rnn.weight_hh, self.rnn.bias_hh)
        x_r, x_z, x_n = gates_x.chunk(3, 1)
        h_r, h_z, h_n = gates_h.chunk(3, 1)
        reset = torch.sigmoid(x_r + h_r)
        update = torch.sigmoid(x_z + h_z)
        candidate = torch.tanh(x_n + reset * h_n)
        new_hidden = (1 - update) * candidate + update * hidden
        logits = F.linear(torch.cat((new_hidden, context, embedded), 1), self.out.weight, self.out.bias)
        return logits, new_hidden, weights
""",
    ),
    Answer(
        "decoder_keywords_hstack",
        "BahdanauDecoder",
        idiom="the attention called by keyword before the embedding; torch.hstack",
        code=DECODER_INIT
        + """
    def step(self, prev_tokens, hidden, enc_outputs, src_mask=None):
        context, weights = self.attention(query=hidden, keys=enc_outputs, values=enc_outputs, mask=src_mask)
        embedded = self.embedding(prev_tokens)
        new_hidden = self.rnn(torch.hstack([embedded, context]), hidden)
        return self.out(torch.hstack([new_hidden, context, embedded])), new_hidden, weights
""",
    ),
    Answer(
        "decoder_split_output_layer",
        "BahdanauDecoder",
        idiom="the output layer's weight split into its three blocks, summed; an extra dropout submodule (p=0)",
        code=DECODER_INIT
        + """        self.sizes = (hidden_dim, enc_dim, emb_dim)
        self.dropout = nn.Dropout(0.0)

    def step(self, prev_tokens, hidden, enc_outputs, src_mask=None):
        embedded = self.dropout(self.embedding(prev_tokens))
        context, weights = self.attention(hidden, enc_outputs, enc_outputs, src_mask)
        state = self.rnn(torch.cat([embedded, context], dim=-1), hidden)
        W_s, W_c, W_e = self.out.weight.split(self.sizes, dim=1)
        logits = state @ W_s.T + context @ W_c.T + embedded @ W_e.T + self.out.bias
        return logits, state, weights
""",
    ),
    Answer(
        "decoder_addmm_indexing",
        "BahdanauDecoder",
        idiom="the embedding table indexed directly; the mask by keyword; torch.addmm for the output layer",
        code=DECODER_INIT
        + """
    def step(self, prev_tokens, hidden, enc_outputs, src_mask=None):
        embedded = self.embedding.weight[prev_tokens]
        context, weights = self.attention(hidden, enc_outputs, enc_outputs, mask=src_mask)
        hidden = self.rnn(torch.cat([embedded, context], 1), hidden)
        features = torch.cat([hidden, context, embedded], 1)
        return torch.addmm(self.out.bias, features, self.out.weight.t()), hidden, weights
""",
    ),
    # ------------------------------------------------------------------ additive_attention_parameters
    Answer(
        "parameters_factored",
        "additive_attention_parameters",
        idiom="one factored product",
        code="""
def additive_attention_parameters(query_dim, key_dim, hidden_dim):
    return hidden_dim * (query_dim + key_dim + 1)
""",
    ),
    Answer(
        "parameters_built",
        "additive_attention_parameters",
        idiom="builds the module and counts its parameters",
        code="""
def additive_attention_parameters(query_dim, key_dim, hidden_dim):
    module = AdditiveAttention(query_dim, key_dim, hidden_dim)
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
""",
    ),
    Answer(
        "parameters_shapes",
        "additive_attention_parameters",
        idiom="a loop over the weight shapes, in float",
        code="""
def additive_attention_parameters(query_dim, key_dim, hidden_dim):
    shapes = [(hidden_dim, query_dim), (hidden_dim, key_dim), (1, hidden_dim)]
    total = 0.0
    for rows, cols in shapes:
        total += rows * cols
    return total
""",
    ),
    Answer(
        "parameters_torch",
        "additive_attention_parameters",
        idiom="a torch tensor",
        code="""
def additive_attention_parameters(query_dim, key_dim, hidden_dim):
    sizes = torch.tensor([query_dim, key_dim, 1])
    return (sizes * hidden_dim).sum()
""",
    ),
    # ------------------------------------------------------------------ attention_scores_computed
    Answer(
        "scores_loop",
        "attention_scores_computed",
        idiom="loops over the steps and sentences",
        code="""
def attention_scores_computed(batch, src_len, tgt_len):
    total = 0
    for _ in range(tgt_len):
        for _ in range(batch):
            total += src_len
    return total
""",
    ),
    Answer(
        "scores_math_prod",
        "attention_scores_computed",
        idiom="math.prod",
        code="""
def attention_scores_computed(batch, src_len, tgt_len):
    return math.prod([batch, src_len, tgt_len])
""",
    ),
    Answer(
        "scores_shape",
        "attention_scores_computed",
        idiom="the number of entries of a (tgt_len, batch, src_len) tensor of scores",
        code="""
def attention_scores_computed(batch, src_len, tgt_len):
    return torch.empty(tgt_len, batch, src_len, device="meta").numel()
""",
    ),
    Answer(
        "scores_numpy",
        "attention_scores_computed",
        idiom="a NumPy integer",
        code="""
import numpy as np


def attention_scores_computed(batch, src_len, tgt_len):
    return np.int64(src_len) * tgt_len * batch
""",
    ),
    # ------------------------------------------------------------------ zero_gradients
    Answer(
        "gradients_measured",
        "zero_gradients",
        idiom="the check itself: Part 1 built for each situation, backward(), the names whose .grad is all but zero",
        code=GRADIENTS
        + """

def zero_gradients(situation):
    torch.manual_seed(0)
    attention = AdditiveAttention(4, 3, 5)
    query, keys, values = torch.randn(2, 4), torch.randn(2, 6, 3), torch.randn(2, 6, 2)
    mask = None
    if situation == GRADIENT_SITUATIONS[1]:
        query = torch.zeros_like(query)
    elif situation == GRADIENT_SITUATIONS[2]:
        nn.init.zeros_(attention.v.weight)
    elif situation == GRADIENT_SITUATIONS[3]:
        values = values[:, :1].expand_as(values)
    elif situation == GRADIENT_SITUATIONS[4]:
        mask = torch.zeros(2, 6, dtype=torch.bool)
        mask[:, 2] = True
    context, _ = attention(query, keys, values, mask)
    context.square().sum().backward()
    return [name for name in GRADIENT_NAMES if getattr(attention, name).weight.grad.abs().max() < 1e-6]
""",
    ),
    Answer(
        "gradients_sets",
        "zero_gradients",
        idiom="sets, chosen by keywords in the situation",
        code=GRADIENTS
        + """

def zero_gradients(situation):
    if "random" in situation:
        return set()
    if "query" in situation:
        return {"W_q"}
    if "of v" in situation:
        return {"W_k", "W_q"}
    return set(GRADIENT_NAMES)
""",
    ),
    Answer(
        "gradients_tuples",
        "zero_gradients",
        idiom="a dict of tuples, in another order",
        code=GRADIENTS
        + """

ZERO = dict(zip(GRADIENT_SITUATIONS, [(), ("W_q",), ("W_k", "W_q"), ("v", "W_k", "W_q"), ("v", "W_q", "W_k")]))


def zero_gradients(situation):
    return ZERO[situation]
""",
    ),
    # ------------------------------------------------------------------ changed_weights
    Answer(
        "changed_measured",
        "changed_weights",
        idiom="the check itself: Part 1 with and without the mask on the same random tensors, nonzero() of the change",
        code="""
def changed_weights(lengths, src_len):
    torch.manual_seed(0)
    attention = AdditiveAttention(4, 3, 5).double()
    batch = len(lengths)
    query, keys = torch.randn(batch, 4, dtype=torch.float64), torch.randn(batch, src_len, 3, dtype=torch.float64)
    mask = torch.arange(src_len) < torch.tensor(lengths)[:, None]
    _, with_mask = attention(query, keys, keys, mask)
    _, without = attention(query, keys, keys)
    return (with_mask != without).nonzero().tolist()
""",
    ),
    Answer(
        "changed_tuples",
        "changed_weights",
        idiom="loops appending tuples",
        code="""
def changed_weights(lengths, src_len):
    changed = []
    for b in range(len(lengths)):
        if lengths[b] == src_len:
            continue  # no padding: the mask hides nothing
        for j in range(src_len):
            changed.append((b, j))
    return changed
""",
    ),
    Answer(
        "changed_numpy",
        "changed_weights",
        idiom="a NumPy grid and argwhere (an (n, 2) array, empty when nothing changes)",
        code="""
import numpy as np


def changed_weights(lengths, src_len):
    padded = np.asarray(lengths) < src_len
    return np.argwhere(np.repeat(padded[:, None], src_len, axis=1))
""",
    ),
    Answer(
        "gradients_per_matrix",
        "zero_gradients",
        idiom="per matrix, the situations that starve it, then a comprehension over the names",
        code=GRADIENTS
        + """

STARVED = {  # the situations in which each matrix gets no gradient
    "W_q": GRADIENT_SITUATIONS[1:],
    "W_k": GRADIENT_SITUATIONS[2:],
    "v": GRADIENT_SITUATIONS[3:],
}


def zero_gradients(situation):
    return [name for name in GRADIENT_NAMES if situation in STARVED[name]]
""",
    ),
    Answer(
        "changed_product",
        "changed_weights",
        idiom="itertools.product over the padded sequences and the positions",
        code="""
import itertools


def changed_weights(lengths, src_len):
    padded = [b for b, length in enumerate(lengths) if length != src_len]
    return [list(pair) for pair in itertools.product(padded, range(src_len))]
""",
    ),
]
