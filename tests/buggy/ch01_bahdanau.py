"""Wrong answers to ch01_bahdanau that students really write."""

from tests.buggy import Bug

TESTS = {
    "AdditiveAttention": ["test_additive_shapes", "test_additive_mask", "test_additive_values"],
    "BahdanauDecoder": ["test_step_shapes", "test_step_values"],
}

ATTENTION_INIT = '''
class AdditiveAttention(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, query, keys, values, mask=None):
'''

DECODER_INIT = '''
class BahdanauDecoder(nn.Module):
    def __init__(self, vocab_size, emb_dim, enc_dim, hidden_dim, attn_dim):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        self.attention = AdditiveAttention(hidden_dim, enc_dim, attn_dim)
        self.rnn = nn.GRUCell(emb_dim + enc_dim, hidden_dim)
        self.out = nn.Linear(hidden_dim + enc_dim + emb_dim, vocab_size)

    def step(self, prev_tokens, hidden, enc_outputs, src_mask=None):
'''


def attention(body: str) -> str:
    return ATTENTION_INIT + body


def decoder(body: str) -> str:
    return DECODER_INIT + body


BUGS = [
    # ------------------------------------------------------------------ AdditiveAttention
    Bug("additive_softmax_over_batch", "AdditiveAttention", why="normalises over the batch", code=attention('''
        scores = self.v(torch.tanh(self.W_q(query).unsqueeze(1) + self.W_k(keys))).squeeze(-1)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=0)
        return torch.bmm(weights.unsqueeze(1), values).squeeze(1), weights
''')),
    Bug("additive_no_tanh", "AdditiveAttention", why="a linear score instead of the tanh layer", code=attention('''
        scores = self.v(self.W_q(query).unsqueeze(1) + self.W_k(keys)).squeeze(-1)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return torch.bmm(weights.unsqueeze(1), values).squeeze(1), weights
''')),
    Bug("additive_mask_inverted", "AdditiveAttention", why="hides the real positions", code=attention('''
        scores = self.v(torch.tanh(self.W_q(query).unsqueeze(1) + self.W_k(keys))).squeeze(-1)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return torch.bmm(weights.unsqueeze(1), values).squeeze(1), weights
''')),
    Bug("additive_mask_after_softmax", "AdditiveAttention", why="zeroes weights without renormalising",
        code=attention('''
        scores = self.v(torch.tanh(self.W_q(query).unsqueeze(1) + self.W_k(keys))).squeeze(-1)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights * mask
        return torch.bmm(weights.unsqueeze(1), values).squeeze(1), weights
''')),
    Bug("additive_nan_on_full_mask", "AdditiveAttention", why="a fully masked row softmaxes to NaN",
        code=attention('''
        scores = self.v(torch.tanh(self.W_q(query).unsqueeze(1) + self.W_k(keys))).squeeze(-1)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return torch.bmm(weights.unsqueeze(1), values).squeeze(1), weights
''')),
    # ------------------------------------------------------------------ BahdanauDecoder.step
    Bug("step_attends_with_new_state", "BahdanauDecoder", why="uses s_t, not s_{t-1}, as the query",
        code=decoder('''
        embedded = self.embedding(prev_tokens)
        context, _ = self.attention(hidden, enc_outputs, enc_outputs, src_mask)
        hidden = self.rnn(torch.cat([embedded, context], dim=-1), hidden)
        context, weights = self.attention(hidden, enc_outputs, enc_outputs, src_mask)
        logits = self.out(torch.cat([hidden, context, embedded], dim=-1))
        return logits, hidden, weights
''')),
    Bug("step_rnn_input_order", "BahdanauDecoder", why="concatenates [context, embedded]", code=decoder('''
        embedded = self.embedding(prev_tokens)
        context, weights = self.attention(hidden, enc_outputs, enc_outputs, src_mask)
        hidden = self.rnn(torch.cat([context, embedded], dim=-1), hidden)
        logits = self.out(torch.cat([hidden, context, embedded], dim=-1))
        return logits, hidden, weights
''')),
    Bug("step_output_order", "BahdanauDecoder", why="concatenates [hidden, embedded, context]", code=decoder('''
        embedded = self.embedding(prev_tokens)
        context, weights = self.attention(hidden, enc_outputs, enc_outputs, src_mask)
        hidden = self.rnn(torch.cat([embedded, context], dim=-1), hidden)
        logits = self.out(torch.cat([hidden, embedded, context], dim=-1))
        return logits, hidden, weights
''')),
    Bug("step_ignores_mask", "BahdanauDecoder", why="attends to padding", code=decoder('''
        embedded = self.embedding(prev_tokens)
        context, weights = self.attention(hidden, enc_outputs, enc_outputs)
        hidden = self.rnn(torch.cat([embedded, context], dim=-1), hidden)
        logits = self.out(torch.cat([hidden, context, embedded], dim=-1))
        return logits, hidden, weights
''')),
    Bug("step_returns_old_state", "BahdanauDecoder", why="returns s_{t-1} instead of s_t", code=decoder('''
        embedded = self.embedding(prev_tokens)
        context, weights = self.attention(hidden, enc_outputs, enc_outputs, src_mask)
        new_hidden = self.rnn(torch.cat([embedded, context], dim=-1), hidden)
        logits = self.out(torch.cat([new_hidden, context, embedded], dim=-1))
        return logits, hidden, weights
''')),
]
