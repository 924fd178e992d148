"""``make generate`` on checkpoints of the published sizes, offline: GPT-2 (124M) and SmolLM-135M.

    python -m benchmarks.pretrained                 # make bench-pretrained: both, 50 new tokens, 3 rounds
    python -m benchmarks.pretrained --tokens 20 --rounds 1 --models gpt2

The machines that build and test the course reach no model hub, so this program writes checkpoints of
the two models' exact configurations with random weights (``transformers``' own initialisation) and a
byte-level BPE tokenizer trained on the course's text, into a temporary folder, and runs ``make
generate`` (:mod:`attention_course.published.generate`) on each: the course's model with its key/value cache, without
it, and ``transformers``' ``generate`` with its cache, timed in alternating rounds in one run. A
generation step costs the same whatever the weights are, so the tokens per second are those of the real
checkpoints; the continuations are not text.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
from pathlib import Path

import torch

from attention_course.data.corpora import course_text
from attention_course.data.tokenization import train_bpe
from attention_course.published import generate

# The published configurations (config.json of "gpt2" and of "HuggingFaceTB/SmolLM-135M" on the Hub).
CONFIGS = {
    "gpt2": ("GPT2", {}),
    "smollm-135m": (
        "Llama",
        {
            "vocab_size": 49152,
            "hidden_size": 576,
            "intermediate_size": 1536,
            "num_hidden_layers": 30,
            "num_attention_heads": 9,
            "num_key_value_heads": 3,
            "max_position_embeddings": 2048,
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
            "tie_word_embeddings": True,
            "bos_token_id": 0,
            "eos_token_id": 0,
        },
    ),
}


def write_checkpoint(name: str, folder: Path) -> Path:
    """A checkpoint of ``name``'s configuration with random weights, and a tokenizer, in ``folder/name``."""
    import transformers

    family, sizes = CONFIGS[name]
    config = getattr(transformers, f"{family}Config")(**sizes)
    torch.manual_seed(0)
    model = getattr(transformers, f"{family}LMHeadModel" if family == "GPT2" else f"{family}ForCausalLM")(config)
    target = folder / name
    with contextlib.redirect_stderr(io.StringIO()):  # transformers' progress bars
        model.save_pretrained(target)
    train_bpe(course_text(), 2048).save(str(target / "tokenizer.json"))
    return target


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=sorted(CONFIGS), default=sorted(CONFIGS))
    parser.add_argument("--tokens", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or mps (make generate's --device)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            folder = write_checkpoint(name, Path(tmp))
            arguments = ["--model", str(folder), "--prompt", "Attention is", "--tokens", str(args.tokens)]
            arguments += ["--rounds", str(args.rounds), "--device", args.device, "--dtype", args.dtype]
            arguments += ["--threads", str(args.threads)] if args.threads else []
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
                result = generate.main(arguments)
            result["model"] = name
            results.append(result)
    for result in results:
        rates = result["tokens_per_second"]
        cached, theirs = rates["course, cached"], rates.get("transformers, cached")
        same = "yes" if all(result["same_tokens"].values()) else "NO"
        print(
            f"{result['model']} ({result['layout']}), {result['new_tokens']} new tokens, median of "
            f"{result['rounds']} rounds on {result['device']}: course cached {cached:,.1f} tokens/s, "
            f"no cache {rates['course, no cache']:,.1f}, transformers cached {theirs:,.1f}; "
            f"course/transformers x{cached / theirs:.2f}, cached/uncached x{cached / rates['course, no cache']:.2f}; "
            f"same tokens: {same}; logits max |difference| {result['logits_max_abs_difference']:.1e}"
        )
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
