"""The attention table of docs/results.md: one row per cell (model, scorer, mode) with the
measures of issue 36, each the mean ± sample std over the cell's seeds.

- test BLEU and chrF, validation NLL of the tested (best valid BLEU) checkpoint (the ledger
  records);
- AER on the synthetic task: the same cell's own runs on ``data=toy_align``
  (configs/study/alignment_*.yaml, records in results/alignment_*/: experiments/alignment_aer.py);
- AER against the kept silver alignments of ding_de_en's test split and the cross-attention's
  mean normalised entropy at the last validation (the record's ``extra``,
  experiments/attention_measures.py);
- *collapsed*: where more than 80% of the rows of the fixed sentence's map peak on one source
  column in a seed's map (the ``<stem>.attn.json`` beside the record), with the shares.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments import luong_reference
from experiments.alignment_aer import UPDATES, AlignmentRun, grid_name, read_runs
from experiments.alignment_baselines import ScoredBaseline
from experiments.attention_measures import COLLAPSED, collapse_share, cross_map
from experiments.comparison_stats import (
    MainEffects,
    PairedBootstrap,
    cell_means_rows,
    interaction,
    main_effects,
    marginal_rows,
    mean_std,
    paired_bootstrap,
    paragraph,
)
from experiments.kept_outputs import kept_lines, test_pairs
from experiments.ledger import Record
from experiments.results_plan import Cell, Plan


@dataclass(frozen=True)
class CellMeasures:
    """Everything the table shows of one cell (lists: one value per seed recorded)."""

    cell: Cell
    records: tuple[Record, ...]
    toy_aer: tuple[float, ...]
    silver_aer: tuple[float, ...]
    entropy: tuple[float, ...]
    collapse: tuple[float, ...]

    @property
    def bleu(self) -> list[float]:
        return [float(r.test["bleu"]) for r in self.records]

    @property
    def chrf(self) -> list[float]:
        return [float(r.test["chrf"]) for r in self.records]

    @property
    def nll(self) -> list[float]:
        return [r.tested_valid_nll for r in self.records]


def toy_records(results: Path) -> list[AlignmentRun]:
    """The synthetic task's records (results/alignment_*/<run>/) at its update count."""
    return [r for r in read_runs(results) if r.updates == UPDATES]


def _map_share(ledger: Path, record: Record) -> float | None:
    path = ledger / f"{record.stem}.attn.json"
    if not path.is_file():
        return None
    return collapse_share(cross_map(json.loads(path.read_text(encoding="utf-8"))))


def measures(
    plan: Plan,
    records: Sequence[Record],
    ledger: Path,
    toy: Sequence[AlignmentRun],
    table: str = "attention",
) -> list[CellMeasures]:
    """The cells of ``plan``'s ``table`` (an attention table's) in grid order, with what the
    ledger holds of each."""
    out = []
    for cell in (c for c in plan.cells if c.table == table):
        got = tuple(sorted((r for r in records if r.key == plan.keys[cell]), key=lambda r: r.seed))
        label = cell.label
        name = grid_name(label["model"], label["score"], label["mode"])
        toy_aer = tuple(t.aer for t in toy if t.mechanism == name)
        silver = tuple(float(r.extra["silver"]["aer"]) for r in got if "silver" in r.extra)
        entropy = tuple(
            float(r.extra["attention_entropy"])
            for r in got
            if isinstance(r.extra.get("attention_entropy"), int | float)
        )
        shares = tuple(s for s in (_map_share(ledger, r) for r in got) if s is not None)
        out.append(CellMeasures(cell, got, toy_aer, silver, entropy, shares))
    return out


def collapsed_text(shares: Sequence[float]) -> str:
    """'yes (0.93, 0.40)' when a seed's map is collapsed, 'no (...)', '–' without maps."""
    if not shares:
        return "–"
    flag = "yes" if any(s > COLLAPSED for s in shares) else "no"
    return f"{flag} ({', '.join(f'{s:.2f}' for s in shares)})"


def seeds_text(m: CellMeasures, wanted: int) -> str:
    """'1 of 2 (1)': the cell's recorded runs of the seeds wanted, and their seeds."""
    seeds = ", ".join(str(r.seed) for r in m.records)
    return f"{len(m.records)} of {wanted}" + (f" ({seeds})" if seeds else "")


def machines_text(m: CellMeasures, labels: dict[str, str]) -> str:
    """The labels (M1, ...) of the machines the cell's runs trained on, or 'not yet run'."""
    return ", ".join(sorted({labels[r.machine_line] for r in m.records})) or "not yet run"


def table(cells: Sequence[CellMeasures], wanted_seeds: int, labels: dict[str, str]) -> list[str]:
    """The Markdown rows of the attention table."""
    rows = [
        "| model | score | mode | seeds | test BLEU | test chrF | valid NLL | AER toy_align "
        "| AER silver | entropy | collapsed | machines |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for m in cells:
        label = m.cell.label
        rows.append(
            f"| {label['model']} | {label['score']} | {label['mode']} "
            f"| {seeds_text(m, wanted_seeds)} | {mean_std(m.bleu)} | {mean_std(m.chrf, 1)} "
            f"| {mean_std(m.nll, 3)} | {mean_std(m.toy_aer, 3)} ({len(m.toy_aer)}) "
            f"| {mean_std(m.silver_aer, 3)} | {mean_std(m.entropy)} "
            f"| {collapsed_text(m.collapse)} | {machines_text(m, labels)} |"
        )
    return rows


# ---- the analysis --------------------------------------------------------------------------

GRID_MODEL = "rnn_luong"
"""The model whose scorer × mode grid the main effects are fitted on (the reference rows
are outside the grid: they enter the bootstrap, not the fit)."""
MEASURES: tuple[tuple[str, bool, int], ...] = (
    ("test BLEU", True, 2),
    ("valid NLL", False, 3),
    ("AER silver", False, 3),
    ("AER toy_align", False, 3),
)
"""(measure, higher is better, digits) of the analysis, in the order it is written."""
MIN_RUNS = 3
ALPHA = 0.05
"""Level of the interaction tests (a resolved one shows its cell means)."""


def _values(m: CellMeasures, measure: str) -> tuple[float, ...]:
    return {
        "test BLEU": tuple(m.bleu),
        "valid NLL": tuple(m.nll),
        "AER silver": m.silver_aer,
        "AER toy_align": m.toy_aer,
    }[measure]


def effects_of(cells: Sequence[CellMeasures], measure: str, higher: bool) -> MainEffects | None:
    """Scorer and mode main effects of one measure over the grid's runs (Bonferroni-widened
    differences); None when the runs do not yet support a fit."""
    rows = _grid_rows(cells, measure)
    if len(rows) < MIN_RUNS:
        return None
    try:
        return main_effects(rows, higher, ("scorer", "mode"), bonferroni=True)
    except ValueError:  # the observed cells do not connect every level yet
        return None


def cell_name(cell: Cell) -> str:
    return " ".join(cell.label[k] for k in ("model", "score", "mode"))


def bootstrap_of(
    cells: Sequence[CellMeasures], ledger: Path, refs: Sequence[str]
) -> PairedBootstrap | None:
    """Each cell against the :data:`GRID_MODEL` cell of best mean test BLEU (sacrebleu's paired
    bootstrap, 1,000 resamples, seed 12345) over that cell's seeds' test outputs, concatenated
    in seed order; cells lacking one of those seeds' kept outputs (experiments/kept_outputs.py
    ``kept_lines``) are left out. Its paragraph Holm-adjusts the p-values over the cells
    tested (comparison_stats ``holm``); it resamples sentences, not training runs. The
    baseline is the grid's best, not the best row: a reference row ahead of every grid cell
    would separate from each of them and tell none apart; it is tested against the grid's
    best like any other cell."""
    kept = [m for m in cells if m.records]
    grid = [m for m in kept if m.cell.label["model"] == GRID_MODEL]
    if len(kept) < 2 or not grid or not refs:
        return None
    best = max(grid, key=lambda m: statistics.mean(m.bleu))
    seeds = [r.seed for r in best.records]
    systems: dict[str, list[str]] = {}
    for m in [best, *(m for m in kept if m is not best)]:
        by_seed = {r.seed: r for r in m.records}
        outputs = [kept_lines(by_seed[s], ledger, len(refs)) if s in by_seed else None
                   for s in seeds]  # fmt: skip
        if all(lines is not None for lines in outputs):
            systems[cell_name(m.cell)] = [line for lines in outputs if lines for line in lines]
    if len(systems) < 2 or cell_name(best.cell) not in systems:
        return None
    return paired_bootstrap(list(refs) * len(seeds), systems, cell_name(best.cell))


def left_out_sentence(cells: Sequence[CellMeasures], boot: PairedBootstrap) -> str:
    """' Left out of the bootstrap ...: a, b.' naming the measured cells it could not test (no
    kept outputs for one of the baseline's seeds); '' when it tested every one."""
    tested = {t.name for t in boot.systems}
    missing = [cell_name(m.cell) for m in cells if m.records and cell_name(m.cell) not in tested]
    if not missing:
        return ""
    base = next(m for m in cells if cell_name(m.cell) == boot.baseline)
    seeds = ", ".join(str(r.seed) for r in base.records)
    return (
        f" Left out of the bootstrap, without kept test outputs of each of the baseline's "
        f"seeds ({seeds}): {', '.join(missing)}."
    )


def _grid_rows(cells: Sequence[CellMeasures], measure: str) -> list[tuple[str, str, float]]:
    """(scorer, mode, value) of every seed's run of the :data:`GRID_MODEL` cells."""
    return [
        (m.cell.label["score"], m.cell.label["mode"], v)
        for m in cells
        if m.cell.label["model"] == GRID_MODEL
        for v in _values(m, measure)
        if not math.isnan(v)
    ]


def seed_spread_sentence(cells: Sequence[CellMeasures]) -> str:
    """' Training variance ...: the seeds of one cell differ by up to D BLEU (cell: a, b).'
    for the cell whose seeds' test BLEU lie furthest apart; '' with no cell of two seeds."""
    spread = [(max(m.bleu) - min(m.bleu), m) for m in cells if len(m.records) > 1]
    if not spread:
        return ""
    width, m = max(spread, key=lambda x: x[0])
    seeds = " and ".join(f"{b:.2f}" for b in m.bleu)
    return (
        " Training variance shows in the table's ± instead: the seeds of one cell differ by "
        f"up to {width:.2f} BLEU ({cell_name(m.cell)}: {seeds})."
    )


def analysis(
    cells: Sequence[CellMeasures],
    ledger: Path,
    refs: Sequence[str],
    diagonal: ScoredBaseline | None = None,
) -> list[str]:
    """The generated analysis: the verdict against the diagonal alignment (``diagonal``:
    its silver AER, :func:`diagonal_verdict`), a table of each scorer's and mode's marginal
    mean with its 95% interval per measure, then one paragraph per measure with the scorer ×
    mode interaction test and, where it is resolved, the cell means
    (experiments/comparison_stats.py), then the comparison with Luong et al."""
    fits = {name: effects_of(cells, name, higher) for name, higher, _ in MEASURES}
    verdict = diagonal_verdict(cells, diagonal)
    if all(f is None for f in fits.values()):
        return [*verdict, "Not enough runs for the analysis yet."]
    head = [name for name, _, _ in MEASURES]
    lines = [
        *verdict,
        f"Marginal means over the {GRID_MODEL} grid (additive fit of scorer and mode over "
        "every seed's run; 95% intervals; a level whose difference to its factor's best is "
        "resolved, with Bonferroni-widened intervals, is marked *):",
        "",
        "| factor | level | " + " | ".join(head) + " |",
        "|---|---|" + "---:|" * len(head),
    ]
    factors = {name: () if f is None else (f.a, f.b) for name, f in fits.items()}
    lines += marginal_rows(factors, {name: digits for name, _, digits in MEASURES})
    boot = bootstrap_of(cells, ledger, refs)
    lines.append("")
    for name, _, digits in MEASURES:
        fit = fits[name]
        if fit is None:
            continue
        crossed = interaction(_grid_rows(cells, name), ("scorer", "mode"))
        tested = boot if name == "test BLEU" else None
        text = paragraph(fit, name, tested, digits=digits, crossed=crossed)
        if tested is not None:
            text += left_out_sentence(cells, tested) + seed_spread_sentence(cells)
        lines += [text, ""]
        if crossed is not None and crossed.p < ALPHA:
            lines += [*cell_means_rows(crossed, name, digits), ""]
    return lines + luong_reference.comparison(
        grid_means(cells, "test BLEU"),
        grid_means(cells, "AER silver"),
        None if diagonal is None else diagonal.aer,
        beating_keys(cells, diagonal),
    )


def grid_means(cells: Sequence[CellMeasures], measure: str) -> dict[tuple[str, str], float]:
    """{(scorer, mode): mean of ``measure`` over the cell's seeds} of the grid's measured
    cells."""
    means = {}
    for m in cells:
        values = [v for v in _values(m, measure) if not math.isnan(v)]
        if m.cell.label["model"] == GRID_MODEL and values:
            means[(m.cell.label["score"], m.cell.label["mode"])] = statistics.fmean(values)
    return means


def test_split(plan: Plan, root: Path) -> tuple[str, list[str], list[str]]:
    """(corpus name, test sources, test references) of the attention table's corpus
    (experiments/kept_outputs.py ``test_pairs``, prepared once under ``root``/data); empty
    lists when the table names no corpus, ``CorpusUnavailable`` when it does not prepare."""
    cells = [c for c in plan.cells if c.table == "attention"]
    data = plan.settings.get(cells[0], {}).get("data") if cells else None
    data = data if isinstance(data, dict) else None
    return (str((data or {}).get("name", "")), *test_pairs(data, root))


def beating_cells(
    cells: Sequence[CellMeasures], diagonal: ScoredBaseline | None
) -> list[CellMeasures]:
    """The cells each of whose seeds scores a silver AER below the diagonal's by more than
    √2 × the half-width of the diagonal's 95% bootstrap interval (:func:`noise_margin`)."""
    if diagonal is None:
        return []
    bar = diagonal.aer - noise_margin(diagonal)
    return [m for m in cells if m.silver_aer and all(v < bar for v in m.silver_aer)]


def beating_keys(
    cells: Sequence[CellMeasures], diagonal: ScoredBaseline | None
) -> set[tuple[str, str]]:
    """(scorer, mode) of the :data:`GRID_MODEL` cells of :func:`beating_cells`."""
    return {
        (m.cell.label["score"], m.cell.label["mode"])
        for m in beating_cells(cells, diagonal)
        if m.cell.label["model"] == GRID_MODEL
    }


def noise_margin(diagonal: ScoredBaseline) -> float:
    """How far below the diagonal a cell's AER must lie to beat it beyond the silver file's
    noise: √2 × the half-width h of the diagonal's 95% interval over the test sentences.
    A cell's AER on the same sentences is taken to be as noisy as the diagonal's and
    independent of it (the difference's interval is then √(h² + h²) wide each side); where
    the sentences hard for one are hard for the other too, the true margin is smaller, so
    the test errs towards naming no cell."""
    return math.sqrt(2.0) * diagonal.half_width


def diagonal_verdict(cells: Sequence[CellMeasures], diagonal: ScoredBaseline | None) -> list[str]:
    """The paragraph that reads the AER silver column against the alignment that reads no
    words: its AER and interval, how many cell means are at or above it, and the cells that
    beat it beyond the silver file's noise (:func:`beating_cells`), or the closest one when
    none does; [] without silver links."""
    if diagonal is None:
        return []
    measured = [m for m in cells if m.silver_aer]
    h, margin = diagonal.half_width, noise_margin(diagonal)
    text = (
        "The alignment that reads no words (target word j linked to source word "
        f"round(j·S/T)) scores AER {diagonal.aer:.3f} against the same silver links, 95% "
        f"interval {diagonal.low:.3f} to {diagonal.high:.3f} over the "
        f"{diagonal.scores.sentences} test sentences ({diagonal.samples} bootstrap "
        "resamples): the silver file's own noise. A cell beats it beyond that noise when each "
        f"of its seeds scores below {diagonal.aer:.3f} − √2 × {h:.3f} = "
        f"{diagonal.aer - margin:.3f} (its AER on the same sentences taken as noisy as the "
        "diagonal's and independent of it, which errs towards naming no cell)."
    )
    if not measured:
        return [text + " No cell has a silver AER yet.", ""]
    worse = [m for m in measured if statistics.fmean(m.silver_aer) >= diagonal.aer]
    text += f" {len(worse)} of the {len(measured)} measured cells' means are at or above it"
    beat = beating_cells(measured, diagonal)
    if beat:
        named = ", ".join(
            f"{cell_name(m.cell)} ({', '.join(f'{v:.3f}' for v in m.silver_aer)})" for m in beat
        )
        verb = "beats" if len(beat) == 1 else "beat"
        return [f"{text}; beyond the noise, {len(beat)} {verb} it: {named}.", ""]
    best = min(measured, key=lambda m: statistics.fmean(m.silver_aer))
    gap = diagonal.aer - statistics.fmean(best.silver_aer)
    where = f"{abs(gap):.3f} {'below' if gap > 0 else 'above'} it"
    return [
        f"{text}; no cell beats it beyond the noise (the closest, {cell_name(best.cell)}, "
        f"{statistics.fmean(best.silver_aer):.3f}: {where}).",
        "",
    ]


def brief(records: Sequence[Record]) -> str:
    """'test BLEU / test chrF / valid NLL' (mean ± std over seeds) of one cell, for the
    attention guide's rows; 'not yet run' without records."""
    if not records:
        return "not yet run"
    n = f" ({len(records)} seeds)" if len(records) > 1 else ""
    bleu = mean_std([float(r.test["bleu"]) for r in records])
    chrf = mean_std([float(r.test["chrf"]) for r in records], 1)
    return f"{bleu} / {chrf} / {mean_std([r.tested_valid_nll for r in records], 3)}{n}"
