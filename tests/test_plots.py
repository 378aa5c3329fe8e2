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
