"""experiments/results_table.py and `make results`: docs/results.md generated from the ledger
(toy records: the tables, mean ± std, machines, curves, stale and missing runs)."""

from __future__ import annotations

import json
import math
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest
from helpers.alignment_runs import LUONG, plant
from helpers.ledger_records import MACHINE, fake_settings, record_for, toy_plan
from omegaconf import OmegaConf

from attnmt.train.run_config import validate_config
from experiments import attention_preset, attention_table
from experiments import results_table as rt
from experiments.comparison_stats import t_quantile
from experiments.ledger import write_record
from experiments.main_protocol import length_config
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
    toy = tmp_path / "results"
    dot = (*LUONG, "model.attention.score=dot", "model.attention.mode=global")
    plant(toy, "alignment_luong", dot, 1, 0.2)
    plant(toy, "alignment_luong", dot, 2, 0.4)
    plant(toy, "alignment_luong_long", dot, 1, 0.9, updates=99)  # another length: left out
    plant(toy, "alignment_transformer", ("data=toy_align", "model=transformer_tiny"), 1, 0.5)
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
            if cell.table == "attention_preset":  # the check: the preset's own size
                assert run.model.name == "rnn_luong" and run.trainer.max_steps == max_steps
                assert run.model.hidden_size == run.model.emb_dim == 256
                assert run.model.attention.mode == cell.label["mode"]
            elif cell.table == "attention":
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
            else:  # the main table: its corpus's length file
                length = OmegaConf.load(ROOT / length_config(run.data.name)).max_steps
                assert run.trainer.max_steps == length and run.trainer.time_budget_min == 0


def test_the_toy_align_grid_is_the_attention_tables_cells() -> None:
    """experiments/alignment_aer.py's GRID: the AER toy_align column's mechanisms, one per
    attention-table cell (tests/test_alignment_page.py: the study configs make them)."""
    from experiments.alignment_aer import GRID, grid_name

    cells = [c for c in make_plan([]).cells if c.table == "attention"]
    of_cells = [grid_name(c.label["model"], c.label["score"], c.label["mode"]) for c in cells]
    assert sorted(of_cells) == sorted(GRID)  # every cell has its own GRID mechanism


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


# ---- the check at the preset's size (experiments/attention_preset.py) ----------------------


def sized_settings(overrides_list: list[list[str]]) -> list[dict]:
    """Distinct settings per overrides list (:func:`fake_settings`, under ``model``), with the
    model size its overrides give (the grid's fixed axes) and one trainer for every cell."""
    out = []
    for settings, overrides in zip(fake_settings(overrides_list), overrides_list):
        model = dict(settings)
        given = dict(o.split("=", 1) for o in overrides if o.startswith("model."))
        if "model.hidden_size" in given:
            model["emb_dim"] = int(given["model.emb_dim"])
            model["hidden_size"] = int(given["model.hidden_size"])
        out.append({"model": model, "trainer": {"max_steps": 5500}})
    return out


def pooled_difference(a: list[float], b: list[float]) -> str:
    """mean(a) − mean(b) with the pooled two-sample t interval, as the section writes it."""
    df = len(a) + len(b) - 2
    pooled = ((len(a) - 1) * statistics.variance(a) + (len(b) - 1) * statistics.variance(b)) / df
    half = t_quantile(0.975, df) * math.sqrt(pooled * (1 / len(a) + 1 / len(b)))
    d = statistics.mean(a) - statistics.mean(b)
    return f"{d:+.2f} (95% interval {d - half:+.2f} to {d + half:+.2f}, {len(a) + len(b)} runs)"


def check_text(bleu: dict[tuple[str, str], list[float]], tmp_path: Path) -> str:
    """docs/results.md from toy records of test BLEU ``bleu[(table, mode)]`` (seed 1, 2, ...)
    of the cells rnn_luong general local_m / local_p; its "At the preset's size" section."""
    plan = make_plan([], settings_of=sized_settings)
    records = [
        record_for(plan, f"rnn_luong general {mode}", seed=s, bleu=b, table=table)
        for (table, mode), values in bleu.items()
        for s, b in enumerate(values, start=1)
    ]
    ledger = tmp_path / "runs"
    for record in records:
        write_record(ledger, record)
    out = tmp_path / "docs" / "results.md"
    toy = tmp_path / "alignment"
    toy.mkdir()
    plan = make_plan(records, settings_of=sized_settings)
    text = rt.write_docs(ledger, out, plan=plan, toy_ledger=toy).read_text(encoding="utf-8")
    start = text.index("### At the preset's size")
    assert text.index("### What the attention table resolves") < start
    assert start < text.index("## Validation BLEU against updates and minutes")
    size = text[text.index("Size: the table's RNNs") :].splitlines()[0]
    assert "have 128 units" in size and "rnn_luong's preset has 256" in size
    assert "4 runs at 256 units" in size
    return text[start : text.index("## Validation BLEU against updates and minutes")]


TABLE, PRESET = "attention", "attention_preset"


def test_the_preset_size_check_says_when_the_order_holds(tmp_path: Path) -> None:
    """Planted: local_m ahead of local_p at both sizes, resolved at the preset's size."""
    bleu = {
        (TABLE, "local_m"): [2.2, 2.4],
        (TABLE, "local_p"): [1.1, 1.3],
        (PRESET, "local_m"): [3.0, 3.2],
        (PRESET, "local_p"): [2.0, 2.2],
    }
    section = check_text(bleu, tmp_path)
    lines = section.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("| score | mode |")))
    rows = [line.split(" | ")[:5] for line in lines[header + 2 : header + 6]]
    assert rows == [
        ["| general", "local_m", "256: the preset's", "2 of 2 (1, 2)", "3.10 ± 0.14"],
        ["| general", "local_m", "128: the table's", "2 of 2 (1, 2)", "2.30 ± 0.14"],
        ["| general", "local_p", "256: the preset's", "2 of 2 (1, 2)", "2.10 ± 0.14"],
        ["| general", "local_p", "128: the table's", "2 of 2 (1, 2)", "1.20 ± 0.14"],
    ]
    assert (
        "In test BLEU the order of the two modes is the same at both sizes (local_m ahead at "
        "both sizes), and at the preset's size the difference is resolved: local_m − local_p = "
        f"{pooled_difference([3.0, 3.2], [2.0, 2.2])} at 256 units, "
        f"{pooled_difference([2.2, 2.4], [1.1, 1.3])} at 128 units."
    ) in section
    assert "the rest is the table's (5500 updates, the same data and trainer settings)" in section
    assert "not yet run" not in section and "no longer compares like with like" not in section


def test_the_preset_size_check_says_when_the_order_flips(tmp_path: Path) -> None:
    """Planted: local_p ahead at the preset's size, local_m at the table's; not resolved."""
    bleu = {
        (TABLE, "local_m"): [2.2, 2.4],
        (TABLE, "local_p"): [1.1, 1.3],
        (PRESET, "local_m"): [2.0, 2.2],
        (PRESET, "local_p"): [2.6, 3.0],
    }
    section = check_text(bleu, tmp_path)
    assert (
        "In test BLEU the order of the two modes is not the same at both sizes (local_p ahead "
        "at 256 units, local_m ahead at 128), and at the preset's size the difference is not "
        f"resolved: local_m − local_p = {pooled_difference([2.0, 2.2], [2.6, 3.0])} at 256 "
        "units"
    ) in section
    assert "is the same at both sizes" not in section


def test_the_preset_size_check_says_plainly_when_it_is_not_run(tmp_path: Path) -> None:
    section = check_text({(TABLE, "local_m"): [2.2], (TABLE, "local_p"): [1.1]}, tmp_path)
    assert (
        "**The check is not yet run** (0 of 4 runs recorded): `python -m "
        "experiments.results_run --tables attention_preset --jobs 2` (4 runs estimated at "
    ) in section
    assert (
        "| general | local_m | 256: the preset's | 0 of 2 | – | – | – | – | – | not yet run |"
        in (section)
    )
    assert "order of the two modes" not in section


def test_the_preset_size_check_waits_for_both_modes_and_needs_two_runs_a_mode(
    tmp_path: Path,
) -> None:
    """One mode recorded: not comparable; one run a mode: no interval, so not resolved."""
    one = check_text({(TABLE, "local_m"): [2.2], (PRESET, "local_m"): [3.0]}, tmp_path / "a")
    assert "Not comparable yet: local_p has no run at the preset's size (1 of 4 runs" in one
    bleu = {
        (TABLE, "local_m"): [2.2],
        (TABLE, "local_p"): [1.1],
        (PRESET, "local_m"): [3.0],
        (PRESET, "local_p"): [2.0],
    }
    each = check_text(bleu, tmp_path / "b")
    assert (
        "is the same at both sizes (local_m ahead at both sizes), and at the preset's size the "
        "difference is not resolved: local_m − local_p = +1.00 (2 runs: one per mode gives no "
        "interval) at 256 units, +1.10 (2 runs: one per mode gives no interval) at 128 units "
        "(2 of 4 runs recorded so far;"
    ) in each


def test_the_preset_size_check_says_when_its_settings_are_not_the_tables() -> None:
    plan = make_plan([], settings_of=sized_settings)
    check = attention_table.measures(plan, [], ROOT, (), "attention_preset")
    cells = attention_table.measures(plan, [], ROOT, ())
    assert "no longer compares" not in "\n".join(attention_preset.section(plan, check, cells, {}))
    plan.settings[check[0].cell] = {**plan.settings[check[0].cell], "trainer": {"max_steps": 400}}
    section = attention_preset.section(plan, check, cells, {})
    assert "**Its settings differ from the table's in trainer:**" in section[-1]
