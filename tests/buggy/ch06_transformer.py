"""Wrong answers to ch06_transformer that students really write.

Each is the reference answer with one realistic mistake in it: ``variant``
replaces one piece of the reference solution's code and checks that the piece
is there, so a wrong answer cannot silently become the right one.
"""

from tests.buggy import Bug
from tests.submissions import solution_bodies

TESTS = {
    "FeedForward": ["test_feed_forward"],
    "EncoderLayer": ["test_encoder_layer"],
    "DecoderLayer": ["test_decoder_layer"],
    "Transformer": ["test_transformer_shapes", "test_transformer_causal", "test_transformer_padding"],
    "greedy_decode": ["test_greedy_decode"],
}

REFERENCE = solution_bodies("ch06_transformer")


def variant(item: str, *replacements: tuple[str, str]) -> str:
    code = REFERENCE[item]
    for old, new in replacements:
        if old not in code:
            raise ValueError(f"{item}: {old!r} is not in the reference solution")
        code = code.replace(old, new)
    return code


BUGS = [
    # ------------------------------------------------------------------ FeedForward
    Bug("ff_relu_after_linear2", "FeedForward", why="the ReLU at the end", code=variant(
        "FeedForward", ("return self.linear2(self.dropout(F.relu(self.linear1(x))))",
                        "return F.relu(self.linear2(self.dropout(self.linear1(x))))"))),
    Bug("ff_no_activation", "FeedForward", why="two linear layers with nothing between", code=variant(
        "FeedForward", ("F.relu(self.linear1(x))", "self.linear1(x)"))),
    Bug("ff_gelu", "FeedForward", why="GELU where the paper has ReLU", code=variant(
        "FeedForward", ("F.relu(", "F.gelu("))),
    # ------------------------------------------------------------------ EncoderLayer
    Bug("encoder_ignores_norm_first", "EncoderLayer", why="always post-norm", code=variant(
        "EncoderLayer", ("if self.norm_first:", "if False:"))),
    Bug("encoder_norm_before_residual", "EncoderLayer", why="post-norm that normalises the block, not the sum",
        code=variant("EncoderLayer",
                     ("x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))",
                      "x = x + self.norm1(self.dropout1(self.self_attn(x, x, x, mask)[0]))"))),
    Bug("encoder_no_attention_residual", "EncoderLayer", why="drops the residual around attention", code=variant(
        "EncoderLayer", ("x = self.norm1(x + self.dropout1(", "x = self.norm1(0 + self.dropout1("),
        ("x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])", "x = self.dropout1(self.self_attn(h, h, h, mask)[0])"))),
    Bug("encoder_mask_not_passed", "EncoderLayer", why="attends to padding", code=variant(
        "EncoderLayer", ("self.self_attn(x, x, x, mask)", "self.self_attn(x, x, x)"),
        ("self.self_attn(h, h, h, mask)", "self.self_attn(h, h, h)"))),
    Bug("encoder_pre_norm_residual_from_norm", "EncoderLayer", why="pre-norm adds to norm1(x) instead of x",
        code=variant("EncoderLayer", ("x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])",
                                      "x = h + self.dropout1(self.self_attn(h, h, h, mask)[0])"))),
    # ------------------------------------------------------------------ DecoderLayer
    Bug("decoder_cross_attends_to_itself", "DecoderLayer", why="keys and values from x, not memory", code=variant(
        "DecoderLayer", ("self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(x, x, x, memory_mask)"),
        ("self.cross_attn(h, memory, memory, memory_mask)", "self.cross_attn(h, h, h, memory_mask)"))),
    Bug("decoder_queries_from_memory", "DecoderLayer", why="queries and keys swapped", code=variant(
        "DecoderLayer", ("self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(memory, x, x, memory_mask)"),
        ("self.cross_attn(h, memory, memory, memory_mask)", "self.cross_attn(memory, h, h, memory_mask)"))),
    Bug("decoder_masks_swapped", "DecoderLayer", why="self-attention gets memory_mask", code=variant(
        "DecoderLayer", ("self.self_attn(x, x, x, tgt_mask)", "self.self_attn(x, x, x, memory_mask)"),
        ("self.self_attn(h, h, h, tgt_mask)", "self.self_attn(h, h, h, memory_mask)"))),
    Bug("decoder_normalises_memory", "DecoderLayer", why="pre-norm applies norm2 to memory too", code=variant(
        "DecoderLayer", ("self.cross_attn(h, memory, memory, memory_mask)",
                         "self.cross_attn(h, self.norm2(memory), self.norm2(memory), memory_mask)"))),
    # ------------------------------------------------------------------ Transformer
    Bug("transformer_no_look_ahead", "Transformer", why="decode forgets tgt_mask", code=variant(
        "Transformer", ("x = layer(x, memory, tgt_mask, memory_mask)", "x = layer(x, memory, None, memory_mask)"))),
    Bug("transformer_encoder_sees_padding", "Transformer", why="encode forgets src_mask", code=variant(
        "Transformer", ("x = layer(x, mask)", "x = layer(x)"))),
    Bug("transformer_cross_sees_padding", "Transformer", why="forward does not pass src_mask to decode", code=variant(
        "Transformer", ("return self.decode(tgt_in, self.encode(src, src_mask), tgt_mask, src_mask)",
                        "return self.decode(tgt_in, self.encode(src, src_mask), tgt_mask)"))),
    Bug("transformer_returns_features", "Transformer", why="no output layer", code=variant(
        "Transformer", ("return self.generator(x)", "return x"))),
    Bug("transformer_ignores_target", "Transformer", why="decodes from zeros", code=variant(
        "Transformer", ("x = self.positions(self.tgt_embedding(tgt_in) * self.scale)",
                        "x = self.positions(self.tgt_embedding(torch.zeros_like(tgt_in)) * self.scale)"))),
    # ------------------------------------------------------------------ greedy_decode
    Bug("greedy_keeps_bos", "greedy_decode", why="returns the leading bos_id", code=variant(
        "greedy_decode", ("return ys[:, 1:]", "return ys"))),
    Bug("greedy_first_position", "greedy_decode", why="argmax at position 0 instead of the last", code=variant(
        "greedy_decode", ("logits[:, -1]", "logits[:, 0]"))),
    Bug("greedy_never_stops_early", "greedy_decode", why="always runs max_len steps", code=variant(
        "greedy_decode", ("        if finished.all():\n            break\n", ""))),
    Bug("greedy_stops_at_first_eos", "greedy_decode", why="stops when any sequence ends", code=variant(
        "greedy_decode", ("if finished.all():", "if finished.any():"))),
    Bug("greedy_no_eos_fill", "greedy_decode", why="keeps generating after a sequence's eos", code=variant(
        "greedy_decode", (".argmax(dim=-1).masked_fill(finished, eos_id)", ".argmax(dim=-1)"))),
    Bug("greedy_forgets_memory_mask", "greedy_decode", why="decodes without the source padding mask", code=variant(
        "greedy_decode", ("causal_mask(ys.size(1), device=src.device), src_mask)",
                          "causal_mask(ys.size(1), device=src.device))"))),
]
