"""Generation speed of the course's decoder-only model with its key/value cache and without it.

Without a cache, every new token runs the model on the whole sequence again: the n-th step
attends L_prompt + n queries to as many keys, and the layers' linear maps and feed-forward
networks run on every position again. With the cache (``DecoderOnly.generate(use_cache=True)``)
the prompt runs once and each step after it runs the newest position alone, reading the keys
and values of the earlier ones from the cache. For comparison, the same model (the same
weights) is built from torch.nn layers, ``nn.TransformerEncoderLayer`` under a causal mask:
torch.nn has no key/value cache, so it recomputes everything at every step, like the course's
model without its cache.

All three generate the same number of new tokens after the same short prompt (batch 1,
temperature 0: the most likely token each step). They are timed in alternating rounds in one
run, so that the ratios compare timings taken side by side, and the script prints the median
tokens/s of each at every length, the ratio cached/uncached, and a final JSON line.

    python -m benchmarks.generate                    # 64, 128, 256, 512 new tokens (a few minutes on 2 CPU cores)
    python -m benchmarks.generate --quick            # tiny model and lengths (seconds)
    python -m benchmarks.generate --lengths 128 1024 --layers 6 --device cuda
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn as nn

from attention_course import best_device
from attention_course.models.interop import to_torch_encoder_layer
from attention_course.models.transformer import DecoderOnly
from attention_course.solutions.ch04_masking import causal_mask


class TorchLayersDecoderOnly(nn.Module):
    """``model`` with its layers replaced by torch.nn's ``nn.TransformerEncoderLayer`` holding the same weights.

    The embedding, the final norm and the output layer are ``model``'s own (shared, not copied).
    Only multi-head attention converts (``num_kv_heads == num_heads``): torch.nn's layers have no
    grouped-query attention and no key/value cache.
    """

    def __init__(self, model: DecoderOnly):
        super().__init__()
        self.embed, self.norm, self.generator, self.max_len = model.embed, model.norm, model.generator, model.max_len
        self.layers = nn.ModuleList(to_torch_encoder_layer(layer) for layer in model.layers)

    def forward(self, ids):
        length = ids.size(1)
        x = self.embed(ids)
        mask = ~causal_mask(length, device=ids.device)  # torch.nn's masks say where NOT to attend
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=True)
        return self.generator(self.norm(x))

    @torch.no_grad()
    def generate(self, ids, new_tokens: int):
        """Greedy generation, the whole sequence recomputed at every step (as DecoderOnly without its cache)."""
        for _ in range(new_tokens):
            next_token = self(ids[:, -self.max_len :])[:, -1].argmax(dim=-1, keepdim=True)
            ids = torch.cat([ids, next_token], dim=1)
        return ids


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default=None)
    p.add_argument("--lengths", type=int, nargs="+", default=None, help="new tokens per generation (64 128 256 512)")
    p.add_argument("--prompt", type=int, default=None, help="prompt length (8)")
    p.add_argument("--vocab", type=int, default=None, help="vocabulary size (512)")
    p.add_argument("--d-model", type=int, default=None, help="(256)")
    p.add_argument("--heads", type=int, default=None, help="(8)")
    p.add_argument("--layers", type=int, default=None, help="(2)")
    p.add_argument("--d-ff", type=int, default=None, help="(1024)")
    p.add_argument("--rounds", type=int, default=None, help="timed rounds per length and model (2)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (torch's default)")
    p.add_argument("--quick", action="store_true", help="a tiny model and lengths 8 16, one round: seconds")
    args = p.parse_args(argv)
    quick = {"lengths": [8, 16], "prompt": 4, "vocab": 32, "d_model": 32, "heads": 4, "layers": 2, "d_ff": 64}
    full = {"lengths": [64, 128, 256, 512], "prompt": 8, "vocab": 512, "d_model": 256, "heads": 8, "layers": 2}
    for name, value in {**full, "d_ff": 1024, "rounds": 2, **(quick if args.quick else {})}.items():
        if getattr(args, name) is None:
            setattr(args, name, 1 if name == "rounds" and args.quick else value)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device) if args.device else best_device()

    torch.manual_seed(0)
    longest = args.prompt + max(args.lengths)
    model = DecoderOnly(args.vocab, args.d_model, args.heads, args.layers, args.d_ff, dropout=0.0, max_len=longest)
    model = model.to(device).eval()
    torch_layers = TorchLayersDecoderOnly(model).to(device).eval()
    prompt = torch.randint(0, args.vocab, (1, args.prompt), device=device)
    runners = {
        "cached": lambda n: model.generate(prompt, n, temperature=0.0, use_cache=True),
        "uncached": lambda n: model.generate(prompt, n, temperature=0.0, use_cache=False),
        "torch.nn": lambda n: torch_layers.generate(prompt, n),
    }

    def timed(name: str, n: int) -> tuple[float, torch.Tensor]:
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        ids = runners[name](n)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return n / (time.perf_counter() - start), ids

    for name in runners:  # warm-up
        timed(name, min(args.lengths))
    rates = {n: {name: [] for name in runners} for n in args.lengths}
    same_tokens = {}
    for n in args.lengths:
        outputs = {}
        for r in range(args.rounds):
            # Alternate the order from round to round, so that no model always runs first (or last).
            for name in runners if r % 2 == 0 else reversed(runners):
                rate, outputs[name] = timed(name, n)
                rates[n][name].append(rate)
        same_tokens[n] = {
            "uncached": torch.equal(outputs["cached"], outputs["uncached"]),
            "torch.nn": torch.equal(outputs["cached"], outputs["torch.nn"]),
        }

    name_of_device = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"{device.type}, {torch.get_num_threads()} threads"
    )
    parameters = sum(p.numel() for p in model.parameters())
    print(f"device: {name_of_device}; PyTorch {torch.__version__}")
    print(
        f"model: DecoderOnly, vocabulary {args.vocab}, d_model {args.d_model}, {args.heads} heads, "
        f"{args.layers} layers, d_ff {args.d_ff}, {parameters:,} parameters; prompt {args.prompt}, batch 1, "
        f"greedy; median of {args.rounds} alternating rounds"
    )
    print(
        f"{'new tokens':>10}  {'cached':>12}  {'uncached':>12}  {'torch.nn':>12}  {'cached/uncached':>15}  "
        f"{'cached/torch.nn':>15}  same tokens"
    )
    summary = {}
    for n in args.lengths:
        median = {name: statistics.median(values) for name, values in rates[n].items()}
        ratio, ratio_torch = median["cached"] / median["uncached"], median["cached"] / median["torch.nn"]
        same = "yes" if all(same_tokens[n].values()) else ", ".join(k for k, v in same_tokens[n].items() if not v)
        print(
            f"{n:>10}  {median['cached']:>8,.0f} t/s  {median['uncached']:>8,.0f} t/s  "
            f"{median['torch.nn']:>8,.0f} t/s  {ratio:>14.2f}x  {ratio_torch:>14.2f}x  {same}"
        )
        summary[str(n)] = {
            "cached_tokens_per_second": round(median["cached"], 1),
            "uncached_tokens_per_second": round(median["uncached"], 1),
            "torch_nn_tokens_per_second": round(median["torch.nn"], 1),
            "cached_over_uncached": round(ratio, 3),
            "cached_over_torch_nn": round(ratio_torch, 3),
            "same_tokens": same_tokens[n],
        }
    longest_n = max(args.lengths)
    print(f"ratio cached/uncached at {longest_n} new tokens: {summary[str(longest_n)]['cached_over_uncached']:.2f}x")
    result = {
        "device": name_of_device,
        "torch": torch.__version__,
        "model": {
            "vocab": args.vocab,
            "d_model": args.d_model,
            "heads": args.heads,
            "layers": args.layers,
            "d_ff": args.d_ff,
            "parameters": parameters,
        },
        "prompt": args.prompt,
        "rounds": args.rounds,
        "new_tokens": summary,
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
