"""PyTorch's global generator in the grader: used through autograder.calls.global_rng only, whose lock keeps two
threads grading side by side from hanging each other (the deadlock is shown with the lock left out)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import autograder

AUTOGRADER = Path(autograder.__file__).parent
# Code that runs in the sandbox, whose worker answers one call at a time, and the module that holds the lock.
EXEMPT = ("sandbox/", "calls/global_rng.py")
GLOBAL_STATE = {"get_rng_state", "set_rng_state", "fork_rng"}
GLOBAL_SEEDING = {"manual_seed", "seed", "initial_seed"}


def direct_uses(source: str) -> list[str]:
    """``line: call`` of each use of PyTorch's global generator in ``source`` that does not go through
    global_rng (a ``torch.Generator()`` of the code's own is not global)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        owner = ast.unparse(node.value)
        if node.attr in GLOBAL_STATE or (
            node.attr in GLOBAL_SEEDING and owner in ("torch", "torch.random", "torch.default_generator")
        ):
            found.append(f"{node.lineno}: {owner}.{node.attr}")
    return found


def test_the_grader_uses_the_global_generator_through_global_rng_only():
    found = {
        str(path.relative_to(AUTOGRADER)): uses
        for path in sorted(AUTOGRADER.rglob("*.py"))
        if not str(path.relative_to(AUTOGRADER)).startswith(EXEMPT) and (uses := direct_uses(path.read_text()))
    }
    assert not found, f"use autograder.calls.global_rng.forked() or .state() instead: {found}"


def test_a_direct_use_of_the_global_generator_is_found():
    planted = "torch.manual_seed(0)\nx = torch.get_rng_state()\nwith torch.random.fork_rng():\n    pass\n"
    assert direct_uses(planted) == ["1: torch.manual_seed", "2: torch.get_rng_state", "3: torch.random.fork_rng"]
    assert direct_uses("g = torch.Generator().manual_seed(0)\nglobal_rng.state()\n") == []


# Two threads read the generator's state while the garbage collector runs Python finalisers, which hand the
# interpreter from thread to thread: one thread reads through global_rng, the other as the argument says.
CHURN = """
import gc, sys, threading, time, torch
from autograder.calls import global_rng

sys.setswitchinterval(1e-6)
gc.set_threshold(50, 1, 1)
stop = time.monotonic() + float(sys.argv[2])
read = torch.get_rng_state if sys.argv[1] == "direct" else global_rng.state


class Cycle:
    def __init__(self):
        self.me, self.tensor = self, torch.ones(3, requires_grad=True).view(3) * 2

    def __del__(self):
        sum(range(200))


def churn(state):
    while time.monotonic() < stop:
        for _ in range(20):
            Cycle()
        state()


threads = [threading.Thread(target=churn, args=(global_rng.state,)), threading.Thread(target=churn, args=(read,))]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""


def _churn(how: str, seconds: float, timeout: float) -> bool:
    """Whether the two threads finish within ``timeout`` seconds."""
    try:
        subprocess.run([sys.executable, "-c", CHURN, how, str(seconds)], timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return False
    return True


@pytest.mark.slow
def test_threads_that_share_the_generator_through_global_rng_finish():
    assert _churn("locked", seconds=3, timeout=90), "two threads reading through global_rng hung"


@pytest.mark.slow
def test_without_the_lock_two_threads_hang():
    # the hang is a race: on a quiet machine one run of a few seconds may miss it, so up to three runs look for it
    assert any(not _churn("direct", seconds=4, timeout=20) for _ in range(3)), (
        "torch.get_rng_state no longer hangs beside global_rng.state here: the lock may no longer be needed"
    )


# torch's random operations, each as a function that draws.
DRAWS = {
    "randn": lambda: torch.randn(4),
    "rand_like": lambda: torch.rand_like(torch.ones(4)),
    "randint": lambda: torch.randint(0, 10, (5,)),
    "randperm": lambda: torch.randperm(7),
    "multinomial": lambda: torch.multinomial(torch.ones(5), 3),
    "normal_": lambda: torch.empty(4).normal_(),
    "uniform_ (nn.Linear's initialisation)": lambda: torch.nn.Linear(3, 2).weight.detach(),
    "dropout": lambda: torch.nn.functional.dropout(torch.ones(8), 0.5),
    "alpha_dropout": lambda: torch.nn.functional.alpha_dropout(torch.ones(8), 0.5, True),
    "rrelu": lambda: torch.nn.functional.rrelu(torch.ones(8), training=True),
    "poisson": lambda: torch.poisson(torch.ones(4)),
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_a_private_generator_draws_what_the_global_one_would_and_leaves_it_alone(name):
    from autograder.calls import global_rng

    start = torch.Generator().manual_seed(1).get_state()
    with global_rng.forked(state=start):
        want, after = DRAWS[name](), global_rng.state()
    with global_rng.forked(seed=99):
        untouched = global_rng.state()
        with global_rng.private(start) as generator:
            got = DRAWS[name]()
        assert torch.equal(global_rng.state(), untouched)
    assert torch.equal(got, want) and torch.equal(generator.get_state(), after)


def test_an_operation_that_can_only_draw_from_the_global_generator_is_refused():
    from autograder.calls import global_rng

    library = torch.library.Library("issue37", "DEF")  # noqa: F841 (the operation lives as long as it does)
    library.define("draw(Tensor x) -> Tensor", tags=(torch.Tag.nondeterministic_seeded,))
    library.impl("draw", lambda x: x + 1, "CPU")
    with global_rng.private():
        with pytest.raises(RuntimeError, match="global random generator"):
            torch.ops.issue37.draw(torch.ones(2))
