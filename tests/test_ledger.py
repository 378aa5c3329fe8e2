"""The results ledger, plan and runner (experiments/ledger.py, results_plan.py, results_run.py):
keys, records only for finished runs, skip of recorded runs, every cell at every seed in
priority order, the time limit, stale records, the extras hook; one real toy run through
train.py."""

from __future__ import annotations

import dataclasses
import signal
import sys
import time
from pathlib import Path

import pytest
from helpers.ledger_records import MACHINE, fake_settings, record_for, toy_plan
from helpers.toy_train import TOY_OVERRIDES
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from attnmt.run_dir import RunDir
from attnmt.run_record import RecordWriter
from experiments import kept_outputs, results_run
from experiments.ledger import (
    defining_settings,
    read_records,
    record_stem,
    settings_key,
    split_current,
    stale_reason,
    write_record,
)
from experiments.protocol import length_config
from experiments.results_plan import (
    CONFIGS,
    FIRST_GUESS_MIN,
    TRANSFORMER_LABELS,
    Cell,
    PlannedRun,
    compose_settings,
    load_experiment,
    make_plan,
)
from experiments.results_run import Runner, collect

TEST = {
    "checkpoint": "best-4.pt",
    "beam": 1,
    "bleu": 12.34,
    "chrf": 40.5,
    "bleu_signature": "BLEU|nrefs:1|case:mixed",
    "chrf_signature": "chrF2|nrefs:1|nc:6",
}


def fake_run_dir(run_dir: Path, with_test: bool = True, entropy: float | None = None) -> None:
    """What train.py leaves: its run record (with or without the test) and last.pt;
    ``entropy``: the cross-attention's normalised entropy at the last validation (and 0.9
    at the one before)."""
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "last.pt").write_bytes(b"weights")
    about = {"params": 3_660_000, "device": "cpu", "precision": "fp32"}
    writer = RecordWriter(RunDir(run_dir), None, about)
    writer.event("start", 0)
    rows = [(2, 0.1, 3.0, 1.0, 10.0, 0.9), (4, 0.2, 2.5, 2.0, 12.0, entropy)]
    for step, minutes, nll, bleu, chrf, h in rows:
        more = {} if entropy is None else {"attention_entropy_norm": {"cross": h}}
        writer.event("valid", step, epoch=0, minutes=minutes, nll=nll, bleu=bleu, chrf=chrf, **more)
    if with_test:
        writer.event("test", 4, epoch=0, minutes=0.2, **TEST)
    writer.update(status="finished", reason="max_steps", step=4, minutes=0.2)
    writer.update(test=TEST if with_test else None)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def runner(tmp_path: Path, launch, hours: float = 0.0, clock=None) -> Runner:
    ledger = tmp_path / "runs"
    return Runner(
        ledger=ledger,
        runs_dir=tmp_path / "outputs",
        planner=lambda: toy_plan(read_records(ledger)[0]),
        hours=hours,
        launch=launch,
        clock=clock or Clock(),
        machine=MACHINE,
        commit="abc1234",
    )


# ---- keys and records ------------------------------------------------------------------------


def test_the_key_ignores_what_does_not_define_a_run() -> None:
    config = {"seed": 1, "device": "cpu", "data": {"name": "d", "root": "/x"}, "hydra": {}}
    config["trainer"] = {"max_steps": 1500, "progress_bar": False}
    settings = defining_settings(config)
    assert settings == {"data": {"name": "d"}, "trainer": {"max_steps": 1500}}
    other = defining_settings({**config, "seed": 2, "device": "cuda", "data": {"name": "d"}})
    assert settings_key(other) == settings_key(settings)
    config["trainer"] = {"max_steps": 400}
    assert settings_key(defining_settings(config)) != settings_key(settings)


def test_records_round_trip_and_bad_files_are_named(tmp_path: Path) -> None:
    plan = toy_plan([])
    record = record_for(plan, "ding_de_en transformer")
    path = write_record(tmp_path, record)
    assert path.name == f"main-ding_de_en-transformer-seed1-{record.key}.json"
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    (tmp_path / f"{record.stem}.attn.json").write_text("{}", encoding="utf-8")  # its maps
    records, bad = read_records(tmp_path)
    assert records == [record]
    assert len(bad) == 1 and "broken.json" in bad[0]
    assert "Toy CPU (family 25 model 1) avx2, 2 cores" in record.machine_line


# ---- the plan ------------------------------------------------------------------------------


def attention_config() -> tuple[dict, list[int]]:
    """configs/experiment/results_attention.yaml as a plain dict, and its seeds."""
    config = OmegaConf.to_container(load_experiment("attention"), resolve=False)
    assert isinstance(config, dict)
    seeds = [int(s) for s in str(config["hydra"]["sweeper"]["params"]["seed"]).split(",")]
    return config, seeds


def test_the_real_configs_plan_every_cell_with_distinct_keys() -> None:
    plan = make_plan([])
    config, seeds = attention_config()
    params = config["hydra"]["sweeper"]["params"]
    attention = [c for c in plan.cells if c.table == "attention"]
    assert len([c for c in plan.cells if c.table == "main"]) == 6
    assert len(attention) == 7 * 4 + 4 + 1
    assert len(set(plan.keys.values())) == len(plan.cells)
    assert len({c.labels for c in attention}) == len(attention)
    assert plan.seeds["attention"] == seeds == [1, 2]
    first = plan.settings[plan.cells[0]]
    length = OmegaConf.load(CONFIGS.parent / length_config(first["data"]["name"])).max_steps
    assert first["trainer"]["max_steps"] == length and first["trainer"]["time_budget_min"] == 0
    for cell in attention:
        trainer = plan.settings[cell]["trainer"]
        assert trainer["max_steps"] == config["trainer"]["max_steps"]
        assert trainer["val_every_steps"] == config["trainer"]["val_every_steps"]
        assert plan.settings[cell]["data"]["name"] == "ding_de_en"
    *rnn, transformer = attention
    for cell in rnn:  # the table's size is a setting of every RNN cell, not a label
        model = plan.settings[cell]["model"]
        assert model["hidden_size"] == params["model.hidden_size"] == 128
        assert model["emb_dim"] == params["model.emb_dim"]
        assert list(cell.label) == ["model", "score", "mode"]
        assert model["name"] == cell.label["model"]
        assert model["attention"]["score"] == cell.label["score"]
        assert model["attention"]["mode"] == cell.label["mode"]
    reference = [c for c in rnn if c.label["model"] == "rnn_bahdanau"]
    assert [c.label["mode"] for c in reference] == ["global", "local_m", "local_p", "hard"]
    assert {c.label["score"] for c in reference} == {"additive"}
    # the Transformer reference row: the preset at its own size, none of the grid's model.*
    preset = OmegaConf.load(CONFIGS / "model" / "transformer.yaml")
    model = plan.settings[transformer]["model"]
    assert model["name"] == "transformer" and model["d_model"] == preset.d_model
    assert model["n_heads"] == preset.n_heads
    assert "emb_dim" not in model and "hidden_size" not in model
    assert not any(o.startswith("model.") for o in transformer.overrides)
    assert transformer.label == {"model": "transformer", **TRANSFORMER_LABELS}
    # every run's folder is one plain value of `hydra.run.dir=` (a comma made the Transformer
    # row's a sweep list: Hydra refused it, "Ambiguous value", and the run never trained)
    parser = OverridesParser.create()
    for run in plan.todo:
        stem = record_stem(run.cell.table, run.cell.label, run.seed, run.key)
        (override,) = parser.parse_overrides([f"hydra.run.dir=outputs/results/x/{stem}"])
        assert not override.is_sweep_override(), stem
        assert override.value() == f"outputs/results/x/{stem}"
    stem = record_stem("attention", transformer.label, 1, "k")
    assert stem == "attention-transformer-scaled_dot__4_heads-global-seed1-k"


def test_the_preset_size_check_is_two_table_cells_at_the_presets_size() -> None:
    """results_attention_preset: rnn_luong general local_m and local_p at rnn_luong.yaml's own
    size (not the table's 128), every other setting the same cell's of the attention table
    (the defaults entry to results_attention), seeds 1 and 2."""
    plan = make_plan([], tables=("attention", "attention_preset"))
    check = [c for c in plan.cells if c.table == "attention_preset"]
    assert [c.label for c in check] == [
        {"model": "rnn_luong", "score": "general", "mode": m} for m in ("local_m", "local_p")
    ]
    assert plan.seeds["attention_preset"] == [1, 2]
    todo = [(r.cell, r.seed) for r in plan.todo if r.cell.table == "attention_preset"]
    assert todo == [(c, s) for s in (1, 2) for c in check]
    preset = OmegaConf.load(CONFIGS / "model" / "rnn_luong.yaml")
    params = load_experiment("attention_preset").hydra.sweeper.params
    assert params["model.emb_dim"] == preset.emb_dim and params["model.hidden_size"] == (
        preset.hidden_size
    )  # spelled out (else the table's 128 merges in), but the preset's own values
    table = {c.labels: c for c in plan.cells if c.table == "attention"}
    bare = compose_settings(  # the preset's size by default, no size override
        [["experiment=results_attention_preset", f"model.attention.mode={c.label['mode']}"]
         for c in check]
    )  # fmt: skip
    for cell, composed in zip(check, bare):
        ours, theirs = plan.settings[cell], plan.settings[table[cell.labels]]
        assert ours == composed
        assert ours["model"]["emb_dim"] == ours["model"]["hidden_size"] == preset.hidden_size
        assert preset.hidden_size == 256 and theirs["model"]["hidden_size"] == 128
        assert {**ours["model"], "emb_dim": 128, "hidden_size": 128} == theirs["model"]
        assert {k: v for k, v in ours.items() if k != "model"} == {
            k: v for k, v in theirs.items() if k != "model"
        }  # data, trainer (5,500 updates, fp32, ...), decode: the table's
        assert ours["trainer"]["max_steps"] == 5500 and ours["trainer"]["precision"] == "fp32"
        assert (
            ours["data"]["name"] == "ding_de_en"
            and plan.keys[cell] != plan.keys[table[cell.labels]]
        )
    distinct = lambda lists: [{"cell": i} for i, _ in enumerate(lists)]  # noqa: E731 (no compose)
    attention_only = make_plan([], tables=("attention",), settings_of=distinct)
    assert {c.table for c in attention_only.cells} == {"attention"}
    assert {r.cell.table for r in attention_only.todo} == {"attention"}


def test_priority_every_cell_at_every_seed_seed_major_main_before_attention() -> None:
    plan = toy_plan([])
    main = [c for c in plan.cells if c.table == "main"]
    attention = [c for c in plan.cells if c.table == "attention"]
    preset = [c for c in plan.cells if c.table == "attention_preset"]
    seeds = attention_config()[1]
    assert plan.seeds == {"main": [1, 2, 3], "attention": seeds, "attention_preset": seeds}
    expected = [
        (cell, seed)
        for seed in (1, 2, 3)
        for table, cells in (("main", main), ("attention", attention), ("attention_preset", preset))
        if seed in plan.seeds[table]
        for cell in cells
    ]
    assert [(r.cell, r.seed) for r in plan.todo] == expected  # rows in grid order
    order = [(r.seed, r.cell.table) for r in plan.todo]
    assert order == (
        [(1, "main")] * 6
        + [(1, "attention")] * 33
        + [(1, "attention_preset")] * 2
        + [(2, "main")] * 6
        + [(2, "attention")] * 33
        + [(2, "attention_preset")] * 2
        + [(3, "main")] * 6
    )
    assert plan.waiting == []  # nothing waits for earlier results
    assert [r.cell.label["data"] for r in plan.todo[:3]] == ["ding_de_en"] * 3


def test_recorded_runs_are_skipped_and_seed_two_does_not_depend_on_earlier_results() -> None:
    """Every attention cell gets seed 2, whatever the BLEU of the seed-1 records (rising,
    falling, or only a few cells recorded): the seeds are fixed in advance."""
    plan = toy_plan([])
    attention = [c for c in plan.cells if c.table == "attention"]
    rising = [record_for(plan, c.text(), bleu=float(i)) for i, c in enumerate(attention)]
    falling = [record_for(plan, c.text(), bleu=40.0 - i) for i, c in enumerate(attention)]
    for records in (rising, falling, rising[:5], []):
        got = toy_plan(records, tables=("attention",))
        assert got.waiting == []
        assert [r.cell for r in got.todo if r.seed == 2] == attention
        recorded = {r.key for r in records}
        assert [r.cell for r in got.todo if r.seed == 1] == [
            c for c in attention if got.keys[c] not in recorded
        ]
    done = toy_plan([*rising, record_for(plan, "ding_de_en transformer")])
    assert ("ding_de_en transformer", 1) not in {(r.cell.text(), r.seed) for r in done.todo}
    assert done.todo[0].describe().startswith("main: ding_de_en rnn_bahdanau, seed 1")
    assert [r.cell for r in done.todo if r.cell.table == "attention"] == attention  # seed 2


def test_records_of_changed_settings_are_stale() -> None:
    plan = toy_plan([])
    old = record_for(plan, "ding_de_en transformer", key="0123456789ab", settings={"old": 1})
    current = record_for(plan, "ding_de_en rnn_luong")
    plan = toy_plan([old, current])
    assert plan.stale == [old] and plan.current == [current]
    assert ("ding_de_en transformer", 1) in {(r.cell.text(), r.seed) for r in plan.todo}
    assert split_current([old], {old.key: old.settings}) == ([old], [])


def test_a_timed_run_is_estimated_from_the_ledger() -> None:
    plan = toy_plan([])
    timed = toy_plan([record_for(plan, "ding_de_en transformer", seed=2, wall_minutes=20.0)])
    assert timed.todo[0].seed == 1 and timed.todo[0].estimate_min == pytest.approx(25.0)
    assert timed.todo[1].estimate_min == 40.0  # not timed yet: the first guess


def test_a_seed_filter_plans_that_seed_of_every_cell() -> None:
    """``--seeds 2`` plans seed 2 of every attention cell not recorded at seed 2, with no
    seed 1 recorded anywhere."""
    plan = toy_plan([])
    attention = [c for c in plan.cells if c.table == "attention"]
    recorded = [record_for(plan, attention[0].text(), seed=2)]
    seed2 = toy_plan(recorded, tables=("attention",), seeds_limit=(2,))
    assert [r.cell for r in seed2.todo] == attention[1:] and {r.seed for r in seed2.todo} == {2}
    assert seed2.waiting == [] and seed2.seeds["attention"] == [1, 2]


def test_tables_and_labels_narrow_the_plan_and_other_tables_records_are_not_stale() -> None:
    plan = toy_plan([])
    attention = record_for(plan, plan.cells[-1].text())
    ding = toy_plan([attention], tables=("main",), only=("ding_de_en",), seeds_limit=(2, 3))
    assert [(r.cell.text(), r.seed) for r in ding.todo] == [
        (f"ding_de_en {m}", s) for s in (2, 3) for m in ("transformer", "rnn_bahdanau", "rnn_luong")
    ]
    assert ding.stale == [] and ding.current == []  # the attention record is another table's
    local_m = toy_plan([], tables=("attention",), only=("rnn_luong", "local_m"))
    assert len(local_m.todo) == 7 * 2 and {r.cell.label["mode"] for r in local_m.todo} == {
        "local_m"
    }
    assert [r.seed for r in local_m.todo] == [1] * 7 + [2] * 7


# ---- the runner ----------------------------------------------------------------------------


def test_a_finished_run_is_recorded_with_its_curve(tmp_path: Path) -> None:
    def launch(run: PlannedRun, run_dir: Path) -> int:
        fake_run_dir(run_dir)
        return 0

    r = runner(tmp_path, launch)
    r.max_runs = 2
    outcome = r.run()
    assert len(outcome.recorded) == 2 and not outcome.failed
    records, _ = read_records(tmp_path / "runs")
    first = next(x for x in records if x.cell == {"data": "ding_de_en", "model": "transformer"})
    assert first.test["bleu"] == 12.34 and first.test["chrf"] == 40.5
    assert first.test["chrf_signature"] == "chrF2|nrefs:1|nc:6" and first.test["beam"] == 1
    assert first.updates == 4 and first.train_minutes == 0.2 and first.params_m == 3.66
    assert first.curve == [[2, 0.1, 3.0, 1.0, 10.0], [4, 0.2, 2.5, 2.0, 12.0]]
    assert first.machine == MACHINE and first.commit == "abc1234" and first.seed == 1


def test_two_jobs_run_two_runs_at_once_each_once(tmp_path: Path) -> None:
    """``jobs=2``: two launches overlap, no run is launched twice, ``max_runs`` holds."""
    import threading

    lock, running, peak, launched = threading.Lock(), [0], [0], []

    def launch(run: PlannedRun, run_dir: Path) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            launched.append((run.key, run.seed))
        time.sleep(0.2)  # both jobs are inside launch at once
        fake_run_dir(run_dir)
        with lock:
            running[0] -= 1
        return 0

    r = runner(tmp_path, launch)
    r.jobs, r.max_runs = 2, 6
    outcome = r.run()
    assert len(outcome.recorded) == 6 and not outcome.failed
    assert peak[0] == 2 and len(set(launched)) == len(launched) == 6
    assert len(read_records(tmp_path / "runs")[0]) == 6


def test_the_extras_hook_fills_the_record_before_it_is_written(tmp_path: Path) -> None:
    dirs: list[Path] = []
    calls: list[tuple[str, Path, Path, dict]] = []

    def launch(run: PlannedRun, run_dir: Path) -> int:
        dirs.append(run_dir)
        fake_run_dir(run_dir)
        return 0

    def extras(record, run_dir: Path, ledger: Path) -> dict:
        calls.append((record.stem, run_dir, ledger, dict(record.extra)))
        assert not (ledger / f"{record.stem}.json").exists()  # before the record is written
        return {"attention_entropy": 0.42, "silver": {"aer": 0.3}}

    r = runner(tmp_path, launch)
    r.extras, r.max_runs = extras, 1
    assert len(r.run().recorded) == 1
    (record,), _ = read_records(tmp_path / "runs")
    (stem, run_dir, ledger, before), *more = calls
    assert (stem, run_dir, ledger, more) == (record.stem, dirs[0], tmp_path / "runs", [])
    assert before == {"device": "cpu", "precision": "fp32"}  # collect's own fields are kept
    assert record.extra == {**before, "attention_entropy": 0.42, "silver": {"aer": 0.3}}


def test_a_failing_extras_hook_still_leaves_the_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def extras(record, run_dir: Path, ledger: Path) -> dict:
        raise RuntimeError("no silver today")

    r = runner(tmp_path, lambda run, d: (fake_run_dir(d), 0)[1])
    r.extras, r.max_runs = extras, 2
    with caplog.at_level("WARNING", logger="results"):
        outcome = r.run()
    assert len(outcome.recorded) == 2 and not outcome.failed
    records, _ = read_records(tmp_path / "runs")
    assert len(records) == 2 and all(x.test["bleu"] == 12.34 for x in records)
    assert all(x.extra == {"device": "cpu", "precision": "fp32"} for x in records)
    assert caplog.text.count("no extra measures") == 2 and "no silver today" in caplog.text


def test_record_extras_keep_every_runs_hypotheses_and_measure_attention_runs(
    tmp_path: Path,
) -> None:
    """The runner's hook: every table's test hypotheses kept beside the record (for the paired
    bootstraps); the last validation's entropy for an attention-table run only; no silver for
    a corpus without it; nothing kept for a run without test outputs."""
    plan = toy_plan([])
    run_dir = tmp_path / "run"
    fake_run_dir(run_dir, entropy=0.4242)
    ledger = tmp_path / "runs"
    toy = {"data": {"name": "toy_reverse"}}
    record = record_for(plan, "rnn_luong dot global", settings=toy)
    main = record_for(plan, "ding_de_en transformer", settings=toy)
    # the check at the preset's size: measured as the table's runs
    preset = record_for(plan, "rnn_luong general local_m", table="attention_preset", settings=toy)
    assert results_run.record_extras(main, run_dir, ledger) == {}  # no hyps/test.txt
    (run_dir / "hyps").mkdir()
    (run_dir / "hyps" / "test.txt").write_text("a b c\nd e\n", encoding="utf-8")
    extra = results_run.record_extras(record, run_dir, ledger)
    assert extra == {"attention_entropy": 0.4242, "hypotheses": f"{record.stem}.test.txt.xz"}
    assert preset.stem.startswith("attention_preset-rnn_luong-general-local_m-seed1-")
    extra = results_run.record_extras(preset, run_dir, ledger)
    assert extra == {"attention_entropy": 0.4242, "hypotheses": f"{preset.stem}.test.txt.xz"}
    assert kept_outputs.read_hypotheses(ledger / extra["hypotheses"]) == ["a b c", "d e"]
    extra = results_run.record_extras(main, run_dir, ledger)
    assert extra == {"hypotheses": f"{main.stem}.test.txt.xz"}  # no attention measures
    assert kept_outputs.read_hypotheses(ledger / extra["hypotheses"]) == ["a b c", "d e"]


def test_failed_runs_leave_no_record_and_the_next_run_goes_on(tmp_path: Path) -> None:
    calls: list[str] = []

    def launch(run: PlannedRun, run_dir: Path) -> int:
        calls.append(run.cell.text())
        if len(calls) == 1:
            return 1  # train.py failed
        fake_run_dir(run_dir, with_test=len(calls) != 2)  # the second: exit 0, no test
        return 0

    r = runner(tmp_path, launch)
    r.max_runs = 3
    outcome = r.run()
    assert len(outcome.failed) == 2 and len(outcome.recorded) == 1
    records, _ = read_records(tmp_path / "runs")
    assert [x.cell["model"] for x in records] == ["rnn_luong"]
    assert calls == ["ding_de_en transformer", "ding_de_en rnn_bahdanau", "ding_de_en rnn_luong"]


def test_a_signal_interrupts_the_run_leaves_no_record_and_starts_nothing(tmp_path: Path) -> None:
    calls: list[Path] = []

    def launch(run: PlannedRun, run_dir: Path) -> int:
        calls.append(run_dir)
        fake_run_dir(run_dir)  # even a run dir that looks complete
        r.request_stop(signal.SIGTERM)
        return 143

    r = runner(tmp_path, launch)
    outcome = r.run()
    assert len(calls) == 1 and outcome.interrupted and not outcome.recorded
    assert read_records(tmp_path / "runs") == ([], [])
    # the next invocation redoes it afresh (the old run directory is removed first)
    r2 = runner(tmp_path, lambda run, d: (fake_run_dir(d), 0)[1])
    r2.max_runs = 1
    assert len(r2.run().recorded) == 1
    assert read_records(tmp_path / "runs")[0][0].cell["model"] == "transformer"


def test_a_run_starts_only_if_its_estimate_fits_the_hours_left(tmp_path: Path) -> None:
    clock = Clock()

    def launch(run: PlannedRun, run_dir: Path) -> int:
        clock.now += 30 * 60  # each run takes 30 minutes
        fake_run_dir(run_dir)
        return 0

    outcome = runner(tmp_path, launch, hours=1.0, clock=clock).run()
    # first guesses: a main run 40 min, an attention run 22. The first main run fits in 60;
    # with 30 left no main run does (40, or 30 recorded x 1.25 for the first one's settings),
    # and the first attention run after them does; then nothing fits in the 0 left
    assert [r.split(":")[0] for r in outcome.recorded] == ["main", "attention"]
    assert FIRST_GUESS_MIN["main"] > 30 >= FIRST_GUESS_MIN["attention"]
    assert "0 min of RESULTS_HOURS left, and no run left fits in it" in outcome.stopped_for_time


@pytest.mark.slow
def test_a_real_toy_run_through_train_py_is_recorded(tmp_path: Path) -> None:
    overrides = [
        *TOY_OVERRIDES,
        f"data.root={tmp_path / 'data'}",
        "trainer.max_steps=4",
        "trainer.val_every_steps=2",
        "trainer.test=true",
    ]
    (settings,) = fake_settings([overrides])
    cell = Cell("main", (("data", "toy_reverse"), ("model", "transformer_tiny")), tuple(overrides))
    run = PlannedRun(cell, 1, settings_key(settings), settings)
    r = runner(tmp_path, None, clock=time.monotonic)
    r.planner = lambda: type("P", (), {"todo": [] if read_records(r.ledger)[0] else [run]})()
    r.keep_map = lambda rec, run_dir, target: results_run.keep_attention_map(rec, run_dir, target)
    outcome = r.run()
    assert outcome.recorded and not outcome.failed, outcome
    (record,), _ = read_records(tmp_path / "runs")
    assert record.updates == 4 and [row[0] for row in record.curve] == [2, 4]
    assert 0 <= record.test["bleu"] <= 100 and record.test["bleu_signature"].startswith("BLEU|")
    assert record.params_m > 0 and record.wall_minutes > 0
    # the fixed-sentence map of a toy run: captured by the same code the runner uses
    from experiments.attention_map import capture

    maps = capture(Path(record.run_dir), source="c a f", reference="f a c")
    assert set(maps["maps"]) == {"enc_self", "self", "cross"}
    assert len(maps["maps"]["self"]) == 2  # heads of the last layer
    self_map = maps["maps"]["self"][0]
    assert all(
        self_map[i][j] == 0 for i in range(len(self_map)) for j in range(i + 1, len(self_map))
    )


def test_collect_needs_a_test_result(tmp_path: Path) -> None:
    plan = toy_plan([])
    run = plan.todo[0]
    fake_run_dir(tmp_path / "a", with_test=False)
    assert collect(run, tmp_path / "a", 1.0, "", {}) is None
    fake_run_dir(tmp_path / "b")
    assert collect(run, tmp_path / "b", 1.0, "", {}) is not None


def test_the_runner_prints_the_plan_without_running(capsys: pytest.CaptureFixture[str]) -> None:
    assert results_run.main(["--dry-run", "--ledger", "/nonexistent/ledger"]) == 0
    out = capsys.readouterr().out
    assert "results plan: 41 cells, 0 runs in the ledger" in out
    assert out.index("main: ding_de_en transformer, seed 1") < out.index("attention:")
    assert out.index("attention:") < out.index("attention_preset:")
    assert sys.executable  # the runs would use this interpreter


def test_the_runner_plans_the_preset_size_check_only_when_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--tables attention_preset``: its 4 runs at the first guess (nothing timed yet);
    ``--tables attention`` (the table's fill): none of them."""
    ledger = "/nonexistent/ledger"
    assert results_run.main(["--dry-run", "--ledger", ledger, "--tables", "attention_preset"]) == 0
    runs = [line.strip() for line in capsys.readouterr().out.splitlines() if "seed" in line]
    guess = FIRST_GUESS_MIN["attention_preset"]
    assert runs == [
        f"attention_preset: rnn_luong general {mode}, seed {seed} [{key}]  ~{guess:.0f} min"
        for seed in (1, 2)
        for mode, key in (("local_m", runs[0].split("[")[1][:12]),
                          ("local_p", runs[1].split("[")[1][:12]))
    ]  # fmt: skip
    assert guess > FIRST_GUESS_MIN["attention"]  # 256 units: slower updates than 128
    assert results_run.main(["--dry-run", "--ledger", ledger, "--tables", "attention"]) == 0
    out = capsys.readouterr().out
    assert "results plan: 33 cells" in out and "attention_preset" not in out
    assert "attention: rnn_luong general local_m, seed 1" in out


def test_a_cell_another_runner_is_training_is_skipped_and_its_folder_kept(
    tmp_path: Path,
) -> None:
    """Two `make results` at once: the second never deletes the first's live run folder."""
    import json

    from attnmt.train import run_lock

    calls: list[str] = []

    def launch(run: PlannedRun, run_dir: Path) -> int:
        calls.append(run.cell.text())
        fake_run_dir(run_dir)
        return 0

    r = runner(tmp_path, launch)
    first = r.planner().todo[0]  # the cell the other runner holds
    stem = record_stem(first.cell.table, first.cell.label, first.seed, first.key)
    busy = tmp_path / "outputs" / first.cell.table / stem
    busy.mkdir(parents=True)
    lock = run_lock.owner_record()  # a live process's lock: this test process stands in
    (busy / ".lock").write_text(json.dumps(lock))
    (busy / "train.log").write_text("the other runner's run\n")
    r.max_runs = 1
    outcome = r.run()
    assert calls == ["ding_de_en rnn_bahdanau"]  # max_runs counts runs made, not cells skipped
    assert outcome.busy == [first.describe()] and not outcome.failed
    assert "left to the runner training it now: main: ding_de_en transformer" in (
        results_run.report(outcome)
    )
    assert (busy / "train.log").read_text() == "the other runner's run\n"


def test_a_setting_added_at_its_default_keeps_a_record_current() -> None:
    """A new schema key at its default keeps the old behaviour (as resume assumes), so a
    record from before it still counts; a new key set elsewhere, or a changed value, does
    not."""
    from experiments.ledger import same_run

    recorded = {"trainer": {"lr": 0.001, "max_steps": 1500}, "data": {"name": "ding_de_en"}}
    defaults = {"trainer.lr": 0.001, "trainer.test_ensemble": 1, "data.tokenizer.sampling": {}}
    now = {
        "trainer": {"lr": 0.001, "max_steps": 1500, "test_ensemble": 1},
        "data": {"name": "ding_de_en", "tokenizer": {"sampling": {}}},
    }
    assert same_run(recorded, now, defaults)
    now["trainer"]["test_ensemble"] = 3  # added, but not at its default
    assert not same_run(recorded, now, defaults)
    now["trainer"]["test_ensemble"] = 1
    now["trainer"]["lr"] = 0.002  # a recorded setting changed
    assert not same_run(recorded, now, defaults)
    now["trainer"]["lr"] = 0.001
    del now["trainer"]["max_steps"]  # a recorded setting is gone
    assert not same_run(recorded, now, defaults)
    # through the planner: the key differs, the record still counts for its cell
    plan = toy_plan([])
    old = record_for(plan, "ding_de_en transformer", key="0123456789ab", settings={"old": 1})
    assert split_current([old], {"fedcba987654": old.settings}, lambda m: {}) == (
        [dataclasses.replace(old, key="fedcba987654")],
        [],
    )
    rekeyed = split_current([old], {"fedcba987654": old.settings}, lambda m: {})[0][0]
    assert rekeyed.stem == old.stem  # its file (and its .attn.json maps) keep their name


def test_records_of_rnn_runs_from_before_enc_hidden_size_are_stale() -> None:
    """enc_hidden_size (null: annotations of hidden_size, half a direction) was added with a
    new meaning, not the old behaviour at its default: an RNN record written before it (each
    direction hidden_size wide) no longer describes the planned run, while a record of
    another model is untouched by it."""
    from attnmt.train.run_config import setting_defaults

    plan = toy_plan([])
    then = {"name": "rnn_luong", "hidden_size": 256, "bidirectional": True}
    now = {"model": {**then, "enc_hidden_size": None}, "trainer": {"lr": 0.001}}
    old = record_for(
        plan, "ding_de_en rnn_luong", key="0123456789ab", settings={**now, "model": then}
    )
    assert split_current([old], {"fedcba987654": now}, setting_defaults) == ([], [old])
    assert "enc_hidden_size" in stale_reason(old)  # docs/results.md says why it is left out
    transformer = {"model": {"name": "transformer", "d_model": 32}, "trainer": {"lr": 0.001}}
    kept = record_for(plan, "ding_de_en transformer", key="0123456789ab", settings=transformer)
    assert split_current([kept], {"fedcba987654": transformer}, setting_defaults)[1] == []
    assert stale_reason(kept) == "its settings are no longer what the configs give"
