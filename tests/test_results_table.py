"""benchmarks/results_table.py and `make results`: the README's tables from Hydra sweeps.

Fake sweeps hold train.log lines in the trainer's format (one real toy run checks that
format); the numbers are checked against hand-computed means and standard deviations.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers.toy_train import toy_train_config
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from attnmt.config import validate_config
from attnmt.train.loop import train
from benchmarks import results_table as rt

ROOT = Path(__file__).resolve().parents[1]
FILE_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"  # hydra/job_logging
BLEU_SIG = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
CHRF_SIG = "chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"
README = """# attnmt

Intro.

<!-- results:main:start -->
old main table
<!-- results:main:end -->

Between.

<!-- results:attention:start -->
<!-- results:attention:end -->

Outro.
"""


def _log(
    params: float,
    minutes: int,
    bleu: float | None,
    chrf: float | None,
    model: str = "transformer",
    warning: str = "",
) -> str:
    """A train.log as the trainer writes it: start, updates, validations, test lines."""

    def t(minute: int, second: int = 0) -> str:
        return f"[2026-11-23 10:{minute:02d}:{second:02d},123]"

    lines = [
        f"{t(0)}[attnmt.train.data][INFO] - valid: 200 pairs for validation; "
        "126 train batches/epoch",
        f"{t(0, 1)}[attnmt.train.loop][INFO] - model {model}: {params:.2f}M parameters on cpu, "
        "precision fp32, 1 rank(s)",
        f"{t(1)}[attnmt.train.loop][INFO] - step 1 | epoch 0 | nll 8.889 (smoothed 8.908) | "
        "ppl 7252.90 | lr 1.50e-05 | gnorm 2.91 | 388 tok/s",
        f"{t(1, 30)}[attnmt.train.loop][INFO] - sacrebleu signatures: {BLEU_SIG} / "
        f"{CHRF_SIG.removeprefix('chrF2|')}",
        f"{t(2)}[attnmt.train.loop][INFO] - valid step 100 | nll 6.000 | ppl 403.43 | "
        "acc 0.100 | BLEU 0.50 | chrF 10.00",
        f"{t(1 + minutes)}[attnmt.train.loop][INFO] - valid step 900 | nll 4.000 | "
        "ppl 54.60 | acc 0.300 | BLEU 2.00 | chrF 15.00",
    ]
    if warning:
        lines.append(f"{t(1 + minutes, 5)}[attnmt.train.loop][WARNING] - {warning}")
    if bleu is not None and chrf is not None:
        lines += [
            f"{t(2 + minutes)}[attnmt.train.report][INFO] - test (best-900.pt, beam 1): "
            f"BLEU|{BLEU_SIG} = {bleu:.2f} 30.0/10.0/5.0/2.0 (BP = 1.000 ratio = 1.000 "
            "hyp_len = 100 ref_len = 100)",
            f"{t(2 + minutes)}[attnmt.train.report][INFO] - test (best-900.pt, beam 1): "
            f"{CHRF_SIG} = {chrf:.2f}",
        ]
    return "\n".join(lines) + "\n"


def _job(sweep: Path, num: int, overrides: dict[str, Any], log: str | None) -> Path:
    """A job directory as Hydra's multirun leaves it: .hydra/{overrides,config}.yaml, train.log."""
    name = "_".join(str(v) for v in overrides.values())
    job = sweep / f"{num}_{name}"
    (job / ".hydra").mkdir(parents=True)
    items = [f"{k}={v}" for k, v in overrides.items()]
    OmegaConf.save(OmegaConf.create(items), job / ".hydra" / "overrides.yaml")
    config = {
        "seed": int(overrides.get("seed", 1)),
        "data": {"name": "ding_de_en", "src_lang": "de", "tgt_lang": "en"},
        "model": {"name": overrides.get("model", "rnn_luong"), "attention": {"score": "general"}},
        "trainer": {"time_budget_min": 12.0, "max_steps": 0},
    }
    OmegaConf.save(OmegaConf.create(config), job / ".hydra" / "config.yaml")
    if log is not None:
        (job / "train.log").write_text(log, encoding="utf-8")
    return job


def _multirun(sweep: Path, params: dict[str, str], task: list[str]) -> None:
    cfg = {"hydra": {"sweeper": {"params": params}, "overrides": {"task": task}}}
    sweep.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create(cfg), sweep / "multirun.yaml")


def _machine(sweep: Path) -> None:
    info = {
        "cpu": "Test CPU 9000",
        "cpu_capability": "AVX2",
        "cores": 2,
        "torch_threads": 2,
        "gpu": None,
        "torch": "2.13.0",
        "commit": "abc1234",
        "recorded": "2026-11-23T10:00:00",
    }
    (sweep / "machine.json").write_text(json.dumps(info), encoding="utf-8")


def _main_sweep(sweep: Path) -> None:
    """2 presets × 2 seeds on ding_de_en, all finished."""
    _multirun(sweep, {"seed": "1,2", "model": "transformer,rnn_luong"}, ["experiment=x"])
    _machine(sweep)
    figures = {  # (seed, model): params, minutes, BLEU, chrF
        ("1", "transformer"): (3.66, 12, 3.00, 20.00),
        ("1", "rnn_luong"): (5.07, 12, 1.50, 18.00),
        ("2", "transformer"): (3.66, 11, 4.00, 22.00),
        ("2", "rnn_luong"): (5.07, 11, 2.50, 17.00),
    }
    for num, ((seed, model), (params, minutes, bleu, chrf)) in enumerate(figures.items()):
        overrides = {"seed": seed, "model": model, "experiment": "x"}
        _job(sweep, num, overrides, _log(params, minutes, bleu, chrf, model))


def _row(md: str, *cells: str) -> str:
    rows = [ln for ln in md.splitlines() if all(f"| {c} |" in ln for c in cells)]
    assert len(rows) == 1, (cells, md)
    return rows[0]


def test_mean_and_std_over_seeds_per_preset(tmp_path: Path) -> None:
    _main_sweep(tmp_path / "main")
    out = tmp_path / "out" / "results"
    assert rt.main(["table", "--main", str(tmp_path / "main"), "--out", str(out)]) == 0
    md = out.with_suffix(".md").read_text(encoding="utf-8")
    # transformer: BLEU 3, 4 -> 3.50 ± 0.71 (sample std √0.5); chrF 20, 22 -> 21.00 ± 1.41;
    # minutes 12, 11 -> 11.5 ± 0.7; updates 900, 900
    row = _row(md, "ding_de_en (de→en)", "transformer")
    assert row == (
        "| ding_de_en (de→en) | transformer | 2 of 2 | 3.50 ± 0.71 | 21.00 ± 1.41 | 3.66M "
        "| 11.5 ± 0.7 | 900 ± 0 |"
    )
    # rnn_luong: BLEU 1.5, 2.5 -> 2.00 ± 0.71; chrF 18, 17 -> 17.50 ± 0.71
    assert "| 2 of 2 | 2.00 ± 0.71 | 17.50 ± 0.71 | 5.07M |" in _row(md, "rnn_luong")
    assert md.index("| transformer |") < md.index("| rnn_luong |")  # the sweep's order
    assert f"BLEU `{BLEU_SIG}`" in md and f"`{CHRF_SIG}`" in md
    assert "beam 1" in md and "asked: 1, 2" in md and "12.0 min" in md
    assert (
        "Ran on: CPU Test CPU 9000 (2 cores, AVX2, torch 2.13.0 with 2 threads); device cpu" in md
    )
    assert "without a result" not in md
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    first = data["main"]["rows"][0]
    assert (first["corpus"], first["model"], first["seeds_ok"]) == ("ding_de_en", "transformer", 2)
    assert first["test_bleu"]["mean"] == pytest.approx(3.5)
    assert first["test_bleu"]["std"] == pytest.approx(0.5**0.5)
    assert first["params_m"] == pytest.approx(3.66)
    assert [r["seed"] for r in first["runs"]] == ["1", "2"]
    assert data["main"]["machine"]["cpu"] == "Test CPU 9000"


def test_failed_and_missing_runs_are_listed_not_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "main"
    _multirun(sweep, {"seed": "1,2", "model": "transformer,rnn_luong"}, ["experiment=x"])
    _job(sweep, 0, {"seed": "1", "model": "transformer", "experiment": "x"}, _log(3.66, 12, 3, 20))
    warn = "step 901: non-finite loss or gradient (NaN/inf); update skipped"
    _job(
        sweep,
        1,
        {"seed": "1", "model": "rnn_luong", "experiment": "x"},
        _log(5.07, 12, None, None, warning=warn),
    )
    _job(sweep, 2, {"seed": "2", "model": "transformer", "experiment": "x"}, None)  # no train.log
    # job 3 (seed 2, rnn_luong) never started: only multirun.yaml knows it
    assert rt.main(["table", "--main", str(sweep), "--out", str(tmp_path / "r")]) == 1
    md = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert "| transformer | 1 of 2 (1 failed) | 3.00 | 20.00 |" in md
    assert "| rnn_luong | 0 of 2 (1 failed, 1 not run) | – | – | 5.07M |" in md
    assert f"- failed: seed 1, model=rnn_luong ({sweep / '1_1_rnn_luong_x'}): no test result" in md
    assert f"last warning: {warn}" in md
    assert "- failed: seed 2, model=transformer" in md and "no train.log" in md
    assert "- not run: seed 2, model=rnn_luong: no job directory" in md
    assert "3 run(s) have no result" in capsys.readouterr().err
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    statuses = [r["status"] for row in data["main"]["rows"] for r in row["runs"]]
    assert sorted(statuses) == ["failed", "failed", "not run", "ok"]


def test_attention_table_is_scorers_by_modes(tmp_path: Path) -> None:
    sweep = tmp_path / "attention"
    params = {"model.attention.score": "dot,location", "model.attention.mode": "global,hard"}
    _multirun(sweep, params, ["experiment=y", "seed=1"])
    _machine(sweep)
    figures = {("dot", "global"): (1.25, 15.5), ("dot", "hard"): (0.5, 12.0)}
    figures[("location", "global")] = (2.0, 16.25)
    for num, ((score, mode), (bleu, chrf)) in enumerate(figures.items()):
        overrides = {"model.attention.score": score, "model.attention.mode": mode}
        overrides.update({"experiment": "y", "seed": "1"})
        _job(sweep, num, overrides, _log(5.0 + num / 100, 3, bleu, chrf, "rnn_luong"))
    assert rt.main(["table", "--attention", str(sweep), "--out", str(tmp_path / "r")]) == 1
    md = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert "| score \\ mode | global | hard | parameters |" in md
    assert "| dot | 1.25 / 15.50 | 0.50 / 12.00 | 5.00–5.01M |" in md
    assert "| location | 2.00 / 16.25 | not run | 5.02M |" in md
    assert "rnn_luong on ding_de_en (de→en)" in md and "seed 1" in md


def test_readme_tables_are_replaced_between_the_markers(tmp_path: Path) -> None:
    _main_sweep(tmp_path / "main")
    readme = tmp_path / "README.md"
    readme.write_text(README, encoding="utf-8")
    args = ["table", "--main", str(tmp_path / "main"), "--readme", str(readme)]
    assert rt.main(args) == 0
    text = readme.read_text(encoding="utf-8")
    assert "old main table" not in text
    head, rest = text.split("<!-- results:main:start -->\n")
    table, tail = rest.split("<!-- results:main:end -->")
    assert head == README.split("<!-- results:main:start -->")[0]
    assert tail == README.split("<!-- results:main:end -->")[1]  # attention block untouched
    assert "do not edit by hand" in table and "| transformer | 2 of 2 | 3.50 ± 0.71 |" in table
    assert rt.main(args) == 0  # again: the same text, nothing doubled
    assert readme.read_text(encoding="utf-8") == text
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp file


@pytest.mark.parametrize(
    "broken",
    [
        README.replace("<!-- results:main:end -->\n", ""),
        README.replace("<!-- results:main:start -->", "").replace("old", "<!-- x -->"),
        README.replace(
            "<!-- results:main:start -->\nold main table\n<!-- results:main:end -->",
            "<!-- results:main:end -->\n<!-- results:main:start -->",
        ),
        README + "<!-- results:main:start -->\n",
    ],
    ids=["no-end", "no-start", "swapped", "twice"],
)
def test_missing_markers_are_a_clear_error_and_leave_the_readme(
    tmp_path: Path, broken: str
) -> None:
    _main_sweep(tmp_path / "main")
    readme = tmp_path / "README.md"
    readme.write_text(broken, encoding="utf-8")
    args = ["table", "--main", str(tmp_path / "main"), "--readme", str(readme)]
    with pytest.raises(SystemExit, match=r"<!-- results:main:start -->\n  <!-- results:main:end"):
        rt.main([*args, "--out", str(tmp_path / "r")])
    assert readme.read_text(encoding="utf-8") == broken
    assert not (tmp_path / "r.md").exists()  # checked before anything is written
    # plan checks both sections before hours of training
    readme.write_text(README.replace("<!-- results:attention:end -->", ""), encoding="utf-8")
    with pytest.raises(SystemExit, match="attention results table goes between"):
        rt.main(["plan", "--readme", str(readme), "--sweep", "experiment=results_main"])


def test_plan_counts_runs_records_the_machine_and_refuses_an_old_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main, attention = tmp_path / "main", tmp_path / "attention"
    sweeps = [
        f"experiment=results_main hydra.sweep.dir={main} seed=1,2,3 trainer.time_budget_min=12",
        f"experiment=results_attention hydra.sweep.dir={attention} trainer.time_budget_min=3",
    ]
    readme = tmp_path / "README.md"
    readme.write_text(README, encoding="utf-8")
    args = ["plan", "--readme", str(readme), "--sweep", sweeps[0], "--sweep", sweeps[1]]
    assert rt.main(args) == 0
    out = capsys.readouterr().out
    assert "results_main: 18 runs = seed (3) × data (2) × model (3), 12 min each" in out
    assert (
        "results_attention: 28 runs = model.attention.score (7) × model.attention.mode (4)" in out
    )
    assert "5.0 h of training budgets (300 min)" in out  # 18 × 12 + 28 × 3 minutes
    info = json.loads((main / "machine.json").read_text(encoding="utf-8"))
    assert info["cores"] >= 1 and info["torch_threads"] >= 1 and info["cpu"]
    assert rt.main(args) == 0  # a sweep that never started is no sweep
    (main / "0_job").mkdir()
    with pytest.raises(SystemExit, match="already holds a sweep; move it away"):
        rt.main(args)


def _compose(overrides: list[str], hydra: bool = True):  # type: ignore[no-untyped-def]
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return compose("train", overrides=overrides, return_hydra_config=hydra)


def test_experiments_compose_into_the_grids_of_the_tables(tmp_path: Path) -> None:
    cfg = _compose(["experiment=results_main"])
    params = {str(k): str(v) for k, v in cfg.hydra.sweeper.params.items()}
    jobs = rt.expand(rt.sweep_axes(params, ["experiment=results_main", "seed=1,2"]))
    assert len(jobs) == 2 * 2 * 3 and jobs[0] == {
        "seed": "1",
        "data": "ding_de_en",
        "model": "transformer",
        "experiment": "results_main",
    }
    assert {j["model"] for j in jobs} == {"transformer", "rnn_bahdanau", "rnn_luong"}
    assert {j["data"] for j in jobs} == {"ding_de_en", "bible_en_fr"}
    assert cfg.trainer.time_budget_min == 12.0 and cfg.hydra.sweep.dir == "outputs/results/main"
    cfg = _compose(["experiment=results_attention"])
    assert (cfg.model.name, cfg.data.name, cfg.trainer.time_budget_min) == (
        "rnn_luong",
        "ding_de_en",
        3.0,
    )
    params = {str(k): str(v) for k, v in cfg.hydra.sweeper.params.items()}
    jobs = rt.expand(rt.sweep_axes(params, []))
    assert len(jobs) == 7 * 4
    for job in jobs:  # every scorer × mode is a valid model config
        overrides = ["experiment=results_attention", *(f"{k}={v}" for k, v in job.items())]
        run = validate_config(_compose(overrides, hydra=False))
        assert run.model.attention.score == job["model.attention.score"]
        assert run.model.attention.mode == job["model.attention.mode"]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_results_expands_to_the_multiruns_and_the_table() -> None:
    def dry(*args: str) -> str:
        done = subprocess.run(
            ["make", "-n", "results", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    full = dry("RESULTS_SEEDS=1,2", "RESULTS_BUDGET=10")
    assert "-m benchmarks.results_table plan --readme README.md" in full
    assert (
        "train.py -m experiment=results_main hydra.sweep.dir=outputs/results/main seed=1,2 " in full
    )
    assert "trainer.time_budget_min=10" in full
    assert (
        "train.py -m experiment=results_attention hydra.sweep.dir=outputs/results/attention" in full
    )
    assert "--out outputs/results/results --readme README.md" in full
    quick = dry("RESULTS_QUICK=1")
    assert "hydra.sweep.dir=outputs/results-quick/main seed=1,2 " in quick
    assert "trainer.max_steps=5" in quick and "--readme" not in quick
    main_only = dry("RESULTS_SEEDS=1", "RESULTS_PARTS=main")
    assert "experiment=results_main hydra.sweep.dir=outputs/results/main seed=1 " in main_only
    assert "results_attention" not in main_only and "--attention" not in main_only
    assert "table --main outputs/results/main" in main_only


def test_a_real_train_log_is_read(tmp_path: Path) -> None:
    """The trainer's own lines (not hand-written ones): parameters, device, scores, signatures."""
    job = tmp_path / "sweep" / "0_run"
    (job / ".hydra").mkdir(parents=True)
    handler = logging.FileHandler(job / "train.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter(FILE_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.INFO)
    try:
        cfg = toy_train_config(
            tmp_path / "data",
            "trainer.max_steps=10",
            "trainer.val_every_steps=10",
            "trainer.test=true",
        )
        result = train(cfg, job)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()
    got = rt.read_job(job)
    assert got.status == "ok" and got.device == "cpu" and got.params_m > 0
    assert got.run.test["bleu"] == pytest.approx(result["test_bleu"], abs=0.01)
    assert got.run.test["chrf"] == pytest.approx(result["test_chrf"], abs=0.01)
    assert got.run.signature == result["test_signature"]
    assert got.chrf_signature.startswith("chrF2|nrefs:1|") and got.updates == 10
