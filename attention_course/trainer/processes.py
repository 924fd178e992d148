"""The processes of ``make train``: one, or several under torchrun (data parallelism), each on its device.

Under ``torchrun --nproc_per_node N`` every process draws the same global batch at each step
(:func:`global_indices`) and trains on its share of it; DDP averages their gradients, so N processes
take the same steps as one.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from attention_course.devices import best_device


class Processes:
    """One process, or one of several under torchrun (data parallel)."""

    def __init__(self, device_name: str | None):
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        device = torch.device(device_name) if device_name else best_device()
        if device.type == "cuda" and self.world > 1:
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
        self.device = device
        if self.world > 1:
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")

    @property
    def main(self) -> bool:
        return self.rank == 0

    def mean(self, value: float) -> float:
        if self.world == 1:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.item() / self.world

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def close(self) -> None:
        if self.world > 1:
            dist.destroy_process_group()


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on ``device`` (a cuda device runs it asynchronously), as before reading a clock."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def global_indices(step: int, args, pool: int) -> torch.Tensor:
    """The examples of one step's global batch: the same in every process, and after a resume."""
    generator = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
    return torch.randint(pool, (args.batch_size,), generator=generator)
