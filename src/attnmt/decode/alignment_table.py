"""AER of every cross-attention map of a model: which layer and head to trust.

One row per map of :func:`attnmt.decode.forced_alignment.table_choices` (each decoder
layer's mean of heads, each head, the mean over layers; an RNN's one map), each scored
against the same gold with the same :class:`~attnmt.decode.word_alignment.Extraction`
(:func:`~attnmt.decode.alignment_error.alignment_error`, counts summed over the corpus).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from attnmt.data.gold import Alignment, Link
from attnmt.decode.alignment_error import AlignmentScores, alignment_error
from attnmt.decode.forced_alignment import ALL_LAYERS, MapChoice
from attnmt.decode.word_alignment import Extraction


@dataclass(frozen=True)
class MapScore:
    """The scores of one map: ``layer`` (0-based, or ``"all"``), ``head`` (None: the
    mean of the heads)."""

    choice: MapChoice
    scores: AlignmentScores

    def to_dict(self) -> dict[str, Any]:
        """``{"layer", "head", "map", "aer", "precision", "recall", "links", ...}``."""
        counts = {k: v for k, v in self.scores.to_dict().items() if k != "sentences"}
        return {
            "layer": self.choice.layer,
            "head": self.choice.head,
            "map": self.choice.describe(),
            **counts,
        }


@dataclass(frozen=True)
class AerTable:
    """AER per map, all read with ``extraction``."""

    extraction: Extraction
    rows: list[MapScore]

    def best(self) -> MapScore | None:
        """The row of lowest AER (the first of equals; None when no AER is defined)."""
        scored = [r for r in self.rows if r.scores.aer is not None]
        return min(scored, key=lambda r: r.scores.aer or 0.0) if scored else None

    def to_dict(self) -> dict[str, Any]:
        """scores.json's ``aer_table``: ``{"extraction": {words, eos, step}, "rows":
        [MapScore.to_dict(), ...], "best": the best row's map or null}``."""
        best = self.best()
        return {
            "extraction": asdict(self.extraction),
            "rows": [r.to_dict() for r in self.rows],
            "best": None if best is None else best.choice.describe(),
        }

    def lines(self) -> list[str]:
        """The terminal table: a row per layer (its heads' mean, then each head), then the
        mean over layers, and the best map."""
        heads = sorted({r.choice.head for r in self.rows if r.choice.head is not None})
        header = ["layer", "mean", *(f"head {h}" for h in heads)]
        table = [header]
        for layer in dict.fromkeys(r.choice.layer for r in self.rows):
            cells = {r.choice.head: _num(r.scores.aer) for r in self.rows
                     if r.choice.layer == layer}  # fmt: skip
            name = "all" if layer == ALL_LAYERS else str(layer)
            table.append([name, cells.get(None, ""), *(cells.get(h, "") for h in heads)])
        widths = [max(len(row[k]) for row in table) for k in range(len(header))]
        out = [
            f"AER by cross-attention map ({self.extraction.describe()}; lower is better):",
            *(_aligned(row, widths) for row in table),
        ]
        best = self.best()
        if best is not None:
            out.append(f"best: {best.choice.describe()} (AER {_num(best.scores.aer)})")
        return out


def _aligned(row: list[str], widths: list[int]) -> str:
    """The cells of ``row`` padded to ``widths``: the first left-aligned, numbers right."""
    first, *rest = row
    cells = [first.ljust(widths[0]), *(c.rjust(w) for c, w in zip(rest, widths[1:]))]
    return "  ".join(cells).rstrip()


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def aer_table(
    choices: Sequence[MapChoice],
    links: Sequence[Sequence[Sequence[Link]]],
    golds: Sequence[Alignment],
    extraction: Extraction,
) -> AerTable:
    """The table of ``links`` (per choice, per sentence) against ``golds``."""
    rows = [MapScore(c, alignment_error(x, golds)) for c, x in zip(choices, links)]
    return AerTable(extraction, rows)
