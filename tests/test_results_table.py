"""experiments/results_table.py and `make results`: docs/results.md generated from the ledger
(toy records: the tables, mean ± std, machines, curves, stale and missing runs)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.ledger_records import MACHINE, record_for, toy_plan

from attnmt.train.run_config import validate_config
from experiments import results_table as rt
from experiments.alignment_aer import UPDATES
from experiments.ledger import write_record
from experiments.results_plan import CONFIGS, TRANSFORMER_LABELS, load_experiment, make_plan

ROOT = Path(__file__).resolve().parents[1]


def test_mean_std_median_and_span() -> None:
    assert rt.mean_std([]) == "–"
    assert rt.mean_std([4.0]) == "4.00"
    assert rt.mean_std([4.0, 6.0]) == "5.00 ± 1.41"
    assert rt.median([3.0, 1.0, 10.0]) == "3.0"
    assert rt.span([3.66, 3.66], "M") == "3.66M"


def test_the_tables_come_from_toy_records(tmp_path: Path) -> None:
    ledger = tmp_path / "runs"
    plan = toy_plan([])
    other = {**MACHINE, "cpu": {**MACHINE["cpu"], "name": "Other CPU"}}
    silver = {"aer": 0.3, "precision": 0.6, "recall": 0.8}
    records = [
        record_for(plan, "ding_de_en transformer", seed=1, bleu=4.0),
        record_for(plan, "ding_de_en transformer", seed=2, bleu=6.0, machine=other),
        record_for(
            plan,
            "rnn_luong dot global",
            bleu=1.5,
            extra={"attention_entropy": 0.5, "silver": silver},
        ),
        record_for(
            plan,
            "rnn_luong dot global",
            seed=2,
            bleu=2.5,
            machine=other,
            extra={"attention_entropy": 0.7, "silver": {**silver, "aer": 0.5}},
        ),
        record_for(plan, "ding_de_en rnn_luong", key="0123456789ab", settings={"old": 1}),  # stale
    ]
    for record in records:
        write_record(ledger, record)
    # seed 1's fixed-sentence map (an RNN's [T][S]): every row peaks on source column 0
    collapsed = {"layer": None, "maps": {"cross": [[0.9, 0.1], [0.8, 0.2], [0.6, 0.4]]}}
    (ledger / f"{records[2].stem}.attn.json").write_text(json.dumps(collapsed), encoding="utf-8")
    # the synthetic task's records (experiments/alignment_aer.py) of the same cells
    toy = tmp_path / "alignment"
    toy.mkdir()
    for name, stem, updates, aer in [
        ("luong dot global", "luong-dot-global-seed1", UPDATES, 0.2),
        ("luong dot global", "luong-dot-global-seed2", UPDATES, 0.4),
        ("luong dot global", "luong-dot-global-seed1-u99", 99, 0.9),  # another length: left out
        ("transformer_tiny cross (last layer, mean of heads)", "transformer_tiny-cross-seed1",
         UPDATES, 0.5),
    ]:  # fmt: skip
        record = {"mechanism": name, "updates": updates, "test": {"aer": aer}}
        (toy / f"{stem}.json").write_text(json.dumps(record), encoding="utf-8")
    out = tmp_path / "docs" / "results.md"
    rt.write_docs(ledger, out, plan=toy_plan(records), toy_ledger=toy)
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Results\n\n" + rt.GENERATED)
    row = next(line for line in text.splitlines() if "| transformer |" in line and "ding" in line)
    assert "| 2 of 3 (1, 2) | 5.00 ± 1.41 | 25.00 ± 1.41 | 3.66M | 1500 | 11.5 | M1, M2 |" in row
    assert "| ding_de_en (?→?) | rnn_luong | 0 of 3 | – |" in text  # its only record is stale
    main_section = text[text.index("## Model presets") : text.index("## Attention scorers")]
    assert "### What the main table resolves\n\nNot enough runs for the analysis yet." in (
        main_section  # two runs (experiments/main_table_analysis.py: tests of its own)
    )
    lines = text.splitlines()
    assert "updates per run, seeds 1, 2 for every cell (fixed in advance)" in text
    header = next(i for i, line in enumerate(lines) if line.startswith("| model | score | mode |"))
    assert lines[header] == (
        "| model | score | mode | seeds | test BLEU | test chrF | valid NLL | AER toy_align "
        "| AER silver | entropy | collapsed | machines |"
    )
    rows = lines[header + 2 : header + 2 + 7 * 4 + 4 + 1]
    assert all(row.startswith("| ") for row in rows) and not lines[header + 2 + 33].startswith("|")
    assert rows[0] == (
        "| rnn_luong | dot | global | 2 of 2 (1, 2) | 2.00 ± 0.71 | 22.0 ± 0.7 | 3.500 ± 0.000 "
        "| 0.300 ± 0.141 (2) | 0.400 ± 0.141 | 0.60 ± 0.14 | yes (1.00) | M1, M2 |"
    )
    assert rows[1] == (
        "| rnn_luong | dot | local_m | 0 of 2 | – | – | – | – (0) | – | – | – | not yet run |"
    )
    assert rows[-1] == (
        f"| transformer | {TRANSFORMER_LABELS['score']} | global | 0 of 2 | – | – | – "
        "| 0.500 (1) | – | – | – | not yet run |"
    )
    assert [r.split(" | ")[:3] for r in rows[-5:-1]] == [
        ["| rnn_bahdanau", "additive", m] for m in ("global", "local_m", "local_p", "hard")
    ]
    assert "| M1 | Toy CPU (family 25 model 1) avx2, 2 cores, torch 2.13.0, 2 threads | 2 |" in text
    assert "| M2 | Other CPU" in text
    assert (
        "![validation BLEU on ding_de_en against updates and minutes](results_ding_de_en.png)"
        in text
    )
    assert (out.parent / "results_ding_de_en.png").read_bytes()[:4] == b"\x89PNG"
    assert not (out.parent / "results_bible_en_fr.png").exists()
    assert "## Stale records (left out)" in text and "0123456789ab.json" in text
    assert "- main: ding_de_en transformer, seed 3" in text
    assert "`BLEU|nrefs:1|toy`" in text


def test_every_attention_cell_is_a_valid_run_config() -> None:
    from hydra import compose, initialize_config_dir

    plan = make_plan([])
    max_steps = load_experiment("attention").trainer.max_steps
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        for cell in plan.cells:
            run = validate_config(compose(config_name="train", overrides=list(cell.overrides)))
            if cell.table == "attention":
                assert run.model.name == cell.label["model"]
                assert run.data.name == "ding_de_en" and run.trainer.max_steps == max_steps
                if cell.label["model"] == "transformer":  # no scorer setting: its labels say
                    assert not hasattr(run.model, "attention")
                    assert cell.label == {"model": "transformer", **TRANSFORMER_LABELS}
                    assert f"{run.model.n_heads} heads" in cell.label["score"]
                    continue
                assert run.model.attention.score == cell.label["score"]
                assert run.model.attention.mode == cell.label["mode"]
                assert run.model.hidden_size == run.model.emb_dim == 128
            else:
                assert run.trainer.max_steps == 1500 and run.trainer.time_budget_min == 0


def test_the_toy_align_grid_is_the_attention_tables_cells() -> None:
    """experiments/alignment_aer.py's GRID: the AER toy_align column's runs, one mechanism
    per attention-table cell; a name it shares with MECHANISMS is the same run (same
    overrides, so the records already made count)."""
    from experiments.alignment_aer import GRID, MECHANISMS, grid_name

    names = [m.name for m in GRID]
    assert len(GRID) == 7 * 4 + 4 + 1 == 33 and len(set(names)) == len(names)
    cells = [c for c in make_plan([]).cells if c.table == "attention"]
    of_cells = [grid_name(c.label["model"], c.label["score"], c.label["mode"]) for c in cells]
    assert sorted(of_cells) == sorted(names)  # every cell has its own GRID mechanism
    by_name = {m.name: m for m in GRID}
    for cell, name in zip(cells, of_cells):
        settings = dict(o.split("=", 1) for o in by_name[name].overrides)
        if cell.label["model"] == "transformer":
            assert settings == {"model": "transformer_tiny"}  # the task's small Transformer
            continue
        default_score = "additive" if cell.label["model"] == "rnn_bahdanau" else "general"
        assert settings["model"] == cell.label["model"]
        assert settings.get("model.attention.score", default_score) == cell.label["score"]
        assert settings.get("model.attention.mode", "global") == cell.label["mode"]
    shared = [m for m in MECHANISMS if m.name in by_name]
    assert len(shared) == len(MECHANISMS) - 1  # all but the local_m window-10 variant
    assert all(by_name[m.name].overrides == m.overrides for m in shared)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_results_runs_the_ledger_runner_and_the_docs() -> None:
    def dry(*args: str) -> str:
        done = subprocess.run(
            ["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "-m experiments.results_run --hours 1.5" in dry("results", "RESULTS_HOURS=1.5")
    quick = dry("results", "RESULTS_QUICK=1")
    assert "-m experiments.results_run --hours 0 --quick" in quick
    assert "rm -rf outputs/results-quick" in quick
    docs = dry("results-docs")
    assert "-m experiments.results_table docs" in docs and "-m experiments.attention_guide" in docs


def test_the_readme_holds_no_generated_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "results:main" not in readme and "results:attention" not in readme
    assert "docs/results.md" in readme
    assert rt.GENERATED in (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
