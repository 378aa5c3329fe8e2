"""experiments/main_protocol.py: the main table's length by the attention table's flattening
rule, from one probe per row of the table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from attnmt.machine import Cpu, Machine
from attnmt.run_summary import FinalTest, Summary
from experiments import attention_protocol
from experiments import main_protocol as mp
from experiments.runs import Run
from experiments.study import load_study

ROOT = Path(__file__).resolve().parents[1]


def probe(name: str, nll: list[float], threads: int = 1) -> Run:
    """The probe ``name`` ('ding_de_en transformer'): validations every 250 updates at
    ``nll``, 10 training minutes, test BLEU 5."""
    curve = tuple((250 * (i + 1), v, 0.0) for i, v in enumerate(nll))  # step, NLL, BLEU
    corpus, model = name.split()
    machine = Machine(Cpu("Toy CPU", family=25, model=1), "2.0", threads)
    summary = Summary(step=curve[-1][0], minutes=10.0, seed=1, machine=machine,
                      test=FinalTest(bleu=5.0))  # fmt: skip
    overrides = {"experiment": "results_main", "data": corpus, "model": model}
    return Run(Path("."), overrides, summary, curve, None)


# best NLL so far flat from 1,250 on (by hand: 3.50 against 3.51 at 1,000 is 0.28%, while at
# 1,000 against 750: (3.6 - 3.51) / 3.6 = 2.5%); the falling one never flattens
FLAT = [4.5, 4.0, 3.6, 3.51, 3.50, 3.50, 3.55, 3.6]
FALLING = [4.5, 4.2, 4.0, 3.8, 3.6, 3.4, 3.2, 3.0]


def test_every_row_of_the_table_has_a_probe_with_the_table_s_settings() -> None:
    """The studies' runs (configs/study/main_protocol*.yaml, loaded by experiments.study) are
    the table's rows at experiment=results_main, the first PROBE_UPDATES long."""
    names = [name for _, name in mp.PROBES]
    assert len(names) == len(mp.CORPORA) * len(mp.PRESETS) == 6
    made = []
    for study in mp.STUDIES:
        s = load_study(ROOT / "configs" / "study" / f"{study}.yaml")
        assert "experiment=results_main" in s.overrides
        for run in s.runs:
            settings = dict(o.split("=", 1) for o in (*s.overrides, *run.grid))
            made.append(
                attention_protocol.probe_name(Run(Path("."), settings, Summary(), (), None))
            )
    assert sorted(set(made)) == sorted(names) and len(made) == 7  # one row also trained longer
    main = load_study(ROOT / "configs" / "study" / "main_protocol.yaml")
    assert f"trainer.max_steps={mp.PROBE_UPDATES}" in main.overrides


def test_the_committed_probes_give_each_corpus_its_flattening() -> None:
    """results/main_protocol*/ (the migrated records): ding_de_en's three rows flatten at
    1,750, 1,750 and 1,250 updates; bible_en_fr's have not flattened."""
    flat = {attention_protocol.probe_name(r): attention_protocol.flattening(r) for r in mp.probes()}
    assert flat == {
        "bible_en_fr rnn_bahdanau": None,
        "bible_en_fr rnn_luong": None,
        "bible_en_fr transformer": None,
        "ding_de_en rnn_bahdanau": 1750,
        "ding_de_en rnn_luong": 1750,
        "ding_de_en transformer": 1250,
    }


def test_the_section_judges_each_corpus_by_its_own_probes() -> None:
    """One length per corpus: ding's three probes flat from 1,250 give 1,400 there (rounded
    up to the table's validation every 200) while bible's length is not settled by a probe
    still falling, nor by one not yet run."""
    lengths = {"ding_de_en": 1500, "bible_en_fr": 1500}
    none = "\n".join(mp.section([], lengths, 200))
    assert none.count("No probe recorded yet") == 2 and none.count("The rule: ") == 1
    assert "Probes not yet run on ding_de_en (3," in none
    assert "Probes not yet run on bible_en_fr (3," in none
    ding = [probe(name, FLAT) for corpus, name in mp.PROBES if corpus == "ding_de_en"]
    bible = [probe("bible_en_fr transformer", FLAT), probe("bible_en_fr rnn_luong", FALLING)]
    text = "\n".join(mp.section([*ding, *bible], lengths, 200))
    on_ding, on_bible = text.split("On bible_en_fr")
    assert "The rule gives 1400 updates (rounded up to the table's validation every 200)" in on_ding
    assert f"set trainer.max_steps in {mp.length_config('ding_de_en')}" in on_ding
    assert "not yet run" not in on_ding and "bible_en_fr" not in on_ding
    assert "A probe has not flattened" in on_bible and "The rule gives" not in on_bible
    assert "Probes not yet run on bible_en_fr (1, 6000 updates each" in on_bible
    assert "bible_en_fr rnn_bahdanau" in on_bible
    partial = "\n".join(mp.section(ding[:2], lengths, 200)).split("On bible_en_fr")[0]
    assert "The probes recorded so far give at least 1400 updates" in partial
    assert "The rule gives" not in partial and "They differ" not in partial
    settled = "\n".join(mp.section(ding, {"ding_de_en": 1400}, 200))
    assert "The rule gives 1400" in settled and "They differ" not in settled


def test_the_time_line_packs_each_probed_row_s_seeds_at_the_rule_s_length() -> None:
    """By hand: probe() says 10 minutes for its updates. FLAT (8 validations, 2,000 updates)
    is 300 ms an update; at the rule's 1,400 updates a run takes 7 minutes. Three probed rows
    × 3 seeds = 9 runs, two at a time: 5 rounds × 7 = 35 minutes = 0.6 hours. A falling probe
    gives no length: its own 2,000 updates are a floor (10 minutes a run; 2 rows × 3 seeds,
    3 rounds: 0.5 hours, at least)."""
    ding = [probe(name, FLAT) for corpus, name in mp.PROBES if corpus == "ding_de_en"]
    line = mp.cost_line(ding, "ding_de_en", 200, 3)
    assert line.startswith("Time: at 1400 updates, the 9 runs (3 seeds of transformer, rnn_b")
    assert "take 0.6 hours on 2 cores" in line and line.endswith("(their machines).")
    bible = [probe("bible_en_fr transformer", FLAT), probe("bible_en_fr rnn_luong", FALLING)]
    line = mp.cost_line(bible, "bible_en_fr", 200, 3)
    assert "at no fewer than 2000 updates, the 6 runs" in line and "take at least 0.5 hours" in line
    assert line.endswith("the presets without a probe are not counted.")
    two = probe("bible_en_fr transformer", FLAT, threads=2)
    assert mp.cost_line([two], "bible_en_fr", 200, 3).endswith(
        "; bible_en_fr transformer was timed at 2 threads: beside another run it is slower, "
        "so for it this is a floor."
    )
    assert mp.cost_line([], "bible_en_fr", 200, 3) == "No probe on bible_en_fr times a run yet."


def test_the_table_length_file_sets_the_length_on_its_corpus_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """configs/table_length/results_main-<corpus>.yaml, applied after the experiment, is what
    the main table's rows compose to; another experiment on that corpus keeps its own, and an
    override on the command line still wins (a copy of configs/ with planted lengths)."""
    from experiments import results_plan

    for corpus in mp.CORPORA:
        assert (results_plan.ROOT / mp.length_config(corpus)).is_file()
    configs = tmp_path / "configs"
    shutil.copytree(results_plan.CONFIGS, configs)
    for corpus, steps in (("ding_de_en", 1234), ("bible_en_fr", 4321)):
        path = tmp_path / mp.length_config(corpus)
        path.write_text(path.read_text().replace("max_steps: ", f"max_steps: {steps} #"))
    monkeypatch.setattr(results_plan, "CONFIGS", configs)
    ding, bible, attention, given = results_plan.compose_settings(
        [
            ["experiment=results_main", "data=ding_de_en", "model=rnn_luong"],
            ["experiment=results_main", "data=bible_en_fr"],
            ["experiment=results_attention"],
            ["experiment=results_main", "data=bible_en_fr", "trainer.max_steps=7"],
        ]
    )
    assert (ding["trainer"]["max_steps"], bible["trainer"]["max_steps"]) == (1234, 4321)
    attention_yaml = OmegaConf.load(configs / "experiment" / "results_attention.yaml")
    assert attention["trainer"]["max_steps"] == OmegaConf.select(
        attention_yaml, "trainer.max_steps"
    )
    assert given["trainer"]["max_steps"] == 7
