"""What the generated pages share: a hand-written page's generated blocks, each between
``<!-- generated: KEY -->`` and ``<!-- end -->`` (:func:`fill`), Markdown tables
(:func:`table`, :func:`num`), figures (:func:`figure`, :func:`save_png`) and a command's
files written or one error line (:func:`report`)."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

from attnmt.atomic import atomic_path
from attnmt.errors import AttnmtError, DataError

BLOCK = re.compile(r"<!-- generated: (.+?) -->\n.*?<!-- end -->", re.DOTALL)


def fill(page: str, blocks: Mapping[str, Sequence[str]], where: Path) -> str:
    """``page`` with each block's lines replaced by ``blocks[KEY]``; DataError naming the
    blocks the page (the file ``where``) lacks, repeats or holds unknown."""
    found = BLOCK.findall(page)
    wrong = sorted(set(blocks) ^ set(found)) + sorted({k for k in found if found.count(k) > 1})
    if wrong:
        raise DataError(
            f"{where}: generated blocks missing, repeated or unknown: {', '.join(wrong)} "
            f"(it holds each of {', '.join(blocks)} once)"
        )
    body = {key: "\n".join(lines).strip("\n") for key, lines in blocks.items()}
    return BLOCK.sub(lambda m: f"<!-- generated: {m[1]} -->\n\n{body[m[1]]}\n\n<!-- end -->", page)


def row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def table(head: Sequence[str], align: str, rows: Iterable[Sequence[str]] = ()) -> list[str]:
    """A Markdown table: ``head``, each column's alignment (``l`` or ``r``), ``rows``."""
    rule = "|" + "".join("---:|" if a == "r" else "---|" for a in align)
    return [row(head), rule, *map(row, rows)]


def num(value: float | None, fmt: str = ".2f") -> str:
    """``value`` formatted, "–" for None."""
    return "–" if value is None else format(value, fmt)


def figure(width: float, height: float, dpi: int = 100, **kw: Any) -> Figure:
    """A matplotlib figure (``width`` × ``height`` inches) drawn by Agg, no pyplot state."""
    fig = Figure(figsize=(width, height), dpi=dpi, **kw)
    FigureCanvasAgg(fig)
    return fig


def panel(fig: Figure, n: int, k: int, xlabel: str, ylabel: str, **kw: Any) -> Axes:
    """Panel ``k`` of ``n`` side by side in ``fig``: its axes labelled, a light grid."""
    ax = fig.add_subplot(1, n, k, **kw)
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    return ax


def heatmap(
    ax: Axes, values: Any, cols: Sequence[str], rows: Sequence[str], title: str, cmap: str
) -> AxesImage:
    """``values`` [rows, cols] on one 0–1 colour scale, the pieces as 7-point tick labels
    (7 / 72 × 100 dpi ≈ 9.7 pixels high)."""
    image = ax.imshow(values, cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(cols)), cols, rotation=90, fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.set_title(title, fontsize=8)
    return image


def save_png(fig: Figure, path: Path, dpi: int | None = None) -> Path:
    """Write ``fig`` to ``path`` as PNG atomically (at ``dpi``, else the figure's), its folder
    made where missing."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)
    return path


def report(write: Callable[[], Iterable[Path]]) -> int:
    """A command's end: ``wrote PATH`` for each file ``write`` wrote, as it comes (0), and
    one line ``error: ...`` on stderr at the first error (2)."""
    try:
        for path in write():
            print(f"wrote {path}")
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
