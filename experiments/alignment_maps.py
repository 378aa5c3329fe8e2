"""One toy_align test sentence's attention in every mechanism, beside its gold alignment.

``keep`` forces the sentence's reference through a finished run (as evaluate.py's AER does:
:func:`attnmt.decode.forced_alignment.forced_alignments`'s map, the last layer's mean of
heads for a Transformer) and writes the map, its word links and the gold links to a small
JSON file; ``draw`` puts every kept map in one figure, docs/attention/toy_align_maps.png,
with the gold links marked on each (sure: a square, possible: a dot, the model's links:
the cells it attends to most).

    python -m experiments.alignment_maps outputs/alignment_*/RUN ...   # keep, then draw

keeps each named trained run's map (its mechanism from its overrides) and draws the figure.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import yaml

from attnmt.atomic import atomic_path, write_json
from attnmt.decode.alignment_error import alignment_error
from attnmt.decode.attention_maps import attention_maps
from attnmt.decode.forced_alignment import select_map
from attnmt.decode.word_alignment import word_alignment, word_index
from experiments.alignment_aer import MECHANISMS, gold_test_split, mechanism_of, stem

ROOT = Path(__file__).resolve().parents[1]
MAPS = ROOT / "results" / "alignment" / "maps"
FIGURE = ROOT / "docs" / "attention" / "toy_align_maps.png"
EXAMPLE = 6
"""0-based line of toy_align's test split: ``na sunadi tapa ri kemal ke ta osta fikar lisku
kintu kemal`` (one-to-many ``sunadi``, many-to-one ``tapa ri``, an unaligned ``ta``, a
mirrored adjective phrase, a verb-final subordinate clause ending in ``ne``)."""
EXAMPLE_SOURCE = "na sunadi tapa ri kemal ke ta osta fikar lisku kintu kemal"
EXAMPLE_REFERENCE = "un ela mira gulsen kemal tes bramo medro lunde kemal fe moren ne"
DIGITS = 3


def keep(run: Path, mechanism: str, path: Path) -> Path:
    """Write the example's forced map from ``run``'s best checkpoint to ``path``."""
    translator, sources, refs, golds = gold_test_split(run)
    gold = golds[EXAMPLE]
    src, ref = sources[EXAMPLE], refs[EXAMPLE]
    if (src, ref) != (EXAMPLE_SOURCE, EXAMPLE_REFERENCE):
        raise ValueError(
            f"toy_align's test line {EXAMPLE + 1} is now {src!r} -> {ref!r}, not the pair "
            "this figure shows: the generator changed; update EXAMPLE_SOURCE/REFERENCE"
        )
    src_ids = translator.tokenizer.encode_src([src])
    tgt_ids = translator.tokenizer.encode_tgt([ref])
    (maps,) = attention_maps(
        translator.model, translator.tokenizer, translator.device, src_ids, [(tgt_ids[0], True)]
    )
    weights = select_map(maps.cross, -1, None)
    links = word_alignment(weights, maps.source_pieces, maps.target_pieces)
    scores = alignment_error([links], [gold])
    write_json(
        path,
        {
            "mechanism": mechanism,
            "run": run.name,
            "test_line": EXAMPLE,
            "source": src,
            "reference": ref,
            "source_pieces": maps.source_pieces,
            "target_pieces": maps.target_pieces,
            "map": [[round(float(x), DIGITS) for x in row] for row in weights],
            "links": [list(x) for x in links],
            "gold_sure": sorted(list(x) for x in gold.sure),
            "gold_possible": sorted(list(x) for x in gold.possible - gold.sure),
            "aer": scores.aer,
        },
        indent=None,
    )
    return path


def _word_cells(pieces: list[str]) -> dict[int, list[int]]:
    """Word index -> the piece positions that spell it."""
    cells: dict[int, list[int]] = {}
    for k, w in enumerate(word_index(pieces)):
        if w >= 0:
            cells.setdefault(w, []).append(k)
    return cells


def _panel(ax: Any, rec: dict[str, Any], title: str, gold_only: bool = False) -> None:
    """One map (or, ``gold_only``, the gold links alone) with gold marked."""
    import numpy as np

    src, tgt = rec["source_pieces"], rec["target_pieces"]
    src_cells, tgt_cells = _word_cells(src), _word_cells(tgt)
    data = np.zeros((len(tgt), len(src))) if gold_only else np.array(rec["map"])
    if gold_only:
        for (i, j), value in [(x, 1.0) for x in rec["gold_sure"]] + [
            (x, 0.5) for x in rec["gold_possible"]
        ]:
            for s in src_cells.get(i, []):
                for t in tgt_cells.get(j, []):
                    data[t, s] = max(data[t, s], value)
    ax.imshow(data, cmap="Greys" if gold_only else "viridis", vmin=0, vmax=1, aspect="auto")
    if not gold_only:
        for marks, style in ((rec["gold_sure"], "s"), (rec["gold_possible"], "o")):
            for i, j in marks:
                for s in src_cells.get(i, []):
                    for t in tgt_cells.get(j, []):
                        ax.plot(s, t, style, mfc="none", mec="red", ms=6 if style == "s" else 3,
                                mew=0.8)  # fmt: skip
    ax.set_xticks(range(len(src)), src, rotation=90, fontsize=7)
    ax.set_yticks(range(len(tgt)), tgt, fontsize=7)
    ax.set_title(title, fontsize=8)


def draw(maps_dir: Path = MAPS, figure: Path = FIGURE) -> Path | None:
    """The figure of every kept map (None when none is kept): 110 dpi, 7-point labels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    recs = []
    for mech in MECHANISMS:
        path = maps_dir / f"{stem(mech, 1)}.json"
        if path.is_file():
            recs.append(json.loads(path.read_text()))
    if not recs:
        return None
    cols = 4
    rows = math.ceil((len(recs) + 1) / cols)
    fig = Figure(figsize=(cols * 3.6, rows * 3.7 + 0.4), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(rows, cols, k + 1) for k in range(len(recs) + 1)]
    _panel(axes[0], recs[0], "gold (black: sure, grey: possible)", gold_only=True)
    for ax, rec in zip(axes[1:], recs):
        _panel(ax, rec, f"{rec['mechanism'].split(' (')[0]}\nAER {rec['aer']:.2f} (this pair)")
    fig.suptitle(
        f"toy_align test line {EXAMPLE + 1}: forced attention (rows: reference pieces, "
        "columns: source pieces); red squares: sure gold links, red dots: possible",
        fontsize=9,
    )
    with atomic_path(figure) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    return figure


def main(argv: list[str] | None = None) -> int:
    """Keep the example's map of each run folder in ``argv`` (named by its mechanism and
    seed, from its .hydra/overrides.yaml), then draw the figure (it shows seed 1's)."""
    for arg in sys.argv[1:] if argv is None else argv:
        run = Path(arg)
        overrides = yaml.safe_load((run / ".hydra" / "overrides.yaml").read_text())
        name = mechanism_of(dict(o.split("=", 1) for o in overrides))
        seed = int(next(o for o in overrides if o.startswith("seed=")).split("=")[1])
        print(f"wrote {keep(run, name, MAPS / f'{stem(name, seed)}.json')}")
    print(f"wrote {draw()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
