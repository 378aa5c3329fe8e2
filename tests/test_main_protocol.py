"""experiments/main_protocol.py: the main table's length by the attention table's flattening
rule, from one probe per row of the table."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from experiments import attention_protocol, variant_runs
from experiments import main_protocol as mp

MACHINE = {"cpu": {"name": "Toy CPU", "family": 25, "model": 1}}


def probe(name: str, nll: list[float], every: int = 250) -> dict[str, Any]:
    curve = [[every * (i + 1), v, 0.0] for i, v in enumerate(nll)]  # step, NLL, BLEU
    return {"variant": name, "curve": curve, "updates": curve[-1][0], "train_minutes": 10.0,
            "test": {"bleu": 5.0}, "machine": MACHINE,
            "overrides": [*mp.COMMON, f"data={name.split()[0]}"]}  # fmt: skip


# best NLL so far flat from 1,250 on (by hand: 3.50 against 3.51 at 1,000 is 0.28%, while at
# 1,000 against 750: (3.6 - 3.51) / 3.6 = 2.5%); the falling one never flattens
FLAT = [4.5, 4.0, 3.6, 3.51, 3.50, 3.50, 3.55, 3.6]
FALLING = [4.5, 4.2, 4.0, 3.8, 3.6, 3.4, 3.2, 3.0]


def test_every_row_of_the_table_has_a_probe_with_the_table_s_settings() -> None:
    names = [p.name for p in mp.PROBES]
    assert len(names) == len(mp.CORPORA) * len(mp.PRESETS) == 6
    assert "bible_en_fr rnn_luong" in names
    assert mp.COMMON[0] == "experiment=results_main"
    assert f"trainer.max_steps={mp.PROBE_UPDATES}" in mp.COMMON


def test_the_section_judges_each_corpus_by_its_own_probes() -> None:
    """One length per corpus: ding's three probes flat from 1,250 give 1,400 there (rounded
    up to the table's validation every 200) while bible's length is not settled by a probe
    still falling, nor by one not yet run."""
    lengths = {"ding_de_en": 1500, "bible_en_fr": 1500}
    none = "\n".join(mp.section([], lengths, 200))
    assert none.count("No probe recorded yet") == 2 and none.count("The rule: ") == 1
    assert "Probes not yet run on ding_de_en (3," in none
    assert "Probes not yet run on bible_en_fr (3," in none
    ding = [probe(p.name, FLAT) for p in mp.PROBES if p.name.startswith("ding_de_en")]
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
    ding = [probe(p.name, FLAT) for p in mp.PROBES if p.name.startswith("ding_de_en")]
    line = mp.cost_line(ding, "ding_de_en", 200, 3)
    assert line.startswith("Time: at 1400 updates, the 9 runs (3 seeds of transformer, rnn_b")
    assert "take 0.6 hours on 2 cores" in line and line.endswith("(their machines).")
    bible = [probe("bible_en_fr transformer", FLAT), probe("bible_en_fr rnn_luong", FALLING)]
    line = mp.cost_line(bible, "bible_en_fr", 200, 3)
    assert "at no fewer than 2000 updates, the 6 runs" in line and "take at least 0.5 hours" in line
    assert line.endswith("the presets without a probe are not counted.")
    two = {**bible[0], "threads": 2}
    assert mp.cost_line([two], "bible_en_fr", 200, 3).endswith(
        "; bible_en_fr transformer was timed at 2 threads: beside another run it is slower, "
        "so for it this is a floor."
    )
    assert mp.cost_line([], "bible_en_fr", 200, 3) == "No probe on bible_en_fr times a run yet."


def test_a_record_s_corpus_is_its_data_override() -> None:
    assert mp.corpus_of(probe("bible_en_fr transformer", FLAT)) == "bible_en_fr"
    assert mp.corpus_of({"overrides": ["model=rnn_luong"]}) == "?"


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


def test_only_runs_the_named_probes_in_the_order_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[tuple[str, int]] = []

    def fake_run(
        v: Any, seed: int, threads: int, common: Any, runs: Path, records: Path, least: int
    ) -> None:
        ran.append((v.name, threads))
        assert (seed, common, least) == (1, mp.COMMON, mp.PROBE_UPDATES)
        return None

    monkeypatch.setattr(attention_protocol, "run_variant", fake_run)
    monkeypatch.setattr(mp, "RECORDS", tmp_path)
    wanted = ["ding_de_en rnn_luong", "bible_en_fr transformer"]
    assert mp.main(["run", "--jobs", "1", "--only", *wanted]) == 0
    assert ran == [(n, 1) for n in wanted]  # one thread a probe unless told
    assert capsys.readouterr().out.splitlines() == [f"{n}: FAILED" for n in wanted]
    ran.clear()
    assert mp.main(["run", "--jobs", "1", "--threads", "2", "--only", wanted[0]]) == 0
    assert ran == [(wanted[0], 2)]


def test_updates_and_every_lengthen_a_probe_and_replace_only_a_shorter_record(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--updates 12000 --every 500``: the probe trains 12,000 updates validated every 500
    in its own run folder, and a record of fewer updates does not stop it; one of 12,000
    does (a fake train.py: what run_variant asks for is what it checks)."""
    asked: list[tuple[str, ...]] = []

    def fake_train(overrides: Any, seed: int, run: Path, threads: int, out: Any) -> bool:
        asked.append(tuple(overrides))
        assert run.parent.name == "12000-updates"
        return False  # nothing recorded: the test looks at what was asked for

    monkeypatch.setattr(variant_runs, "train_run", fake_train)
    monkeypatch.setattr(mp, "RECORDS", tmp_path / "records")
    monkeypatch.setattr(mp, "RUNS", tmp_path / "runs")
    stem = "bible_en_fr-rnn_bahdanau-seed1.json"
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / stem).write_text(json.dumps({"updates": 6000}))
    argv = ["run", "--only", "bible_en_fr rnn_bahdanau", "--updates", "12000", "--every", "500"]
    monkeypatch.setattr(attention_protocol, "read_all", lambda records: [])
    assert mp.main(argv) == 0
    (overrides,) = asked
    assert "trainer.max_steps=12000" in overrides and "trainer.val_every_steps=500" in overrides
    assert not any(o in overrides for o in mp.COMMON if "max_steps" in o or "val_every" in o)
    (tmp_path / "records" / stem).write_text(json.dumps({"updates": 12000}))
    assert mp.main(argv) == 0
    assert len(asked) == 1  # a record as long as asked: nothing trains


def test_with_length_needs_the_setting_it_replaces() -> None:
    assert attention_protocol.with_length(("a=1", "trainer.max_steps=5"), 7, None) == (
        "a=1",
        "trainer.max_steps=7",
    )
    with pytest.raises(KeyError, match=r"trainer\.val_every_steps"):
        attention_protocol.with_length(("trainer.max_steps=5",), None, 10)


def test_only_names_the_probes_when_one_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        mp.main(["show", "--only", "ding_de_en lstm"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "ding_de_en lstm" in err and "ding_de_en transformer" in err
