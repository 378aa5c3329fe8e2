"""experiments/attention_table.py's paired bootstrap (every cell against the best cell of the
scorer × mode grid) and its verdict against the diagonal alignment, from toy records with kept
test outputs and planted silver AER (no training)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers.ledger_records import keep_outputs, record_for, toy_plan

from attnmt.decode.alignment_error import AlignmentScores
from experiments import attention_table as at
from experiments import luong_reference
from experiments.alignment_baselines import ScoredBaseline
from experiments.ledger import Record
from experiments.results_plan import Plan

WORDS = [f"w{i}" for i in range(14)]  # a toy vocabulary
REFS = [" ".join(WORDS[(i * 5 + j * 3) % len(WORDS)] for j in range(6 + i % 4)) for i in range(30)]
TRANSFORMER = "transformer scaled_dot, 4 heads global"
KEEP = {
    TRANSFORMER: 20,  # every word: far ahead of the grid
    "rnn_luong general local_m": 5,  # the grid's best
    "rnn_luong concat local_m": 4,  # a word a sentence behind it
    "rnn_luong dot hard": 1,  # far behind
}
"""Cell -> how many words of each reference its toy outputs keep."""
BLEU = {TRANSFORMER: 30.0, "rnn_luong general local_m": 6.0, "rnn_luong concat local_m": 5.0,
        "rnn_luong dot hard": 1.0}  # fmt: skip
"""Cell -> the test BLEU its records claim (ranks the cells; the bootstrap scores outputs)."""


def outputs(cell: str, seed: int) -> list[str]:
    return [" ".join(r.split()[: KEEP[cell] + (i + seed) % 2]) for i, r in enumerate(REFS)]


def kept(plan: Plan, tmp_path: Path) -> tuple[list[Record], Path]:
    """Seeds 1 and 2 of each cell of KEEP, their test outputs kept in the ledger."""
    ledger = tmp_path / "runs"
    records = []
    for cell in KEEP:
        for seed in (1, 2):
            record = record_for(plan, cell, seed=seed, bleu=BLEU[cell], table="attention")
            keep_outputs(record, outputs(cell, seed), tmp_path, ledger)
            records.append(record)
    return records, ledger


def test_the_baseline_is_the_grids_best_cell_not_the_reference_row(tmp_path: Path) -> None:
    """The Transformer reference row is far ahead of every rnn_luong cell: the bootstrap still
    tests each cell against rnn_luong general local_m, so the grid's close cell (one word a
    sentence behind) and its far one are told apart, and the Transformer is tested against the
    grid's best like any cell (ahead of it, resolved)."""
    plan = toy_plan([])
    records, ledger = kept(plan, tmp_path)
    cells = at.measures(plan, records, ledger, ())
    boot = at.bootstrap_of(cells, ledger, REFS)
    assert boot is not None
    assert boot.baseline == "rnn_luong general local_m" and boot.segments == 2 * len(REFS)
    tests = {t.name: t for t in boot.systems}
    assert set(tests) == set(KEEP)
    assert tests[boot.baseline].p_value is None and tests[boot.baseline].diff == 0.0
    far = tests["rnn_luong dot hard"]
    assert far.diff < -10 and far.p_value is not None and far.p_value < 0.05
    ahead = tests[TRANSFORMER]
    assert ahead.diff > 10 and ahead.p_value is not None and ahead.p_value < 0.05
    close = tests["rnn_luong concat local_m"]
    assert far.diff < close.diff < 0 and close.p_value is not None
    assert "Left out of the bootstrap" not in at.bootstrap_notes(cells, boot)


def test_without_a_measured_grid_cell_there_is_no_bootstrap(tmp_path: Path) -> None:
    """Only the reference row (and nothing of rnn_luong) recorded: nothing to test against."""
    plan = toy_plan([])
    records, ledger = kept(plan, tmp_path)
    only_reference = [r for r in records if r.cell["model"] != at.GRID_MODEL]
    cells = at.measures(plan, only_reference, ledger, ())
    assert at.bootstrap_of(cells, ledger, REFS) is None


def test_a_cell_without_the_baselines_seeds_is_left_out(tmp_path: Path) -> None:
    """A cell whose seed 2 kept no outputs has nothing to pair with the baseline's seed 2."""
    missing = "rnn_luong concat local_m"
    plan = toy_plan([])
    records, ledger = kept(plan, tmp_path)
    for r in records:
        if r.seed == 2 and " ".join(r.cell[k] for k in ("model", "score", "mode")) == missing:
            del r.extra["hypotheses"]
    cells = at.measures(plan, records, ledger, ())
    boot = at.bootstrap_of(cells, ledger, REFS)
    assert boot is not None and missing not in {t.name for t in boot.systems}
    assert at.bootstrap_notes(cells, boot).startswith(
        " Left out of the bootstrap, without kept test outputs of each of the baseline's "
        f"seeds (1, 2): {missing}. Training variance shows"
    )


def test_valid_nll_is_the_tested_checkpoints(tmp_path: Path) -> None:
    """A run whose BLEU peaks mid-way (and ties later) while its NLL rises after: the table's
    NLL is that of the first best-BLEU validation, the checkpoint the test decoded."""
    plan = toy_plan([])
    curve = [
        [1000, 5.0, 4.0, 2.0, 20.0],
        [2000, 10.0, 3.5, 4.0, 25.0],  # best BLEU first reached here: the tested checkpoint
        [3000, 15.0, 3.7, 4.0, 25.0],
        [4000, 20.0, 3.9, 3.0, 24.0],
    ]
    record = record_for(plan, TRANSFORMER, bleu=4.0, table="attention", curve=curve)
    assert record.tested_valid_nll == 3.5 and record.final_valid_nll == 3.9
    (cell,) = [m for m in at.measures(plan, [record], tmp_path, ()) if m.records]
    assert cell.nll == [3.5]
    assert at.brief([record]).endswith("/ 3.500")
    empty = record_for(plan, TRANSFORMER, table="attention", curve=[])
    assert str(empty.tested_valid_nll) == "nan"


# ---- the verdict against the diagonal alignment --------------------------------------------


def diagonal(aer: float, low: float, high: float) -> ScoredBaseline:
    """A diagonal alignment's silver score with its bootstrap interval, planted."""
    scores = AlignmentScores(aer, 1 - aer, 1 - aer, 100, 100, 100, 45, 45, 10)
    return ScoredBaseline(scores, low, high, 1000)


def silver_cells(plan: Plan, aer: dict[str, tuple[float, ...]]) -> list[at.CellMeasures]:
    """The plan's attention cells, those named in ``aer`` with one record a seed holding
    that seed's silver AER."""
    records = []
    for cell, values in aer.items():
        for seed, value in enumerate(values, 1):
            record = record_for(plan, cell, seed=seed, table="attention")
            record.extra["silver"] = {"aer": value}
            records.append(record)
    return at.measures(plan, records, Path("."), ())


def test_a_cell_that_clearly_beats_the_diagonal_is_named() -> None:
    """Diagonal 0.550, interval 0.530 to 0.570: h = 0.020, the bar 0.550 − √2·0.020 = 0.522.
    general local_m (0.300, 0.320) is below it in both seeds: named. concat local_m (0.510,
    0.530) has a mean below the diagonal but a seed above the bar: not named. Means at or
    above 0.550: dot hard's 0.710 alone, 1 of 3."""
    plan = toy_plan([])
    aer = {
        "rnn_luong general local_m": (0.30, 0.32),
        "rnn_luong concat local_m": (0.51, 0.53),
        "rnn_luong dot hard": (0.70, 0.72),
    }
    cells = silver_cells(plan, aer)
    base = diagonal(0.55, 0.53, 0.57)
    assert at.noise_margin(base) == pytest.approx(math.sqrt(2) * 0.02)
    assert [m.name for m in at.beating_cells(cells, base)] == ["rnn_luong general local_m"]
    (text, blank) = at.diagonal_verdict(cells, base)
    assert blank == ""
    assert "scores AER 0.550 against the same silver links, 95% interval 0.530 to 0.570" in text
    assert "each of its seeds scores below 0.550 − √2 × 0.020 = 0.522" in text
    assert text.endswith(
        "1 of the 3 measured cells' means are at or above it; beyond the noise, 1 beats it: "
        "rnn_luong general local_m (0.300, 0.320)."
    )
    (luong, _) = luong_reference.comparison(
        {}, at.grid_means(cells, "AER silver"), base.aer, {("general", "local_m")}
    )
    assert "only local_m general beats the diagonal, so their order is not tested here" in luong


def test_no_cell_is_named_when_all_are_at_or_worse_than_the_diagonal() -> None:
    """Every cell at or above the diagonal's 0.554: none named, and the closest cell's gap
    stated (additive local_m 0.560 + 0.566 → 0.563, 0.009 above it); no ranking of the cells
    of Luong et al. on this column."""
    plan = toy_plan([])
    aer = {
        "rnn_luong general local_m": (0.57, 0.58),
        "rnn_luong general local_p": (0.70, 0.78),
        "rnn_luong location global": (0.66, 0.69),
        "rnn_luong additive local_m": (0.560, 0.566),
    }
    cells = silver_cells(plan, aer)
    base = diagonal(0.554, 0.536, 0.572)
    assert at.beating_cells(cells, base) == []
    (text, _) = at.diagonal_verdict(cells, base)
    assert text.endswith(
        "4 of the 4 measured cells' means are at or above it; no cell beats it beyond the "
        "noise (the closest, rnn_luong additive local_m, 0.563: 0.009 above it)."
    )
    (luong, _) = luong_reference.comparison({}, at.grid_means(cells, "AER silver"), base.aer, ())
    assert (
        "here local_m general 0.575, local_p general 0.740, global location 0.675, the "
        "diagonal alignment 0.554; beyond the silver file's noise none of them beats the "
        "diagonal, so their order is not tested here."
    ) in luong
    assert "ranks 1 of 3" not in luong


def test_without_silver_links_there_is_no_verdict() -> None:
    plan = toy_plan([])
    assert at.diagonal_verdict(silver_cells(plan, {}), None) == []
    (text, _) = at.diagonal_verdict(silver_cells(plan, {}), diagonal(0.5, 0.49, 0.51))
    assert text.endswith("No cell has a silver AER yet.")
