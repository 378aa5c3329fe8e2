"""experiments/attention_table.py from planted run folders of the results_attention* studies
(no training): the table's rows, the paired bootstrap against the grid's best cell, the verdict
against the diagonal alignment; the check at the preset's size differs from the table only in
the model's size."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from helpers.alignment_runs import LUONG
from helpers.alignment_runs import plant as plant_toy
from helpers.run_folders import plant_run

from attnmt.decode.alignment_error import AlignmentScores
from experiments import attention_table as at
from experiments import luong_reference
from experiments.alignment_baselines import ScoredBaseline
from experiments.runs import study_cells
from experiments.study import load_study

STUDIES = Path(__file__).resolve().parents[1] / "configs" / "study"
TABLE = ("results_attention", "results_attention_reference", "results_attention_transformer")
PRESET = "results_attention_preset"
CONFIG = {"data": {"name": "toy"}, "trainer": {"max_steps": 5500}, "seed": 1}
"""A run's .hydra/config.yaml, as far as the pages read it."""
TRANSFORMER = "transformer scaled_dot, 4 heads global"


def plant(
    results: Path,
    study: str,
    seed: int,
    *grid: str,
    bleu: float = 5.0,
    silver: float | None = None,
    entropy: float | None = None,
    cross: list[list[float]] | None = None,
    hypotheses: list[str] | None = None,
) -> Path:
    """The folder of ``study``'s run of seed ``seed`` whose grid holds ``grid``: plant_run's,
    with the last validation's cross-attention entropy, eval/silver/scores.json (its AER) and
    attention_map.json (the fixed sentence's map ``cross``) where given."""
    spec = load_study(STUDIES / f"{study}.yaml")
    run = next(r for r in spec.runs if {*grid, f"seed={seed}"} <= set(r.grid))
    overrides = [*spec.overrides, *run.grid]
    folder = plant_run(results, study, run.name, overrides, bleu, CONFIG, hypotheses)
    if entropy is not None:
        events = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        events[-1]["attention_entropy_norm"] = {"cross": entropy}
        (folder / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    if silver is not None:
        (folder / "eval" / "silver").mkdir(parents=True)
        entry = {"test-beam1": {"beam": 1, "aer": silver}}
        (folder / "eval" / "silver" / "scores.json").write_text(json.dumps(entry))
    if cross is not None:
        (folder / "attention_map.json").write_text(
            json.dumps({"layer": None, "maps": {"cross": cross}})
        )
    return folder


def cells(results: Path, *studies: str, toy: Path | None = None) -> list[at.CellMeasures]:
    found = [
        c for s in studies or TABLE for c in study_cells(results, load_study(STUDIES / f"{s}.yaml"))
    ]
    return at.measures(found, at.toy_records(toy) if toy else ())


def test_the_table_rows_come_from_the_run_folders(tmp_path: Path) -> None:
    """Two seeds of rnn_luong dot global on two machines: mean ± std of test BLEU and chrF, the
    tested checkpoint's NLL, silver AER, entropy, seed 1's collapsed map; the toy_align AER of
    the same cell's synthetic runs at the table's updates only. Rows: the grid scorer-major,
    then rnn_bahdanau per mode, then the Transformer; unrun cells say so."""
    results = tmp_path / "results"
    dot = ("model.attention.score=dot", "model.attention.mode=global")
    collapsed = [[0.9, 0.1], [0.8, 0.2], [0.6, 0.4]]  # every row peaks on source column 0
    plant(results, TABLE[0], 1, *dot, bleu=1.5, silver=0.3, entropy=0.5, cross=collapsed)
    other = plant(results, TABLE[0], 2, *dot, bleu=2.5, silver=0.5, entropy=0.7)
    summary = json.loads((other / "summary.json").read_text())
    summary["machine"] = {**summary["machine"], "cpu": {"name": "Other CPU"}}
    (other / "summary.json").write_text(json.dumps(summary))
    toy = tmp_path / "toy"
    toy_dot = (*LUONG, "model.attention.score=dot", "model.attention.mode=global")
    plant_toy(toy, "alignment_luong", toy_dot, 1, 0.2)
    plant_toy(toy, "alignment_luong", toy_dot, 2, 0.4)
    plant_toy(toy, "alignment_luong_long", toy_dot, 1, 0.9, updates=99)  # another length
    plant_toy(toy, "alignment_transformer", ("data=toy_align", "model=transformer_tiny"), 1, 0.5)
    measured = cells(results, toy=toy)
    runs = measured[0].runs
    labels = {runs[0].machine_line: "M1", runs[1].machine_line: "M2"}
    rows = at.table(measured, labels)
    assert rows[:2] == [
        "| model | score | mode | seeds | test BLEU | test chrF | valid NLL | AER toy_align "
        "| AER silver | entropy | collapsed | machines |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    assert len(rows) == 2 + 7 * 4 + 4 + 1
    assert rows[2] == (
        "| rnn_luong | dot | global | 2 of 2 (1, 2) | 2.00 ± 0.71 | 22.0 ± 0.7 | 3.500 ± 0.000 "
        "| 0.300 ± 0.141 (2) | 0.400 ± 0.141 | 0.60 ± 0.14 | yes (1.00) | M1, M2 |"
    )
    assert rows[3] == (
        "| rnn_luong | dot | local_m | 0 of 2 | – | – | – | – (0) | – | – | – | not yet run |"
    )
    scores = ("dot", "scaled_dot", "general", "additive", "concat", "cosine", "location")
    assert [r.split(" | ")[1:3] for r in rows[2:30:4]] == [[s, "global"] for s in scores]
    assert [r.split(" | ")[:3] for r in rows[-5:-1]] == [
        ["| rnn_bahdanau", "additive", m] for m in ("global", "local_m", "local_p", "hard")
    ]
    assert rows[-1] == (
        "| transformer | scaled_dot, 4 heads | global | 0 of 2 | – | – | – | 0.500 (1) | – | – "
        "| – | not yet run |"
    )


# ---- the paired bootstrap --------------------------------------------------------------------

WORDS = [f"w{i}" for i in range(14)]  # a toy vocabulary
REFS = [" ".join(WORDS[(i * 5 + j * 3) % len(WORDS)] for j in range(6 + i % 4)) for i in range(30)]
CONCAT = ("model.attention.score=concat", "model.attention.mode=local_m")
KEEP = {
    (): 20,  # the Transformer: every word, far ahead of the grid
    ("model.attention.score=general", "model.attention.mode=local_m"): 5,  # the grid's best
    CONCAT: 4,  # a word a sentence behind it
    ("model.attention.score=dot", "model.attention.mode=hard"): 1,  # far behind
}
"""A cell's grid -> how many words of each reference its planted test outputs keep."""
BLEU = dict(zip(KEEP, (30.0, 6.0, 5.0, 1.0)))
"""A cell's grid -> the test BLEU its summary claims (ranks the cells; the bootstrap scores
outputs); concat local_m's seed 2 claims 0.80 more."""


def outputs(keep: int, seed: int) -> list[str]:
    return [" ".join(r.split()[: keep + (i + seed) % 2]) for i, r in enumerate(REFS)]


def kept(results: Path, skip: tuple[str, ...] | None = None) -> list[at.CellMeasures]:
    """Seeds 1 and 2 of each cell of KEEP with their test outputs (but seed 2 of ``skip``)."""
    for grid, keep in KEEP.items():
        study = TABLE[2] if not grid else TABLE[0]
        for seed in (1, 2):
            lines = None if seed == 2 and grid == skip else outputs(keep, seed)
            bleu = BLEU[grid] + (0.8 if (grid, seed) == (CONCAT, 2) else 0.0)
            plant(results, study, seed, *grid, bleu=bleu, hypotheses=lines)
    return cells(results)


def test_the_baseline_is_the_grids_best_cell_not_the_reference_row(tmp_path: Path) -> None:
    """The Transformer row is far ahead of every rnn_luong cell: the bootstrap still tests
    each cell against rnn_luong general local_m, so the grid's close cell (one word a sentence
    behind) and its far one are told apart, and the Transformer is tested against the grid's
    best like any cell (ahead of it, resolved)."""
    measured = kept(tmp_path)
    boot = at.bootstrap_of(measured, REFS)
    assert boot is not None
    assert boot.baseline == "rnn_luong general local_m" and boot.segments == 2 * len(REFS)
    tests = {t.name: t for t in boot.systems}
    assert set(tests) == {
        TRANSFORMER,
        "rnn_luong general local_m",
        "rnn_luong concat local_m",
        "rnn_luong dot hard",
    }
    assert tests[boot.baseline].p_value is None and tests[boot.baseline].diff == 0.0
    far = tests["rnn_luong dot hard"]
    assert far.diff < -10 and far.p_value is not None and far.p_value < 0.05
    ahead = tests[TRANSFORMER]
    assert ahead.diff > 10 and ahead.p_value is not None and ahead.p_value < 0.05
    close = tests["rnn_luong concat local_m"]
    assert far.diff < close.diff < 0 and close.p_value is not None
    assert at.bootstrap_notes(measured, boot) == (
        " Training variance shows in the table's ± instead: the seeds of one cell differ by "
        "up to 0.80 BLEU (rnn_luong concat local_m: 5.00 and 5.80)."
    )


def test_without_a_measured_grid_cell_there_is_no_bootstrap(tmp_path: Path) -> None:
    """Only the Transformer row (nothing of rnn_luong) recorded: nothing to test against."""
    for seed in (1, 2):
        plant(tmp_path, TABLE[2], seed, hypotheses=outputs(20, seed))
    assert at.bootstrap_of(cells(tmp_path), REFS) is None


def test_a_cell_without_the_baselines_seeds_is_left_out(tmp_path: Path) -> None:
    """A cell whose seed 2 kept no outputs has nothing to pair with the baseline's seed 2."""
    measured = kept(tmp_path, skip=CONCAT)
    boot = at.bootstrap_of(measured, REFS)
    assert boot is not None and "rnn_luong concat local_m" not in {t.name for t in boot.systems}
    assert at.bootstrap_notes(measured, boot).startswith(
        " Left out of the bootstrap, without kept test outputs of each of the baseline's "
        "seeds (1, 2): rnn_luong concat local_m. Training variance shows"
    )


def test_valid_nll_is_the_tested_checkpoints(tmp_path: Path) -> None:
    """A run whose BLEU peaks mid-way (and ties later) while its NLL rises after: the table's
    NLL is that of the first best-BLEU validation, the checkpoint the test decoded."""
    folder = plant(tmp_path, TABLE[2], 1, bleu=4.0)
    curve = [(1000, 4.0, 2.0), (2000, 3.5, 4.0), (3000, 3.7, 4.0), (4000, 3.9, 3.0)]
    events = [{"event": "valid", "step": s, "nll": n, "bleu": b, "chrf": 20.0} for s, n, b in curve]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (cell,) = [m for m in cells(tmp_path) if m.runs]
    assert cell.nll == (3.5,) and cell.runs[0].tested_nll == 3.5
    assert at.brief(cell) == "4.00 / 24.0 / 3.500"
    assert at.brief(cells(tmp_path / "none")[0]) == "not yet run"  # a cell without runs


# ---- the verdict against the diagonal alignment --------------------------------------------


def diagonal(aer: float, low: float, high: float) -> ScoredBaseline:
    """A diagonal alignment's silver score with its bootstrap interval, planted."""
    scores = AlignmentScores(aer, 1 - aer, 1 - aer, 100, 100, 100, 45, 45, 10)
    return ScoredBaseline(scores, low, high, 1000)


def silver_cells(results: Path, aer: Mapping[tuple[str, str], Sequence[float]]) -> list:
    """The table's cells, those of rnn_luong (score, mode) in ``aer`` with a run a seed
    holding that seed's silver AER."""
    for (score, mode), values in aer.items():
        grid = (f"model.attention.score={score}", f"model.attention.mode={mode}")
        for seed, value in enumerate(values, 1):
            plant(results, TABLE[0], seed, *grid, silver=value)
    return cells(results)


def test_a_cell_that_clearly_beats_the_diagonal_is_named(tmp_path: Path) -> None:
    """Diagonal 0.550, interval 0.530 to 0.570: h = 0.020, the bar 0.550 − √2·0.020 = 0.522.
    general local_m (0.300, 0.320) is below it in both seeds: named. concat local_m (0.510,
    0.530) has a mean below the diagonal but a seed above the bar: not named. Means at or
    above 0.550: dot hard's 0.710 alone, 1 of 3."""
    aer = {
        ("general", "local_m"): (0.30, 0.32),
        ("concat", "local_m"): (0.51, 0.53),
        ("dot", "hard"): (0.70, 0.72),
    }
    measured = silver_cells(tmp_path, aer)
    base = diagonal(0.55, 0.53, 0.57)
    assert [m.name for m in at.beating_cells(measured, base)] == ["rnn_luong general local_m"]
    (text, blank) = at.diagonal_verdict(measured, base)
    assert blank == ""
    assert "scores AER 0.550 against the same silver links, 95% interval 0.530 to 0.570" in text
    assert "each of its seeds scores below 0.550 − √2 × 0.020 = 0.522" in text
    assert text.endswith(
        "1 of the 3 measured cells' means are at or above it; beyond the noise, 1 beats it: "
        "rnn_luong general local_m (0.300, 0.320)."
    )
    beating = {m.labels[1:] for m in at.beating_cells(measured, base)}
    (luong, _) = luong_reference.comparison(
        {}, at.grid_means(measured, "AER silver"), 0.55, beating
    )
    assert "only local_m general beats the diagonal, so their order is not tested here" in luong


def test_no_cell_is_named_when_all_are_at_or_worse_than_the_diagonal(tmp_path: Path) -> None:
    """Every cell at or above the diagonal's 0.554: none named, and the closest cell's gap
    stated (additive local_m 0.560 + 0.566 → 0.563, 0.009 above it); no ranking of the cells
    of Luong et al. on this column."""
    aer = {
        ("general", "local_m"): (0.57, 0.58),
        ("general", "local_p"): (0.70, 0.78),
        ("location", "global"): (0.66, 0.69),
        ("additive", "local_m"): (0.560, 0.566),
    }
    measured = silver_cells(tmp_path, aer)
    base = diagonal(0.554, 0.536, 0.572)
    assert at.beating_cells(measured, base) == []
    (text, _) = at.diagonal_verdict(measured, base)
    assert text.endswith(
        "4 of the 4 measured cells' means are at or above it; no cell beats it beyond the "
        "noise (the closest, rnn_luong additive local_m, 0.563: 0.009 above it)."
    )
    (luong, _) = luong_reference.comparison({}, at.grid_means(measured, "AER silver"), base.aer)
    assert (
        "here local_m general 0.575, local_p general 0.740, global location 0.675, the "
        "diagonal alignment 0.554; beyond the silver file's noise none of them beats the "
        "diagonal, so their order is not tested here."
    ) in luong
    assert "ranks 1 of 3" not in luong


def test_without_silver_links_there_is_no_verdict(tmp_path: Path) -> None:
    measured = cells(tmp_path)
    assert at.diagonal_verdict(measured, None) == []
    (text, _) = at.diagonal_verdict(measured, diagonal(0.5, 0.49, 0.51))
    assert text.endswith("No cell has a silver AER yet.")
    assert at.analysis(measured, [], None) == ["Not enough runs for the analysis yet."]


# ---- the check at the preset's size (its section is a frozen record) ----------------------


def test_the_preset_size_check_differs_from_the_table_only_in_the_models_size() -> None:
    """Each run of results_attention_preset composes (Hydra, as train.py would) to the same
    settings as the table's run of its cell and seed but for the model's emb_dim and
    hidden_size: 256 there, 128 in the table; so the check compares like with like."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    def settings(study: str, *grid: str) -> dict:
        spec = load_study(STUDIES / f"{study}.yaml")
        run = next(r for r in spec.runs if set(grid) <= set(r.grid))
        cfg = compose(config_name="train", overrides=[*spec.overrides, *run.grid])
        out = OmegaConf.to_container(cfg)
        assert isinstance(out, dict)
        return out

    with initialize_config_dir(config_dir=str(STUDIES.parent), version_base="1.3"):
        for run in load_study(STUDIES / f"{PRESET}.yaml").runs:
            ours = settings(PRESET, *run.grid)
            theirs = settings(TABLE[0], "model.attention.score=general", *run.grid)
            for sizes, units in ((ours["model"], 256), (theirs["model"], 128)):
                assert (sizes.pop("emb_dim"), sizes.pop("hidden_size")) == (units, units)
            assert ours == theirs
