"""One toy_align test pair's forced attention in every mechanism, beside its gold links.

    python -m experiments.alignment_maps outputs/alignment_*/RUN ...   # keep each map, then draw

:func:`keep` writes a run's map of the pair (the last layer's mean of heads for a
Transformer, as docs/alignment.md's table reads it) with its word links and the gold links to
results/alignment/maps/; :func:`draw` puts every kept seed-1 map into one figure.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from attnmt.atomic import write_json
from attnmt.decode.alignment_error import alignment_error
from attnmt.decode.forced_alignment import select_map
from attnmt.decode.translator import load_translator
from attnmt.decode.word_alignment import word_alignment, word_index
from attnmt.errors import DataError
from experiments import page_blocks
from experiments.alignment_aer import MECHANISMS, gold_test, mechanism_of, stem
from experiments.attention_measures import forced_maps
from experiments.page_blocks import report
from experiments.runs import ROOT, read_run

MAPS = ROOT / "results" / "alignment" / "maps"
FIGURE = ROOT / "docs" / "attention" / "toy_align_maps.png"
EXAMPLE = 6
"""0-based line of toy_align's test split: a one-to-many ``sunadi``, a many-to-one ``tapa
ri``, an unaligned ``ta``, a mirrored adjective phrase, a verb-final clause ending in ``ne``."""
EXAMPLE_SOURCE = "na sunadi tapa ri kemal ke ta osta fikar lisku kintu kemal"
EXAMPLE_REFERENCE = "un ela mira gulsen kemal tes bramo medro lunde kemal fe moren ne"


def keep(run: Path, mechanism: str, path: Path) -> Path:
    """Write the example's forced map from ``run``'s best checkpoint to ``path``."""
    translator = load_translator(run, device="cpu")
    _, sources, refs, golds = gold_test(translator.config["data"])
    src, ref, gold = sources[EXAMPLE], refs[EXAMPLE], golds[EXAMPLE]
    if (src, ref) != (EXAMPLE_SOURCE, EXAMPLE_REFERENCE):
        raise DataError(
            f"toy_align's test line {EXAMPLE + 1} is {src!r} -> {ref!r}, not the pair of this "
            "figure: update EXAMPLE_SOURCE/REFERENCE"
        )
    maps, _ = forced_maps(translator, src, ref)
    weights = select_map(maps.cross, -1, None)
    links = word_alignment(weights, maps.source_pieces, maps.target_pieces)
    kept = {
        "mechanism": mechanism,
        "run": run.name,
        "test_line": EXAMPLE,
        "source": src,
        "reference": ref,
        "source_pieces": maps.source_pieces,
        "target_pieces": maps.target_pieces,
        "map": [[round(float(x), 3) for x in row] for row in weights],
        "links": [list(x) for x in links],
        "gold_sure": sorted(list(x) for x in gold.sure),
        "gold_possible": sorted(list(x) for x in gold.possible - gold.sure),
        "aer": alignment_error([links], [gold]).aer,
    }
    write_json(path, kept, indent=None)
    return path


def _cells(rec: dict[str, Any], kind: str) -> list[tuple[int, int]]:
    """(source piece, target piece) of every piece pair that spells a ``gold_<kind>`` link."""
    src, tgt = word_index(rec["source_pieces"]), word_index(rec["target_pieces"])
    return [(s, t) for i, j in rec[f"gold_{kind}"] for s, a in enumerate(src) if a == i
            for t, b in enumerate(tgt) if b == j]  # fmt: skip


def _panel(ax: Any, rec: dict[str, Any], title: str, gold_only: bool = False) -> None:
    """One map with the gold marked, or (``gold_only``) the gold links alone."""
    src, tgt = rec["source_pieces"], rec["target_pieces"]
    if gold_only:
        data = np.zeros((len(tgt), len(src)))
        for kind, value in (("possible", 0.5), ("sure", 1.0)):
            for s, t in _cells(rec, kind):
                data[t, s] = value
        page_blocks.heatmap(ax, data, src, tgt, title, "Greys")
        return
    page_blocks.heatmap(ax, np.array(rec["map"]), src, tgt, title, "viridis")
    for kind, style, size in (("sure", "s", 6), ("possible", "o", 3)):
        for s, t in _cells(rec, kind):
            ax.plot(s, t, style, mfc="none", mec="red", ms=size, mew=0.8)


def draw(maps_dir: Path = MAPS, figure: Path = FIGURE) -> Path | None:
    """The figure of every kept seed-1 map at 110 dpi (None when none is kept)."""
    paths = [maps_dir / f"{stem(m, 1)}.json" for m in MECHANISMS]
    recs = [json.loads(p.read_text()) for p in paths if p.is_file()]
    if not recs:
        return None
    cols, rows = 4, math.ceil((len(recs) + 1) / 4)
    fig = page_blocks.figure(cols * 3.6, rows * 3.7 + 0.4, dpi=110, layout="constrained")
    axes = [fig.add_subplot(rows, cols, k + 1) for k in range(len(recs) + 1)]
    _panel(axes[0], recs[0], "gold (black: sure, grey: possible)", gold_only=True)
    for ax, rec in zip(axes[1:], recs):
        _panel(ax, rec, f"{rec['mechanism'].split(' (')[0]}\nAER {rec['aer']:.2f} (this pair)")
    fig.suptitle(
        f"toy_align test line {EXAMPLE + 1}: forced attention (rows: reference pieces, "
        "columns: source pieces); red squares: sure gold links, red dots: possible",
        fontsize=9,
    )
    return page_blocks.save_png(fig, figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="*", type=Path, help="trained run folders to keep")
    args = parser.parse_args(argv)

    def write() -> Iterator[Path]:
        """The example's map of each run (named by its mechanism and seed), then the figure."""
        for run in map(read_run, args.runs):
            name = mechanism_of(run.overrides)
            yield keep(run.folder, name, MAPS / f"{stem(name, run.seed)}.json")
        if (png := draw()) is not None:
            yield png

    return report(write)


if __name__ == "__main__":
    sys.exit(main())
