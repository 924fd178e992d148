"""Correct answers to ch10_what_heads_learn in other idioms than the reference's."""

from tests.correct import Answer

ANSWERS: list[Answer] = [
    # ------------------------------------------------------------------ previous_token_score
    Answer(
        "previous_loop",
        "previous_token_score",
        """
def previous_token_score(pattern):
    length = pattern.shape[-1]
    total = sum(pattern[:, :, i, i - 1] for i in range(1, length))  # (B, H)
    return (total / (length - 1)).mean(dim=0)
""",
        "a loop over the queries",
    ),
    Answer(
        "previous_index_float64",
        "previous_token_score",
        """
def previous_token_score(pattern):
    queries = torch.arange(1, pattern.size(-1))
    return pattern.double()[..., queries, queries - 1].mean(dim=(0, 2)).float()
""",
        "advanced indexing in float64",
    ),
    Answer(
        "previous_mask",
        "previous_token_score",
        """
def previous_token_score(pattern):
    length = pattern.size(-1)
    below = torch.diag(torch.ones(length - 1), -1)  # 1 at (i, i - 1)
    return (pattern * below).sum(dim=(-2, -1)).mean(dim=0) / (length - 1)
""",
        "a mask of the diagonal below, multiplied and summed",
    ),
    Answer(
        "previous_numpy",
        "previous_token_score",
        """
import numpy as np


def previous_token_score(pattern):
    weights = np.diagonal(pattern.numpy(), offset=-1, axis1=-2, axis2=-1)
    return torch.from_numpy(weights.mean(axis=(0, 2)))
""",
        "NumPy's diagonal",
    ),
    # ------------------------------------------------------------------ prefix_matching_score
    Answer(
        "prefix_diagonal",
        "prefix_matching_score",
        """
def prefix_matching_score(pattern, period):
    if period < 1 or period >= pattern.size(-1):
        raise ValueError(f"period={period} leaves no query of the repeat")
    # offset 1 - period holds (i, i - period + 1) from query period - 1 on; that first query is not of the repeat
    return pattern.diagonal(offset=1 - period, dim1=-2, dim2=-1)[..., 1:].mean(dim=(0, -1))
""",
        "a diagonal below the main one",
    ),
    Answer(
        "prefix_loop",
        "prefix_matching_score",
        """
def prefix_matching_score(pattern, period):
    length = pattern.shape[-1]
    if not (isinstance(period, int) and 0 < period < length):
        raise ValueError("period must be at least 1 and less than the length of the pattern")
    total = 0
    for i in range(period, length):
        total = total + pattern[:, :, i, i - period + 1]
    return (total / (length - period)).mean(dim=0)
""",
        "a loop over the queries of the repeat",
    ),
    Answer(
        "prefix_gather",
        "prefix_matching_score",
        """
def prefix_matching_score(pattern, period):
    batch, heads, length, _ = pattern.shape
    if period <= 0 or period > length - 1:
        raise ValueError(f"invalid period {period} for {length} positions")
    keys = torch.arange(1, length - period + 1).view(1, 1, -1, 1).expand(batch, heads, -1, 1)
    return pattern[:, :, period:].gather(-1, keys).mean(dim=(0, 2, 3))
""",
        "gather along the keys",
    ),
    Answer(
        "prefix_mask",
        "prefix_matching_score",
        """
def prefix_matching_score(pattern, period):
    length = pattern.size(-1)
    if not 1 <= period < length:
        raise ValueError("bad period")
    target = torch.zeros(length, length, dtype=pattern.dtype)
    target[torch.arange(period, length), torch.arange(1, length - period + 1)] = 1.0
    return torch.einsum("bhqk,qk->h", pattern, target) / (pattern.size(0) * (length - period))
""",
        "a mask of the target keys and einsum",
    ),
    # ------------------------------------------------------------------ copying_score
    Answer(
        "copying_numpy",
        "copying_score",
        """
import numpy as np


def copying_score(ov):
    values = np.linalg.eigvals(ov.double().numpy())
    return torch.as_tensor(values.real.sum(axis=-1) / np.abs(values).sum(axis=-1))
""",
        "NumPy's eigenvalues in float64",
    ),
    Answer(
        "copying_trace",
        "copying_score",
        """
def copying_score(ov):
    trace = ov.diagonal(dim1=-2, dim2=-1).sum(dim=-1)  # the sum of the eigenvalues is the trace
    return trace / torch.linalg.eigvals(ov).abs().sum(dim=-1)
""",
        "the trace for the sum of the eigenvalues",
    ),
    Answer(
        "copying_eig",
        "copying_score",
        """
def copying_score(ov):
    values, _vectors = torch.linalg.eig(ov)
    return values.real.sum(-1) / values.abs().sum(-1)
""",
        "torch.linalg.eig, its vectors unused",
    ),
    Answer(
        "copying_hypot",
        "copying_score",
        """
def copying_score(ov):
    values = torch.linalg.eigvals(ov.double())
    return (values.real.sum(-1) / torch.hypot(values.real, values.imag).sum(-1)).to(ov.dtype)
""",
        "float64 eigenvalues, their moduli with hypot",
    ),
    # ------------------------------------------------------------------ ablation_effects
    Answer(
        "ablation_pattern_hook",
        "ablation_effects",
        """
def ablation_effects(model, tokens, period):
    def loss():
        logits = model(tokens)
        return F.cross_entropy(logits[:, period:-1].flatten(0, 1), tokens[:, period + 1 :].flatten())

    with torch.no_grad():
        base = loss()
        rows = []
        for layer in model.layers:
            row = []
            for head in range(layer.W_Q.shape[0]):
                keep = torch.ones(layer.W_Q.shape[0])
                keep[head] = 0
                handle = layer.hook_pattern.register_forward_hook(lambda m, i, p, keep=keep: p * keep[:, None, None])
                row.append(loss() - base)
                handle.remove()
            rows.append(torch.stack(row))
    return torch.stack(rows)
""",
        "the head's attention pattern zeroed instead of its output",
    ),
    Answer(
        "ablation_weights",
        "ablation_effects",
        """
def ablation_effects(model, tokens, period):
    def loss():
        logits = model(tokens)[:, :-1]
        losses = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")
        return losses[:, period:].mean()

    effects = torch.zeros(model.config.num_layers, model.config.num_heads)
    with torch.no_grad():
        clean = loss()
        for l, layer in enumerate(model.layers):
            for h in range(model.config.num_heads):
                saved = layer.W_O[h].clone()
                layer.W_O[h] = 0.0
                effects[l, h] = loss() - clean
                layer.W_O[h] = saved
    return effects
""",
        "W_O's rows of the head zeroed and put back; a loss per position, then the repeat's",
    ),
    Answer(
        "ablation_context_manager",
        "ablation_effects",
        """
import contextlib


@contextlib.contextmanager
def zeroed(attention, head):
    def hook(module, inputs, z):
        keep = torch.ones(z.size(1), device=z.device)
        keep[head] = 0.0
        return z * keep[None, :, None, None]

    handle = attention.hook_z.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def ablation_effects(model, tokens, period):
    def repeat_loss():
        logits = model(tokens)
        return F.cross_entropy(logits[:, period : tokens.size(1) - 1].reshape(-1, logits.size(-1)),
                               tokens[:, period + 1 :].reshape(-1))

    with torch.no_grad():
        clean = repeat_loss()
        effects = []
        for attention in model.layers:
            for head in range(model.config.num_heads):
                with zeroed(attention, head):
                    effects.append(repeat_loss() - clean)
    return torch.stack(effects).view(len(model.layers), model.config.num_heads)
""",
        "a context manager that zeroes a head by a multiplicative mask",
    ),
    Answer(
        "ablation_in_place_hook",
        "ablation_effects",
        """
def ablation_effects(model, tokens, period):
    targets = tokens[:, period + 1 :]

    def repeat_loss():
        logits = model(tokens)[:, period:-1]
        log_probs = logits.log_softmax(dim=-1)
        return -log_probs.gather(-1, targets[..., None]).mean()

    def zero_in_place(module, inputs, z, head):
        z[:, head] = 0.0  # returns None: the output is changed where it is

    effects = torch.zeros(len(model.layers), model.config.num_heads)
    with torch.no_grad():
        clean = repeat_loss()
        for l, attention in enumerate(model.layers):
            for h in range(model.config.num_heads):
                handle = attention.hook_z.register_forward_hook(lambda m, i, z, h=h: zero_in_place(m, i, z, h))
                effects[l, h] = repeat_loss() - clean
                handle.remove()
    return effects
""",
        "a hook that zeroes the head in place and returns None; the cross-entropy by log_softmax and gather",
    ),
    # ------------------------------------------------------------------ path_patch
    Answer(
        "path_two_runs",
        "path_patch",
        """
def path_patch(model, tokens, period, sender, receiver, path):
    names = {"query": "hook_q_input", "key": "hook_k_input", "value": "hook_v_input"}
    if path not in names:
        raise ValueError(f"unknown path {path!r}")
    if receiver <= sender[0] or receiver >= len(model.layers):
        raise ValueError(f"receiver {receiver} is not a layer after {sender[0]}")
    source = model.layers[sender[0]]
    cache = []
    handle = source.hook_z.register_forward_hook(lambda m, i, z: cache.append(z.detach().clone()))
    with torch.no_grad():
        model(tokens)  # a clean run, cached
    handle.remove()
    z = cache[0]
    removed = sum(z[:, h] @ source.W_O[h] for h in sender[1])  # head by head
    handle = getattr(model.layers[receiver], names[path]).register_forward_hook(lambda m, i, x: x - removed)
    try:
        with torch.no_grad():
            logits = model(tokens)
    finally:
        handle.remove()
    return F.cross_entropy(logits[:, period:-1].flatten(0, 1), tokens[:, period + 1 :].flatten())
""",
        "a clean run cached first, then a patched run; the senders' outputs summed head by head",
    ),
    Answer(
        "path_forward_by_hand",
        "path_patch",
        """
import math


def path_patch(model, tokens, period, sender, receiver, path):
    if path not in ("query", "key", "value"):
        raise ValueError("path must be query, key or value")
    layer_of_sender, heads = sender
    if not layer_of_sender < receiver < len(model.layers):
        raise ValueError("receiver must be a later layer than the sender's")
    with torch.no_grad():
        x = model.W_E[tokens] + model.W_pos[: tokens.size(1)]
        length = tokens.size(1)
        future = torch.ones(length, length, dtype=torch.bool).triu(1)
        sent = None
        for index, layer in enumerate(model.layers):
            reads = {"query": x, "key": x, "value": x}
            if index == receiver:
                reads[path] = x - sent
            q = torch.einsum("btd,hde->bhte", reads["query"], layer.W_Q)
            k = torch.einsum("btd,hde->bhte", reads["key"], layer.W_K)
            v = torch.einsum("btd,hde->bhte", reads["value"], layer.W_V)
            scores = (q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))).masked_fill(future, float("-inf"))
            z = scores.softmax(-1) @ v
            if index == layer_of_sender:
                sent = torch.einsum("bhte,hed->btd", z[:, list(heads)], layer.W_O[list(heads)])
            x = x + torch.einsum("bhte,hed->btd", z, layer.W_O)
        logits = x @ model.W_U
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    return losses[:, period:].mean()
""",
        "the model's forward written out, the receiver's one input changed; no hooks",
    ),
    Answer(
        "path_stack_and_gather",
        "path_patch",
        """
def path_patch(model, tokens, period, sender, receiver, path):
    layer, heads = sender[0], torch.as_tensor(list(sender[1]))
    if not isinstance(receiver, int) or not layer < receiver < len(model.layers):
        raise ValueError(f"receiver={receiver}: must be a later layer")
    try:
        point = getattr(model.layers[receiver], {"query": "hook_q_input", "key": "hook_k_input",
                                                  "value": "hook_v_input"}[path])
    except KeyError:
        raise ValueError(f"path={path!r}: one of query, key, value") from None
    state = {}

    def keep(module, inputs, z):
        per_head = torch.einsum("bhte,hed->bhtd", z, model.layers[layer].W_O)  # every head's output
        state["sent"] = per_head.index_select(1, heads).sum(dim=1)

    handles = [model.layers[layer].hook_z.register_forward_hook(keep),
               point.register_forward_hook(lambda m, i, x: torch.sub(x, state["sent"]))]
    with torch.no_grad():
        logits = model(tokens)
    for handle in handles:
        handle.remove()
    log_probs = logits[:, period:-1].log_softmax(-1)
    return -log_probs.gather(-1, tokens[:, period + 1 :, None]).mean()
""",
        "every head's output, then index_select; the cross-entropy by log_softmax and gather",
    ),
    Answer(
        "path_pre_hook_on_a_copy",
        "path_patch",
        """
def path_patch(model, tokens, period, sender, receiver, path):
    points = dict(query="hook_q_input", key="hook_k_input", value="hook_v_input")
    if path not in points:
        raise ValueError("path: expected query, key or value")
    src, chosen = sender
    layers = list(model.layers)
    if receiver not in range(src + 1, len(layers)):
        raise ValueError("receiver: not a layer after the sender's")
    mask = torch.zeros(layers[src].W_O.shape[0])
    mask[list(chosen)] = 1.0
    box = [None]

    def grab(module, inputs, z):
        box[0] = torch.einsum("bhte,h,hed->btd", z, mask, layers[src].W_O)  # only the chosen heads

    def subtract(module, inputs, x):
        out = x.clone()
        out -= box[0]  # in place on a copy: the layer's input itself is left alone
        return out

    first = layers[src].hook_z.register_forward_hook(grab)
    second = getattr(layers[receiver], points[path]).register_forward_hook(subtract)
    try:
        with torch.inference_mode():
            logits = model(tokens).double()
    finally:
        first.remove()
        second.remove()
    targets = tokens[:, period + 1 :]
    picked = logits[:, period:-1].log_softmax(-1).gather(-1, targets.unsqueeze(-1))
    return -picked.mean()
""",
        "a 0/1 mask of the heads in einsum, an in-place subtraction on a copy, float64 log-softmax",
    ),
    # ------------------------------------------------------------------ split_prefix_score
    Answer(
        "split_fractions",
        "split_prefix_score",
        """
from fractions import Fraction


def split_prefix_score(repeats):
    shares = [Fraction(1, earlier) for earlier in range(1, repeats)]
    return float(sum(shares) / len(shares))
""",
        "exact fractions, one share per copy",
    ),
    Answer(
        "split_per_query",
        "split_prefix_score",
        """
def split_prefix_score(repeats, period=5):
    weights = [1 / (i // period) for i in range(period, repeats * period)]  # query i has i // period earlier matches
    return sum(weights) / len(weights)
""",
        "a loop over the queries of a segment of 5 tokens",
    ),
    Answer(
        "split_harmonic_numpy",
        "split_prefix_score",
        """
import numpy as np


def split_prefix_score(repeats):
    return np.mean(1.0 / np.arange(1, repeats))  # numpy's float64, the mean of 1/k over the copies after the first
""",
        "NumPy's mean of 1 / k",
    ),
    Answer(
        "split_recursive",
        "split_prefix_score",
        """
def split_prefix_score(repeats):
    if repeats == 2:
        return 1.0
    # one more copy adds a share of 1 / (repeats - 1) to the mean of the copies before it
    before = split_prefix_score(repeats - 1) * (repeats - 2)
    return (before + 1 / (repeats - 1)) / (repeats - 1)
""",
        "a recursion over the number of copies",
    ),
    # ------------------------------------------------------------------ after_ablating_previous
    Answer(
        "after_branches",
        "after_ablating_previous",
        """
def after_ablating_previous(measurement):
    if "copying" in measurement or "previous-token score" in measurement:
        return "unchanged"  # weights alone, or computed before the head's output
    if measurement == "the loss on the repeat":
        return "rises"
    return "falls"
""",
        "branches on words of the measurement",
    ),
    Answer(
        "after_index",
        "after_ablating_previous",
        """
CHANGE_OPTIONS = ("falls", "unchanged", "rises")
MEASUREMENTS = (
    "the previous-token head's previous-token score",
    "the induction head's prefix-matching score",
    "the induction head's copying score",
    "the loss on the repeat",
)


def after_ablating_previous(measurement):
    return CHANGE_OPTIONS[[1, 0, 1, 2][MEASUREMENTS.index(measurement)]]
""",
        "indices into the notebook's tuples",
    ),
    Answer(
        "after_match",
        "after_ablating_previous",
        """
def after_ablating_previous(measurement):
    match measurement:
        case "the loss on the repeat":
            return "rises"
        case "the induction head's prefix-matching score":
            return "falls"
        case _:
            return "unchanged"
""",
        "a match statement with a default",
    ),
    Answer(
        "after_dict_get",
        "after_ablating_previous",
        """
def after_ablating_previous(measurement):
    changed = {"the induction head's prefix-matching score": "falls", "the loss on the repeat": "rises"}
    return changed.get(measurement, "unchanged")
""",
        "a dict of the changed ones, unchanged by default",
    ),
]
