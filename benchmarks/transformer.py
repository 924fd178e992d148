"""Training throughput of the course's Transformer against the same model built from torch.nn layers.

Both models have the same sizes, the same embeddings and output layer, and train
on the same batches of the date task with the same optimizer; only the
encoder and decoder layers differ (the course's, or nn.TransformerEncoderLayer /
nn.TransformerDecoderLayer). The two are timed in alternating rounds in one run,
and the script prints tokens per second for each, the ratio, and the model
FLOPs utilisation where the peak of the device is known (a GPU whose data
sheet the course holds, or any device with --peak-tflops).

    python -m benchmarks.transformer                 # CPU or the best device, defaults
    python -m benchmarks.transformer --precision bf16 --compile --batch-size 512
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_course import best_device
from attention_course.data.dates import SOURCE_VOCAB, TARGET_VOCAB, DateTask, batch
from attention_course.models.layers import TokenEmbedding
from attention_course.models.transformer import EncoderDecoder
from attention_course.scale.flops import mfu, peak_flops, training_flops
from attention_course.solutions.ch04_masking import causal_mask


class TorchLayersTransformer(nn.Module):
    """The course's Transformer with its layers replaced by torch.nn's (same sizes, same interface)."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, dropout, norm_first):
        super().__init__()
        self.src_embed = TokenEmbedding(src_vocab_size, d_model, 64, dropout)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model, 64, dropout)
        common = {
            "dim_feedforward": d_ff,
            "dropout": dropout,
            "activation": "relu",
            "batch_first": True,
            "norm_first": norm_first,
        }
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model, num_heads, **common),
            num_layers,
            norm=nn.LayerNorm(d_model) if norm_first else None,
            enable_nested_tensor=False,
        )
        self.decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(d_model, num_heads, **common),
            num_layers,
            norm=nn.LayerNorm(d_model) if norm_first else None,
        )
        self.generator = nn.Linear(d_model, tgt_vocab_size)

    def forward(self, src, tgt_in, src_mask, tgt_mask):
        # torch.nn's masks say where NOT to attend: invert the course's.
        memory = self.encoder(self.src_embed(src), src_key_padding_mask=~src_mask)
        x = self.decoder(
            self.tgt_embed(tgt_in), memory, tgt_mask=~tgt_mask, tgt_is_causal=True, memory_key_padding_mask=~src_mask
        )
        return self.generator(x)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default=None)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d-ff", type=int, default=512)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--norm", choices=("pre", "post"), default="pre")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=10, help="timed steps per round and model")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--peak-tflops", type=float, default=None, help="peak TFLOP/s of the device, for the MFU")
    args = p.parse_args()
    device = torch.device(args.device) if args.device else best_device()

    sizes = (len(SOURCE_VOCAB), len(TARGET_VOCAB), args.d_model, args.heads, args.layers, args.d_ff, args.dropout)
    torch.manual_seed(0)
    models = {
        "course (fused attention)": EncoderDecoder(*sizes, max_len=64, norm_first=args.norm == "pre", fused=True),
        "course (own attention)": EncoderDecoder(*sizes, max_len=64, norm_first=args.norm == "pre", fused=False),
        "torch.nn layers": TorchLayersTransformer(*sizes, norm_first=args.norm == "pre"),
    }
    parameters = {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()}
    assert len(set(parameters.values())) == 1, parameters
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=1e-3) for name, m in models.items()}
    steppers = {name: torch.compile(m) if args.compile else m for name, m in models.items()}
    for m in models.values():
        m.to(device).train()

    examples = DateTask(seed=0).examples("train", args.batch_size * args.steps)
    batches = []
    for i in range(args.steps):
        b = batch(examples[i * args.batch_size : (i + 1) * args.batch_size])
        b = {k: v.to(device) for k, v in b.items()}
        b["tgt_in"], b["target"] = b["tgt"][:, :-1], b["tgt"][:, 1:]
        b["tgt_mask"] = causal_mask(b["tgt_in"].size(1), device=device)
        batches.append(b)
    tokens_per_step = [int(b["src_mask"].sum() + b["target"].numel()) for b in batches]
    # The model FLOPs of the timed steps, by the standard accounting (the three models compute the same).
    flops_per_token = sum(
        training_flops(
            models["course (own attention)"], b["src_mask"].sum(1).tolist(), [b["target"].size(1)] * len(b["src"])
        )
        for b in batches
    ) / sum(tokens_per_step)
    autocast = (
        torch.autocast(device.type, dtype=torch.bfloat16) if args.precision == "bf16" else contextlib.nullcontext()
    )

    def one_round(name: str) -> float:
        model, optimizer = steppers[name], optimizers[name]
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for b in batches:
            with autocast:
                logits = model(b["src"], b["tgt_in"], b["src_mask"], b["tgt_mask"])
                loss = F.cross_entropy(logits.flatten(0, 1).float(), b["target"].flatten())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return sum(tokens_per_step) / (time.perf_counter() - start)

    for name in models:  # warm-up (and compilation)
        one_round(name)
    rates = {name: [] for name in models}
    for _ in range(args.rounds):
        for name in models:
            rates[name].append(one_round(name))

    name_of_device = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"{device.type}, {torch.get_num_threads()} threads"
    )
    print(f"device: {name_of_device}; PyTorch {torch.__version__}; precision {args.precision}; compile {args.compile}")
    print(
        f"model: d_model {args.d_model}, {args.heads} heads, {args.layers}+{args.layers} layers, d_ff {args.d_ff}, "
        f"{args.norm}-norm, {next(iter(parameters.values())):,} parameters; batch {args.batch_size}; "
        f"median of {args.rounds} rounds of {args.steps} training steps"
    )
    baseline = statistics.median(rates["torch.nn layers"])
    peak, peak_source = peak_flops(device, args.peak_tflops)
    print(f"model FLOPs per token {flops_per_token:,.0f}; peak: {peak_source}")
    summary = {}
    for name, values in rates.items():
        rate = statistics.median(values)
        utilisation = mfu(rate * flops_per_token, peak)
        extra = f"   MFU {utilisation:.1%}" if utilisation is not None else ""
        print(f"  {name:26} {rate:12,.0f} tokens/s   x{rate / baseline:.2f} of torch.nn{extra}")
        summary[name] = {
            "tokens_per_second": round(rate, 1),
            "ratio_to_torch_nn": round(rate / baseline, 3),
            "mfu": float(f"{utilisation:.3g}") if utilisation is not None else None,
        }
    print(
        json.dumps(
            {
                "device": name_of_device,
                "flops_per_token": round(flops_per_token, 1),
                "peak_tflops": peak / 1e12 if peak is not None else None,
                "peak_source": peak_source,
                **summary,
            }
        )
    )


if __name__ == "__main__":
    main()
