"""experiments/protocol.py: the main table's length from its probes (the flattening rule that
must stay), rounded to the table's validations, per corpus, as docs/results.md states it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir

from attnmt.machine import Cpu, Machine
from attnmt.run_record import Validation
from attnmt.run_summary import FinalTest, Summary
from experiments import protocol as pr
from experiments.runs import Run
from experiments.study import load_study

ROOT = Path(__file__).resolve().parents[1]


def probe(
    nll: list[float],
    overrides: tuple[str, ...] = ("experiment=results_main", "data=ding_de_en", "model=rnn_luong"),
    *,
    threads: int = 1,
    bleu: float | None = None,
) -> Run:
    """A probe's run: validations every 250 updates at ``nll``, 10 training minutes."""
    valid = tuple(Validation(250 * (i + 1), None, v, 0.0, None, None) for i, v in enumerate(nll))
    machine = Machine(Cpu("Toy CPU", family=25, model=1), "2.0", threads)
    test = None if bleu is None else FinalTest(bleu=bleu)
    summary = Summary(step=valid[-1].step, minutes=10.0, seed=1, machine=machine, test=test)
    return Run(Path("."), dict(o.split("=") for o in overrides), summary, valid, None)


def main_probe(name: str, nll: list[float], threads: int = 1) -> Run:
    """The main-table probe ``name`` ('ding_de_en transformer'), test BLEU 5."""
    corpus, model = name.split()
    run = probe(nll, ("experiment=results_main", f"data={corpus}", f"model={model}"),
                threads=threads, bleu=5.0)  # fmt: skip
    return run


# a curve that pauses at 3,750 and falls again, flat from 5,000 on (by hand: 5,000 vs 4,000
# is (3.687 - 3.667) / 3.687 = 0.54%, 4,750 vs 3,750 is (3.706 - 3.667) / 3.706 = 1.05%)
PAUSING = [4.8, 4.3, 4.1, 4.0, 3.94, 3.88, 3.85, 3.82, 3.80, 3.775, 3.752, 3.737, 3.724, 3.707,
           3.706, 3.687, 3.677, 3.671, 3.667, 3.667, 3.667]  # fmt: skip
# best NLL so far flat from 1,250 on (by hand: 3.50 against 3.51 at 1,000 is 0.28%, while at
# 1,000 against 750: (3.6 - 3.51) / 3.6 = 2.5%); the falling one never flattens
FLAT = [4.5, 4.0, 3.6, 3.51, 3.50, 3.50, 3.55, 3.6]
FALLING = [4.5, 4.2, 4.0, 3.8, 3.6, 3.4, 3.2, 3.0]


def test_a_pause_does_not_set_the_length_and_it_rounds_up_to_a_validation() -> None:
    rec = probe(PAUSING)
    assert pr.flattening(rec) == 5000
    assert pr.table_updates([rec], 300) == 5100 and pr.table_updates([rec], 500) == 5000
    assert pr.table_updates([rec, probe(PAUSING[:14])], 500) is None  # one still falling
    assert pr.table_updates([], 500) is None


def test_the_plan_packs_runs_longest_first_onto_two_jobs() -> None:
    assert pr.plan_hours([60.0, 60.0]) == pytest.approx(1.0)
    assert pr.plan_hours([90.0, 60.0, 30.0]) == pytest.approx(1.5)  # 90 | 60 + 30
    assert pr.plan_hours([30.0] * 4, jobs=1) == pytest.approx(2.0)
    assert pr.plan_hours([]) == 0.0


def lines(runs: list[Run], updates: int, every: int = 500) -> str:
    return "\n".join(pr.protocol_lines(runs, updates, every, "table.yaml"))


def test_the_protocol_text_follows_the_numbers() -> None:
    rec = probe(PAUSING, bleu=7.5)
    text = lines([rec], 5000)
    row = "| ding_de_en rnn_luong | 5250 | 5000 | 3.667 | 3.667, 7.50 | 114 (1) | Toy CPU"
    assert row in text
    assert "The rule gives 5000 updates" in text and "They differ" not in text
    other = lines([probe(PAUSING)], 3000)
    assert "They differ: set trainer.max_steps in table.yaml" in other
    assert "| 5250 | 5000 | 3.667 | 3.667, nan | 114 (1) |" in other  # 10 min over 5,250 updates
    assert "| 114 (2) |" in lines([probe(PAUSING, threads=2)], 3000)
    assert "not settled" in lines([probe(PAUSING[:14])], 3000)
    assert lines([], 5000) == f"No probe recorded yet (`{pr.COMMAND}`)."


def plant_probe(results: Path, study: str, corpus: str, model: str) -> None:
    folder = results / study / f"data-{corpus}_model-{model}"
    (folder / ".hydra").mkdir(parents=True)
    summary = {"format": "attnmt-run-summary", "status": "finished", "step": 500, "seed": 1,
               "minutes": 5.0}  # fmt: skip
    (folder / "summary.json").write_text(json.dumps(summary))
    events = [{"event": "valid", "step": 250 * k, "nll": 4.0 / k, "bleu": 1.0} for k in (1, 2)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    overrides = ["experiment=results_main", f"data={corpus}", f"model={model}", "seed=1"]
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))


def test_the_probes_are_read_from_their_run_folders(tmp_path: Path) -> None:
    """Planted run folders of both probe studies (summary.json with training minutes,
    metrics.jsonl, overrides) read as probes by name; the section states them after the
    rule, each at its minutes over its updates."""
    plant_probe(tmp_path, pr.STUDIES[0], "ding_de_en", "transformer")
    plant_probe(tmp_path, pr.STUDIES[1], "bible_en_fr", "rnn_bahdanau")
    runs = pr.probes(tmp_path)
    assert [pr.probe_name(r) for r in runs] == [
        "bible_en_fr rnn_bahdanau",
        "ding_de_en transformer",
    ]
    assert [[(v.step, v.nll, v.bleu) for v in r.valid] for r in runs] == [
        [(250, 4.0, 1.0), (500, 2.0, 1.0)]
    ] * 2
    text = "\n".join(pr.main_section(runs, {"bible_en_fr": 500}, 250))
    assert text.startswith("The rule: the first validation L of a probe")
    # 5 training minutes over 500 updates: 600 ms per update
    assert "| bible_en_fr rnn_bahdanau | 500 | not yet | – | 2.000, nan | 600 (1) | ? |" in text
    assert "ding_de_en" not in text


def test_every_main_table_row_has_a_probe_with_the_table_s_settings() -> None:
    """The main probe studies' runs are the table's rows at experiment=results_main (the
    first PROBE_UPDATES long), the rows of configs/study/results_main.yaml."""
    made: dict[str, list[str]] = {}
    for study in ("results_main", *pr.STUDIES):
        s = load_study(ROOT / "configs" / "study" / f"{study}.yaml")
        assert "experiment=results_main" in s.overrides
        for run in s.runs:
            settings = dict(o.split("=", 1) for o in (*s.overrides, *run.grid))
            fake = Run(Path("."), settings, Summary(), (), None)
            made.setdefault(study, []).append(pr.probe_name(fake))
    assert len(made["main_protocol"]) == 6 and len(made["main_protocol_long"]) == 1
    assert set(made["main_protocol"]) == set(made["results_main"])
    assert set(made["main_protocol"]) == {f"{c} {p}" for c in ("ding_de_en", "bible_en_fr")
                                          for p in pr.PRESETS}  # fmt: skip
    main = load_study(ROOT / "configs" / "study" / "main_protocol.yaml")
    assert f"trainer.max_steps={pr.PROBE_UPDATES}" in main.overrides


def test_the_committed_main_probes_give_each_corpus_its_flattening() -> None:
    """results/main_protocol*/: ding_de_en's three rows flatten at 1,750, 1,750 and 1,250
    updates; bible_en_fr's have not flattened."""
    flat = {pr.probe_name(r): pr.flattening(r) for r in pr.probes()}
    assert flat == {
        "bible_en_fr rnn_bahdanau": None,
        "bible_en_fr rnn_luong": None,
        "bible_en_fr transformer": None,
        "ding_de_en rnn_bahdanau": 1750,
        "ding_de_en rnn_luong": 1750,
        "ding_de_en transformer": 1250,
    }


def test_the_main_section_judges_each_corpus_by_its_own_probes() -> None:
    """One length per corpus: ding's three probes flat from 1,250 give 1,400 there (rounded
    up to the table's validation every 200) while bible's length is not settled by a probe
    still falling, nor by one not yet run."""
    lengths = {"ding_de_en": 1500, "bible_en_fr": 1500}
    none = "\n".join(pr.main_section([], lengths, 200))
    assert none.count("No probe recorded yet") == 2 and none.count("The rule: ") == 1
    assert "Probes not yet run on ding_de_en (3," in none
    assert "Probes not yet run on bible_en_fr (3," in none
    ding = [main_probe(f"ding_de_en {p}", FLAT) for p in pr.PRESETS]
    bible = [
        main_probe("bible_en_fr transformer", FLAT),
        main_probe("bible_en_fr rnn_luong", FALLING),
    ]
    text = "\n".join(pr.main_section([*ding, *bible], lengths, 200))
    on_ding, on_bible = text.split("On bible_en_fr")
    assert "The rule gives 1400 updates (rounded up to the table's validation every 200)" in on_ding
    assert f"set trainer.max_steps in {pr.length_config('ding_de_en')}" in on_ding
    assert "not yet run" not in on_ding and "bible_en_fr" not in on_ding
    assert "A probe has not flattened" in on_bible and "The rule gives" not in on_bible
    assert "Probes not yet run on bible_en_fr (1, 6000 updates each" in on_bible
    assert "bible_en_fr rnn_bahdanau" in on_bible
    partial = "\n".join(pr.main_section(ding[:2], lengths, 200)).split("On bible_en_fr")[0]
    assert "The probes recorded so far give at least 1400 updates" in partial
    assert "The rule gives" not in partial and "They differ" not in partial
    settled = "\n".join(pr.main_section(ding, {"ding_de_en": 1400}, 200))
    assert "The rule gives 1400" in settled and "They differ" not in settled


def test_the_cost_line_packs_each_probed_row_s_seeds_at_the_rule_s_length() -> None:
    """By hand: a probe says 10 minutes for its updates. FLAT (8 validations, 2,000 updates)
    is 300 ms an update; at the rule's 1,400 updates a run takes 7 minutes. Three probed rows
    × 3 seeds = 9 runs, two at a time: 5 rounds × 7 = 35 minutes = 0.6 hours. A falling probe
    gives no length: its own 2,000 updates are a floor (10 minutes a run; 2 rows × 3 seeds,
    3 rounds: 0.5 hours, at least)."""
    ding = [main_probe(f"ding_de_en {p}", FLAT) for p in pr.PRESETS]
    line = pr.cost_line(ding, "ding_de_en", 200, 3)
    assert line.startswith("Time: at 1400 updates, the 9 runs (3 seeds of transformer, rnn_b")
    assert "take 0.6 hours on 2 cores" in line and line.endswith("(their machines).")
    bible = [
        main_probe("bible_en_fr transformer", FLAT),
        main_probe("bible_en_fr rnn_luong", FALLING),
    ]
    line = pr.cost_line(bible, "bible_en_fr", 200, 3)
    assert "at no fewer than 2000 updates, the 6 runs" in line and "take at least 0.5 hours" in line
    assert line.endswith("the presets without a probe are not counted.")
    two = main_probe("bible_en_fr transformer", FLAT, threads=2)
    assert pr.cost_line([two], "bible_en_fr", 200, 3).endswith(
        "; bible_en_fr transformer was timed at 2 threads: beside another run it is slower, "
        "so for it this is a floor."
    )
    assert pr.cost_line([], "bible_en_fr", 200, 3) == "No probe on bible_en_fr times a run yet."


def test_the_table_length_file_sets_the_length_on_its_corpus_only(tmp_path: Path) -> None:
    """configs/table_length/results_main-<corpus>.yaml, applied after the experiment, is what
    the main table's rows compose to; another experiment on that corpus keeps its own, and an
    override on the command line still wins (a copy of configs/ with planted lengths)."""
    configs = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", configs)
    for corpus, planted in (("ding_de_en", 1234), ("bible_en_fr", 4321)):
        assert (ROOT / pr.length_config(corpus)).is_file()
        path = tmp_path / pr.length_config(corpus)
        path.write_text(path.read_text().replace("max_steps: ", f"max_steps: {planted} #"))
    runs = (["experiment=results_main", "data=ding_de_en", "model=rnn_luong"],
            ["experiment=results_main", "data=bible_en_fr"],
            ["experiment=results_attention"],
            ["experiment=results_main", "data=bible_en_fr", "trainer.max_steps=7"])  # fmt: skip
    with initialize_config_dir(config_dir=str(configs), version_base="1.3"):
        steps = [compose(config_name="train", overrides=o).trainer.max_steps for o in runs]
    attention = yaml.safe_load((configs / "experiment" / "results_attention.yaml").read_text())
    assert steps == [1234, 4321, attention["trainer"]["max_steps"], 7]
