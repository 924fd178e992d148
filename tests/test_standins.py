"""The grader's side of the stand-ins (autograder.calls.standins): what it answers, what it refuses, and the
random state it carries. The sandbox's side is graded end to end in tests/test_grades_hold.py and
tests/test_grading.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from autograder.api import scripted
from autograder.calls import standins
from autograder.calls.standin_limits import Size, size_of
from autograder.calls.standins import Scope
from autograder.grading.source import Source
from autograder.release import reference
from autograder.sandbox import values, wire

CH03, CH04, CH06, CH07 = "ch03_multi_head", "ch04_masking", "ch06_transformer", "ch07_efficient_attention"


def decoded(answer: dict, key: str = "value"):
    assert answer["ok"], answer
    return values.decode(answer[key])


def callback(kind: str, name: str, *args, **kwargs) -> dict:
    return {"kind": kind, "name": name, "args": values.encode(list(args)), "kwargs": values.encode(kwargs)}


def mha_scope() -> Scope:
    """The stand-ins of a check of MultiHeadAttention(16, 4) on (2, 5, 16) inputs."""
    scope = Scope(CH03, ("split_heads", "merge_heads"))

    def run(helpers):
        mha = standins.rebound(reference.get(CH03, "MultiHeadAttention"), helpers)(16, 4)
        x = torch.randn(2, 5, 16)
        return mha(x, x, x)

    scope.run_reference = run
    scope.inputs_size = lambda: size_of([torch.zeros(2, 5, 16)])
    return scope


def test_sizes_of_ints_tensors_and_containers():
    assert size_of(7) == Size(value=7)
    assert size_of(torch.zeros(2, 3, 4)) == Size(elements=24, dimension=4, dims=3)
    assert size_of([torch.zeros(2, 3), (torch.zeros(5), 9)]) == Size(value=9, elements=11, dimension=5, dims=2)
    assert size_of(True) == Size() and size_of("x") == Size() and size_of(float("inf")) == Size()
    assert size_of(0.5) == Size(real=1) and size_of(-7.2) == Size(real=8)
    limit = Size(value=4, elements=160, dimension=16, dims=3)
    assert size_of(torch.zeros(2, 5, 16)).within(limit) is None
    assert "has elements: over 1792, more than the 896 allowed" in size_of(torch.zeros(1, 2500, 16)).within(limit)
    assert "has dimensions: 6" in size_of(torch.zeros(1, 1, 1, 1, 1, 1)).within(limit)


def test_whatever_can_stand_for_an_integer_is_measured():
    # torch takes a NumPy int and a 0-d (or one-element) integer tensor as a size, as it takes an int
    assert size_of(np.int64(30000)) == size_of(np.uint16(30000)) == Size(value=30000)
    assert size_of(torch.tensor(30000)) == Size(value=30000, elements=1)
    assert size_of(np.array(-30000)) == Size(value=30000, elements=1)
    assert size_of(torch.tensor([3, -40000, 7])) == Size(value=40000, elements=3, dimension=3, dims=1)
    assert size_of({30000, 2}) == size_of(frozenset({30000})) == Size(value=30000)
    assert size_of({"n": [(np.int32(9),)]}) == Size(value=9)
    # a real number, or a 0-d tensor of one, is a length to torch.arange; other real values count by their shapes
    assert size_of(np.float64(1e7)) == Size(real=10**7) and size_of(torch.tensor(1e7)) == Size(real=10**7, elements=1)
    assert "is over 1000, more than the 40 allowed" in size_of(1e7).within(Size(value=6))  # a length, as an int
    assert "is 900, more than the 40 allowed" in size_of(900).within(Size(value=6))  # one size, whole where small
    assert size_of(1e7).within(Size(real=100)) is None  # where the reference passes real numbers only: no length
    assert size_of(torch.full((2,), 1e9)) == Size(elements=2, dimension=2, dims=1)
    assert size_of(torch.ones(3, dtype=torch.bool)) == size_of(np.ones(3, dtype=bool)) == Size(0, 3, 3, 1)
    assert size_of(np.bool_(True)) == Size() and size_of(torch.empty(0, dtype=torch.long)) == Size(dims=1)


@pytest.mark.parametrize(
    "size",
    [np.int64(30000), torch.tensor(30000), np.array(30000), torch.tensor([30000])],
    ids=["numpy int", "0-d tensor", "0-d array", "one-element tensor"],
)
def test_a_size_the_student_chose_is_refused_in_any_integer_type(size):
    scope = Scope(CH04, ("causal_mask",))
    scope.run_reference = lambda helpers: helpers["causal_mask"](6)
    scope.inputs_size = lambda: size_of([torch.zeros(2, 6, 8)])
    answer = scope.answer(callback("call", "causal_mask", 6))
    assert answer["ok"], answer
    answer = scope.answer(callback("call", "causal_mask", size))
    assert not answer["ok"] and "size is over 1000, more than the 40 allowed" in answer["error"], answer


@pytest.mark.parametrize(
    "length", [1e7, np.float64(1e7), torch.tensor(1e7)], ids=["float", "numpy float", "0-d tensor"]
)
def test_a_length_the_student_chose_as_a_real_number_is_refused(length):
    """Issue 37: torch.arange takes a float (or a 0-d float tensor) as its length, so the reference positional
    encoding built ten million positions (700 MB) in the grader before it failed on a float size."""
    scope = Scope("ch05_positional_encoding", ("sinusoidal_positional_encoding",))
    scope.run_reference = lambda helpers: helpers["sinusoidal_positional_encoding"](6, 8)
    scope.inputs_size = lambda: size_of([torch.zeros(2, 6, 8)])
    assert scope.answer(callback("call", "sinusoidal_positional_encoding", 6, 8))["ok"]
    answer = scope.answer(callback("call", "sinusoidal_positional_encoding", length, 8))
    assert not answer["ok"] and "max_len is over 1000, more than the 40 allowed" in answer["error"], answer


def test_a_function_stand_in_answers_with_the_reference_value():
    scope = mha_scope()
    x = torch.randn(2, 5, 16)
    got = decoded(scope.answer(callback("call", "split_heads", x, 4)))
    assert torch.equal(got, reference.get(CH03, "split_heads")(x, 4))
    assert scope.kinds() == (("split_heads", "merge_heads"), ())


def test_a_call_larger_than_the_reference_makes_is_refused_before_anything_is_computed():
    scope = mha_scope()
    answer = scope.answer(callback("call", "split_heads", torch.zeros(1, 3000, 16), 4))
    assert not answer["ok"] and "stands in for yours" in answer["error"] and "x has elements" in answer["error"]
    answer = scope.answer(callback("call", "split_heads", torch.zeros(2, 5, 16), 10**9))
    assert not answer["ok"] and "num_heads is over 1000, more than the 32 allowed" in answer["error"]


def test_names_the_item_does_not_use_and_malformed_calls_are_refused():
    scope = mha_scope()
    for bad in (
        callback("call", "MultiHeadAttention", 16, 4),
        callback("construct", "split_heads"),
        {"kind": "call", "name": "split_heads", "args": {"pickle": "x"}, "kwargs": {"dict": {}}},
        {"kind": "call", "name": ["split_heads"]},
    ):
        answer = scope.answer(bad)
        assert answer == {"ok": False, "error_type": "RuntimeError", "error": answer["error"]}, answer


def test_the_reference_raising_on_the_students_arguments_raises_the_same_error_there():
    answer = mha_scope().answer(callback("call", "split_heads", torch.zeros(2, 5, 16), 3))
    assert answer["ok"] is False and answer["error_type"] == "ValueError" and "num_heads" in answer["error"]


def softmax_scope() -> Scope:
    """The stand-in of masked_softmax in a check whose reference passes it no mask (chapter 7's
    check_relative_positions replays the item on x alone, with no mask)."""
    scope = Scope(CH07, ("masked_softmax",))
    scope.run_reference = lambda helpers: helpers["masked_softmax"](torch.randn(2, 4, 6, 6), None)
    scope.inputs_size = lambda: size_of([torch.zeros(2, 6, 32)])
    return scope


def test_a_mask_is_bounded_by_the_scores_it_broadcasts_to_at_any_rank_up_to_theirs():
    """Issue 56: a per-head loop passes masked_softmax each head's 3-D scores and mask[:, h], as the contract
    allows (a mask broadcastable to the scores); the stand-in refused it ("mask has dimensions: 3, more than the
    2 allowed"), its bound taken from the reference's own calls, which passed no mask."""
    scope = softmax_scope()
    scores, mask = torch.randn(2, 6, 6), torch.rand(2, 6, 6) < 0.7
    mask[..., 0] = True
    got = decoded(scope.answer(callback("call", "masked_softmax", scores, mask)))
    assert torch.equal(got, reference.get("ch04_masking", "masked_softmax")(scores, mask))
    for fits in (torch.ones(2, 4, 6, 6, dtype=torch.bool), torch.ones(1, 6, dtype=torch.bool), torch.tensor(True)):
        assert scope.answer(callback("call", "masked_softmax", torch.randn(2, 4, 6, 6), fits))["ok"]
    # A mask that does not broadcast to its scores is held to the reference's bound, and large scores to theirs.
    answer = scope.answer(callback("call", "masked_softmax", torch.randn(2, 4, 6, 6), torch.ones(1, 1, 1, 1, 1, 6)))
    assert not answer["ok"] and "mask has dimensions: 6, more than the 2 allowed" in answer["error"], answer
    answer = scope.answer(callback("call", "masked_softmax", torch.randn(2, 4, 6, 6), torch.ones(2, 4, 6, 70) > 0))
    assert not answer["ok"] and "mask has elements: over 1000, more than the 256 allowed" in answer["error"], answer
    answer = scope.answer(callback("call", "masked_softmax", torch.randn(4, 100, 100), torch.ones(100, 100) > 0))
    assert not answer["ok"] and "scores has elements: over 2816, more than the 1408 allowed" in answer["error"], answer


def test_a_module_stand_ins_mask_may_be_one_for_every_head():
    """MultiHeadAttention's mask is broadcastable to (B, H, Lq, Lk) (H: the heads it was built with): a layer
    that gives it one mask per head is answered, though the reference passed one (Lq, Lk) mask."""
    scope = Scope(CH06, ("MultiHeadAttention",))
    x, look_ahead = torch.randn(2, 16, 16), torch.ones(16, 16, dtype=torch.bool).tril()
    scope.run_reference = lambda helpers: helpers["MultiHeadAttention"](16, 4)(x, x, x, look_ahead)
    built = scope.answer(
        {**callback("construct", "MultiHeadAttention", 16, 4), "rng": values.encode(torch.get_rng_state())}
    )

    def forward(mask):
        return scope.answer(
            {
                **callback("forward", "MultiHeadAttention", x, x, x, mask),
                "init": built["init"],
                "state": built["state"],
                "rng": values.encode(torch.get_rng_state()),
            }
        )

    per_head = look_ahead.expand(2, 4, 16, 16).clone()  # crosses as 2,048 values: the reference's 256, times 8
    want = reference.get(CH06, "MultiHeadAttention")(16, 4)
    want.load_state_dict(decoded(built, "state"))
    assert torch.allclose(decoded(forward(per_head))[0], want.eval()(x, x, x, look_ahead)[0], atol=1e-6)
    answer = forward(torch.ones(2, 5, 16, 16, dtype=torch.bool))  # 5 heads' masks, for 4 heads
    assert not answer["ok"] and "mask has elements: 2560" in answer["error"], answer


def layer_scope(dropout: float) -> Scope:
    """The stand-ins of a check of EncoderLayer(16, 4, 32, dropout) in train mode."""
    scope = Scope(CH06, ("MultiHeadAttention", "FeedForward"))

    def run(helpers):
        layer = standins.rebound(reference.get(CH06, "EncoderLayer"), helpers)(16, 4, 32, dropout)
        return layer(torch.randn(2, 6, 16))

    scope.run_reference = run
    return scope


def test_a_module_stand_in_is_built_and_run_as_the_reference_with_the_sandboxs_random_state():
    scope = layer_scope(0.3)
    torch.manual_seed(5)
    start = torch.get_rng_state()
    built = scope.answer({**callback("construct", "FeedForward", 16, 32, 0.3), "rng": values.encode(start)})
    state = decoded(built, "state")
    assert set(state) == {"linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"}
    assert set(decoded(built, "parameters")) == set(state)
    torch.set_rng_state(start)
    expected_module = reference.get(CH06, "FeedForward")(16, 32, 0.3)
    assert all(torch.equal(state[k], v) for k, v in expected_module.state_dict().items())
    assert torch.equal(decoded(built, "rng"), torch.get_rng_state())  # advanced as building it here advances it

    x = torch.randn(2, 6, 16)
    before = torch.get_rng_state()
    ran = scope.answer(
        {
            **callback("forward", "FeedForward", x),
            "init": built["init"],
            "state": values.encode(state),
            "training": True,
            "rng": values.encode(before),
        }
    )
    torch.set_rng_state(before)
    expected_module.train()
    assert torch.equal(decoded(ran), expected_module(x))  # the same dropout mask
    assert torch.equal(decoded(ran, "rng"), torch.get_rng_state())


def test_a_module_stand_in_refuses_a_state_it_was_not_built_with_and_a_forged_random_state():
    scope = layer_scope(0.0)
    rng = values.encode(torch.get_rng_state())
    built = scope.answer({**callback("construct", "FeedForward", 16, 32), "rng": rng})
    state = decoded(built, "state")
    state["linear1.weight"] = torch.zeros(64, 16)
    answer = scope.answer(
        {
            **callback("forward", "FeedForward", torch.zeros(2, 6, 16)),
            "init": built["init"],
            "state": values.encode(state),
        }
    )
    assert not answer["ok"] and "not those it was built with" in answer["error"]
    forged = scope.answer({**callback("construct", "FeedForward", 16, 32), "rng": values.encode(torch.zeros(3))})
    assert not forged["ok"] and "random generator" in forged["error"]
    huge = scope.answer({**callback("construct", "FeedForward", 16, 100_000), "rng": rng})
    assert not huge["ok"] and "d_ff is over 1000, more than the 144 allowed" in huge["error"]


class InProcess:
    """The worker's way back to the grader (autograder.sandbox.worker), answered by ``scope`` in this process."""

    def __init__(self, scope: Scope):
        self.scope, self.message_bytes = scope, wire.MAX_MESSAGE

    def encode(self, what: str, value):
        return values.encode(value)

    def ask(self, callback: dict):
        answer = self.scope.answer(callback)
        if not answer["ok"]:
            raise RuntimeError(answer["error"])
        return wire.CallbackResult(0, **answer)


def test_a_fixture_whose_calls_a_test_counts_stays_in_the_grader():
    """Issue 56: the call-limited model of chapter 6's test of speculative decoding was rebuilt in the sandbox,
    where the student's code could raise its budget, reset its count or call its parent class's decode. The
    grader holds it now: the student's code gets a proxy that can call it, and each call is made and counted in
    the grader, on arguments no larger than the reference's calls."""
    from autograder.sandbox.stand_ins import StandIns

    src, visible = torch.tensor([[7, 3, 9]]), torch.ones(1, 3, dtype=torch.bool)
    with standins.grading(CH06, ("causal_mask",)) as scope:
        scope.run_reference = lambda helpers: reference.get(CH06, "greedy_decode")(
            scripted.build("CallLimitedTranslator", [16, 1, 2, 2]), src, visible, 1, 2, 8
        )
        scope.inputs_size = lambda: size_of([src, visible, 8])
        model = scripted.build("CallLimitedTranslator", [16, 1, 2, 2])
        sent = values.encode(model)
        assert set(sent) == {"held"} and "calls" not in repr(sent)  # the budget does not cross
        proxy = values.decode(sent, held=StandIns(InProcess(scope), values).held_fixture)
        assert (proxy.vocab_size, proxy.bos_id, proxy.eos_id) == (16, 1, 2)
        assert not hasattr(proxy, "calls") and not hasattr(proxy, "made")
        assert not any("decode" in vars(cls) for cls in type(proxy).__mro__[1:])  # no parent's decode to call
        proxy.calls, proxy.made = 10**9, 0  # the proxy's own attributes: the grader's count is not there
        memory = proxy.encode(src, visible)
        tgt = torch.tensor([[1, 5]])
        first = proxy.decode(tgt, memory, torch.ones(2, 2, dtype=torch.bool).tril(), visible)
        assert torch.equal(first, scripted.ScriptedTranslator().decode(tgt, memory, torch.ones(2, 2).tril() > 0))
        proxy.decode(tgt, memory, torch.ones(2, 2, dtype=torch.bool).tril(), visible)
        third = proxy.decode(tgt, memory, torch.ones(2, 2, dtype=torch.bool).tril(), visible)
        assert model.made == 3 and torch.equal(third, first.roll(1, dims=-1))  # counted here: past the budget
        with pytest.raises(RuntimeError, match="more than the"):  # no larger than the reference's calls
            proxy.decode(torch.ones(1, 5000, dtype=torch.long), memory, None, visible)
        for forged in ({"held": 9, "name": "decode"}, {"held": 1, "name": "__init__"}, {"held": 1, "name": "made"}):
            answer = scope.answer({"kind": "fixture", "args": values.encode([]), "kwargs": values.encode({}), **forged})
            assert not answer["ok"], answer
        assert model.made == 3
    with pytest.raises(RuntimeError, match="no such fixture"):  # the check is over: nothing holds it
        proxy.decode(tgt, memory, None, visible)
    with pytest.raises(RuntimeError, match="only while a check runs"):
        values.encode(model)
    with pytest.raises(wire.WireError, match="cannot be used here"):  # a fixture held by the grader is never rebuilt
        values.decode(sent)


def test_the_draft_beside_the_counted_model_is_held_and_their_key_stays_in_the_grader():
    """Issue 68: the draft of chapter 6's test of speculative decoding was rebuilt in the sandbox and never missed,
    so greedy decoding with it, with its parent class or with a ScriptedTranslator built there gave the counted
    model's tokens without calling the model. The draft is held by the grader too, and the keyed model and draft
    write words drawn under a key drawn for the check, which no value that crosses holds."""
    from autograder.sandbox.stand_ins import StandIns

    src, visible = torch.tensor([[7, 3, 9, 4, 11, 6, 8]]), torch.ones(1, 7, dtype=torch.bool)
    spec = reference.get(CH06, "speculative_decode")
    with standins.grading(CH06, ("causal_mask",)) as scope:
        scope.run_reference = lambda helpers: spec(
            scripted.build("CallLimitedTranslator", [16, 1, 2, 2, True]),
            scripted.build("HeldDraft", [16, 1, 2, 4, True]),
            *(src, visible, 1, 2, 10, 3),
        )
        scope.inputs_size = lambda: size_of([src, visible, 10])
        model = scripted.build("CallLimitedTranslator", [16, 1, 2, 2, True])
        draft = scripted.build("HeldDraft", [16, 1, 2, 4, True])
        assert model._key == draft._key == scripted.key()  # one key for the check
        sent = values.encode([model, draft])
        assert [set(part) for part in sent["list"]] == [{"held"}, {"held"}]
        assert model._key.hex() not in repr(sent) and str(model._key) not in repr(sent)  # the key does not cross
        stand_ins = StandIns(InProcess(scope), values)
        proxy_model, proxy_draft = values.decode(sent, held=stand_ins.held_fixture)
        assert (proxy_draft.vocab_size, proxy_draft.bos_id, proxy_draft.eos_id) == (16, 1, 2)
        for proxy in (proxy_model, proxy_draft):
            assert not hasattr(proxy, "_key") and not hasattr(proxy, "miss_every")
            assert not any("decode" in vars(cls) for cls in type(proxy).__mro__[1:])  # no class with a decode to build
        memory = proxy_draft.encode(src, visible)
        tgt = torch.tensor([[1, 9, 10, 15, 14, 9, 10]])
        look_ahead = torch.ones(7, 7, dtype=torch.bool).tril()
        guessed = proxy_draft.decode(tgt, memory, look_ahead, visible).argmax(-1)
        assert torch.equal(guessed, draft.decode(tgt, memory, look_ahead, visible).argmax(-1))  # answered here
        own = proxy_model.decode(tgt, memory, look_ahead, visible).argmax(-1)
        missed = (torch.arange(7) + 1) % 4 == 0
        assert torch.equal(guessed[0, ~missed], own[0, ~missed]) and (guessed[0, missed] != own[0, missed]).all()
        # What the student's code can build: the public fixtures, or a keyed one under the sandbox's own key.
        publics = (
            scripted.ScriptedTranslator(16, 1, 2),
            scripted.ScriptedDraft(16, 1, 2, 0),
            scripted.CallLimitedTranslator(16, 1, 2, 10**9),
        )
        for other in publics:
            assert not torch.equal(other.decode(tgt, memory, look_ahead, visible).argmax(-1), own)
    outside = scripted.CallLimitedTranslator(16, 1, 2, 10**9, True)  # outside a check: the process's own key
    assert outside._key != model._key
    assert not torch.equal(outside.decode(tgt, memory, look_ahead, visible).argmax(-1), own)


def test_devices_and_dtypes_cross_by_name_and_nothing_else_does():
    for value in (torch.device("cpu"), torch.device("meta"), torch.float64, torch.bool):
        assert values.decode(values.encode(value)) == value
    for bad in ({"device": "cuda:x"}, {"device": "tpu"}, {"dtype": "object"}):
        with pytest.raises(wire.WireError):
            values.decode(bad)


def test_an_item_used_by_another_is_tested_first():
    tests = [
        ("test_mha", 'item = Item(ASSIGNMENT, "MultiHeadAttention", MultiHeadAttention, uses=("split_heads",))', 1.0),
        ("test_split", 'item = Item(ASSIGNMENT, "split_heads", split_heads)', 1.0),
    ]
    source = Source(CH03, CH03, {}, tests, ("MultiHeadAttention", "split_heads"), "")
    assert source.order_problems() == ["test_mha uses split_heads, whose test cells test_split come after it"]
    assert Source(CH03, CH03, {}, tests[::-1], source.items, "").order_problems() == []


def test_the_check_being_run_is_the_current_scope():
    assert standins.current() is None
    with standins.grading(CH03, ("split_heads",)) as scope:
        assert standins.current() is scope and scope.uses == ("split_heads",)
    assert standins.current() is None


# Every module the course's items use, built and run in train mode (dropout drawing where it has any).
MODULE_STAND_INS = {
    ("ch01_bahdanau", "AdditiveAttention"): (
        (6, 5, 8),
        (torch.randn(2, 6), torch.randn(2, 7, 5), torch.randn(2, 7, 3)),
    ),
    (CH06, "FeedForward"): ((16, 32, 0.3), (torch.randn(2, 6, 16),)),
    (CH06, "MultiHeadAttention"): ((16, 4), (torch.randn(2, 6, 16),) * 3),
    (CH06, "PositionalEncoding"): ((16, 64, 0.3), (torch.randn(2, 6, 16),)),
    (CH06, "EncoderLayer"): ((16, 4, 32, 0.3), (torch.randn(2, 6, 16),)),
    (CH06, "DecoderLayer"): ((16, 4, 32, 0.3, True), (torch.randn(2, 6, 16), torch.randn(2, 5, 16))),
}


def module_scope(assignment: str, name: str, inputs) -> Scope:
    scope = Scope(assignment, (name,))
    scope.inputs_size = lambda: size_of([16, 64, *inputs])
    return scope


def built_and_run(scope: Scope, name: str, init: tuple, inputs: tuple, start: torch.Tensor):
    """What the stand-in answers for building ``name(*init)`` and running it on ``inputs`` in train mode, with
    the sandbox's generator in state ``start``: (parameters, output, the generator's state after each)."""
    built = scope.answer({**callback("construct", name, *init), "rng": values.encode(start)})
    state = decoded(built, "state")
    ran = scope.answer(
        {
            **callback("forward", name, *inputs),
            "init": built["init"],
            "state": values.encode(state),
            "training": True,
            "rng": built["rng"],
        }
    )
    return state, decoded(built, "rng"), decoded(ran), decoded(ran, "rng")


@pytest.mark.parametrize("assignment,name", sorted(MODULE_STAND_INS))
def test_a_module_stand_in_draws_what_the_global_generator_would_and_leaves_it_alone(assignment, name):
    """Issue 37: a module stand-in draws from a generator of its own (global_rng.private), set to the sandbox's
    state: its parameters, dropout masks and the state it sends back are those the reference makes drawing from
    the global generator in that state, bit for bit; and the grader's global generator is neither used nor
    moved."""
    init, inputs = MODULE_STAND_INS[assignment, name]
    start = torch.Generator().manual_seed(7).get_state()
    torch.manual_seed(11)
    untouched = torch.get_rng_state()
    state, after_init, output, after_forward = built_and_run(
        module_scope(assignment, name, inputs), name, init, inputs, start
    )
    assert torch.equal(torch.get_rng_state(), untouched)

    torch.set_rng_state(start)
    module = reference.get(assignment, name)(*init)
    assert torch.equal(after_init, torch.get_rng_state())
    assert all(torch.equal(state[key], value) for key, value in module.state_dict().items())
    module.train()
    with torch.no_grad():
        expected = module(*inputs)
    expected = expected[0] if isinstance(expected, tuple) else expected
    output = output[0] if isinstance(output, tuple) else output
    assert torch.equal(output, expected)
    assert torch.equal(after_forward, torch.get_rng_state())
    if name in ("FeedForward", "EncoderLayer"):  # dropout drew: the state moved on
        assert not torch.equal(after_forward, after_init)


def test_a_stand_ins_call_waits_for_no_lock_that_another_grading_holds():
    """Issue 37: a stand-in's call (built and run with dropout) answers while another thread holds the global
    generator's lock, as a slow reference run for another student's check does; before, it waited for that
    lock, and a student whose stand-in calls ran slowly held it against every grading beside theirs."""
    import threading

    from autograder.calls import global_rng

    init, inputs = MODULE_STAND_INS[CH06, "EncoderLayer"]
    held, release, answered = threading.Event(), threading.Event(), []

    def other_grading():
        with global_rng.LOCK:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=other_grading)
    holder.start()
    try:
        assert held.wait(10)
        start = torch.Generator().manual_seed(3).get_state()
        caller = threading.Thread(
            target=lambda: answered.append(
                built_and_run(module_scope(CH06, "EncoderLayer", inputs), "EncoderLayer", init, inputs, start)
            )
        )
        caller.start()
        caller.join(10)
        assert answered, "the stand-in's call waited for the lock another grading held"
    finally:
        release.set()
        holder.join()
