"""Annotated attention heatmaps (target pieces × source pieces).

The same figures serve ``evaluate.py plot_attention=N`` (PNG files) and TensorBoard
(``writer.add_image(tag, figure_to_array(fig), step, dataformats="HWC")``).
Figures are built with :class:`matplotlib.figure.Figure` and the Agg canvas directly,
so nothing is registered with pyplot and no GUI backend is needed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from torch import Tensor

from attnmt.errors import DataError

#: cells are annotated with their weight when the map has at most this many cells
ANNOTATE_MAX_CELLS = 150
#: inches per piece at 100 dpi: 40 pixels
CELL_INCHES = 0.4


def _as_array(weights: Tensor | np.ndarray) -> np.ndarray:
    if isinstance(weights, Tensor):
        weights = weights.detach().float().cpu().numpy()
    return np.asarray(weights, dtype=np.float32)


def attention_figure(
    weights: Tensor | np.ndarray,
    src_tokens: list[str],
    tgt_tokens: list[str],
    title: str | None = None,
    axis_labels: tuple[str, str] = ("source", "target"),
    caption: str | None = None,
) -> Figure:
    """Heatmap of weights [T,S]: row t = target piece t, column s = source piece s.

    Readable at its own size: about 40 px per piece, 10-point labels, source labels at 45°,
    one colour scale for every map (0 to 1, so maps and heads compare), the weights printed
    in the cells of small maps only. ``axis_labels`` = (x label, y label); ``caption`` is
    printed under the map (e.g. the reference). Raises DataError when the token lists do
    not match the shape of ``weights``.
    """
    w = _as_array(weights)
    if w.ndim != 2 or w.shape != (len(tgt_tokens), len(src_tokens)):
        raise DataError(
            f"attention map of shape {tuple(w.shape)} does not match "
            f"{len(tgt_tokens)} target × {len(src_tokens)} source tokens"
        )
    n_tgt, n_src = w.shape
    width = max(5.0, CELL_INCHES * n_src + 3.0)
    height = max(3.5, CELL_INCHES * n_tgt + 2.2 + (0.4 if caption else 0.0))
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=1.0, aspect="equal")
    ax.set_xticks(range(n_src), labels=src_tokens, rotation=45, ha="right", fontsize=10)
    ax.set_yticks(range(n_tgt), labels=tgt_tokens, fontsize=10)
    ax.set_xlabel(axis_labels[0], fontsize=10)
    ax.set_ylabel(axis_labels[1], fontsize=10)
    if title:
        ax.set_title(title, fontsize=10)
    if 0 < w.size <= ANNOTATE_MAX_CELLS:
        for t in range(n_tgt):
            for s in range(n_src):
                color = "black" if w[t, s] > 0.5 else "white"
                ax.text(s, t, f"{w[t, s]:.2f}", ha="center", va="center", fontsize=8, color=color)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if caption:
        fig.text(0.01, 0.01, caption[:150], fontsize=9, ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.04 if caption else 0, 1, 1))
    return fig


def figure_to_array(fig: Figure) -> np.ndarray:
    """Render ``fig`` to an RGB uint8 array [H,W,3] (for add_image(dataformats="HWC"))."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def save_attention_png(
    weights: Tensor | np.ndarray,
    src_tokens: list[str],
    tgt_tokens: list[str],
    path: str | Path,
    title: str | None = None,
    axis_labels: tuple[str, str] = ("source", "target"),
    caption: str | None = None,
) -> Path:
    """Write the heatmap of :func:`attention_figure` to ``path`` as PNG; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = attention_figure(weights, src_tokens, tgt_tokens, title, axis_labels, caption)
    fig.savefig(path, format="png")
    return path
