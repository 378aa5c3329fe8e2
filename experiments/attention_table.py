"""docs/results.md's attention table: a row per cell (model, score, mode), each measure's mean
± sample std over its seeds (attention_measures; AER toy_align: alignment_aer's runs), and its
analysis: silver AER against the diagonal, scorer × mode effects, the bootstrap, Luong et al."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments import luong_reference, page_blocks
from experiments.alignment_aer import GRID, UPDATES, AlignmentRun, grid_name, read_runs
from experiments.alignment_baselines import ScoredBaseline
from experiments.attention_measures import COLLAPSED, collapse_share, cross_map
from experiments.comparison_stats import (
    ALPHA,
    PairedBootstrap,
    cell_means_rows,
    fitted,
    interaction,
    marginal_table,
    mean_std,
    paired_bootstrap,
    paragraph,
)
from experiments.runs import Cell, Run, config, corpus_split, kept_hypotheses, scores_entry

GRID_MODEL = "rnn_luong"
"""The model whose scorer × mode grid the analysis fits (the other rows are tested against
its best cell by the bootstrap only)."""
FACTORS = ("scorer", "mode")
TRANSFORMER = ("scaled_dot, 4 heads", "global")
"""The Transformer row's score and mode labels (configs/model/transformer.yaml)."""
MEASURES = {
    "test BLEU": ("bleu", True, 2),
    "valid NLL": ("nll", False, 3),
    "AER silver": ("silver_aer", False, 3),
    "AER toy_align": ("toy_aer", False, 3),
}
"""Measure -> (its :class:`CellMeasures` field, higher is better, digits), in the order the
analysis writes them."""


def labels_of(cell: Cell) -> tuple[str, str, str]:
    """(model, score, mode) of a study cell."""
    o = cell.overrides
    if o["model"] == "transformer":
        return (o["model"], *TRANSFORMER)
    return o["model"], o["model.attention.score"], o["model.attention.mode"]


@dataclass(frozen=True)
class CellMeasures:
    """A row: its study cell (runs by seed) and its measures, one value per seed that has it."""

    cell: Cell
    bleu: tuple[float, ...]
    chrf: tuple[float, ...]
    nll: tuple[float, ...]
    toy_aer: tuple[float, ...]
    silver_aer: tuple[float, ...]
    entropy: tuple[float, ...]
    collapse: tuple[float, ...]

    @property
    def labels(self) -> tuple[str, str, str]:
        return labels_of(self.cell)

    @property
    def name(self) -> str:
        return " ".join(self.labels)

    @property
    def runs(self) -> tuple[Run, ...]:
        return self.cell.runs

    def values(self, measure: str) -> list[float]:
        """The seeds' values of one of :data:`MEASURES`, NaN left out."""
        return [v for v in getattr(self, MEASURES[measure][0]) if not math.isnan(v)]


def toy_records(results: Path) -> list[AlignmentRun]:
    """The synthetic task's records (results/alignment_*/<run>/) at the table's updates."""
    return [r for r in read_runs(results) if r.updates == UPDATES]


def _silver(run: Run) -> float | None:
    entry = scores_entry(run.folder / "eval" / "silver" / "scores.json")
    return None if entry is None or entry.get("aer") is None else float(entry["aer"])


def _share(run: Run) -> float | None:
    path = run.folder / "attention_map.json"
    if not path.is_file():
        return None
    return collapse_share(cross_map(json.loads(path.read_text(encoding="utf-8"))))


def measures(cells: Sequence[Cell], toy: Sequence[AlignmentRun] = ()) -> list[CellMeasures]:
    """Each study cell's measures (silver AER: eval/silver/scores.json; collapse share:
    attention_map.json; AER toy_align: the same cell's ``toy`` runs), in the order of
    alignment_aer's GRID (scorer-major, then the reference rows)."""
    out = []
    for cell in cells:
        runs = cell.runs
        mechanism = grid_name(*labels_of(cell))
        out.append(
            CellMeasures(
                cell,
                tuple(r.test_score("bleu") for r in runs),
                tuple(r.test_score("chrf") for r in runs),
                tuple(r.tested_nll for r in runs),
                tuple(t.aer for t in toy if t.mechanism == mechanism),
                tuple(v for v in map(_silver, runs) if v is not None),
                tuple(r.entropy for r in runs if r.entropy is not None),
                tuple(v for v in map(_share, runs) if v is not None),
            )
        )
    return sorted(out, key=lambda m: GRID.index(grid_name(*m.labels)))


def collapsed_text(shares: Sequence[float]) -> str:
    """'yes (0.93, 0.40)' when a seed's map is collapsed, 'no (...)', '–' without maps."""
    if not shares:
        return "–"
    flag = "yes" if any(s > COLLAPSED for s in shares) else "no"
    return f"{flag} ({', '.join(f'{s:.2f}' for s in shares)})"


COLUMNS = "seeds|test BLEU|test chrF|valid NLL|AER toy_align|AER silver|entropy|collapsed|machines"
"""The attention table's columns after the labels (:func:`columns`)."""


def columns(m: CellMeasures, labels: dict[str, str]) -> dict[str, str]:
    """Column -> the cell's entry; 'seeds': '1 of 2 (1)', its runs of the seeds its study
    asks for; 'machines': the ``labels`` (M1, ...) of the machine lines its runs ran on."""
    return {
        "seeds": m.cell.seeds_text,
        "test BLEU": mean_std(m.bleu),
        "test chrF": mean_std(m.chrf, 1),
        "valid NLL": mean_std(m.nll, 3),
        "AER toy_align": f"{mean_std(m.toy_aer, 3)} ({len(m.toy_aer)})",
        "AER silver": mean_std(m.silver_aer, 3),
        "entropy": mean_std(m.entropy),
        "collapsed": collapsed_text(m.collapse),
        "machines": ", ".join(sorted({labels[r.machine_line] for r in m.runs})) or "not yet run",
    }


def table(cells: Sequence[CellMeasures], labels: dict[str, str]) -> list[str]:
    """The Markdown rows of the attention table."""
    rows = [[*m.labels, *columns(m, labels).values()] for m in cells]
    return page_blocks.table(["model", "score", "mode", *COLUMNS.split("|")], "llllrrrrrrll", rows)


# ---- the analysis --------------------------------------------------------------------------


def _grid_rows(cells: Sequence[CellMeasures], measure: str) -> list[tuple[str, str, float]]:
    """(scorer, mode, value) of every seed's run of the :data:`GRID_MODEL` cells."""
    grid = [m for m in cells if m.labels[0] == GRID_MODEL]
    return [(m.labels[1], m.labels[2], v) for m in grid for v in m.values(measure)]


def grid_means(cells: Sequence[CellMeasures], measure: str) -> dict[tuple[str, str], float]:
    """{(scorer, mode): the seeds' mean} of the :data:`GRID_MODEL` cells that have one."""
    grid = [m for m in cells if m.labels[0] == GRID_MODEL and m.values(measure)]
    return {m.labels[1:]: statistics.fmean(m.values(measure)) for m in grid}


def bootstrap_of(cells: Sequence[CellMeasures], refs: Sequence[str]) -> PairedBootstrap | None:
    """Each measured cell against the :data:`GRID_MODEL` cell of best mean test BLEU (not the
    best row: a reference row ahead of the whole grid would tell no grid cells apart), over
    the baseline's seeds' kept test outputs concatenated in seed order; a cell lacking one of
    those seeds' outputs is left out."""
    kept = [m for m in cells if m.runs]
    grid = [m for m in kept if m.labels[0] == GRID_MODEL]
    if len(kept) < 2 or not grid or not refs:
        return None
    best = max(grid, key=lambda m: statistics.mean(m.bleu))
    seeds = [r.seed for r in best.runs]
    systems: dict[str, list[str]] = {}
    for m in [best, *(m for m in kept if m is not best)]:
        by_seed = {r.seed: r for r in m.runs}
        outputs = [kept_hypotheses(by_seed[s], len(refs)) if s in by_seed else None
                   for s in seeds]  # fmt: skip
        if all(lines is not None for lines in outputs):
            systems[m.name] = [line for lines in outputs if lines for line in lines]
    if len(systems) < 2 or best.name not in systems:
        return None
    return paired_bootstrap(list(refs) * len(seeds), systems, best.name)


def bootstrap_notes(cells: Sequence[CellMeasures], boot: PairedBootstrap) -> str:
    """The sentences after the bootstrap's: the measured cells it could not test, and the
    largest spread of one cell's seeds' test BLEU."""
    tested = {t.name for t in boot.systems}
    missing = [m.name for m in cells if m.runs and m.name not in tested]
    text = ""
    if missing:
        base = next(m for m in cells if m.name == boot.baseline)
        text += (
            " Left out of the bootstrap, without kept test outputs of each of the baseline's "
            f"seeds ({', '.join(str(r.seed) for r in base.runs)}): {', '.join(missing)}."
        )
    spread = [(max(m.bleu) - min(m.bleu), m) for m in cells if len(m.runs) > 1]
    if spread:
        width, m = max(spread, key=lambda x: x[0])
        text += (
            " Training variance shows in the table's ± instead: the seeds of one cell differ "
            f"by up to {width:.2f} BLEU ({m.name}: {' and '.join(f'{b:.2f}' for b in m.bleu)})."
        )
    return text


def analysis(
    cells: Sequence[CellMeasures],
    refs: Sequence[str],
    diagonal: ScoredBaseline | None = None,
) -> list[str]:
    """The verdict against the diagonal alignment, each scorer's and mode's marginal mean per
    measure, a paragraph per measure (main effects, the interaction test and, resolved, the
    cell means; for test BLEU the paired bootstrap), then Luong et al."""
    found = {n: fitted(_grid_rows(cells, n), up, FACTORS) for n, (_, up, _) in MEASURES.items()}
    fits = {name: fit for name, fit in found.items() if fit is not None}
    verdict = diagonal_verdict(cells, diagonal)
    if not fits:
        return [*verdict, "Not enough runs for the analysis yet."]
    lines = [
        *verdict,
        f"Marginal means over the {GRID_MODEL} grid (additive fit of scorer and mode over "
        "every seed's run; 95% intervals; a level whose difference to its factor's best is "
        "resolved, with Bonferroni-widened intervals, is marked *):",
        "",
        *marginal_table(
            {n: (f.a, f.b) if (f := fits.get(n)) else () for n in MEASURES},
            {n: digits for n, (_, _, digits) in MEASURES.items()},
        ),
        "",
    ]
    boot = bootstrap_of(cells, refs)
    for name, fit in fits.items():
        digits = MEASURES[name][2]
        crossed = interaction(_grid_rows(cells, name), FACTORS)
        tested = boot if name == "test BLEU" else None
        text = paragraph(fit, name, tested, digits=digits, crossed=crossed)
        lines += [text + (bootstrap_notes(cells, tested) if tested else ""), ""]
        if crossed is not None and crossed.p < ALPHA:
            lines += [*cell_means_rows(crossed, name, digits), ""]
    beating = {m.labels[1:] for m in beating_cells(cells, diagonal) if m.labels[0] == GRID_MODEL}
    return lines + luong_reference.comparison(
        grid_means(cells, "test BLEU"),
        grid_means(cells, "AER silver"),
        None if diagonal is None else diagonal.aer,
        beating,
    )


def test_split(cells: Sequence[CellMeasures]) -> tuple[str, list[str], list[str]]:
    """(corpus, test sources, test references) of the corpus the cells' runs trained on
    (runs.corpus_split); ('', [], []) without runs."""
    data = next((config(r)["data"] for m in cells for r in m.runs), None)
    return (data["name"] if data else "", *corpus_split(data))


# ---- against the diagonal alignment --------------------------------------------------------


def beating_cells(
    cells: Sequence[CellMeasures], diagonal: ScoredBaseline | None
) -> list[CellMeasures]:
    """The cells each of whose seeds' silver AER lies below the diagonal's AER − √2 h, h the
    half-width of its 95% interval over the test sentences: beyond the silver file's noise
    (a cell's AER taken as noisy as the diagonal's and independent of it)."""
    if diagonal is None:
        return []
    bar = diagonal.aer - math.sqrt(2.0) * diagonal.half_width
    return [m for m in cells if m.silver_aer and all(v < bar for v in m.silver_aer)]


def diagonal_verdict(cells: Sequence[CellMeasures], diagonal: ScoredBaseline | None) -> list[str]:
    """The paragraph reading AER silver against the alignment that reads no words: its AER and
    interval, how many cell means are at or above it, and the cells that beat it beyond the
    noise (:func:`beating_cells`), else the closest; [] without silver links."""
    if diagonal is None:
        return []
    h = diagonal.half_width
    bar = diagonal.aer - math.sqrt(2.0) * h
    text = (
        "The alignment that reads no words (target word j linked to source word "
        f"round(j·S/T)) scores AER {diagonal.aer:.3f} against the same silver links, 95% "
        f"interval {diagonal.low:.3f} to {diagonal.high:.3f} over the "
        f"{diagonal.scores.sentences} test sentences ({diagonal.samples} bootstrap "
        "resamples): the silver file's own noise. A cell beats it beyond that noise when each "
        f"of its seeds scores below {diagonal.aer:.3f} − √2 × {h:.3f} = "
        f"{bar:.3f} (its AER on the same sentences taken as noisy as the "
        "diagonal's and independent of it, which errs towards naming no cell)."
    )
    measured = [m for m in cells if m.silver_aer]
    if not measured:
        return [text + " No cell has a silver AER yet.", ""]
    worse = [m for m in measured if statistics.fmean(m.silver_aer) >= diagonal.aer]
    text += f" {len(worse)} of the {len(measured)} measured cells' means are at or above it"
    beat = beating_cells(measured, diagonal)
    if beat:
        named = ", ".join(f"{m.name} ({', '.join(f'{v:.3f}' for v in m.silver_aer)})" for m in beat)
        verb = "beats" if len(beat) == 1 else "beat"
        return [f"{text}; beyond the noise, {len(beat)} {verb} it: {named}.", ""]
    best = min(measured, key=lambda m: statistics.fmean(m.silver_aer))
    mean = statistics.fmean(best.silver_aer)
    where = f"{abs(diagonal.aer - mean):.3f} {'below' if mean < diagonal.aer else 'above'} it"
    return [
        f"{text}; no cell beats it beyond the noise (the closest, {best.name}, {mean:.3f}: "
        f"{where}).",
        "",
    ]


def brief(m: CellMeasures) -> str:
    """'test BLEU / test chrF / valid NLL' (mean ± std over seeds) of a cell, for the
    attention guide; 'not yet run' without runs."""
    if not m.runs:
        return "not yet run"
    n = f" ({len(m.runs)} seeds)" if len(m.runs) > 1 else ""
    return f"{mean_std(m.bleu)} / {mean_std(m.chrf, 1)} / {mean_std(m.nll, 3)}{n}"
