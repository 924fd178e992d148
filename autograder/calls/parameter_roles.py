"""Where a student's parameters are, when the contract does not name them all.

A ``Transformer``'s layers are the contract's ``EncoderLayer`` and ``DecoderLayer``, whose
parameters it names (``self_attn.W_q.weight``, ...), but its embeddings and output layer are the
student's to name. :func:`arrange` finds them by their role: the layers by the contract's names
inside them (a decoder layer has a ``cross_attn``), in the order the model holds them; the source
embedding by its shape (source vocabulary, d_model); of the two (target vocabulary, d_model)
matrices, the output layer's is the one with a bias (else the later one). The work is linear in
the number of the student's parameters and buffers, which may be at most a few times the
reference's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from autograder.api.items import type_name

LAYER_KEY = "self_attn.W_q.weight"
MAX_EXTRA = 64  # parameters and buffers a model may hold besides four times the reference's


class NotFound(Exception):
    """The student's model has no parameter in a role the reference's weights need."""


@dataclass
class Arranged:
    """The reference's weights for a student's model: ``moved``, under the student's names, and
    ``common``, what every model of the call gets (the reference's own names)."""

    moved: dict
    common: dict
    roles: tuple[dict, dict]  # (the reference's roles, the student's roles)

    def settled(self, state_after: dict) -> dict:
        """``common``, made to match a model whose output layer shares its weight with the target
        embedding (as the assignment allows): whichever of the two the student's model now holds in
        both, the reference gets in both too. Nothing else is shared this way: layers that share their
        weights stay the student's mistake."""
        ours, theirs = self.roles
        if not (ours["out"] and ours["tgt"] and theirs["out"] and theirs["tgt"]):
            return self.common
        held_out, held_tgt = state_after.get(theirs["out"]), state_after.get(theirs["tgt"])
        tensors = isinstance(held_out, torch.Tensor) and isinstance(held_tgt, torch.Tensor)
        if not tensors or held_out.shape != held_tgt.shape or not torch.equal(held_out, held_tgt):
            return self.common
        common = dict(self.common)
        common[ours["out"]] = common[ours["tgt"]] = held_out.clone()
        return common


def arrange(layout: str, weights: dict, state: dict, init: tuple) -> Arranged:
    """The reference's ``weights`` arranged for a student's model whose ``state`` (its state_dict) this is;
    a piece the student's model leaves out (an output layer's bias) is zero in every model of the call."""
    if layout != "transformer":
        raise ValueError(f"unknown layout {layout!r}")
    if not isinstance(state, dict):
        raise NotFound(f"state_dict() returned a {type_name(state)}, not a dict of tensors")
    most = 4 * len(weights) + MAX_EXTRA
    if len(state) > most:
        raise NotFound(
            f"the model holds {len(state)} parameters and buffers; one built as the assignment says, with these "
            f"sizes, holds {len(weights)} parameters, and the grader reads at most {most}"
        )
    shapes = {str(key): tuple(getattr(value, "shape", ())) for key, value in state.items()}
    src_vocab, tgt_vocab, d_model = init[:3]
    ours, theirs = _roles(weights, src_vocab, tgt_vocab, d_model), _roles(shapes, src_vocab, tgt_vocab, d_model)
    moved, common = {}, dict(weights)
    for side, label in (("enc", "encoder"), ("dec", "decoder")):
        if len(ours[side]) != len(theirs[side]):
            raise NotFound(
                f"the model holds {len(theirs[side])} {label} layers (found by their self_attn.W_q.weight); "
                f"num_layers={len(ours[side])} asks for {len(ours[side])}"
            )
        for a, b in zip(ours[side], theirs[side]):
            moved.update({b + key[len(a) :]: value for key, value in weights.items() if key.startswith(a)})
    for role in ("src", "tgt", "out", "bias"):
        if ours[role] is None:
            continue
        if theirs[role] is not None:
            moved[theirs[role]] = weights[ours[role]]
        elif role == "bias":  # an output layer without a bias: the reference's gets a zero one
            common[ours[role]] = weights[ours[role]].new_zeros(weights[ours[role]].shape)
        else:
            what = {"src": "source embedding", "tgt": "target embedding", "out": "output layer"}[role]
            raise NotFound(f"the model holds no {what} (a parameter of shape {_shape_of(role, init)})")
    return Arranged(moved, common, (ours, theirs))


def _shape_of(role: str, init: tuple) -> tuple:
    src_vocab, tgt_vocab, d_model = init[:3]
    return (src_vocab, d_model) if role == "src" else (tgt_vocab, d_model)


def _roles(state: dict, src_vocab: int, tgt_vocab: int, d_model: int) -> dict:
    """The key (or layer prefix) of each role in ``state`` (key -> tensor or shape)."""

    def shape(key):
        value = state[key]
        return tuple(value) if isinstance(value, tuple) else tuple(value.shape)

    layers: dict[str, list[str]] = {"enc": [], "dec": []}
    for key in state:
        if key.endswith("." + LAYER_KEY):
            prefix = key[: -len(LAYER_KEY)]
            layers["dec" if prefix + "cross_attn.W_q.weight" in state else "enc"].append(prefix)
    inside = tuple(layers["enc"] + layers["dec"])
    rest = [key for key in state if not (inside and key.startswith(inside))]
    sources = [key for key in rest if shape(key) == (src_vocab, d_model)]
    src = sources[0] if sources else None
    words = [key for key in rest if shape(key) == (tgt_vocab, d_model) and key != src]
    biased = [
        key for key in words if key.endswith("weight") and _shape_or_none(state, key[:-6] + "bias") == (tgt_vocab,)
    ]
    out = biased[0] if biased else (words[-1] if len(words) > 1 else None)
    tgt = next((key for key in words if key != out), None)
    bias = out[:-6] + "bias" if out and out.endswith("weight") and out[:-6] + "bias" in state else None
    return {**layers, "src": src, "tgt": tgt, "out": out, "bias": bias}


def _shape_or_none(state: dict, key: str):
    if key not in state:
        return None
    value = state[key]
    return tuple(value) if isinstance(value, tuple) else tuple(value.shape)
