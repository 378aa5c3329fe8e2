"""Does attention align once a model translates? Each run's validation AER (metrics.jsonl
``valid`` events' ``aer``: ``trainer.valid_alignments``) against its validation BLEU.

    python -m experiments.aer_vs_bleu RUN [RUN ...] [--out docs/aer_vs_bleu.png]

Draws one line per run and prints each validation, then per run the first, last and lowest
AER, Spearman's ρ of BLEU and AER (negative: AER falls as BLEU rises) and the AER of the
alignment that reads no words on its valid split. A run without a
validation AER is named and left out; none with one is an error (exit status 2).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from matplotlib.figure import Figure
from scipy import stats

from attnmt.decode.alignment_error import alignment_error, read_gold
from attnmt.errors import DataError
from attnmt.run_record import Validation, read_record
from experiments import page_blocks
from experiments.alignment_baselines import diagonal_links
from experiments.page_blocks import num, report, save_png
from experiments.runs import ROOT, corpus_split

DEFAULT_OUT = Path("docs/aer_vs_bleu.png")


@dataclass(frozen=True)
class AerCurve:
    """One run's validations that logged an AER, in step order."""

    label: str
    points: tuple[Validation, ...]
    diagonal: float | None = None  # the valid split's diagonal alignment's AER

    @property
    def bleu(self) -> np.ndarray:
        return np.array([p.bleu for p in self.points], dtype=float)

    @property
    def aer(self) -> np.ndarray:
        return np.array([p.aer for p in self.points], dtype=float)


def spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    """Spearman's ρ (Pearson's r of the ranks, ties given their mean rank: scipy.stats);
    None with fewer than 3 points or a constant series."""
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(stats.spearmanr(x, y).statistic)


def labels(runs: Sequence[Path]) -> list[str]:
    """Each run's folder name, or ``parent/name`` when names repeat."""
    names = [r.resolve().name for r in runs]
    if len(set(names)) == len(names):
        return names
    return [f"{r.resolve().parent.name}/{r.resolve().name}" for r in runs]


def diagonal_aer(sources: Sequence[str], refs: Sequence[str], links: Path) -> float | None:
    """AER against ``links`` of the alignment that reads no words (alignment_baselines)."""
    return alignment_error(diagonal_links(sources, refs), read_gold(links)).aer


def run_diagonal(run: Path) -> float | None:
    """:func:`diagonal_aer` of the run's valid split and ``trainer.valid_alignments`` file;
    None without that file."""
    config = run / ".hydra" / "config.yaml"
    cfg = yaml.safe_load(config.read_text(encoding="utf-8")) if config.is_file() else {}
    links = ROOT / str(cfg.get("trainer", {}).get("valid_alignments"))
    if not links.is_file():
        return None
    return diagonal_aer(*corpus_split(cfg["data"], split="valid"), links)


def read_curves(runs: Sequence[Path]) -> tuple[list[AerCurve], list[str]]:
    """(the runs' curves, the labels of runs without any validation AER); RecordError
    naming the file when a record is unreadable."""
    curves, without = [], []
    for label, run in zip(labels(runs), runs):
        points = [
            v for v in read_record(run).validations() if v.aer is not None and v.bleu is not None
        ]
        if points:
            ordered = tuple(sorted(points, key=lambda v: v.step))
            curves.append(AerCurve(label, ordered, run_diagonal(run)))
        else:
            without.append(label)
    return curves, without


def table(curves: Sequence[AerCurve]) -> list[str]:
    """The printed table (module docstring): the validations, then one summary per run."""
    rows = [[c.label, str(p.step), num(p.minutes, ".1f"), num(p.bleu), num(p.aer, ".4f")]
            for c in curves for p in c.points]  # fmt: skip
    summaries = []
    for c in curves:
        low = min(c.points, key=lambda p: (p.aer, p.step))
        first, last = c.points[0], c.points[-1]
        summaries.append(
            [c.label, str(len(c.points)), num(first.aer, ".4f"), num(last.aer, ".4f"),
             f"{num(low.aer, '.4f')} ({low.step})", f"{num(first.bleu)} → {num(last.bleu)}",
             num(spearman(c.bleu, c.aer), "+.2f"), num(c.diagonal, ".4f")]
        )  # fmt: skip
    head = ["run", "validations", "AER first", "AER last", "lowest AER (step)"]
    head += ["BLEU first → last", "Spearman ρ (BLEU, AER)", "diagonal AER"]
    return [
        *page_blocks.table(["run", "step", "minutes", "valid BLEU", "AER"], "lrrrr", rows),
        "",
        *page_blocks.table(head, "lrrrrrrr", summaries),
    ]


def figure(curves: Sequence[AerCurve]) -> Figure:
    """AER (lower is better) against validation BLEU, one line per run in step order; each
    run's first validation hollow, its last one labelled with its step, its diagonal dashed."""
    fig = page_blocks.figure(7.5, 5)
    aer = "AER of the attention against the valid links (lower: aligns better)"
    ax = page_blocks.panel(fig, 1, 1, "validation BLEU (sacrebleu)", aer)
    for c in curves:
        (line,) = ax.plot(c.bleu, c.aer, "o-", markersize=4, label=c.label)
        ax.plot(c.bleu[:1], c.aer[:1], "o", color=line.get_color(), markerfacecolor="white")
        if c.diagonal is not None:
            ax.axhline(c.diagonal, ls="--", lw=1, color=line.get_color(), label="its diagonal")
        ax.annotate(
            f"step {c.points[-1].step}",
            (c.bleu[-1], c.aer[-1]),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=7,
            color=line.get_color(),
        )
    ax.set_title("Does attention align once the model translates?", fontsize=11)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the PNG to write")
    args = parser.parse_args(argv)
    return report(lambda: write(args.runs, args.out))


def write(runs: Sequence[Path], out: Path) -> list[Path]:
    """Draw the runs' figure into ``out`` and print their table (module docstring)."""
    curves, without = read_curves(runs)
    if not curves:
        raise DataError(
            "none of the runs logged a validation AER (metrics.jsonl valid events' aer); "
            "train them with word links of the valid split: trainer.valid_alignments=FILE"
        )
    for label in without:
        print(f"note: {label} logged no validation AER; left out", file=sys.stderr)
    save_png(figure(curves), out)
    print("\n".join(table(curves)) + "\n")
    return [out]


if __name__ == "__main__":
    sys.exit(main())
