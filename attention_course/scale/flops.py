"""Model FLOPs of a training step, a device's peaks, the model FLOPs utilisation (MFU), and Chinchilla's fitted loss.

The peaks are a device's dense bf16 FLOP/s and its memory bandwidth; the fitted loss is the parametric law of
Hoffmann et al. (2022) with its published constants and with those of Besiroglu et al.'s (2024) refit.
"""

from __future__ import annotations

import torch

from attention_course.models.transformer import DecoderOnly, EncoderDecoder

# Dense bf16 tensor-core peaks, in FLOP/s, by the exact name that torch.cuda.get_device_name reports, from
# the vendors' data sheets. The data sheets give these peaks "with sparsity" (2:4 structured sparsity, which
# dense training does not use); the dense peak is half of that. Form factors of one chip differ (an H100 in
# a PCIe card runs at lower clocks and power than in an SXM module), so a name must match exactly.
PEAK_BF16_FLOPS = {
    "NVIDIA H100 80GB HBM3": 1979e12 / 2,  # H100 SXM5: NVIDIA H100 data sheet
    "NVIDIA H100 NVL": 1671e12 / 2,  # NVIDIA H100 data sheet
    "NVIDIA H100 PCIe": 1513e12 / 2,  # NVIDIA H100 PCIe product brief
    "NVIDIA H200": 1979e12 / 2,  # H200 SXM: NVIDIA H200 data sheet
    "NVIDIA H200 NVL": 1671e12 / 2,  # NVIDIA H200 data sheet
    "NVIDIA A100-SXM4-40GB": 624e12 / 2,  # NVIDIA A100 data sheet: the same peak in every form factor
    "NVIDIA A100-SXM4-80GB": 624e12 / 2,
    "NVIDIA A100-PCIE-40GB": 624e12 / 2,
    "NVIDIA A100 80GB PCIe": 624e12 / 2,
    "NVIDIA A10": 250e12 / 2,  # NVIDIA A10 data sheet
    "NVIDIA L4": 242e12 / 2,  # NVIDIA L4 data sheet
    "NVIDIA GeForce RTX 4090": 330.4e12 / 2,  # NVIDIA Ada Lovelace architecture white paper
}


# Peak memory bandwidth, in bytes/s, by the same names, from the same data sheets: the rate at which a step that
# reads more bytes than its arithmetic can use (decoding one token, for one) is bound.
PEAK_MEMORY_BANDWIDTH = {
    "NVIDIA H100 80GB HBM3": 3.35e12,  # H100 SXM5: NVIDIA H100 data sheet
    "NVIDIA H200": 4.8e12,  # H200 SXM: NVIDIA H200 data sheet
}


def _matrix_weights(*modules: torch.nn.Module) -> int:
    """The weights of the matrix products in ``modules``: their linear layers' weight matrices.

    Embedding look-ups, biases and layer norms are left out, as in the standard accounting.
    """
    return sum(m.weight.numel() for module in modules for m in module.modules() if isinstance(m, torch.nn.Linear))


def training_flops(model: torch.nn.Module, lengths, target_lengths=None) -> float:
    """Model FLOPs of one training step (forward and backward pass) on sequences of the given lengths.

    The standard accounting (Kaplan et al. 2020, Chowdhery et al. 2022): a token costs 6 FLOPs for each
    weight of a matrix product it goes through (2 in the forward pass, 4 in the backward pass), and each
    attention layer adds 12 d L FLOPs per query, for its products with the L keys and L values (d: the
    width of the queries). Embedding look-ups, biases and norms are not counted.

    ``lengths``: the length of each sequence of a ``DecoderOnly`` model, or of each source of an
    ``EncoderDecoder``, whose ``target_lengths`` are the lengths of the decoder's sequences. Source tokens
    go through the encoder and the cross-attention's key and value projections; target tokens go through
    the rest of the decoder and the output layer. Self-attention spans a sequence's own length,
    cross-attention the source's.
    """
    lengths = torch.as_tensor(lengths, dtype=torch.int64).flatten()
    if isinstance(model, EncoderDecoder):
        if target_lengths is None or len(target_lengths) != len(lengths):
            raise ValueError("an EncoderDecoder needs one target length for each source length")
        targets = torch.as_tensor(target_lengths, dtype=torch.int64).flatten()
        encoder, decoder = model.encoder_layers, model.decoder_layers
        cross_kv = sum(_matrix_weights(layer.cross_attn.W_k, layer.cross_attn.W_v) for layer in decoder)
        per_source = _matrix_weights(encoder) + cross_kv
        per_target = _matrix_weights(decoder, model.generator) - cross_kv
        encoder_width = sum(layer.self_attn.W_q.out_features for layer in encoder)
        self_width = sum(layer.self_attn.W_q.out_features for layer in decoder)
        cross_width = sum(layer.cross_attn.W_q.out_features for layer in decoder)
        s, t = lengths, targets  # every sum exact: integers
        matrices = 6 * (int(s.sum()) * per_source + int(t.sum()) * per_target)
        scores = 12 * (int((s * s).sum()) * encoder_width + int((t * t).sum()) * self_width)
        return float(matrices + scores + 12 * int((t * s).sum()) * cross_width)
    if isinstance(model, DecoderOnly):
        if target_lengths is not None:
            raise ValueError("a DecoderOnly model has one stream: give its lengths only")
        per_token = _matrix_weights(model.layers, model.generator)
        width = sum(layer.self_attn.W_q.out_features for layer in model.layers)
        return float(6 * int(lengths.sum()) * per_token + 12 * int((lengths * lengths).sum()) * width)
    raise TypeError(f"training_flops counts EncoderDecoder and DecoderOnly models, not {type(model).__name__}")


def peak_flops(device: torch.device, peak_tflops: float | None = None) -> tuple[float | None, str]:
    """The peak FLOP/s of one ``device``, and where it comes from; ``(None, why)`` where none is known."""
    if peak_tflops is not None:
        return peak_tflops * 1e12, "--peak-tflops"
    if device.type != "cuda":
        return None, f"no peak is known for a {device.type} device: give one with --peak-tflops"
    name = torch.cuda.get_device_name(device)
    if name not in PEAK_BF16_FLOPS:
        return None, f"no peak is known for {name!r}: give its dense bf16 peak with --peak-tflops"
    return PEAK_BF16_FLOPS[name], f"{name}: dense bf16 peak of its data sheet"


def mfu(flops_per_second: float, peak: float | None, devices: int = 1) -> float | None:
    """Model FLOPs utilisation: the model FLOP/s achieved on ``devices`` devices over their peak."""
    return None if peak is None else flops_per_second / (peak * devices)


# The parametric loss L(N, D) = E + A / N^alpha + B / D^beta, in nats per token, fitted to the final losses of
# models of N parameters trained on D tokens of MassiveText with a SentencePiece vocabulary of 32,000 tokens:
# Hoffmann et al. (2022), their third approach, as the paper's text rounds it; and the refit of Besiroglu et al.
# (2024) to the data reconstructed from the paper's plots, which finds the rounded fit biased and its optimiser
# stopped before it converged.
CHINCHILLA_FITS = {
    "Hoffmann et al. 2022": {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28},
    "Besiroglu et al. 2024": {"E": 1.8172, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658},
}


def chinchilla_loss(n_params: float, n_tokens: float, E: float, A: float, B: float, alpha: float, beta: float) -> float:
    """The fitted loss ``E + A / n_params^alpha + B / n_tokens^beta`` (nats per token of the fit's data)."""
    if n_params <= 0 or n_tokens <= 0:
        raise ValueError(f"n_params and n_tokens must be positive, got {n_params!r} and {n_tokens!r}")
    return E + A / n_params**alpha + B / n_tokens**beta


def chinchilla_optimal(compute_flops: float, A: float, B: float, alpha: float, beta: float, **_) -> tuple[float, float]:
    """``(n_params, n_tokens)`` with ``6 * n_params * n_tokens = compute_flops`` that minimise the fitted loss:
    ``n_params = G (C / 6)^(beta / (alpha + beta))`` with ``G = (alpha A / (beta B))^(1 / (alpha + beta))``
    (Hoffmann et al. 2022, section 3.3). ``E`` does not move the optimum, and is accepted and ignored."""
    if compute_flops <= 0:
        raise ValueError(f"compute_flops must be positive, got {compute_flops!r}")
    g = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
    n_params = g * (compute_flops / 6) ** (beta / (alpha + beta))
    return n_params, compute_flops / 6 / n_params
