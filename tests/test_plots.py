"""Attention heatmaps: shapes, pixels, PNG files, no pyplot state."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from attnmt.decode.plots import attention_figure, figure_to_array, save_attention_png
from attnmt.errors import DataError

SRC = ["▁das", "▁Haus", "</s>"]
TGT = ["▁the", "▁house", "</s>"]


def test_figure_has_tokens_on_axes_and_annotations() -> None:
    weights = torch.tensor([[0.9, 0.1, 0.0], [0.2, 0.7, 0.1], [0.0, 0.0, 1.0]])
    fig = attention_figure(weights, SRC, TGT, title="sample 0")
    (ax, _colorbar) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == SRC
    assert [t.get_text() for t in ax.get_yticklabels()] == TGT
    annotations = [t.get_text() for t in ax.texts]
    assert len(annotations) == 9 and annotations[0] == "0.90" and annotations[5] == "0.10"
    assert ax.get_title() == "sample 0"
    np.testing.assert_allclose(ax.images[0].get_array(), weights.numpy())


def test_figure_to_array_is_hwc_uint8() -> None:
    fig = attention_figure(np.eye(3, dtype=np.float32), SRC, TGT)
    img = figure_to_array(fig)
    width, height = fig.get_size_inches() * fig.dpi
    assert img.dtype == np.uint8 and img.shape == (round(height), round(width), 3)
    assert img.min() < 50 and img.max() > 200  # not blank


def test_save_png(tmp_path) -> None:
    path = save_attention_png(torch.rand(2, 3), SRC, TGT[:2], tmp_path / "sub" / "a.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_shape_mismatch_and_no_pyplot() -> None:
    with pytest.raises(DataError, match=r"shape \(2, 3\) does not match 3 target × 3 source"):
        attention_figure(torch.rand(2, 3), SRC, TGT)
    if "matplotlib.pyplot" in sys.modules:  # imported by someone else: no figures left open
        import matplotlib.pyplot as plt

        assert plt.get_fignums() == []


def test_a_long_map_is_drawn_at_a_bounded_size_with_every_weight_and_thinned_labels() -> None:
    """A 511-piece hypothesis (what an early model decodes to the cap) over 250 source
    pieces: at 40 px a piece this was a 20,000-pixel figure (minutes per validation)."""
    from attnmt.decode.plots import MAX_MAP_INCHES

    n_tgt, n_src = 511, 250
    weights = torch.softmax(torch.randn(n_tgt, n_src), dim=-1)
    src = [f"▁s{i}" for i in range(n_src)]
    tgt = [f"▁t{i}" for i in range(n_tgt)]
    fig = attention_figure(weights, src, tgt, title="long", caption="reference: x")
    width, height = fig.get_size_inches()
    assert height <= MAX_MAP_INCHES + 3 and width <= MAX_MAP_INCHES + 4
    (ax, _colorbar) = fig.axes
    np.testing.assert_allclose(ax.images[0].get_array(), weights.numpy())  # every weight
    x_labels = [t.get_text() for t in ax.get_xticklabels()]
    y_labels = [t.get_text() for t in ax.get_yticklabels()]
    assert 10 <= len(y_labels) <= 100 and 10 <= len(x_labels) <= 100
    assert y_labels[0] == "0 ▁t0" and y_labels[1].endswith(f"▁t{int(ax.get_yticks()[1])}")
    assert "every" in ax.get_ylabel() and "511" in ax.get_ylabel()
    img = figure_to_array(fig)
    assert img.shape[0] <= (MAX_MAP_INCHES + 3) * 100
    assert img.shape[0] / n_tgt >= 1  # at least a pixel a piece


def test_a_long_piece_label_is_shortened() -> None:
    fig = attention_figure(np.eye(3, dtype=np.float32), ["▁" + "x" * 500, "b", "</s>"], TGT)
    (ax, _colorbar) = fig.axes
    assert ax.get_xticklabels()[0].get_text() == "▁" + "x" * 14 + "…"


def test_validation_heatmaps_of_a_511_piece_hypothesis_stay_small(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A model that never ends a sentence decodes to the length limit (511 pieces here,
    common early in training): its validation heatmaps (cross-attention per layer, per
    head and decoder self-attention, 511 × 511) are bounded pictures, every weight drawn."""
    from helpers.tiny_checkpoint import tiny_model, toy_tokenizer

    from attnmt import EOS_ID
    from attnmt.decode.config import DecodeConfig
    from attnmt.decode.plots import MAX_MAP_INCHES
    from attnmt.decode.translator import Translator
    from attnmt.train.evaluation import attention_images, make_eval_set

    tok = toy_tokenizer(tmp_path_factory.mktemp("heat"))
    model = tiny_model("transformer", tok).eval()
    eos = torch.tensor([EOS_ID])
    model.out_proj.register_forward_hook(lambda _m, _i, out: out.index_fill(-1, eos, -1e4))
    decode = DecodeConfig(max_len_a=0.0, max_len_b=511)
    translator = Translator(model, tok, torch.device("cpu"), decode)
    (hyp,) = translator.hypotheses(["a b c d"])
    assert hyp is not None and len(hyp.tokens) == 511
    valid = make_eval_set(tok, ["a b c d"], ["d c b a"], 100)
    images = attention_images(translator, valid, 0, step=1)
    names = [name for name, _ in images]
    assert "self_layer0" in names and len(images) >= 3
    most = (MAX_MAP_INCHES + 4) * 100
    for name, image in images:
        height, width, _ = image.shape
        assert 512 <= height <= most and width <= most, (name, image.shape)


def test_results_png_is_savefigs_picture_and_tensorboards_drawn_once(tmp_path) -> None:
    """The trainer's results.png and its TensorBoard image come from one drawing: the file
    holds savefig's pixels, the returned array figure_to_array's."""
    from matplotlib.image import imread

    from attnmt.train.reporting import results_figure, save_figure
    from attnmt.train.state import History

    history = History()
    for step in (1, 2, 3, 4):
        history.add_train(step, 0.1 * step, 4.0 - 0.5 * step)
    history.add_valid(2, 0.2, 3.5, 1.0, 10.0)
    history.add_valid(4, 0.4, 3.0, 2.5, 14.0)
    fig = results_figure(history, "run: transformer on toy_reverse, step 4")
    pixels = save_figure(fig, tmp_path / "results.png")
    fig.savefig(tmp_path / "savefig.png", format="png")
    written, expected = imread(tmp_path / "results.png"), imread(tmp_path / "savefig.png")
    assert written.shape == expected.shape == (700, 1000, 4)
    np.testing.assert_array_equal(written, expected)
    np.testing.assert_array_equal(pixels, figure_to_array(fig))
    assert pixels.dtype == np.uint8 and pixels.min() < 50 and pixels.max() > 200
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.png", "savefig.png"]
