"""Generation for a batch of prompts of different lengths: left padding, its mask and each token's position.

A batch is a rectangle, so prompts of different lengths are padded. Padding on the left puts every prompt's
last token in the last column, where each step reads the next token's logits and appends it. The padding
must then change nothing: no real token attends to a padding token (the mask), and each real token keeps
the position it has alone (its position counts the real tokens before it, not the padding). With both,
every sequence of the batch gets the tokens it gets generated alone.
"""

from __future__ import annotations

import torch

from attention_course.models.transformer import DecoderOnly, next_tokens


def left_padded(prompts: list[list[int]], pad_id: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, real)``: the prompts padded on the left with ``pad_id`` into (B, L), and True at real tokens."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("prompts must be a non-empty list of non-empty token lists")
    length = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (length - len(p)) + list(p) for p in prompts], device=device)
    real = torch.tensor([[False] * (length - len(p)) + [True] * len(p) for p in prompts], device=device)
    return ids, real


def real_positions(real: torch.Tensor) -> torch.Tensor:
    """(B, L): each token's position, the number of real tokens before it; a padding token takes position 0
    (no real token sees it)."""
    return (real.cumsum(dim=1) - 1).clamp(min=0)


def padded_mask(real: torch.Tensor) -> torch.Tensor:
    """(B, 1, L, L): each query sees the real keys up to itself, and itself (so that a padding query's row
    is never empty)."""
    length = real.size(1)
    causal = torch.ones(length, length, dtype=torch.bool, device=real.device).tril()
    return ((causal & real[:, None, :]) | torch.eye(length, dtype=torch.bool, device=real.device))[:, None]


@torch.inference_mode()
def generate_batch(
    model: DecoderOnly,
    prompts: list[list[int]],
    new_tokens: int,
    pad_id: int = 0,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> list[list[int]]:
    """``new_tokens`` tokens after each prompt, generated for the whole batch at once with the key/value
    cache; greedy (temperature 0) gives each prompt the tokens that ``model.generate`` gives it alone."""
    device = next(model.parameters()).device
    ids, real = left_padded(prompts, pad_id, device)
    length = ids.size(1)
    if length + new_tokens > model.max_len:
        raise ValueError(f"{length} prompt and {new_tokens} new positions are more than max_len={model.max_len}")
    positions = real_positions(real)
    logits, cache = model.extend(ids, mask=padded_mask(real), positions=positions)
    generated = []
    for step in range(new_tokens):
        token = next_tokens(logits[:, -1], temperature, generator)
        generated.append(token)
        if step == new_tokens - 1:
            break
        real = torch.cat([real, torch.ones_like(token, dtype=torch.bool)], dim=1)
        positions = positions[:, -1:] + 1
        logits, cache = model.extend(token, cache, mask=real[:, None, None, :], positions=positions)
    return torch.cat(generated, dim=1).tolist()
