"""experiments/results_table.py and `make results`: docs/results.md generated from the ledger
(toy records: the tables, mean ± std, machines, curves, stale and missing runs)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.ledger_records import MACHINE, record_for, toy_plan

from attnmt.train.run_config import validate_config
from experiments import results_table as rt
from experiments.ledger import write_record
from experiments.results_plan import CONFIGS, make_plan

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
    records = [
        record_for(plan, "ding_de_en transformer", seed=1, bleu=4.0),
        record_for(plan, "ding_de_en transformer", seed=2, bleu=6.0, machine=other),
        record_for(plan, "rnn_luong dot global", seed=1, bleu=1.5),
        record_for(plan, "ding_de_en rnn_luong", key="0123456789ab", settings={"old": 1}),  # stale
    ]
    for record in records:
        write_record(ledger, record)
    out = tmp_path / "docs" / "results.md"
    rt.write_docs(ledger, out, plan=toy_plan(records))
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Results\n\n" + rt.GENERATED)
    row = next(line for line in text.splitlines() if "| transformer |" in line and "ding" in line)
    assert "| 2 of 3 (1, 2) | 5.00 ± 1.41 | 25.00 ± 1.41 | 3.66M | 1500 | 11.5 | M1, M2 |" in row
    assert "| ding_de_en (?→?) | rnn_luong | 0 of 3 | – |" in text  # its only record is stale
    attention = next(line for line in text.splitlines() if line.startswith("| rnn_luong | dot |"))
    assert "| 1.50 / 21.5 / 3.50 | not yet run | not yet run | not yet run | M1 |" in attention
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
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        for cell in plan.cells:
            run = validate_config(compose(config_name="train", overrides=list(cell.overrides)))
            if cell.table == "attention":
                assert run.model.name == cell.label["model"]
                assert run.model.attention.score == cell.label["score"]
                assert run.model.attention.mode == cell.label["mode"]
                assert run.data.name == "ding_de_en" and run.trainer.max_steps == 400
            else:
                assert run.trainer.max_steps == 1500 and run.trainer.time_budget_min == 0


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
