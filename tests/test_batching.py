"""A batch of prompts of different lengths, left-padded, generates what each prompt generates alone."""

from __future__ import annotations

import pytest
import torch

from attention_course.published.batching import generate_batch, left_padded, padded_mask, real_positions
from attention_course.published.pretrained import from_pretrained
from tests.test_pretrained import build

PROMPTS = [[5, 9, 2, 33, 14, 7, 21], [40], [3, 3, 8, 50], [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]]


def alone(model, prompt, n):
    return model.generate(torch.tensor([prompt]), n, temperature=0)[0, len(prompt) :].tolist()


@pytest.mark.parametrize(
    "name", ["gpt2-tied", "llama-gqa-untied", "yarn-scaled", "mistral-window", "qwen2-biases-window"]
)
def test_a_left_padded_batch_generates_each_prompts_own_tokens(name, tmp_path):
    build(name, tmp_path)
    model = from_pretrained(tmp_path)
    batched = generate_batch(model, PROMPTS, 12, pad_id=0)
    assert batched == [alone(model, p, 12) for p in PROMPTS]


def test_without_position_ids_or_the_mask_the_padding_changes_the_tokens(tmp_path):
    """The two halves of the method matter: GPT-2's learned positions need each token's position, and every
    model needs the padding masked."""
    build("gpt2-tied", tmp_path)
    model = from_pretrained(tmp_path)
    ids, real = left_padded(PROMPTS, 0)
    length = ids.size(1)
    mask, positions = padded_mask(real), real_positions(real)
    with torch.no_grad():
        right = model.extend(ids, mask=mask, positions=positions)[0][:, -1]
        unpositioned = model.extend(ids, mask=mask)[0][:, -1]
        unmasked = model.extend(ids, positions=positions)[0][:, -1]
        expected = torch.stack([model(torch.tensor([p]))[0, -1] for p in PROMPTS])
    torch.testing.assert_close(right, expected, atol=1e-4, rtol=1e-4)
    padded = torch.tensor([len(p) < length for p in PROMPTS])
    for wrong in (unpositioned, unmasked):
        assert (wrong - expected)[padded].abs().amax() > 1e-2


def test_left_padded_and_its_refusals():
    ids, real = left_padded([[1, 2, 3], [4]], pad_id=9)
    assert ids.tolist() == [[1, 2, 3], [9, 9, 4]] and real.tolist() == [[True] * 3, [False, False, True]]
    with pytest.raises(ValueError, match="non-empty"):
        left_padded([[1], []], 0)
    model = torch.nn.Module()
    model.max_len = 8
    model.register_parameter("w", torch.nn.Parameter(torch.zeros(1)))
    with pytest.raises(ValueError, match="more than max_len=8"):
        generate_batch(model, [[1, 2, 3]], 6)
