"""Published checkpoints in the course's layers (attention_course.published.pretrained), proven offline.

Each test builds a randomly initialised ``transformers`` model of the GPT-2, Llama (with Llama 3.1's, YaRN's
and linear rotary scaling), Mistral or Qwen2 family from a tiny config, writes it with ``save_pretrained``
and loads it with the course's ``from_pretrained``: the logits must equal ``transformers``' within 1e-4 in
float32, and greedy generation with the course's key/value cache, and without it, must choose the tokens
that ``transformers``' ``generate`` chooses. The weights are
drawn larger than ``transformers``' initialisation, so that the attention's scores, and so the rotary
layout, matter to the logits. Nothing reaches a network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import transformers  # its models are imported on first use, by the tests that build them
from safetensors.torch import load_file, save_file

from attention_course.data.tokenization import train_bpe
from attention_course.models.layers import SwiGLU
from attention_course.models.transformer import attention_weights
from attention_course.published import generate, pretrained
from attention_course.published.layouts import interleave_rotary_rows
from attention_course.published.pretrained import CheckpointError, DownloadError, from_pretrained
from attention_course.solutions.ch03_multi_head import merge_heads, split_heads
from attention_course.solutions.ch07_efficient_attention import RotaryGroupedQueryAttention, repeat_kv

VOCAB = 61
GPT2_CONFIGS = {
    "gpt2-tied": {"n_embd": 32, "n_head": 4, "n_layer": 2, "n_positions": 48},
    "gpt2-untied-exact-gelu": {
        "n_embd": 24,
        "n_head": 3,
        "n_layer": 3,
        "n_positions": 40,
        "n_inner": 40,
        "tie_word_embeddings": False,
        "activation_function": "gelu",
    },
}
LLAMA_CONFIGS = {
    "llama-gqa-untied": {
        "hidden_size": 32,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 48,
    },
    "llama-mqa-tied": {
        "hidden_size": 48,
        "num_attention_heads": 6,
        "num_key_value_heads": 1,
        "intermediate_size": 64,
        "tie_word_embeddings": True,
    },
    "llama-mha-bias-theta": {
        "hidden_size": 24,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "intermediate_size": 40,
        "attention_bias": True,
        "mlp_bias": True,
        "rope_theta": 500000.0,
    },
    # Scaled rotary frequencies, with an original context of 16 positions so that every pair of a head of 8
    # features is scaled (its wavelengths are 6, 63, 628 and 6283 positions).
    "llama3-scaled": {
        "hidden_size": 32,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 48,
        "tie_word_embeddings": True,
        "rope_parameters": {
            "rope_type": "llama3",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16,
        },
    },
    "yarn-scaled": {
        "hidden_size": 32,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 48,
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 16,
        },
    },
    "linear-scaled": {
        "hidden_size": 24,
        "num_attention_heads": 3,
        "num_key_value_heads": 1,
        "intermediate_size": 40,
        "rope_parameters": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0},
    },
}
# Other families of the Llama layout: (config class, model class, settings).
OTHER_CONFIGS = {
    "mistral-window": (
        "MistralConfig",
        "MistralForCausalLM",
        {
            "hidden_size": 32,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "intermediate_size": 48,
            "sliding_window": 4,
        },
    ),
    "qwen2-biases-window": (
        "Qwen2Config",
        "Qwen2ForCausalLM",
        {
            "hidden_size": 32,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "intermediate_size": 48,
            "use_sliding_window": True,
            "sliding_window": 3,
            "max_window_layers": 1,  # layer 0 attends to every position, layer 1 within 3
        },
    ),
    "qwen2-tied": (
        "Qwen2Config",
        "Qwen2ForCausalLM",
        {
            "hidden_size": 24,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "intermediate_size": 40,
            "tie_word_embeddings": True,
        },
    ),
}


def randomised(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """``model`` with every weight drawn anew: N(1, 0.3) for the norms' scales, N(0, 0.3) for the rest."""
    generator = torch.Generator().manual_seed(seed)
    norm_scales = ("layernorm.weight", "norm.weight", "ln_1.weight", "ln_2.weight", "ln_f.weight")
    with torch.no_grad():
        for name, p in model.named_parameters():
            drawn = torch.randn(p.shape, generator=generator) * 0.3
            p.copy_(drawn + 1 if name.endswith(norm_scales) else drawn)
    return model.eval()


def build(name: str, folder, seed: int = 0, vocab: int = VOCAB, **save):
    """A random ``transformers`` model of the named tiny config and ``vocab`` tokens, saved into ``folder``."""
    torch.manual_seed(seed)
    if name in GPT2_CONFIGS:
        config = transformers.GPT2Config(vocab_size=vocab, bos_token_id=None, eos_token_id=None, **GPT2_CONFIGS[name])
        model = transformers.GPT2LMHeadModel(config)
    else:
        config_class, model_class, settings = OTHER_CONFIGS.get(
            name, ("LlamaConfig", "LlamaForCausalLM", LLAMA_CONFIGS.get(name))
        )
        config = getattr(transformers, config_class)(
            vocab_size=vocab,
            num_hidden_layers=2,
            max_position_embeddings=64,
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
            **settings,
        )
        model = getattr(transformers, model_class)(config)
    model = randomised(model, seed)
    model.save_pretrained(folder, **save)
    return model


def greedy(model, ids: torch.Tensor, n: int) -> torch.Tensor:
    config = transformers.GenerationConfig(max_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        return model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)


@pytest.mark.parametrize("name", [*GPT2_CONFIGS, *LLAMA_CONFIGS, *OTHER_CONFIGS])
def test_logits_and_greedy_generation_equal_transformers(name, tmp_path):
    """Logits on 3 sequences of 11 tokens, and 12 greedy tokens after 5: past the original context of the
    scaled families' frequencies (16), and past the sliding windows (3 and 4 positions)."""
    theirs = build(name, tmp_path)
    ours = from_pretrained(tmp_path)
    ids = torch.randint(VOCAB, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want, got = theirs(ids).logits, ours(ids)
    assert got.shape == want.shape == (3, 20, VOCAB)
    assert (got - want).abs().max().item() < 1e-4
    assert want.std() > 1.0  # logits far from uniform: the test can tell a wrong layer from a right one
    expected = greedy(theirs, ids[:, :5], 12)
    assert torch.equal(ours.generate(ids[:, :5], 12, temperature=0), expected)
    assert torch.equal(ours.generate(ids[:, :5], 12, temperature=0, use_cache=False), expected)


def test_the_course_model_is_built_from_the_course_layers(tmp_path):
    build("llama-gqa-untied", tmp_path / "llama")
    build("gpt2-tied", tmp_path / "gpt2")
    llama, gpt2 = from_pretrained(tmp_path / "llama"), from_pretrained(tmp_path / "gpt2")
    layer = llama.layers[0]
    assert isinstance(layer.self_attn, RotaryGroupedQueryAttention)
    assert (layer.self_attn.num_heads, layer.self_attn.num_kv_heads) == (4, 2)
    assert isinstance(layer.ff, SwiGLU) and isinstance(layer.norm1, torch.nn.RMSNorm)
    assert llama.generator.weight is not llama.embed.tokens.weight
    assert gpt2.generator.weight is gpt2.embed.tokens.weight  # GPT-2 ties its output layer to the embedding
    assert isinstance(gpt2.layers[0].norm1, torch.nn.LayerNorm) and gpt2.embed.positions.weight.shape == (48, 32)


def test_without_the_rotary_row_permutation_the_logits_differ(tmp_path):
    """The conversion from the checkpoints' rotate-half layout to the course's interleaved pairs matters."""
    theirs = build("llama-gqa-untied", tmp_path)
    ours = from_pretrained(tmp_path)
    with torch.no_grad():
        for layer in ours.layers:  # undo the permutation: rows back in the checkpoint's order
            for projection, heads in ((layer.self_attn.W_q, 4), (layer.self_attn.W_k, 2)):
                inverse = torch.argsort(interleave_rotary_rows(torch.arange(projection.out_features), heads))
                projection.weight.copy_(projection.weight[inverse])
        ids = torch.randint(VOCAB, (2, 9), generator=torch.Generator().manual_seed(2))
        assert (ours(ids) - theirs(ids).logits).abs().max().item() > 1e-2


def test_interleave_rotary_rows_pairs_each_feature_with_its_half_partner():
    rows = torch.arange(2 * 8)  # two heads of 8 features
    assert interleave_rotary_rows(rows, 2).tolist() == [0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15]
    matrix = torch.arange(16 * 3).view(16, 3)
    assert torch.equal(interleave_rotary_rows(matrix, 2)[:, 0], interleave_rotary_rows(matrix[:, 0], 2))


def as_pytorch_bin(folder):
    """The checkpoint rewritten as older checkpoints are: torch.save's ``pytorch_model.bin``, no safetensors."""
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()


@pytest.mark.parametrize("form", ["pytorch_model.bin", "shards"])
def test_pytorch_bin_and_sharded_checkpoints_load(form, tmp_path):
    theirs = build("llama-gqa-untied", tmp_path, **({"max_shard_size": "20KB"} if form == "shards" else {}))
    if form == "pytorch_model.bin":
        as_pytorch_bin(tmp_path)
    files = {p.name for p in tmp_path.iterdir()}
    assert "model.safetensors" not in files
    assert "pytorch_model.bin" in files if form == "pytorch_model.bin" else "model.safetensors.index.json" in files
    ids = torch.randint(VOCAB, (1, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (from_pretrained(tmp_path)(ids) - theirs(ids).logits).abs().max().item() < 1e-4


def test_dtype_and_device_are_the_callers(tmp_path, device):
    build("gpt2-tied", tmp_path)
    model = from_pretrained(tmp_path, device=device, dtype=torch.float64)
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    assert {p.device.type for p in model.parameters()} == {torch.device(device).type}
    assert not model.training
    assert model(torch.zeros(1, 3, dtype=torch.long, device=device)).dtype == torch.float64


# --------------------------------------------------------------------------- refusals, with their reasons


def edit_config(folder, **changes):
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


def edit_tensors(folder, change):
    tensors = load_file(folder / "model.safetensors")
    change(tensors)
    save_file(tensors, folder / "model.safetensors")


def test_an_unsupported_architecture_is_refused_naming_it(tmp_path):
    build("gpt2-tied", tmp_path)
    edit_config(tmp_path, architectures=["BertForMaskedLM"], model_type="bert")
    with pytest.raises(CheckpointError, match="BertForMaskedLM.*GPT2LMHeadModel.*LlamaForCausalLM"):
        from_pretrained(tmp_path)


def test_a_missing_tensor_is_refused_naming_its_key(tmp_path):
    build("llama-gqa-untied", tmp_path)
    edit_tensors(tmp_path, lambda t: t.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(CheckpointError, match=r"no tensor 'model\.layers\.1\.mlp\.up_proj\.weight'.*layers\.1\.ff\.up"):
        from_pretrained(tmp_path)


def test_a_tensor_of_the_wrong_shape_is_refused_naming_both_shapes(tmp_path):
    build("gpt2-tied", tmp_path)
    edit_config(tmp_path, n_inner=100)  # the config says 100 hidden units; the weights have 128
    with pytest.raises(
        CheckpointError, match=r"'h\.0\.mlp\.c_fc\.weight' has shape \(32, 128\); config\.json makes it \(32, 100\)"
    ):
        from_pretrained(tmp_path)


def test_a_tensor_with_no_place_in_the_model_is_refused(tmp_path):
    build("llama-gqa-untied", tmp_path)
    edit_tensors(tmp_path, lambda t: t.update({"model.layers.0.self_attn.q_norm.weight": torch.ones(8)}))
    with pytest.raises(CheckpointError, match="no place for: 'model.layers.0.self_attn.q_norm.weight'"):
        from_pretrained(tmp_path)


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"rope_parameters": {"rope_type": "dynamic", "rope_theta": 500000.0, "factor": 8.0}},
            "rotary scaling.*rope_type 'dynamic' is not one the course computes",
        ),
        (
            {"rope_parameters": {"rope_type": "longrope", "rope_theta": 500000.0}},
            "rope_type 'longrope' is not one",
        ),
        (
            {"rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0}},
            "rotary scaling.*'low_freq_factor'",
        ),
        (
            {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}},
            "partial_rotary_factor=0.5",
        ),
        ({"hidden_act": "gelu"}, "hidden_act is 'gelu'"),
        ({"head_dim": 16}, "head_dim is 16"),
        ({"attention_bias": True}, "attention_bias=True and mlp_bias=False"),
    ],
)
def test_llama_settings_the_course_cannot_compute_are_refused(changes, message, tmp_path):
    build("llama-gqa-untied", tmp_path)
    edit_config(tmp_path, **changes)
    with pytest.raises(CheckpointError, match=message):
        from_pretrained(tmp_path)


@pytest.mark.parametrize(
    "name, change",
    [
        ("llama3-scaled", {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}),
        ("yarn-scaled", {"rope_parameters": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}}),
        ("mistral-window", {"sliding_window": None}),
        ("qwen2-biases-window", {"use_sliding_window": False}),
    ],
)
def test_the_scaling_and_the_windows_change_the_logits(name, change, tmp_path):
    """The settings the new families add are applied: with the scaling or the window taken away from the
    config, the same weights give other logits at the later positions (and the same at the first ones)."""
    build(name, tmp_path)
    ids = torch.randint(VOCAB, (2, 24), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        scaled = from_pretrained(tmp_path)(ids)
        edit_config(tmp_path, **change)
        plain = from_pretrained(tmp_path)(ids)
    assert (scaled - plain)[:, 16:].abs().max().item() > 1e-2
    if "window" in name:  # the windows hide nothing from the first positions
        assert (scaled - plain)[:, :3].abs().max().item() < 1e-5


def test_the_scaled_frequencies_equal_transformers():
    """The course's inverse frequencies and attention factor, for each scaling, against transformers' own."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from attention_course.models.rope import inverse_frequencies, rope_parameters

    cases = [
        {
            "rope_type": "llama3",
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_theta": 500000.0,
        },
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "rope_theta": 1e6},
        {
            "rope_type": "yarn",
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "rope_theta": 10000.0,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 0.707,
        },
        {
            "rope_type": "yarn",
            "factor": 8.0,
            "original_max_position_embeddings": 2048,
            "rope_theta": 10000.0,
            "truncate": False,
            "attention_factor": 1.3,
        },
        {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0},
    ]
    for rope in cases:
        config = transformers.LlamaConfig(
            hidden_size=512, num_attention_heads=4, max_position_embeddings=131072, rope_parameters=dict(rope)
        )
        want, want_factor = ROPE_INIT_FUNCTIONS[rope["rope_type"]](config, "cpu")
        got, factor = inverse_frequencies(128, rope_parameters(config.to_dict()), 131072)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
        assert factor == pytest.approx(want_factor, rel=1e-9), rope


def test_a_folder_without_weights_or_config_says_what_is_missing(tmp_path):
    with pytest.raises(CheckpointError, match="has no config.json"):
        from_pretrained(tmp_path)
    build("gpt2-tied", tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="holds no weights"):
        from_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match="there is no folder"):
        from_pretrained(tmp_path / "missing" / "folder" / "deep")


def test_without_a_network_a_name_gets_an_error_that_says_a_local_folder_works(tmp_path):
    """Offline (HF_HUB_OFFLINE=1, an empty Hub cache), a Hub name cannot be downloaded: the error says so and
    names the way out. In its own process, as huggingface_hub reads its settings when imported."""
    code = (
        "from attention_course.published.pretrained import from_pretrained, DownloadError\n"
        "try:\n    from_pretrained('gpt2')\nexcept DownloadError as exc:\n    print(exc)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hub")}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "could not download 'gpt2'" in run.stdout and "local folder" in run.stdout
    assert issubclass(DownloadError, OSError)


def test_a_local_folder_is_read_without_the_hub(tmp_path, monkeypatch):
    build("gpt2-tied", tmp_path)

    def no_download(*args, **kwargs):
        raise AssertionError("a local folder must not be downloaded")

    monkeypatch.setattr("huggingface_hub.snapshot_download", no_download)
    assert pretrained.checkpoint_folder(tmp_path) == tmp_path
    from_pretrained(str(tmp_path))


@pytest.mark.parametrize("name", ["gpt2-tied", "llama-gqa-untied", "yarn-scaled", "qwen2-biases-window"])
def test_attention_weights_are_what_each_layer_attends_with(name, tmp_path):
    """The weights that attention_weights recomputes give back each layer's attention output: with the values
    and W_o of the layer, they make what the (fused) attention returned."""
    build(name, tmp_path)
    model = from_pretrained(tmp_path)
    ids = torch.randint(VOCAB, (2, 9), generator=torch.Generator().manual_seed(4))
    outputs, inputs = [], []

    def keep(module, args, output):
        inputs.append(args[0])
        outputs.append(output[0])

    hooks = [layer.self_attn.register_forward_hook(keep) for layer in model.layers]
    with torch.no_grad():
        model(ids)
    for hook in hooks:
        hook.remove()
    weights = attention_weights(model, ids)
    assert len(weights) == len(model.layers)
    for layer, w, x, out in zip(model.layers, weights, inputs, outputs):
        attention = layer.self_attn
        assert w.shape == (2, attention.num_heads, 9, 9)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, attention.num_heads, 9))
        assert torch.all(w.triu(1) == 0)  # no query attends to a later key
        v = repeat_kv(
            split_heads(attention.W_v(x), attention.num_kv_heads), attention.num_heads // attention.num_kv_heads
        )
        with torch.no_grad():
            torch.testing.assert_close(attention.W_o(merge_heads(w @ v)), out, atol=1e-5, rtol=1e-5)


def test_the_tensor_map_names_every_checkpoint_tensor_once(tmp_path):
    build("gpt2-tied", tmp_path / "gpt2")
    build("llama-gqa-untied", tmp_path / "llama")
    for folder in ("gpt2", "llama"):
        config = json.loads((tmp_path / folder / "config.json").read_text())
        rows = pretrained.tensor_map(config)
        tensors = pretrained.read_tensors(tmp_path / folder)
        keys = {k.removeprefix("transformer.") for k in tensors}
        assert {key for key, *_ in rows} == keys
        model = from_pretrained(tmp_path / folder)
        named = {name for *_, name, _ in rows}
        assert named == set(model.state_dict()) - ({"generator.weight"} if folder == "gpt2" else set())
    rows = pretrained.tensor_map(json.loads((tmp_path / "llama" / "config.json").read_text()))
    how = {name: text for _, _, name, text in rows}
    assert "rotate-half to interleaved" in how["layers.0.self_attn.W_q.weight"]
    assert how["layers.0.self_attn.W_v.weight"] == "as it is"


def test_qwen2_biases_its_query_key_and_value_projections_only(tmp_path):
    build("qwen2-tied", tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    biased = {name for _, _, name, _ in pretrained.tensor_map(config) if name.endswith(".bias")}
    assert biased == {f"layers.{i}.self_attn.W_{p}.bias" for i in range(2) for p in "qkv"}
    model = from_pretrained(tmp_path)
    assert model.layers[0].self_attn.W_o.bias is None and model.layers[0].ff.up.bias is None
    edit_config(tmp_path, attention_bias=True)
    with pytest.raises(CheckpointError, match="sets attention_bias; Qwen2 biases its q, k and v projections only"):
        from_pretrained(tmp_path)


# --------------------------------------------------------------------------- make generate


def checkpoint_with_tokenizer(folder, family: str = "llama-gqa-untied"):
    """A tiny random checkpoint of 300 tokens, with a byte-level BPE tokenizer of 300 tokens beside it."""
    build(family, folder, vocab=300)
    text = "Attention is all you need. " * 50 + "The key/value cache keeps the keys."
    train_bpe(text, 300).save(str(folder / "tokenizer.json"))


@pytest.mark.parametrize(
    "family", ["gpt2-tied", "llama-gqa-untied", "llama3-scaled", "mistral-window", "qwen2-biases-window"]
)
def test_make_generate_prints_the_continuation_and_three_timings_that_agree(family, tmp_path, capsys):
    checkpoint_with_tokenizer(tmp_path, family)
    result = generate.main(["--model", str(tmp_path), "--prompt", "Attention is", "--tokens", "8", "--rounds", "1"])
    printed = capsys.readouterr().out
    assert set(result["tokens_per_second"]) == {"course, cached", "course, no cache", "transformers, cached"}
    assert all(rate > 0 for rate in result["tokens_per_second"].values())
    assert result["same_tokens"] == {"course, no cache": True, "transformers, cached": True}
    assert result["logits_max_abs_difference"] < 1e-4
    assert "continuation (8 tokens, greedy):" in printed and "same tokens: yes" in printed
    assert "logits at all 10 positions: max |course - transformers| = " in printed
    assert json.loads(printed.strip().splitlines()[-1]) == result


def test_make_generate_without_the_comparison_and_its_refusals(tmp_path, capsys):
    checkpoint_with_tokenizer(tmp_path)
    result = generate.main(["--model", str(tmp_path), "--tokens", "3", "--rounds", "1", "--no-compare"])
    assert set(result["tokens_per_second"]) == {"course, cached", "course, no cache"}
    assert result["logits_max_abs_difference"] is None
    with pytest.raises(SystemExit, match="more than the model's context of 64"):
        generate.main(["--model", str(tmp_path), "--tokens", "100", "--no-compare"])
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(SystemExit, match="has no tokenizer"):
        generate.main(["--model", str(tmp_path), "--no-compare"])
    with pytest.raises(SystemExit, match="there is no folder"):
        generate.main(["--model", str(tmp_path / "no" / "such" / "folder")])
    with pytest.raises(SystemExit):
        generate.main(["--model", str(tmp_path), "--tokens", "0"])
    assert "--tokens must be positive" in capsys.readouterr().err
