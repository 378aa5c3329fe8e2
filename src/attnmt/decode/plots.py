"""Annotated attention heatmaps (target pieces × source pieces).

The same figures serve ``evaluate.py plot_attention=N`` (PNG files) and TensorBoard
(``writer.add_image(tag, figure_to_array(fig), step, dataformats="HWC")``).
Figures are built with :class:`matplotlib.figure.Figure` and the Agg canvas directly,
so nothing is registered with pyplot and no GUI backend is needed.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from torch import Tensor

from attnmt.errors import DataError

#: cells are annotated with their weight when the map has at most this many cells
ANNOTATE_MAX_CELLS = 150
#: inches per piece at 100 dpi: 40 pixels, while the map fits MAX_MAP_INCHES
CELL_INCHES = 0.4
#: the longer side of a map, in inches (1,600 px): longer maps get smaller cells
MAX_MAP_INCHES = 16.0
#: inches a 10-point tick label needs (y; x labels at 45° need 1.5 times that); more
#: pieces than fit are labelled every k-th
LABEL_INCHES = 0.18
#: characters of a piece shown as a label (longer ones end in "…")
LABEL_CHARS = 16


def _as_array(weights: Tensor | np.ndarray) -> np.ndarray:
    if isinstance(weights, Tensor):
        weights = weights.detach().float().cpu().numpy()
    return np.asarray(weights, dtype=np.float32)


def cell_inches(n_tgt: int, n_src: int) -> float:
    """Inches per piece: :data:`CELL_INCHES`, smaller when the map would exceed
    :data:`MAX_MAP_INCHES`, never under one pixel at 100 dpi (every weight stays visible)."""
    longest = max(n_tgt, n_src, 1)
    return max(min(CELL_INCHES, MAX_MAP_INCHES / longest), 0.01)


def _ticks(labels: list[str], cell: float, room: float) -> tuple[list[int], list[str], int]:
    """(positions, labels, step): every piece when ``cell`` inches leave each label its
    ``room``, else every ``step``-th, its label led by its position (``"12 ▁house"``)."""
    step = max(1, math.ceil(room / cell - 1e-9))
    short = [t if len(t) <= LABEL_CHARS else t[: LABEL_CHARS - 1] + "…" for t in labels]
    if step == 1:
        return list(range(len(labels))), short, 1
    positions = list(range(0, len(labels), step))
    return positions, [f"{i} {short[i]}" for i in positions], step


def _axis_label(name: str, n: int, step: int) -> str:
    return name if step == 1 else f"{name} ({n} pieces; a label every {step})"


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
    in the cells of small maps only. A long map (a hypothesis decoded to the length cap)
    shrinks to :data:`MAX_MAP_INCHES` with every weight still drawn (at least a pixel
    each) and every k-th piece labelled (said in the axis label), so drawing it costs
    about what a short one does. ``axis_labels`` = (x label, y label); ``caption`` is
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
    cell = cell_inches(n_tgt, n_src)
    width = max(5.0, cell * n_src + 3.0)
    height = max(3.5, cell * n_tgt + 2.2 + (0.4 if caption else 0.0))
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(
        w, cmap="viridis", vmin=0.0, vmax=1.0, aspect="equal", interpolation="nearest"
    )
    x_at, x_labels, x_step = _ticks(src_tokens, cell, 1.5 * LABEL_INCHES)
    y_at, y_labels, y_step = _ticks(tgt_tokens, cell, LABEL_INCHES)
    ax.set_xticks(x_at, labels=x_labels, rotation=45, ha="right", fontsize=10)
    ax.set_yticks(y_at, labels=y_labels, fontsize=10)
    ax.set_xlabel(_axis_label(axis_labels[0], n_src, x_step), fontsize=10)
    ax.set_ylabel(_axis_label(axis_labels[1], n_tgt, y_step), fontsize=10)
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


def drawn_rgba(fig: Figure) -> np.ndarray:
    """Draw ``fig`` with Agg once: its pixels, RGBA uint8 [H,W,4] (a view of the canvas)."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())


def figure_to_array(fig: Figure) -> np.ndarray:
    """Render ``fig`` to an RGB uint8 array [H,W,3] (for add_image(dataformats="HWC"))."""
    return drawn_rgba(fig)[..., :3].copy()


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
