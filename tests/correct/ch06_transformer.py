"""Correct answers to ch06_transformer in other idioms than the reference's."""

from tests.catalogue import reference_head
from tests.correct import Answer

A = "ch06_transformer"

# The reference's __init__ of the classes whose answers below write forward in other idioms, and its options of
# the question on normalised outputs.
FF_HEAD = reference_head(A, "FeedForward", "    def forward")
ENC_HEAD = reference_head(A, "EncoderLayer", "    def forward")
DEC_HEAD = reference_head(A, "DecoderLayer", "    def forward")
NORM_SITUATIONS = "\n" + reference_head(A, "normalised_output", "def normalised_output")

ANSWERS: list[Answer] = [
    # ------------------------------------------------------------------ FeedForward
    Answer(
        "ff_sequential",
        "FeedForward",
        idiom="an nn.Sequential over the same submodules",
        code=FF_HEAD
        + """        self.net = nn.Sequential(self.linear1, nn.ReLU(), self.dropout, self.linear2)

    def forward(self, x):
        return self.net(x)
""",
    ),
    Answer(
        "ff_functional",
        "FeedForward",
        idiom="F.linear and F.dropout with the submodules' parameters and mode",
        code=FF_HEAD
        + """
    def forward(self, x):
        hidden = F.relu(F.linear(x, self.linear1.weight, self.linear1.bias))
        hidden = F.dropout(hidden, p=self.dropout.p, training=self.training)
        return F.linear(hidden, self.linear2.weight, self.linear2.bias)
""",
    ),
    Answer(
        "ff_dropout_before_clamp",
        "FeedForward",
        idiom="dropout before the ReLU, written as a clamp (the two commute: dropout scales by a factor >= 0)",
        code=FF_HEAD
        + """
    def forward(self, x):
        return self.linear2(self.dropout(self.linear1(x)).clamp(min=0))
""",
    ),
    Answer(
        "ff_einsum_float64",
        "FeedForward",
        idiom="einsum with float64 intermediates",
        code=FF_HEAD
        + """
    def forward(self, x):
        hidden = torch.einsum("...d,fd->...f", x.double(), self.linear1.weight.double()) + self.linear1.bias.double()
        hidden = self.dropout(torch.maximum(hidden, torch.zeros_like(hidden)))
        out = torch.einsum("...f,df->...d", hidden, self.linear2.weight.double()) + self.linear2.bias.double()
        return out.to(x.dtype)
""",
    ),
    # ------------------------------------------------------------------ EncoderLayer
    Answer(
        "encoder_shared_residual_helper",
        "EncoderLayer",
        idiom="one residual helper for both blocks and both orders",
        code=ENC_HEAD
        + """
    def _residual(self, x, block, norm, dropout):
        if self.norm_first:
            return x + dropout(block(norm(x)))
        return norm(x + dropout(block(x)))

    def forward(self, x, mask=None):
        x = self._residual(x, lambda y: self.self_attn(y, y, y, mask=mask)[0], self.norm1, self.dropout1)
        return self._residual(x, self.ff, self.norm2, self.dropout2)
""",
    ),
    Answer(
        "encoder_functional_norm_and_dropout",
        "EncoderLayer",
        idiom="F.layer_norm with the modules' weight, bias and eps; F.dropout following self.training",
        code=ENC_HEAD
        + """
    def _norm(self, norm, x):
        return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    def _drop(self, dropout, x):
        return F.dropout(x, dropout.p, self.training)

    def forward(self, x, mask=None):
        if self.norm_first:
            h = self._norm(self.norm1, x)
            out, _ = self.self_attn(h, h, h, mask)
            x = x + self._drop(self.dropout1, out)
            return x + self._drop(self.dropout2, self.ff(self._norm(self.norm2, x)))
        out, _ = self.self_attn(x, x, x, mask)
        x = self._norm(self.norm1, x + self._drop(self.dropout1, out))
        return self._norm(self.norm2, x + self._drop(self.dropout2, self.ff(x)))
""",
    ),
    Answer(
        "encoder_one_dropout_keyword_parts",
        "EncoderLayer",
        idiom="one nn.Dropout for both blocks; its parts built with keyword arguments; the attention called by keyword",
        code="""
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.pre = norm_first
        self.norm1 = nn.LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(num_heads=num_heads, d_model=d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = FeedForward(d_model=d_model, d_ff=d_ff, dropout=dropout)
        self.drop = nn.Dropout(p=dropout)

    def forward(self, x, mask=None):
        if self.pre:
            h = self.norm1(x)
            x = x + self.drop(self.self_attn(query=h, key=h, value=h, mask=mask)[0])
            return x + self.drop(self.ff(self.norm2(x)))
        x = self.norm1(x + self.drop(self.self_attn(query=x, key=x, value=x, mask=mask)[0]))
        return self.norm2(x + self.drop(self.ff(x)))
""",
    ),
    Answer(
        "encoder_loop_over_blocks",
        "EncoderLayer",
        idiom="a loop over (block, norm, dropout) triples",
        code=ENC_HEAD
        + """
    def forward(self, x, mask=None):
        blocks = ((lambda y: self.self_attn(y, y, y, mask)[0], self.norm1, self.dropout1),
                  (self.ff, self.norm2, self.dropout2))
        for block, norm, drop in blocks:
            x = x + drop(block(norm(x))) if self.norm_first else norm(x + drop(block(x)))
        return x
""",
    ),
    Answer(
        "encoder_two_methods",
        "EncoderLayer",
        idiom="separate pre-norm and post-norm methods, submodules registered in another order",
        code='''class EncoderLayer(nn.Module):
    """Self-attention and a feed-forward network, each in a residual connection with a layer norm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.self_attn = MultiHeadAttention(d_model, num_heads)

    def _attend(self, y, mask):
        return self.self_attn(query=y, key=y, value=y, mask=mask)[0]

    def _pre(self, x, mask):
        x = x + self.dropout1(self._attend(self.norm1(x), mask))
        return x + self.dropout2(self.ff(self.norm2(x)))

    def _post(self, x, mask):
        x = self.norm1(self.dropout1(self._attend(x, mask)) + x)
        return self.norm2(self.dropout2(self.ff(x)) + x)

    def forward(self, x, mask=None):
        return self._pre(x, mask) if self.norm_first else self._post(x, mask)
''',
    ),
    # ------------------------------------------------------------------ DecoderLayer
    Answer(
        "decoder_loop_over_blocks",
        "DecoderLayer",
        idiom="a loop over (block, norm, dropout) triples",
        code=DEC_HEAD
        + """
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        blocks = ((lambda y: self.self_attn(y, y, y, tgt_mask)[0], self.norm1, self.dropout1),
                  (lambda y: self.cross_attn(y, memory, memory, memory_mask)[0], self.norm2, self.dropout2),
                  (self.ff, self.norm3, self.dropout3))
        for block, norm, drop in blocks:
            x = x + drop(block(norm(x))) if self.norm_first else norm(x + drop(block(x)))
        return x
""",
    ),
    Answer(
        "decoder_functional_norm_and_dropout",
        "DecoderLayer",
        idiom="F.layer_norm with the modules' weight, bias and eps; F.dropout following self.training",
        code=DEC_HEAD
        + """
    def _sublayer(self, x, block, norm, dropout):
        normed = lambda y: F.layer_norm(y, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
        if self.norm_first:
            return x + F.dropout(block(normed(x)), dropout.p, self.training)
        return normed(x + F.dropout(block(x), dropout.p, self.training))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x = self._sublayer(x, lambda y: self.self_attn(y, y, y, tgt_mask)[0], self.norm1, self.dropout1)
        x = self._sublayer(x, lambda y: self.cross_attn(y, memory, memory, memory_mask)[0], self.norm2,
                           self.dropout2)
        return self._sublayer(x, self.ff, self.norm3, self.dropout3)
""",
    ),
    Answer(
        "decoder_norms_in_a_loop",
        "DecoderLayer",
        idiom="norms and dropouts registered with setattr in a loop; keyword arguments to the attentions",
        code='''class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the memory, and a feed-forward network."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.ff = FeedForward(d_model, d_ff, dropout)
        for i in (1, 2, 3):
            setattr(self, f"norm{i}", nn.LayerNorm(d_model))
            setattr(self, f"dropout{i}", nn.Dropout(dropout))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            h = self.norm1(x)
            out, _ = self.self_attn(query=h, key=h, value=h, mask=tgt_mask)
            x = x + self.dropout1(out)
            out, _ = self.cross_attn(query=self.norm2(x), key=memory, value=memory, mask=memory_mask)
            x = x + self.dropout2(out)
            return x + self.dropout3(self.ff(self.norm3(x)))
        out, _ = self.self_attn(query=x, key=x, value=x, mask=tgt_mask)
        x = self.norm1(x + self.dropout1(out))
        out, _ = self.cross_attn(query=x, key=memory, value=memory, mask=memory_mask)
        x = self.norm2(x + self.dropout2(out))
        return self.norm3(x + self.dropout3(self.ff(x)))
''',
    ),
    Answer(
        "decoder_residual_helper",
        "DecoderLayer",
        idiom="a residual helper taking the block's inputs",
        code=DEC_HEAD
        + """
    def _add(self, x, index, block):
        norm, dropout = getattr(self, f"norm{index}"), getattr(self, f"dropout{index}")
        if self.norm_first:
            return x + dropout(block(norm(x)))
        return norm(x + dropout(block(x)))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x = self._add(x, 1, lambda q: self.self_attn(q, q, q, tgt_mask)[0])
        x = self._add(x, 2, lambda q: self.cross_attn(q, memory, memory, memory_mask)[0])
        return self._add(x, 3, self.ff)
""",
    ),
    # ------------------------------------------------------------------ Transformer
    Answer(
        "transformer_other_names",
        "Transformer",
        idiom="other submodule names, masks made with unsqueeze, the scale computed in each method",
        code='''class Transformer(nn.Module):
    """The encoder-decoder Transformer."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, dropout=0.1,
                 max_len=512):
        super().__init__()
        self.d_model = d_model
        self.embed_src = nn.Embedding(src_vocab_size, d_model)
        self.embed_tgt = nn.Embedding(tgt_vocab_size, d_model)
        nn.init.normal_(self.embed_src.weight, std=d_model ** -0.5)
        nn.init.normal_(self.embed_tgt.weight, std=d_model ** -0.5)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.decoder = nn.ModuleList([DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.out = nn.Linear(d_model, tgt_vocab_size)

    def encode(self, src, src_mask=None):
        mask = src_mask.unsqueeze(1).unsqueeze(2) if src_mask is not None else None
        x = self.pos(self.embed_src(src) * math.sqrt(self.d_model))
        for layer in self.encoder:
            x = layer(x, mask)
        return x

    def decode(self, tgt_in, memory, tgt_mask=None, memory_mask=None):
        if memory_mask is not None:
            memory_mask = memory_mask.unsqueeze(1).unsqueeze(2)
        x = self.pos(self.embed_tgt(tgt_in) * math.sqrt(self.d_model))
        for layer in self.decoder:
            x = layer(x, memory, tgt_mask, memory_mask)
        return self.out(x)

    def forward(self, src, tgt_in, src_mask=None, tgt_mask=None):
        memory = self.encode(src, src_mask)
        return self.decode(tgt_in, memory, tgt_mask=tgt_mask, memory_mask=src_mask)
''',
    ),
    Answer(
        "transformer_named_layers",
        "Transformer",
        idiom="layers as named attributes (no ModuleList), registered interleaved; one positional encoding each "
        "for the source and the target",
        code='''class Transformer(nn.Module):
    """The encoder-decoder Transformer."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, dropout=0.1,
                 max_len=512):
        super().__init__()
        self.num_layers, self.scale = num_layers, d_model ** 0.5
        self.projection = nn.Linear(d_model, tgt_vocab_size)
        self.target_words = nn.Embedding(tgt_vocab_size, d_model)
        self.source_words = nn.Embedding(src_vocab_size, d_model)
        for embedding in (self.source_words, self.target_words):
            nn.init.normal_(embedding.weight, std=d_model ** -0.5)
        self.source_positions = PositionalEncoding(d_model, max_len, dropout)
        self.target_positions = PositionalEncoding(d_model, max_len, dropout)
        for i in range(num_layers):
            setattr(self, f"encoder_{i}", EncoderLayer(d_model, num_heads, d_ff, dropout))
            setattr(self, f"decoder_{i}", DecoderLayer(d_model, num_heads, d_ff, dropout))

    def encode(self, src, src_mask=None):
        mask = None if src_mask is None else src_mask.view(src_mask.size(0), 1, 1, -1)
        x = self.source_positions(self.scale * self.source_words(src))
        for i in range(self.num_layers):
            x = getattr(self, f"encoder_{i}")(x, mask)
        return x

    def decode(self, tgt_in, memory, tgt_mask=None, memory_mask=None):
        mask = None if memory_mask is None else memory_mask.view(memory_mask.size(0), 1, 1, -1)
        x = self.target_positions(self.scale * self.target_words(tgt_in))
        for i in range(self.num_layers):
            x = getattr(self, f"decoder_{i}")(x, memory, tgt_mask, mask)
        return self.projection(x)

    def forward(self, src, tgt_in, src_mask=None, tgt_mask=None):
        return self.decode(tgt_in, self.encode(src, src_mask), tgt_mask, src_mask)
''',
    ),
    Answer(
        "transformer_tied_output",
        "Transformer",
        idiom="the output layer's weight tied to the target embedding; embeddings scaled by a module of their own",
        code='''class ScaledEmbedding(nn.Module):
    """Token embeddings times the square root of their size."""

    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.table = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.table.weight, std=d_model ** -0.5)
        self.factor = math.sqrt(d_model)

    def forward(self, ids):
        return self.table(ids) * self.factor


class Transformer(nn.Module):
    """The encoder-decoder Transformer."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, dropout=0.1,
                 max_len=512):
        super().__init__()
        self.src_embed = ScaledEmbedding(src_vocab_size, d_model)
        self.tgt_embed = ScaledEmbedding(tgt_vocab_size, d_model)
        self.positions = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        self.generator.weight = self.tgt_embed.table.weight

    def encode(self, src, src_mask=None):
        mask = None if src_mask is None else src_mask[:, None, None]
        x = self.positions(self.src_embed(src))
        for layer in self.encoder:
            x = layer(x, mask)
        return x

    def decode(self, tgt_in, memory, tgt_mask=None, memory_mask=None):
        mask = None if memory_mask is None else memory_mask[:, None, None]
        x = self.positions(self.tgt_embed(tgt_in))
        for layer in self.decoder:
            x = layer(x, memory, tgt_mask, mask)
        return self.generator(x)

    def forward(self, src, tgt_in, src_mask=None, tgt_mask=None):
        return self.decode(tgt_in, self.encode(src, src_mask), tgt_mask, src_mask)
''',
    ),
    Answer(
        "transformer_pre_norm",
        "Transformer",
        idiom="pre-norm layers (norm_first=True) with nothing after the last one; the memory mask made once in "
        "forward and reused",
        code='''class Transformer(nn.Module):
    """The encoder-decoder Transformer, with pre-norm layers."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, dropout=0.1,
                 max_len=512):
        super().__init__()
        self.d_model = d_model
        self.embeddings = nn.ModuleDict({"src": nn.Embedding(src_vocab_size, d_model),
                                         "tgt": nn.Embedding(tgt_vocab_size, d_model)})
        for embedding in self.embeddings.values():
            nn.init.normal_(embedding.weight, mean=0.0, std=1.0 / math.sqrt(d_model))
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleDict({
            "encoder": nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first=True)
                                      for _ in range(num_layers)]),
            "decoder": nn.ModuleList([DecoderLayer(d_model, num_heads, d_ff, dropout, norm_first=True)
                                      for _ in range(num_layers)]),
        })
        self.logits = nn.Linear(d_model, tgt_vocab_size)

    def _embed(self, which, ids):
        return self.positional(self.embeddings[which](ids) * math.sqrt(self.d_model))

    def encode(self, src, src_mask=None):
        mask = None if src_mask is None else src_mask.reshape(src.size(0), 1, 1, src.size(1))
        x = self._embed("src", src)
        for layer in self.layers["encoder"]:
            x = layer(x, mask=mask)
        return x

    def decode(self, tgt_in, memory, tgt_mask=None, memory_mask=None):
        mask = None if memory_mask is None else memory_mask[:, None, None, :]
        x = self._embed("tgt", tgt_in)
        for layer in self.layers["decoder"]:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=mask)
        return self.logits(x)

    def forward(self, src, tgt_in, src_mask=None, tgt_mask=None):
        memory = self.encode(src, src_mask=src_mask)
        return self.decode(tgt_in, memory, tgt_mask=tgt_mask, memory_mask=src_mask)
''',
    ),
    # ------------------------------------------------------------------ greedy_decode
    Answer(
        "greedy_one_sequence_at_a_time",
        "greedy_decode",
        idiom="a loop over the sequences, each decoded alone, then padded with eos_id to the longest",
        code='''@torch.no_grad()
def greedy_decode(model, src, src_mask, bos_id, eos_id, max_len):
    """(B, T) greedy output without the leading bos_id; T <= max_len."""
    outputs = []
    for b in range(src.size(0)):
        one_src = src[b:b + 1]
        one_mask = None if src_mask is None else src_mask[b:b + 1]
        memory = model.encode(one_src, one_mask)
        ys = [bos_id]
        for _ in range(max_len):
            tgt = torch.tensor([ys], dtype=torch.long, device=src.device)
            logits = model.decode(tgt, memory, causal_mask(len(ys), device=src.device), one_mask)
            ys.append(int(logits[0, -1].argmax()))
            if ys[-1] == eos_id:
                break
        outputs.append(ys[1:])
    length = max(len(tokens) for tokens in outputs)
    padded = [tokens + [eos_id] * (length - len(tokens)) for tokens in outputs]
    return torch.tensor(padded, dtype=torch.long, device=src.device)
''',
    ),
    Answer(
        "greedy_preallocated",
        "greedy_decode",
        idiom="a preallocated (B, max_len + 1) buffer filled column by column, torch.where for finished rows, "
        "the look-ahead mask made with tril",
        code='''@torch.no_grad()
def greedy_decode(model, src, src_mask, bos_id, eos_id, max_len):
    """(B, T) greedy output without the leading bos_id; T <= max_len."""
    batch = src.size(0)
    memory = model.encode(src, src_mask)
    ys = torch.full((batch, max_len + 1), eos_id, dtype=torch.long, device=src.device)
    ys[:, 0] = bos_id
    done = torch.zeros(batch, dtype=torch.bool, device=src.device)
    steps = 0
    while steps < max_len and not bool(done.all()):
        steps += 1
        look_ahead = torch.ones(steps, steps, dtype=torch.bool, device=src.device).tril()
        logits = model.decode(ys[:, :steps], memory, look_ahead, src_mask)
        token = torch.where(done, torch.full_like(done, eos_id, dtype=torch.long), logits[:, -1].argmax(-1))
        ys[:, steps] = token
        done = done | (token == eos_id)
    return ys[:, 1:steps + 1]
''',
    ),
    Answer(
        "greedy_token_list",
        "greedy_decode",
        idiom="inference_mode instead of the decorator, a list of token columns stacked at the end, a (1, 1, T, T) "
        "mask",
        code='''def greedy_decode(model, src, src_mask, bos_id, eos_id, max_len):
    """(B, T) greedy output without the leading bos_id; T <= max_len."""
    with torch.inference_mode():
        memory = model.encode(src, src_mask)
        columns = [torch.full((src.size(0),), bos_id, dtype=torch.long, device=src.device)]
        finished = torch.zeros_like(columns[0], dtype=torch.bool)
        while len(columns) <= max_len and not finished.all():
            ys = torch.stack(columns, dim=1)
            mask = causal_mask(ys.size(1), device=src.device)[None, None]
            nxt = model.decode(ys, memory, mask, src_mask)[:, -1, :].argmax(-1)
            nxt = torch.where(finished, torch.full_like(nxt, eos_id), nxt)
            columns.append(nxt)
            finished = finished | nxt.eq(eos_id)
        return torch.stack(columns[1:], dim=1).clone()
''',
    ),
    Answer(
        "greedy_keywords_and_probabilities",
        "greedy_decode",
        idiom="keyword arguments to encode and decode, the argmax of the softmax, a step counter",
        code='''@torch.no_grad()
def greedy_decode(model, src, src_mask, bos_id, eos_id, max_len):
    """(B, T) greedy output without the leading bos_id; T <= max_len."""
    memory = model.encode(src=src, src_mask=src_mask)
    ys = src.new_full((src.size(0), 1), bos_id)
    ended = src.new_zeros(src.size(0), dtype=torch.bool)
    step = 0
    while step < max_len:
        probabilities = model.decode(tgt_in=ys, memory=memory, tgt_mask=causal_mask(ys.size(1), device=ys.device),
                                     memory_mask=src_mask).softmax(dim=-1)
        choice = probabilities[:, -1, :].argmax(dim=-1)
        choice[ended] = eos_id
        ys = torch.cat((ys, choice.unsqueeze(-1)), dim=-1)
        ended = ended | (choice == eos_id)
        step += 1
        if ended.all():
            break
    return ys[:, 1:]
''',
    ),
    # ------------------------------------------------------------------ encoder_layer_parameters
    Answer(
        "parameters_closed_form",
        "encoder_layer_parameters",
        idiom="one closed formula",
        code="""
def encoder_layer_parameters(d_model, num_heads, d_ff):
    return 4 * d_model**2 + 2 * d_model * d_ff + 9 * d_model + d_ff
""",
    ),
    Answer(
        "parameters_counted_from_the_layer",
        "encoder_layer_parameters",
        idiom="builds the notebook's EncoderLayer and counts its trainable numbers",
        code="""
def encoder_layer_parameters(d_model, num_heads, d_ff):
    layer = EncoderLayer(d_model, num_heads, d_ff)
    return sum(p.numel() for p in layer.parameters() if p.requires_grad)
""",
    ),
    Answer(
        "parameters_per_linear_layer",
        "encoder_layer_parameters",
        idiom="a helper for one linear layer, summed over the layers, floats",
        code="""
def linear(n_in, n_out):
    return float(n_in * n_out + n_out)


def encoder_layer_parameters(d_model, num_heads, d_ff):
    projections = sum(linear(d_model, d_model) for _ in ("W_q", "W_k", "W_v", "W_o"))
    feed_forward = linear(d_model, d_ff) + linear(d_ff, d_model)
    layer_norms = 2 * (d_model + d_model)
    return projections + feed_forward + layer_norms
""",
    ),
    Answer(
        "parameters_of_the_submodules",
        "encoder_layer_parameters",
        idiom="counts each submodule with parameters_to_vector and returns a tensor",
        code="""
from torch.nn.utils import parameters_to_vector


def encoder_layer_parameters(d_model, num_heads, d_ff):
    parts = [MultiHeadAttention(d_model, num_heads), FeedForward(d_model, d_ff), nn.LayerNorm(d_model),
             nn.LayerNorm(d_model)]
    return torch.tensor(sum(parameters_to_vector(part.parameters()).numel() for part in parts))
""",
    ),
    # ------------------------------------------------------------------ cross_attention_weights_shape
    Answer(
        "cross_shape_bare_tuple",
        "cross_attention_weights_shape",
        idiom="a bare return of the four sizes",
        code="""
def cross_attention_weights_shape(batch_size, num_heads, src_len, tgt_len):
    return batch_size, num_heads, tgt_len, src_len
""",
    ),
    Answer(
        "cross_shape_measured",
        "cross_attention_weights_shape",
        idiom="runs a MultiHeadAttention on target queries and source keys and reads the weights' shape",
        code="""
def cross_attention_weights_shape(batch_size, num_heads, src_len, tgt_len):
    d_model = 2 * num_heads
    attention = MultiHeadAttention(d_model, num_heads)
    target, memory = torch.zeros(batch_size, tgt_len, d_model), torch.zeros(batch_size, src_len, d_model)
    with torch.no_grad():
        _, weights = attention(target, memory, memory)
    return tuple(weights.shape)
""",
    ),
    Answer(
        "cross_shape_torch_size",
        "cross_attention_weights_shape",
        idiom="a torch.Size (a tuple of ints)",
        code="""
def cross_attention_weights_shape(batch_size, num_heads, src_len, tgt_len):
    return torch.Size([batch_size, num_heads, tgt_len, src_len])
""",
    ),
    Answer(
        "cross_shape_from_the_scores",
        "cross_attention_weights_shape",
        idiom="the shape of q @ k^T, split into heads, built from named dimensions",
        code="""
def cross_attention_weights_shape(batch_size, num_heads, src_len, tgt_len):
    queries = torch.empty(batch_size, num_heads, tgt_len, 1)
    keys = torch.empty(batch_size, num_heads, src_len, 1)
    return tuple(int(n) for n in (queries @ keys.transpose(-2, -1)).shape)
""",
    ),
    # ------------------------------------------------------------------ decoded_positions
    Answer(
        "positions_sum",
        "decoded_positions",
        idiom="a sum over the steps",
        code="""
def decoded_positions(eos_steps, max_len):
    last = min(max_len, max(eos_steps))
    return sum(length for length in range(1, last + 1))
""",
    ),
    Answer(
        "positions_counted",
        "decoded_positions",
        idiom="the check itself: a scripted model whose decode adds up the lengths it is given, and Part 5",
        code="""
class _Scripted:
    def __init__(self, eos_steps):
        self.eos_steps, self.seen = eos_steps, 0

    def encode(self, src, src_mask=None):
        return torch.zeros(src.size(0), src.size(1), 4)

    def decode(self, tgt_in, memory, tgt_mask=None, memory_mask=None):
        self.seen += tgt_in.size(1)  # one sequence's positions
        logits = torch.zeros(tgt_in.size(0), tgt_in.size(1), 3)
        logits[:, -1, 2] = 0.5  # token 2 ...
        logits[:, -1, 1] = torch.tensor([float(s <= tgt_in.size(1)) for s in self.eos_steps])  # ... or eos_id = 1
        return logits


def decoded_positions(eos_steps, max_len):
    model = _Scripted(eos_steps)
    batch = len(eos_steps)
    src, src_mask = torch.zeros(batch, 2, dtype=torch.long), torch.ones(batch, 2, dtype=torch.bool)
    greedy_decode(model, src, src_mask, bos_id=0, eos_id=1, max_len=max_len)
    return model.seen
""",
    ),
    Answer(
        "positions_comb",
        "decoded_positions",
        idiom="math.comb, a float",
        code="""
def decoded_positions(eos_steps, max_len):
    steps = min(max(eos_steps), max_len)
    return float(math.comb(steps + 1, 2))
""",
    ),
    # ------------------------------------------------------------------ normalised_output
    Answer(
        "normalised_measured",
        "normalised_output",
        idiom="the check itself: Parts 1 to 3 built fresh, mean and variance of each position on random inputs",
        code=NORM_SITUATIONS
        + """


def normalised_output(situation):
    torch.manual_seed(0)
    x, memory = 3 * torch.randn(2, 5, 8) + 1, torch.randn(2, 4, 8)
    pre = "pre-norm" in situation
    if situation.startswith("EncoderLayer"):
        out = EncoderLayer(8, 2, 16, norm_first=pre)(x)
    elif situation.startswith("DecoderLayer"):
        out = DecoderLayer(8, 2, 16, norm_first=pre)(x, memory)
    elif situation.startswith("two"):
        layers = [EncoderLayer(8, 2, 16, norm_first=True), EncoderLayer(8, 2, 16, norm_first=True), nn.LayerNorm(8)]
        out = nn.Sequential(*layers)(x)
    else:
        out = FeedForward(8, 16)(x)
    mean, var = out.mean(-1), out.var(-1, unbiased=False)
    return bool(mean.abs().max() < 1e-4 and (var - 1).abs().max() < 1e-3)
""",
    ),
    Answer(
        "normalised_keywords",
        "normalised_output",
        idiom="keywords of the situation, a NumPy bool",
        code=NORM_SITUATIONS
        + """
import numpy as np



def normalised_output(situation):
    return np.bool_("post-norm" in situation or situation.endswith("nn.LayerNorm"))
""",
    ),
    Answer(
        "positions_simulated",
        "decoded_positions",
        idiom="the decoding loop simulated: the length of ys added up until every sequence has ended",
        code="""
def decoded_positions(eos_steps, max_len):
    total, step, ended = 0, 0, [False] * len(eos_steps)
    while step < max_len and not all(ended):
        step += 1
        total += step  # ys holds bos_id and the step - 1 tokens written so far
        ended = [done or eos == step for done, eos in zip(ended, eos_steps)]
    return total
""",
    ),
    Answer(
        "normalised_set",
        "normalised_output",
        idiom="membership in a set of the situations that end with a layer norm",
        code=NORM_SITUATIONS
        + """

ENDS_WITH_A_NORM = {NORM_SITUATIONS[0], NORM_SITUATIONS[2], NORM_SITUATIONS[4]}


def normalised_output(situation):
    return situation in ENDS_WITH_A_NORM
""",
    ),
    Answer(
        "normalised_last_operation",
        "normalised_output",
        idiom="the last operation of each model, compared with a layer norm",
        code=NORM_SITUATIONS
        + """

LAST_OPERATION = {
    "EncoderLayer, post-norm": "layer norm",
    "EncoderLayer, pre-norm": "residual sum",
    "DecoderLayer, post-norm": "layer norm",
    "DecoderLayer, pre-norm": "residual sum",
    "two pre-norm EncoderLayers followed by one nn.LayerNorm": "layer norm",
    "FeedForward": "linear layer",
}


def normalised_output(situation):
    return LAST_OPERATION[situation] == "layer norm"
""",
    ),
    # ------------------------------------------------------------------ temperature_probs
    Answer(
        "temperature_manual_softmax",
        "temperature_probs",
        idiom="the softmax written out with the largest logit subtracted, ties at temperature 0 counted by hand",
        code="""def temperature_probs(logits, temperature):
    if temperature < 0:
        raise ValueError("temperature must not be negative, got " + str(temperature))
    largest = logits.max(dim=-1, keepdim=True).values
    if temperature == 0:
        winners = (logits == largest).to(logits.dtype)
        return winners / winners.sum(-1, keepdim=True)
    e = torch.exp((logits - largest) / temperature)
    return e / e.sum(-1, keepdim=True)
""",
    ),
    Answer(
        "temperature_log_softmax",
        "temperature_probs",
        idiom="log_softmax then exp, and torch.where for the shared argmax",
        code="""def temperature_probs(logits, temperature):
    if temperature < 0:
        raise ValueError(f"temperature={temperature} is negative")
    if temperature > 0:
        return F.log_softmax(logits / temperature, dim=-1).exp()
    is_max = logits == logits.amax(-1, keepdim=True)
    one = torch.ones_like(logits)
    return torch.where(is_max, one, torch.zeros_like(logits)) / is_max.sum(-1, keepdim=True)
""",
    ),
    Answer(
        "temperature_numpy",
        "temperature_probs",
        idiom="NumPy in float64, back to a tensor of the input's dtype",
        code="""import numpy as np


def temperature_probs(logits, temperature):
    if temperature < 0:
        raise ValueError("a negative temperature is not allowed")
    z = logits.detach().cpu().numpy().astype(np.float64)
    if temperature == 0:
        p = (z == z.max(axis=-1, keepdims=True)).astype(np.float64)
    else:
        p = np.exp((z - z.max(axis=-1, keepdims=True)) / temperature)
    p = p / p.sum(axis=-1, keepdims=True)
    return torch.from_numpy(p).to(dtype=logits.dtype, device=logits.device)
""",
    ),
    Answer(
        "temperature_flattened_rows",
        "temperature_probs",
        idiom="the rows flattened to (N, V), a loop over rows at temperature 0",
        code="""def temperature_probs(logits, temperature):
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (temperature={temperature})")
    rows = logits.reshape(-1, logits.size(-1))
    if temperature == 0:
        out = torch.zeros_like(rows)
        for i, row in enumerate(rows):
            best = (row == row.max()).nonzero().flatten()
            out[i, best] = 1.0 / len(best)
        return out.reshape(logits.shape)
    return torch.softmax(rows / temperature, dim=1).reshape(logits.shape)
""",
    ),
    # ------------------------------------------------------------------ top_k_probs
    Answer(
        "top_k_sorted_threshold",
        "top_k_probs",
        idiom="the k-th value read from a descending sort, probabilities zeroed and renormalised",
        code="""def top_k_probs(logits, k):
    if k < 1:
        raise ValueError(f"k must be positive, got k={k}")
    ordered = logits.sort(dim=-1, descending=True).values
    threshold = ordered[..., min(k, logits.shape[-1]) - 1 : min(k, logits.shape[-1])]
    probs = torch.softmax(logits, dim=-1) * (logits >= threshold)
    return probs / probs.sum(dim=-1, keepdim=True)
""",
    ),
    Answer(
        "top_k_kthvalue",
        "top_k_probs",
        idiom="kthvalue counted from the smallest, the rest filled with -inf",
        code="""def top_k_probs(logits, k):
    if k < 1:
        raise ValueError("k should be at least 1")
    vocab = logits.size(-1)
    if k >= vocab:
        return torch.softmax(logits, dim=-1)
    kth = logits.kthvalue(vocab - k + 1, dim=-1, keepdim=True).values
    return torch.softmax(torch.where(logits >= kth, logits, torch.full_like(logits, -float("inf"))), dim=-1)
""",
    ),
    Answer(
        "top_k_loop",
        "top_k_probs",
        idiom="a loop over the rows with Python lists",
        code="""def top_k_probs(logits, k):
    if k < 1:
        raise ValueError(f"bad k: {k}")
    flat = logits.reshape(-1, logits.shape[-1])
    result = torch.zeros_like(flat)
    for i in range(flat.shape[0]):
        values = flat[i].tolist()
        cut = sorted(values, reverse=True)[min(k, len(values)) - 1]
        keep = torch.tensor([v >= cut for v in values])
        result[i][keep] = torch.softmax(flat[i][keep], dim=0)
    return result.reshape(logits.shape)
""",
    ),
    Answer(
        "top_k_numpy",
        "top_k_probs",
        idiom="NumPy's partition for the k-th largest",
        code="""import numpy as np


def top_k_probs(logits, k):
    if k < 1:
        raise ValueError(f"k must be >= 1, got k={k}")
    z = logits.detach().cpu().numpy().astype(np.float64)
    v = z.shape[-1]
    k = min(k, v)
    kth = np.partition(z, v - k, axis=-1)[..., v - k : v - k + 1]
    e = np.where(z >= kth, np.exp(z - z.max(axis=-1, keepdims=True)), 0.0)
    return torch.from_numpy(e / e.sum(axis=-1, keepdims=True)).to(logits.dtype)
""",
    ),
    # ------------------------------------------------------------------ top_p_probs
    Answer(
        "top_p_loop",
        "top_p_probs",
        idiom="a loop over rows: sorted probabilities added up one by one in Python",
        code="""def top_p_probs(logits, p):
    if p <= 0 or p > 1:
        raise ValueError(f"p={p} is not in (0, 1]")
    probs = torch.softmax(logits, dim=-1)
    flat = probs.reshape(-1, probs.shape[-1])
    out = torch.zeros_like(flat)
    for i, row in enumerate(flat):
        total, last = 0.0, None
        for value in sorted(row.tolist(), reverse=True):
            if total >= p:
                break
            total += value
            last = value
        keep = row >= last
        out[i] = torch.where(keep, row, torch.zeros_like(row)) / row[keep].sum()
    return out.reshape(probs.shape)
""",
    ),
    Answer(
        "top_p_searchsorted",
        "top_p_probs",
        idiom="searchsorted on the running totals for the size of the nucleus",
        code="""def top_p_probs(logits, p):
    if not (0 < p <= 1):
        raise ValueError("p must be in (0, 1]")
    probs = logits.softmax(-1)
    desc = probs.sort(-1, descending=True).values
    totals = desc.cumsum(-1)
    target = torch.full_like(totals[..., :1], p)
    index = torch.searchsorted(totals.contiguous(), target.contiguous()).clamp(max=probs.size(-1) - 1)
    # the running total may reach p only through rounding at the last step: index is then the last token
    smallest_kept = desc.gather(-1, index)
    kept = torch.where(probs >= smallest_kept, probs, 0.0)
    return kept / kept.sum(-1, keepdim=True)
""",
    ),
    Answer(
        "top_p_numpy",
        "top_p_probs",
        idiom="NumPy in float64, the nucleus size from argmax over a boolean running total",
        code="""import numpy as np


def top_p_probs(logits, p):
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got p={p}")
    z = logits.detach().cpu().numpy().astype(np.float64)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    desc = -np.sort(-probs, axis=-1)
    before = np.cumsum(desc, axis=-1) - desc
    count = (before < p).sum(axis=-1, keepdims=True)
    smallest = np.take_along_axis(desc, count - 1, axis=-1)
    kept = np.where(probs >= smallest, probs, 0.0)
    return torch.from_numpy(kept / kept.sum(axis=-1, keepdims=True)).to(logits.dtype)
""",
    ),
    Answer(
        "top_p_ascending_mass",
        "top_p_probs",
        idiom="the mass of the tokens strictly more likely than each token decides whether it is in",
        code="""def top_p_probs(logits, p):
    if p <= 0 or p > 1:
        raise ValueError(f"p out of range: {p}")
    probs = torch.softmax(logits, dim=-1)
    # for each token, the probability of every token strictly more likely than it
    ahead = (probs.unsqueeze(-2) * (probs.unsqueeze(-2) > probs.unsqueeze(-1))).sum(-1)
    kept = probs * (ahead < p)
    return kept / kept.sum(-1, keepdim=True)
""",
    ),
    # ------------------------------------------------------------------ min_p_probs
    Answer(
        "min_p_log_space",
        "min_p_probs",
        idiom="in log space: a logit at least the largest plus log(min_p)",
        code="""def min_p_probs(logits, min_p):
    if min_p < 0 or min_p > 1:
        raise ValueError(f"min_p must be in [0, 1], got min_p={min_p}")
    if min_p == 0:
        return torch.softmax(logits, dim=-1)
    floor = logits.amax(-1, keepdim=True) + math.log(min_p)
    return torch.softmax(logits.masked_fill(logits < floor, float("-inf")), dim=-1)
""",
    ),
    Answer(
        "min_p_numpy",
        "min_p_probs",
        idiom="NumPy, the probabilities divided by the row's largest",
        code="""import numpy as np


def min_p_probs(logits, min_p):
    if not 0.0 <= min_p <= 1.0:
        raise ValueError("min_p must be between 0 and 1")
    z = logits.detach().cpu().numpy().astype(np.float64)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    relative = probs / probs.max(axis=-1, keepdims=True)
    kept = np.where(relative >= min_p, probs, 0.0)
    return torch.from_numpy(kept / kept.sum(axis=-1, keepdims=True)).to(logits.dtype)
""",
    ),
    Answer(
        "min_p_loop",
        "min_p_probs",
        idiom="a loop over rows with Python floats",
        code="""def min_p_probs(logits, min_p):
    if min_p < 0 or min_p > 1:
        raise ValueError(f"min_p={min_p} outside [0, 1]")
    probs = torch.softmax(logits, dim=-1)
    flat = probs.reshape(-1, probs.shape[-1]).clone()
    for row in flat:
        top = max(row.tolist())
        for j, value in enumerate(row.tolist()):
            if value < min_p * top:
                row[j] = 0.0
        row /= row.sum()
    return flat.reshape(probs.shape)
""",
    ),
    Answer(
        "min_p_where",
        "min_p_probs",
        idiom="torch.where on the probabilities and a clone-free renormalisation",
        code="""def min_p_probs(logits, min_p):
    if not (0 <= min_p <= 1):
        raise ValueError(f"expected 0 <= min_p <= 1, got min_p={min_p}")
    probs = F.softmax(logits, dim=-1)
    threshold = min_p * probs.max(dim=-1, keepdim=True).values
    kept = torch.where(probs >= threshold, probs, torch.zeros_like(probs))
    return kept / kept.sum(dim=-1, keepdim=True)
""",
    ),
    # ------------------------------------------------------------------ speculative_decode
    Answer(
        "speculative_tensor_acceptance",
        "speculative_decode",
        idiom="the accepted count from a cumulative product over positions, eos handled with cummax, one slice per round",
        code="""@torch.no_grad()
def speculative_decode(model, draft, src, src_mask, bos_id, eos_id, max_len, lookahead=4):
    if lookahead < 1:
        raise ValueError(f"lookahead must be >= 1, got lookahead={lookahead}")
    memory, small_memory = model.encode(src, src_mask), draft.encode(src, src_mask)
    out = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    while out.size(1) - 1 < max_len and not done.all():
        start = out.size(1)
        seq = out
        for _ in range(min(lookahead, max_len - start)):
            step = draft.decode(seq, small_memory, causal_mask(seq.size(1), device=src.device), src_mask)
            seq = torch.cat([seq, step[:, -1:].argmax(-1)], dim=1)
        picks = model.decode(seq, memory, causal_mask(seq.size(1), device=src.device), src_mask)
        picks = picks[:, start - 1 :].argmax(-1)
        # rows that have ended by each position (before this round, or at an eos of the model's picks)
        ended = torch.cat([done[:, None], picks == eos_id], dim=1).long().cummax(dim=1).values.bool()
        picks = picks.masked_fill(ended[:, :-1], eos_id)
        ended = ended[:, 1:]
        agree = (seq[:, start:] == picks[:, :-1]) | ended[:, :-1]
        accepted = int(agree.all(dim=0).long().cumprod(0).sum())
        # the round stops early where every row has ended
        all_ended = ended.all(dim=0).nonzero()
        keep = accepted + 1 if len(all_ended) == 0 else min(accepted + 1, int(all_ended[0]) + 1)
        out = torch.cat([out, picks[:, :keep]], dim=1)
        done = ended[:, keep - 1]
    return out[:, 1:]
""",
    ),
    Answer(
        "speculative_buffer_loops",
        "speculative_decode",
        idiom="a preallocated buffer filled with eos_id, Python loops over positions and rows",
        code="""@torch.no_grad()
def speculative_decode(model, draft, src, src_mask, bos_id, eos_id, max_len, lookahead=4):
    if lookahead < 1:
        raise ValueError("lookahead must be at least 1")
    batch, device = src.size(0), src.device
    memory = model.encode(src, src_mask)
    draft_memory = draft.encode(src, src_mask)
    buffer = torch.full((batch, max_len + 1), eos_id, dtype=torch.long, device=device)
    buffer[:, 0] = bos_id
    written = 0
    finished = [False] * batch
    while written < max_len and not all(finished):
        n_guess = min(lookahead, max_len - written - 1)
        prefix = buffer[:, : written + 1].clone()
        for _ in range(n_guess):
            mask = torch.ones(prefix.size(1), prefix.size(1), dtype=torch.bool, device=device).tril()
            nxt = draft.decode(prefix, draft_memory, mask, src_mask)[:, -1].argmax(-1)
            prefix = torch.cat([prefix, nxt[:, None]], dim=1)
        mask = torch.ones(prefix.size(1), prefix.size(1), dtype=torch.bool, device=device).tril()
        verdict = model.decode(prefix, memory, mask, src_mask).argmax(-1)  # (B, written + 1 + n_guess)
        for j in range(n_guess + 1):
            matches = True
            for b in range(batch):
                token = eos_id if finished[b] else int(verdict[b, written + j])
                buffer[b, written + 1 + j] = token
                if token == eos_id:
                    finished[b] = True
                if j < n_guess and not finished[b] and int(prefix[b, written + 1 + j]) != token:
                    matches = False
            if all(finished) or not matches:
                written += j + 1
                break
        else:
            written += n_guess + 1
    return buffer[:, 1 : written + 1]
""",
    ),
    Answer(
        "speculative_guess_list",
        "speculative_decode",
        idiom="the guesses kept in a list, the model's tokens unbound and walked one by one",
        code="""@torch.no_grad()
def speculative_decode(model, draft, src, src_mask, bos_id, eos_id, max_len, lookahead=4):
    if lookahead < 1:
        raise ValueError(f"lookahead={lookahead}: the draft must guess at least one token")

    def greedy_step(m, memory, ys):
        look_ahead = causal_mask(ys.size(1), device=ys.device)
        return m.decode(ys, memory, look_ahead, src_mask)

    memories = (model.encode(src, src_mask), draft.encode(src, src_mask))
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    stopped = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    while ys.size(1) <= max_len and not bool(stopped.all()):
        guesses = []
        trial = ys
        while len(guesses) < lookahead and ys.size(1) + len(guesses) < max_len:
            guesses.append(greedy_step(draft, memories[1], trial)[:, -1].argmax(-1))
            trial = torch.cat([trial, guesses[-1][:, None]], dim=1)
        own = greedy_step(model, memories[0], trial)[:, ys.size(1) - 1 :].argmax(-1).unbind(1)
        for j, token in enumerate(own):
            token = torch.where(stopped, torch.full_like(token, eos_id), token)
            ys = torch.cat([ys, token[:, None]], dim=1)
            stopped = stopped | (token == eos_id)
            if stopped.all() or j == len(guesses) or not torch.equal(guesses[j][~stopped], token[~stopped]):
                break
    return ys[:, 1:]
""",
    ),
    Answer(
        "speculative_python_rows",
        "speculative_decode",
        idiom="every sequence a Python list, tensors made afresh for each call",
        code="""@torch.no_grad()
def speculative_decode(model, draft, src, src_mask, bos_id, eos_id, max_len, lookahead=4):
    if not lookahead >= 1:
        raise ValueError(f"need lookahead >= 1, got lookahead={lookahead}")
    enc = model.encode(src, src_mask)
    enc_draft = draft.encode(src, src_mask)
    rows = [[bos_id] for _ in range(src.size(0))]
    ended = [False] * src.size(0)
    calls = 0
    while len(rows[0]) - 1 < max_len and not all(ended):
        length = len(rows[0])
        proposal = torch.tensor(rows, dtype=torch.long, device=src.device)
        for _ in range(min(lookahead, max_len - length)):
            logits = draft.decode(proposal, enc_draft, causal_mask(proposal.size(1), device=src.device), src_mask)
            proposal = torch.cat([proposal, logits[:, -1].argmax(-1, keepdim=True)], 1)
        best = model.decode(proposal, enc, causal_mask(proposal.size(1), device=src.device), src_mask).argmax(-1).tolist()
        guessed = proposal.tolist()
        j = 0
        while True:
            for b in range(len(rows)):
                rows[b].append(eos_id if ended[b] else best[b][length - 1 + j])
                ended[b] = ended[b] or rows[b][-1] == eos_id
            position = length + j
            if all(ended) or position >= len(guessed[0]):
                break
            if any(not ended[b] and guessed[b][position] != rows[b][-1] for b in range(len(rows))):
                break
            j += 1
    return torch.tensor([row[1:] for row in rows], dtype=torch.long, device=src.device)
""",
    ),
    # ------------------------------------------------------------------ speculative_sample
    Answer(
        "speculative_sample_python_loop",
        "speculative_sample",
        idiom="plain Python floats: a for loop with break, the draw by adding up the distribution token by token",
        code="""def speculative_sample(p, q, draft, uniforms):
    g = len(draft)
    if p.shape[0] != g + 1 or q.shape[0] != g:
        raise ValueError(f"p needs {g + 1} rows (one more than q), it has {p.shape[0]}")
    P, Q, U, guesses = p.tolist(), q.tolist(), uniforms.tolist(), draft.tolist()
    kept = []
    weights = P[g]
    for i, x in enumerate(guesses):
        if U[i] * Q[i][x] < P[i][x]:
            kept.append(x)
        else:
            weights = [max(0.0, a - b) for a, b in zip(P[i], Q[i])]
            break
    total, running, token = sum(weights), 0.0, len(weights) - 1
    for t, w in enumerate(weights):
        running += w / total
        if running > U[g]:
            token = t
            break
    return torch.tensor(kept + [token], dtype=torch.long)
""",
    ),
    Answer(
        "speculative_sample_vectorised",
        "speculative_sample",
        idiom="every ratio at once, the accepted count from a cumulative product, the draw by counting (cdf <= u)",
        code="""def speculative_sample(p, q, draft, uniforms):
    g = draft.numel()
    if p.shape[0] != q.shape[0] + 1:
        raise ValueError("p must have one row more than q")
    rows = torch.arange(g)
    ok = uniforms[:g] * q[rows, draft] < p[rows, draft]
    n = int(ok.long().cumprod(0).sum())
    dist = p[g] if n == g else torch.relu(p[n] - q[n])
    cdf = torch.cumsum(dist / dist.sum(), 0)
    token = min(int((cdf <= uniforms[-1]).sum()), dist.numel() - 1)
    return torch.cat([draft[:n], torch.tensor([token], dtype=draft.dtype)])
""",
    ),
    Answer(
        "speculative_sample_numpy",
        "speculative_sample",
        idiom="NumPy in float64: the first rejection by argmin, the draw by np.searchsorted",
        code="""import numpy as np


def speculative_sample(p, q, draft, uniforms):
    P, Q = p.detach().cpu().double().numpy(), q.detach().cpu().double().numpy()
    if P.shape[0] != Q.shape[0] + 1:
        raise ValueError(f"p has {P.shape[0]} rows; it must have one more than q ({Q.shape[0]})")
    x, u = draft.cpu().numpy(), uniforms.cpu().double().numpy()
    g = len(x)
    rejected = u[:g] >= P[np.arange(g), x] / Q[np.arange(g), x]
    n = int(np.argmax(rejected)) if rejected.any() else g
    dist = P[g] if n == g else np.maximum(P[n] - Q[n], 0.0)
    cdf = np.cumsum(dist) / dist.sum()
    token = min(int(np.searchsorted(cdf, u[g], side="right")), len(dist) - 1)
    return torch.from_numpy(np.append(x[:n], token).astype(np.int64))
""",
    ),
    Answer(
        "speculative_sample_log_space",
        "speculative_sample",
        idiom="the acceptance test in log space, the residual with torch.where, the draw by torch.bucketize",
        code="""def speculative_sample(p, q, draft, uniforms):
    if len(p) - len(q) != 1:
        raise ValueError(f"expected p with len(q) + 1 = {len(q) + 1} rows, got p with {len(p)}")
    n = 0
    for i, x in enumerate(draft.tolist()):
        if not torch.log(uniforms[i]) < torch.log(p[i, x]) - torch.log(q[i, x]):
            break
        n += 1
    if n < len(draft):
        diff = p[n] - q[n]
        dist = torch.where(diff > 0, diff, torch.zeros_like(diff))
    else:
        dist = p[-1]
    edges = (dist / dist.sum()).cumsum(-1)
    token = torch.bucketize(uniforms[-1:].to(edges.dtype), edges, right=True).clamp(max=len(dist) - 1)
    return torch.cat([draft[:n], token])
""",
    ),
]
