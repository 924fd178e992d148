"""The helper package the chapters share."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from attention_course import (  # noqa: E402
    AttentionMaps,
    attention_score_bytes,
    best_device,
    format_bytes,
    four_word_example,
    plot_attention,
    seed_everything,
)


def test_four_word_example_draws_the_tutorial_matrices():
    words, wq, wk, wv = four_word_example()
    assert words.tolist() == [[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1]]
    assert (words @ wq).tolist() == [[2, 0, 2], [2, 0, 0], [4, 0, 2], [2, 1, 2]]
    assert wq.shape == wk.shape == wv.shape == (3, 3)
    assert not np.array_equal(wq, wk)


def test_seed_everything_repeats_draws_and_refuses_non_ints():
    seed_everything(3)
    a = torch.randn(4), np.random.rand(2)
    seed_everything(3)
    b = torch.randn(4), np.random.rand(2)
    assert torch.equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    with pytest.raises(TypeError, match="seed must be an int"):
        seed_everything(1.5)


def test_best_device_is_usable():
    device = best_device()
    assert torch.zeros(1, device=device).device.type == device.type


def test_score_bytes_are_quadratic_and_match_a_real_tensor():
    scores = torch.empty(2, 4, 128, 128, dtype=torch.bfloat16)
    assert attention_score_bytes(128, batch=2, heads=4, dtype=torch.bfloat16) == scores.nbytes
    assert attention_score_bytes(2048) == 4 * attention_score_bytes(1024)
    assert attention_score_bytes(10, query_len=1) == 40


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"seq_len": 0}, "seq_len must be a positive int"),
        ({"seq_len": 4, "heads": -1}, "heads must be a positive int"),
        ({"seq_len": 4, "query_len": 0}, "query_len must be a positive int"),
        ({"seq_len": 4, "dtype": "float32"}, "dtype must be a torch.dtype"),
    ],
)
def test_score_bytes_refuses_bad_arguments(kwargs, error):
    with pytest.raises(ValueError, match=error):
        attention_score_bytes(**kwargs)


def test_format_bytes():
    assert format_bytes(0) == "0 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 * 1024**3) == "3 GiB"
    with pytest.raises(ValueError, match="non-negative"):
        format_bytes(-1)


def test_plot_attention_labels_and_checks_shapes():
    ax = plot_attention(
        torch.tensor([[0.2, 0.8], [0.5, 0.5], [1.0, 0.0]]), queries=["a", "b", "c"], keys=["x", "y"], title="t"
    )
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    assert ax.get_title() == "t" and len(ax.texts) == 6
    with pytest.raises(ValueError, match="select a batch element"):
        plot_attention(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="keys has 3 labels but weights has 2 columns"):
        plot_attention(np.zeros((2, 2)), keys=["a", "b", "c"])


def test_attention_maps_show_one_map_at_a_time_with_the_tokens_on_the_axes():
    first, second = torch.tensor([[1.0, 0.0], [0.5, 0.5], [0.2, 0.8]]), torch.full((3, 2), 0.5)
    maps = AttentionMaps({"head 0": first, "head 1": second}, queries=["a", "b", "a"], keys=["x", "y"], name="t")
    figure = maps.figure()
    assert [trace.visible for trace in figure.data] == [True, False]
    np.testing.assert_array_equal(figure.data[0].z, first.numpy())
    (menu,) = figure.layout.updatemenus
    assert [button.label for button in menu.buttons] == ["head 0", "head 1"]
    assert menu.buttons[1].args[0] == {"visible": [False, True]}
    # a repeated token keeps its own row: the axes are positions, labelled
    assert list(figure.layout.yaxis.ticktext) == ["a", "b", "a"] and list(figure.layout.yaxis.tickvals) == [0, 1, 2]
    assert list(figure.layout.xaxis.ticktext) == ["x", "y"]
    html = maps._repr_html_()
    assert 'id="attention-maps-t"' in html and "<script" in html and "cdn.plot.ly" not in html
    with pytest.raises(ValueError, match=r"maps\['head 0'\] has shape \(3, 2\), but there are 2 queries and 2 keys"):
        AttentionMaps({"head 0": first}, queries=["a", "b"], keys=["x", "y"], name="t")
    with pytest.raises(ValueError, match="maps is empty"):
        AttentionMaps({}, queries=[], keys=[], name="t")


def test_the_training_program_does_not_shadow_the_train_function():
    import types

    import attention_course.trainer.command  # noqa: F401  (a submodule named like an exported function would replace it)
    from attention_course import train

    assert callable(train) and not isinstance(train, types.ModuleType)


def test_records_are_read_by_name_and_a_missing_name_lists_the_records():
    from attention_course.records import course_repository, measured

    gpu = measured("gpu")
    assert {"command", "day", "figures"} <= set(gpu)
    assert (course_repository() / "benchmarks" / "figures.json").is_file()
    with pytest.raises(KeyError, match="no record named 'no-such-record'.*gpu"):
        measured("no-such-record")
    with pytest.raises(TypeError, match="name must be"):
        measured("")
