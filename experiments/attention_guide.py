"""docs/attention.md's generated blocks (page_blocks.fill): each mechanism's code quoted from
the source, its attention-table row and its map of the fixed sentence (PNGs in
docs/attention/, one 0–1 colour scale), the sheet's worked example, the Transformer's maps.

    python -m experiments.attention_guide            # part of make results-docs
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.figure import Figure

from attnmt.atomic import write_text
from attnmt.data import batching
from attnmt.models import alignment, attention, masking, multihead, scorers
from experiments import alignment_maps, attention_table, page_blocks, results_table
from experiments.attention_measures import FIXED_CORPUS
from experiments.attention_table import CellMeasures
from experiments.runs import ROOT, Run

PAGE = ROOT / "docs" / "attention.md"
CMAP = "viridis"
STATE = [5.0, 1.0, 20.0]
ANNOTATIONS = [[3.0, 12.0, 45.0], [59.0, 2.0, 5.0], [1.0, 43.0, 5.0], [4.0, 3.0, 45.3]]
"""The sheet's worked example: a decoder state and four annotations h_1..h_4."""

LUONG = "rnn_luong"
SCORERS = {  # block "score NAME": its code, its row over the modes, its global-mode map
    "dot": (scorers.Dot.score,),
    "scaled_dot": (scorers.ScaledDot.score,),
    "general": (scorers.General.precompute, scorers.General.score),
    "concat": (scorers.Concat.precompute, scorers.Concat.score),
    "additive": (scorers.Additive.precompute, scorers.Additive.score),
    "cosine": (scorers.Cosine.precompute, scorers.Cosine.score),
    "location": (scorers.Location.score,),
}
SCORER_MODEL = {"additive": "rnn_bahdanau"}  # else LUONG
MODES = {  # block "mode NAME": its code, its column over the scorers, LUONG general's map
    "global": (alignment.GlobalAlignment.forward, attention.attend),
    "local_m": (alignment.LocalMonotonic.forward,),
    "local_p": (alignment.LocalPredictive.centre, alignment.LocalPredictive.forward),
    "hard": (alignment.HardAlignment.forward,),
}
CODE = {  # block "code NAME": its code alone
    "multihead": (multihead.scaled_dot_attention, multihead.MultiHeadAttention.attend),
    "masks": (masking.masked_softmax,),
    "shift": (batching.make_batch,),
}
Labels = tuple[str, str, str]
"""(model, score, mode) of an attention-table row."""


@dataclass(frozen=True)
class Rows:
    """The attention table's rows in its order (their runs by seed), and the runs of the main
    table's Transformer on the fixed sentence's corpus."""

    cells: dict[Labels, CellMeasures]
    transformer: tuple[Run, ...] = ()


def rows_of(results: Path) -> Rows:
    """The rows of the attention table's and the main table's studies under ``results``."""
    table = attention_table.measures(results_table.cells(results, *results_table.ATTENTION))
    main = results_table.cells(results, results_table.MAIN)
    pick = {"data": FIXED_CORPUS, "model": "transformer"}
    transformer = next((c.runs for c in main if pick.items() <= c.overrides.items()), ())
    return Rows({m.labels: m for m in table}, transformer)


def kept_maps(runs: Sequence[Run]) -> tuple[int, dict[str, Any]] | None:
    """(seed, attention_map.json) of the first run (runs come by seed); None without."""
    path = runs[0].folder / "attention_map.json" if runs else None
    if path is None or not path.is_file():
        return None
    return runs[0].seed, json.loads(path.read_text(encoding="utf-8"))


def code_lines(obj: Any) -> tuple[str, str, int, str]:
    """(repository path, qualified name, first line, the lines that compute it): the body of
    ``obj`` after its signature and docstring, at most 14 non-blank lines."""
    lines, start = inspect.getsourcelines(obj)
    path = Path(inspect.getsourcefile(obj) or "?").resolve().relative_to(ROOT).as_posix()
    node = ast.parse(textwrap.dedent("".join(lines))).body[0]
    assert isinstance(node, ast.FunctionDef)
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    kept = [line.rstrip() for line in lines[body[0].lineno - 1 :] if line.strip()][:14]
    return path, obj.__qualname__, start, textwrap.dedent("\n".join(kept))


def worked_example() -> dict[str, list[float]]:
    """The sheet's example through attnmt's ``Dot`` scorer and ``attend`` (float64, so
    α_2 ≈ 7.9e-232 does not underflow): scores, weights, context."""
    s = torch.tensor([[STATE]], dtype=torch.float64)  # [B=1, Tq=1, 3]
    h = torch.tensor([ANNOTATIONS], dtype=torch.float64)  # [B=1, Tk=4, 3]
    scores = scorers.Dot()(s, h)
    context, weights = attention.attend(scores, h)
    return {
        "scores": scores[0, 0].tolist(),
        "weights": weights[0, 0].tolist(),
        "context": context[0, 0].tolist(),
    }


def worked_figure(example: dict[str, list[float]]) -> Figure:
    """The state, the annotations (columns), scores, α_i · h_i and c as annotated heatmaps."""
    fig = page_blocks.figure(8, 2.4, dpi=80)
    h = np.array(ANNOTATIONS).T  # columns h_1..h_4
    panels = [
        (np.array([STATE]).T, "state s"),
        (h, "annotations h_1..h_4"),
        (np.array([example["scores"]]), "scores sᵀh_i"),
        (h * np.array(example["weights"]), "α_i · h_i"),
        (np.array([example["context"]]).T, "context c"),
    ]
    for k, (values, title) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), k + 1)
        ax.imshow(values, cmap=CMAP, aspect="auto")
        for (r, c), v in np.ndenumerate(values):
            ax.text(c, r, f"{v:.3g}", ha="center", va="center", fontsize=7, color="w")
        ax.set_title(title, fontsize=8)
        ax.set(xticks=[], yticks=[])
    fig.tight_layout()
    return fig


def save(fig: Figure, path: Path) -> str:
    """Write ``fig`` as PNG (atomically, 100 dpi); its path relative to the page's folder."""
    return page_blocks.save_png(fig, path, 100).relative_to(path.parent.parent).as_posix()


def map_figure(maps: dict[str, Any], name: str, rows: str, cols: str, title: str) -> Figure:
    """Heatmaps (0–1, one colour scale) of the kept map ``name``, one panel per head when it
    has heads; ``rows``, ``cols``: the keys of its piece labels."""
    weights = np.array(maps["maps"][name], dtype=float)
    heads = weights if weights.ndim == 3 else weights[None]
    ncol = min(len(heads), 4)
    nrow = (len(heads) + ncol - 1) // ncol
    title = textwrap.fill(title, width=int(12 * 3.2 * ncol))  # ~12 characters an inch
    height = 3.0 * nrow + 0.4 + 0.15 * (title.count("\n") + 1)
    fig = page_blocks.figure(3.2 * ncol, height, dpi=70, layout="constrained")
    for k, head in enumerate(heads):
        ax = fig.add_subplot(nrow, ncol, k + 1)
        shown = f"{name}, head {k}" if weights.ndim == 3 else name
        image = page_blocks.heatmap(ax, head, maps[cols], maps[rows], shown, CMAP)
    fig.colorbar(image, ax=fig.axes, shrink=0.6)
    fig.suptitle(title, fontsize=9)
    return fig


def quoted(code: Sequence[Any]) -> list[str]:
    out = []
    for obj in code:
        path, name, line, text = code_lines(obj)
        out += [f"`{path}`, `{name}` (line {line}):", "", "```python", text, "```", ""]
    return out


def mechanism(rows: Rows, code: Sequence[Any], cells: list[Labels], head: list[str]) -> list[str]:
    """Its quoted ``code``, then ``cells``' 'BLEU / chrF / NLL' under ``head``."""
    briefs = [attention_table.brief(rows.cells[c]) for c in cells]
    return [
        *quoted(code),
        "Test BLEU / test chrF / valid NLL of the tested checkpoint ([results.md](results.md)):",
        "",
        *page_blocks.table(head, "r" * len(head), [briefs]),
        "",
    ]


def heatmap(rows: Rows, cell: Labels, folder: Path) -> list[str]:
    what, m = " ".join(cell), rows.cells.get(cell)
    if (kept := kept_maps(m.runs if m else ())) is None:
        return [f"Heatmap: not yet run ({what}, seed 1)."]
    seed, maps = kept
    title = f"{what}, seed {seed}: {maps['hypothesis']}"
    png = save(
        map_figure(maps, "cross", "tgt_out", "src_pieces", title), folder / f"{'_'.join(cell)}.png"
    )
    return [f"![{what}: attention on the fixed sentence]({png})"]


def transformer_maps(rows: Rows, folder: Path) -> list[str]:
    if (kept := kept_maps(rows.transformer)) is None:
        return ["Heatmaps: not yet run (transformer on ding_de_en, seed 1)."]
    seed, maps = kept
    panels = {
        "enc_self": ("src_pieces", "src_pieces", "encoder self-attention"),
        "self": ("tgt_input", "tgt_input", "decoder masked self-attention"),
        "cross": ("tgt_out", "src_pieces", "cross-attention"),
    }
    out = []
    for name, (r, c, what) in ((k, v) for k, v in panels.items() if k in maps["maps"]):
        title = f"transformer, layer {maps['layer']}, {what}, seed {seed}"
        png = save(map_figure(maps, name, r, c, title), folder / f"transformer_{name}.png")
        out += [f"![transformer {what}]({png})", ""]
    return out


def worked(folder: Path) -> list[str]:
    example = worked_example()
    png = save(worked_figure(example), folder / "worked_example.png")
    path, name, line, _ = code_lines(attention.attend)
    fmt = ", ".join
    return [
        f"Decoder state s = {STATE}, annotations h_1..h_4 = {ANNOTATIONS}, through "
        f"`scorers.Dot` and `{name}` (`{path}`, line {line}) in float64 "
        "(experiments/attention_guide.py `worked_example`; tests/test_attention_guide.py checks "
        "the numbers):",
        "",
        f"- dot scores sᵀh_i: {fmt(f'{v:g}' for v in example['scores'])}",
        f"- weights α: {fmt(f'{v:.4g}' for v in example['weights'])} (h_2 and h_3 are wiped out)",
        f"- context c = Σ α_i h_i: {fmt(f'{v:.3f}' for v in example['context'])}",
        "",
        f"![the worked example: state, annotations, scores, α·h and context]({png})",
    ]


def toy_align_maps(folder: Path) -> list[str]:
    """Every mechanism's map of one toy_align test pair beside its gold (experiments.
    alignment_maps draws it from results/alignment/maps/)."""
    png = alignment_maps.draw(figure=folder / alignment_maps.FIGURE.name)
    if png is None:
        return ["Not drawn yet: results/alignment/maps/ holds no maps."]
    return [
        f"Test line {alignment_maps.EXAMPLE + 1}: “{alignment_maps.EXAMPLE_SOURCE}” → "
        f"“{alignment_maps.EXAMPLE_REFERENCE}”.",
        "",
        "![every mechanism's attention on one toy_align test pair, beside its gold]"
        f"({png.relative_to(folder.parent).as_posix()})",
    ]


def blocks(rows: Rows, folder: Path) -> dict[str, list[str]]:
    """The lines of each of the page's blocks by its key (PNGs into ``folder``)."""
    out = {"worked example": worked(folder), "toy_align maps": toy_align_maps(folder)}
    for name, code in SCORERS.items():
        model = SCORER_MODEL.get(name, LUONG)
        cells = [c for c in rows.cells if c[:2] == (model, name)]
        shown = heatmap(rows, (model, name, "global"), folder)
        out[f"score {name}"] = [*mechanism(rows, code, cells, [c[2] for c in cells]), *shown]
    for name, code in MODES.items():
        cells = [c for c in rows.cells if c[2] == name]
        head = [s + ("" if m == LUONG else f" ({m.removeprefix('rnn_')})") for m, s, _ in cells]
        shown = heatmap(rows, (LUONG, "general", name), folder)
        out[f"mode {name}"] = [*mechanism(rows, code, cells, head), *shown]
    out.update({f"code {name}": quoted(code) for name, code in CODE.items()})
    return {**out, "transformer maps": transformer_maps(rows, folder)}


def write_guide(results: Path, out: Path, page: Path = PAGE) -> Path:
    """Rewrite the blocks of ``page`` from the runs under ``results`` into ``out`` (its PNGs
    under attention/ beside it)."""
    folder = out.parent / "attention"
    text = page_blocks.fill(
        page.read_text(encoding="utf-8"), blocks(rows_of(results), folder), page
    )
    return write_text(out, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=results_table.RESULTS)
    parser.add_argument("--out", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    return page_blocks.report(lambda: [write_guide(args.results, args.out)])


if __name__ == "__main__":
    sys.exit(main())
