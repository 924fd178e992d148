"""``make generate``: a published checkpoint continues a prompt in the course's own layers, and how fast.

    make generate ARGS="--model gpt2 --prompt 'Attention is' --tokens 50"
    make generate ARGS="--model HuggingFaceTB/SmolLM-135M --prompt 'The key/value cache' --tokens 100"
    python -m attention_course.published.generate --model PATH --prompt '...' --tokens 50 --rounds 3

The checkpoint (a Hugging Face Hub name, downloaded once, or a local folder) is loaded into the course's
``DecoderOnly`` (:func:`attention_course.published.pretrained.from_pretrained`), and its tokenizer with the
``tokenizers`` library. The prompt is continued greedily (temperature 0: the most likely token each step)
three ways, timed in alternating rounds in one run so that the ratios compare timings taken side by side:

- the course's model with its key/value cache (the prompt once, then one position per step);
- the course's model without it (the whole sequence again at every step);
- ``transformers``' own model of the same checkpoint and its ``generate``, with its cache (where
  ``transformers`` is installed; ``--no-compare`` leaves it out).

It prints the continuation, the median tokens/s of each, the ratios, whether all three chose the same
tokens, the largest difference between the course's logits and ``transformers``' over the prompt and its
continuation, and a final JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from attention_course.published.pretrained import (
    CheckpointError,
    checkpoint_folder,
    describe,
    from_pretrained,
    load_tokenizer,
)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m attention_course.published.generate",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--model", required=True, help="a Hugging Face Hub name (gpt2, HuggingFaceTB/SmolLM-135M) or a folder"
    )
    p.add_argument("--prompt", default="Attention is", help="the text to continue")
    p.add_argument("--tokens", type=int, default=50, help="new tokens to generate")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds of each way of generating (the median is shown)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (torch's default)")
    p.add_argument("--no-compare", action="store_true", help="leave out transformers' own model")
    args = p.parse_args(argv)
    for name in ("tokens", "rounds"):
        if getattr(args, name) <= 0:
            p.error(f"--{name} must be positive, got {getattr(args, name)}")
    if args.threads is not None and args.threads <= 0:
        p.error(f"--threads must be positive, got {args.threads}")
    return args


def transformers_model(folder, dtype: torch.dtype, device: torch.device):
    """``transformers``' own model of the checkpoint; None where ``transformers`` is not installed."""
    try:
        from transformers import AutoModelForCausalLM
    except ImportError:
        return None
    return AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(device).eval()


def transformers_generate(model, ids: torch.Tensor, n: int) -> torch.Tensor:
    """``transformers``' greedy ``generate`` of exactly n new tokens, with its cache."""
    from transformers import GenerationConfig

    # No end-of-text token: like the course's generate, exactly n tokens, whatever they are.
    config = GenerationConfig(max_new_tokens=n, do_sample=False, use_cache=True, eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        return model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device, dtype = torch.device(args.device), DTYPES[args.dtype]
    try:
        folder = checkpoint_folder(args.model)
        model = from_pretrained(folder, device=device, dtype=dtype)
        tokenizer = load_tokenizer(folder)
    except (CheckpointError, OSError) as exc:
        raise SystemExit(f"make generate: {exc}") from None
    prompt_ids = tokenizer.encode(args.prompt).ids
    if not prompt_ids:
        raise SystemExit("make generate: the prompt is empty once tokenized: give some text with --prompt")
    if len(prompt_ids) + args.tokens > model.max_len:
        raise SystemExit(
            f"make generate: {len(prompt_ids)} prompt tokens and --tokens {args.tokens} are more than the "
            f"model's context of {model.max_len}"
        )
    prompt = torch.tensor([prompt_ids], device=device)
    ways = {
        "course, cached": lambda n: model.generate(prompt, n, temperature=0, use_cache=True),
        "course, no cache": lambda n: model.generate(prompt, n, temperature=0, use_cache=False),
    }
    theirs = None if args.no_compare else transformers_model(folder, dtype, device)
    if theirs is not None:
        ways["transformers, cached"] = lambda n: transformers_generate(theirs, prompt, n)

    def timed(way: str, n: int) -> tuple[float, torch.Tensor]:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        ids = ways[way](n)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return n / (time.perf_counter() - start), ids

    for way in ways:  # warm-up: the first call of each pays for allocations that later ones reuse
        timed(way, min(4, args.tokens))
    rates, outputs = {way: [] for way in ways}, {}
    for r in range(args.rounds):
        for way in ways if r % 2 == 0 else reversed(ways):  # no way always runs first, or last
            rate, outputs[way] = timed(way, args.tokens)
            rates[way].append(rate)
    median = {way: statistics.median(values) for way, values in rates.items()}
    reference = outputs["course, cached"]
    same = {way: torch.equal(ids.cpu(), reference.cpu()) for way, ids in outputs.items() if way != "course, cached"}

    logits_difference = None
    if theirs is not None:  # the two models' logits at every position of the prompt and its continuation
        with torch.no_grad():
            ours_logits, their_logits = model(reference).float(), theirs(reference).logits.float()
        logits_difference = (ours_logits - their_logits).abs().max().item()

    continuation = tokenizer.decode(reference[0, len(prompt_ids) :].tolist())
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    print(f"model: {args.model}: {describe(model)}; {args.dtype} on {where}; PyTorch {torch.__version__}")
    print(f"prompt ({len(prompt_ids)} tokens): {args.prompt!r}")
    print(f"continuation ({args.tokens} tokens, greedy): {continuation!r}")
    print(f"tokens/s, median of {args.rounds} alternating rounds (the prompt's own pass included):")
    for way in ways:
        ratio = median[way] / median["course, cached"]
        agrees = "" if way == "course, cached" else f"   same tokens: {'yes' if same[way] else 'NO'}"
        print(f"  {way:<22} {median[way]:>10,.1f} tokens/s   x{ratio:.2f} of the course's cached{agrees}")
    if theirs is None and not args.no_compare:
        print("  (transformers is not installed: no comparison with its generate)")
    if logits_difference is not None:
        print(f"logits at all {reference.shape[1]} positions: max |course - transformers| = {logits_difference:.1e}")
    result = {
        "model": str(args.model),
        "layout": describe(model),
        "dtype": args.dtype,
        "device": where,
        "prompt_tokens": len(prompt_ids),
        "new_tokens": args.tokens,
        "rounds": args.rounds,
        "tokens_per_second": {way: round(value, 1) for way, value in median.items()},
        "same_tokens": same,
        "logits_max_abs_difference": logits_difference,
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
