"""experiments/attention_protocol.py: the attention table's length from its probes (the
flattening rule that must stay), the rounding to the table's validations, the plan's wall
clock on two jobs (estimated and as recorded) and the protocol text of docs/results.md."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.ledger_records import record_for, toy_plan

from attnmt.machine import Cpu, Machine
from attnmt.run_summary import FinalTest, Summary
from experiments import attention_protocol as ap
from experiments.alignment_aer import AlignmentRun
from experiments.results_plan import make_plan
from experiments.runs import Run

ROOT = Path(__file__).resolve().parents[1]


def probe(
    nll: list[float],
    overrides: tuple[str, ...] = ("model=rnn_luong", "model.hidden_size=128"),
    *,
    threads: int = 1,
    bleu: float | None = None,
    pace: float | None = None,
) -> Run:
    """A probe's run: validations every 250 updates at ``nll``, 10 training minutes."""
    curve = tuple((250 * (i + 1), v, 0.0) for i, v in enumerate(nll))  # step, NLL, BLEU
    machine = Machine(Cpu("Toy CPU", family=25, model=1), "2.0", threads)
    test = None if bleu is None else FinalTest(bleu=bleu)
    summary = Summary(step=curve[-1][0], minutes=10.0, seed=1, machine=machine, test=test)
    return Run(Path("."), dict(o.split("=") for o in overrides), summary, curve, None,
                      pace_ms_per_update=pace)  # fmt: skip


# a curve that pauses at 3,750 and falls again, flat from 5,000 on (by hand: 5,000 vs 4,000
# is (3.687 - 3.667) / 3.687 = 0.54%, 4,750 vs 3,750 is (3.706 - 3.667) / 3.706 = 1.05%)
PAUSING = [4.8, 4.3, 4.1, 4.0, 3.94, 3.88, 3.85, 3.82, 3.80, 3.775, 3.752, 3.737, 3.724, 3.707,
           3.706, 3.687, 3.677, 3.671, 3.667, 3.667, 3.667]  # fmt: skip


def test_a_pause_does_not_set_the_length_and_it_rounds_up_to_a_validation() -> None:
    rec = probe(PAUSING)
    assert ap.flattening(rec) == 5000
    assert ap.table_updates([rec], 300) == 5100 and ap.table_updates([rec], 500) == 5000
    assert ap.table_updates([rec, probe(PAUSING[:14])], 500) is None  # one still falling
    assert ap.table_updates([], 500) is None


def test_the_plan_packs_runs_longest_first_onto_two_jobs() -> None:
    assert ap.plan_hours([60.0, 60.0]) == pytest.approx(1.0)
    assert ap.plan_hours([90.0, 60.0, 30.0]) == pytest.approx(1.5)  # 90 | 60 + 30
    assert ap.plan_hours([30.0] * 4, jobs=1) == pytest.approx(2.0)
    assert ap.plan_hours([]) == 0.0


def test_the_protocol_text_follows_the_numbers() -> None:
    rec = probe(PAUSING, pace=200, bleu=7.5)
    lines = ap.protocol_lines([rec], 5000, 500)
    text = "\n".join(lines)
    row = "| rnn_luong general global | 5250 | 5000 | 3.667 | 3.667, 7.50 | 200 (1) | Toy CPU"
    assert row in text
    assert "The rule gives 5000 updates" in text and "They differ" not in text
    other = "\n".join(ap.protocol_lines([probe(PAUSING)], 3000, 500))
    assert "They differ: set trainer.max_steps" in other
    assert "| 5250 | 5000 | 3.667 | 3.667, nan | 114 (1) |" in other  # 10 min over 5,250 updates
    two = "\n".join(ap.protocol_lines([probe(PAUSING, threads=2)], 3000, 500))
    assert "| 114 (2) |" in two
    assert "not settled" in "\n".join(ap.protocol_lines([probe(PAUSING[:14])], 3000, 500))
    smaller = probe(PAUSING[:14], ("model=rnn_luong", "model.hidden_size=64"))  # not for the length
    both = "\n".join(ap.protocol_lines([rec, smaller], 5000, 500))
    assert "(64 units: not the table's) | 3500 | not yet |" in both
    assert "The rule gives 5000 updates" in both


def toy_run(mechanism: str, wall_minutes: float) -> AlignmentRun:
    """A synthetic-task run of ``mechanism`` (seed 1) that took ``wall_minutes``."""
    run = Run(Path("."), {}, Summary(step=1200, seed=1), (), None, wall_minutes)
    return AlignmentRun(run, mechanism, 0.1, 0.9, 0.9, 99.0)


def test_the_section_estimates_every_cell_at_every_seed_and_says_when_over_budget() -> None:
    plan = make_plan([])
    cells = [c for c in plan.cells if c.table == "attention"]
    lines = ap.section(plan, [], [toy_run(m, 3.0) for m in ap.GRID])
    text = "\n".join(lines)
    runs = len(cells) * len(plan.seeds["attention"])
    assert (
        f"Time: {runs} ding_de_en runs" in text
        and "the synthetic task's runs, all recorded" in text
    )
    missing = ap.section(plan, [], [toy_run(ap.GRID[0], 3.0)])
    left = len(ap.GRID) * len(plan.seeds["attention"]) - len(plan.seeds["attention"])
    assert f"and {left} synthetic-task runs not yet recorded at {left * 3.0 / 60:.1f};" in (
        "\n".join(missing)
    )
    hours = ap.plan_hours([ap.estimate(plan.keys[c], "attention", []) for c in cells] * 2)
    assert f"about **{hours:.1f} hours**" in text
    assert ("more than the 8 hours" in text) == (hours > ap.BUDGET_HOURS)


def test_the_measured_line_sums_recorded_minutes_and_fills_the_rest_by_settings() -> None:
    plan = toy_plan([])
    cells = [c for c in plan.cells if c.table == "attention"]
    first, second = cells[0].text(), cells[1].text()
    seeds = plan.seeds["attention"]
    assert seeds[:2] == [1, 2]
    assert ap.measured_line(plan, cells, seeds, [30.0]) == ""  # nothing recorded yet
    # record_for: wall minutes 12 + seed, so 13 and 14 for the first cell, 13 for the second
    done = [record_for(plan, first, 1, table="attention"),
            record_for(plan, first, 2, table="attention"),
            record_for(plan, second, 1, table="attention")]  # fmt: skip
    plan = toy_plan(done)
    line = ap.measured_line(plan, cells, seeds, [30.0])
    assert "the 3 ding_de_en runs recorded took 0.7 job-hours, median 13.0 minutes" in line
    assert "3 on Toy CPU (family 25 model 1) avx2, 2 cores" in line
    rest = len(cells) * len(seeds) - 3
    unknown = rest - 1  # the second cell's seed 2 takes its seed 1's 13 minutes
    assert f"{rest} of them" in line and f"({unknown} at the runner's estimate" in line
    guess = ap.estimate("never recorded", "attention", [])
    minutes = [13.0, 14.0, 13.0, 13.0, *[guess] * unknown, 30.0]
    assert f"**{ap.plan_hours(minutes):.1f} hours** two at a time" in line


def test_the_probes_are_read_from_their_run_folders_and_their_studies(tmp_path: Path) -> None:
    """Planted run folders (summary.json with a kept pace, metrics.jsonl, overrides) read as
    probes, the smaller size first; the studies' runs are the probes the page names."""
    import json

    import yaml

    for study, hidden in (("attention_protocol", "128"), ("attention_protocol_64", "64")):
        folder = tmp_path / study / "seed-1"
        (folder / ".hydra").mkdir(parents=True)
        summary = {"format": "attnmt-run-summary", "status": "finished", "step": 500, "seed": 1,
                   "minutes": 5.0, "pace_ms_per_update": 90, "pace_note": "idle"}  # fmt: skip
        (folder / "summary.json").write_text(json.dumps(summary))
        events = [{"event": "valid", "step": 250 * k, "nll": 4.0 / k, "bleu": 1.0} for k in (1, 2)]
        (folder / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
        overrides = ["model=rnn_luong", f"model.hidden_size={hidden}", "seed=1"]
        (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    runs = ap.probes(tmp_path)
    assert [ap.other_size(r) for r in runs] == ["64 units", None]
    assert [r.curve for r in runs] == [((250, 4.0, 1.0), (500, 2.0, 1.0))] * 2
    text = "\n".join(ap.protocol_lines(runs, 500, 250))
    assert "| rnn_luong general global | 500 | not yet | – | 2.000, nan | 90 (1) | ? |" in text
    assert "rnn_luong general global, idle." in text
    from experiments.study import load_study

    names = set()
    for study in ap.STUDIES:
        s = load_study(ROOT / "configs" / "study" / f"{study}.yaml")
        assert f"trainer.max_steps={ap.PROBE_UPDATES}" in s.overrides
        for run in s.runs:
            settings = dict(o.split("=", 1) for o in (*s.overrides, *run.grid))
            fake = Run(Path("."), settings, Summary(), (), None)
            names.add((ap.probe_name(fake), ap.other_size(fake)))
    assert names == {
        ("rnn_luong general global", None),
        ("rnn_bahdanau additive global", None),
        ("rnn_luong general global", "64 units"),
    }


def test_the_committed_probes_give_the_committed_length() -> None:
    """results/attention_protocol*/ (the migrated records): rnn_luong at the table's size
    flattens at 5,500 of its 6,000 updates, the 64-unit one not yet; docs/results.md says so."""
    runs = ap.probes()
    assert [(ap.other_size(r), ap.flattening(r)) for r in runs] == [
        ("64 units", None),
        (None, 5500),
    ]
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert all(line in page for line in ap.protocol_lines(runs, 5500, 250)[2:4])
