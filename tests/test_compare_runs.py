"""scripts/compare_runs.py on toy run directories: seeds grouped, mean ± std, a PNG."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from helpers.toy_train import toy_train_config

from attnmt import run_curves
from attnmt.run_dir import RunDir
from attnmt.run_record import RecordWriter
from attnmt.train.loop import train
from scripts import compare_runs as compare


def _run(root: Path, name: str, seed: int, lr: str) -> dict:
    """A toy run with its record and .hydra/overrides.yaml as train.py writes them."""
    run = root / name
    (run / ".hydra").mkdir(parents=True)
    overrides = [f"seed={seed}", f"trainer.lr={lr}", f"hydra.run.dir={run}"]
    (run / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    cfg = toy_train_config(
        root / "data",
        f"seed={seed}",
        f"trainer.lr={lr}",
        "trainer.max_steps=20",
        "trainer.val_every_steps=10",
        "trainer.log_every_steps=5",
        "trainer.test=true",
        "decode.beam=2",
    )
    return train(cfg, run)


def test_seeds_are_grouped_with_mean_and_std(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "multirun"
    a = [_run(runs, f"{i}_seed={s}", s, "0.003") for i, s in enumerate((1, 2))]
    b = _run(runs, "2_other", 3, "0.001")
    capsys.readouterr()  # the runs' own output
    assert compare.main([str(runs), "--out", str(tmp_path / "out" / "cmp")]) == 0
    md = (tmp_path / "out" / "cmp.md").read_text(encoding="utf-8")
    assert (tmp_path / "out" / "cmp.png").read_bytes()[:4] == b"\x89PNG"
    assert md == capsys.readouterr().out
    table = [line for line in md.splitlines()[2:] if line.startswith("| ")]
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table}
    assert set(rows) == {"trainer.lr=0.003", "trainer.lr=0.001"}  # seed and paths left out
    bleus = [r["test_bleu"] for r in a]
    mean_std = f"{statistics.mean(bleus):.2f} ± {statistics.stdev(bleus):.2f}"
    assert "| 2 | " in rows["trainer.lr=0.003"] and mean_std in rows["trainer.lr=0.003"]
    assert f"| {b['test_bleu']:.2f} |" in rows["trainer.lr=0.001"]
    assert "signature: `BLEU|nrefs:1|case:mixed|eff:no|tok:13a" in md
    # the curves: one validation point per 10 steps, in training minutes
    run = compare.read_run(runs / "0_seed=1")
    assert [v[0] for v in run.valid] == [10, 20] and run.valid[0][1] >= 0.0
    assert run.beam == 2 and run.test["bleu"] == pytest.approx(a[0]["test_bleu"])
    assert run.test["chrf"] == pytest.approx(a[0]["test_chrf"])


def test_no_runs_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no run directory"):
        compare.main([str(tmp_path)])


def _recorded_run(
    root: Path,
    name: str,
    seed: int,
    valid: list[tuple[str, float]],
    stop: tuple[str, float] | None = None,
) -> Path:
    """A run directory whose record holds validations at training time ``MM:SS`` with a
    BLEU each, as the trainer writes them; ``stop``: the reason it finished and its
    ``trainer.time_budget_min`` (in .hydra/config.yaml)."""
    run = root / name
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(f"- seed={seed}\n- model=transformer\n")
    writer = RecordWriter(RunDir(run), None, {"model": "transformer"})
    writer.event("start", 0)
    for i, (clock, bleu) in enumerate(valid, start=1):
        minutes, seconds = map(int, clock.split(":"))
        at = minutes + seconds / 60
        writer.event("valid", 200 * i, epoch=0, minutes=at, nll=3.5, bleu=bleu, chrf=20.0)
    if stop is not None:
        reason, budget = stop
        (run / ".hydra" / "config.yaml").write_text(f"trainer:\n  time_budget_min: {budget}\n")
        writer.update(status="finished", reason=reason)
    return run


def test_best_validation_bleu_by_wall_clock_marks(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _recorded_run(runs, "a", 1, [("05:00", 1.0), ("10:00", 3.0), ("20:00", 2.5), ("29:30", 2.8)])
    _recorded_run(runs, "b", 2, [("04:00", 2.0), ("14:00", 4.0), ("31:00", 5.0)])
    out = tmp_path / "cmp"
    assert compare.main([str(runs), "--out", str(out), "--minutes", "5", "15", "30", "60"]) == 0
    md = out.with_suffix(".md").read_text(encoding="utf-8")
    row = next(line for line in md.splitlines() if line.startswith("| model=transformer | 1.50"))
    # by 5 min: 1.0 and 2.0; by 15: 3.0 and 4.0; by 30: 3.0 (a's last validation at 29.5 min
    # counts, 29.5 >= 0.95 * 30) and 4.0 (b's 5.0 came at 31 min); by 60: both ran shorter
    assert row == "| model=transformer | 1.50 ± 0.71 | 3.50 ± 0.71 | 3.50 ± 0.71 | – |"
    assert "| runs | by 5 min | by 15 min | by 30 min | by 60 min |" in md
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(SystemExit):
        compare.main([str(runs), "--out", str(out), "--minutes", "0"])


def test_a_run_its_budget_stopped_counts_its_final_validation_at_the_budget(
    tmp_path: Path,
) -> None:
    # 30-minute runs validate at 29:00 and, stopped between updates, once more at 30:05
    valid = [("15:00", 1.0), ("29:00", 2.0), ("30:05", 4.0)]
    budget = _recorded_run(tmp_path / "a", "budget", 1, valid, ("time_budget", 30))
    early = _recorded_run(tmp_path / "b", "early", 1, valid, ("early_stopping", 30))
    plain = _recorded_run(tmp_path / "c", "plain", 1, valid)  # no summary reason, no config
    best = {
        name: [compare.best_by(compare.read_run(run), m) for m in (15, 29.5, 30, 60)]
        for name, run in (("budget", budget), ("early", early), ("plain", plain))
    }
    assert compare.read_run(budget).budget_stop == 30.0
    assert best["budget"] == [1.0, 2.0, 4.0, 4.0]  # from the budget's mark on: every validation
    assert best["early"] == best["plain"] == [1.0, 2.0, 2.0, None]  # 30:05 came after minute 30
    for bad in ("trainer: [unclosed\n", "- a list\n", "trainer:\n  time_budget_min: ${nope}\n"):
        (budget / ".hydra" / "config.yaml").write_text(bad)
        with pytest.raises(SystemExit, match=r"config\.yaml: unreadable"):
            compare.read_run(budget)
    (budget / ".hydra" / "config.yaml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SystemExit, match=r"config\.yaml: unreadable"):
        compare.read_run(budget)


def test_the_best_by_a_mark_is_one_rule_for_compare_runs_and_the_run_curves() -> None:
    points = [(4.0, 1.0), (9.8, 3.0), (15.0, 2.0)]  # (training minutes, valid BLEU)
    assert [run_curves.best_by(points, m) for m in (5, 10, 15, 15.7, 15.8)] == [
        1.0,  # the best by minute 5 is the first validation's
        3.0,  # a later, worse validation does not lower it
        3.0,
        3.0,  # 15 >= 0.95 * 15.7: the run reached the mark
        None,  # 15 < 0.95 * 15.8: the run was shorter than the mark
    ]
    assert run_curves.best_by([], 5) is None
    assert run_curves.best_by([(10.3, 2.0)], 10.0) is None  # its first validation came later
    run = compare.Run(path=Path("r"), label="r", valid=[(100, m, b, 0.0) for m, b in points])
    marks = (5, 10, 13.9, 14, 15.7, 15.8)
    assert [compare.best_by(run, m) for m in marks] == [1.0, 3.0, 3.0, 3.0, 3.0, None]
    assert run_curves.budget_stop("max_steps", 14.0) is None  # only the budget's stop counts
    run.budget_stop = run_curves.budget_stop("time_budget", 14.0)  # stopped at 14 (checked at 15)
    # from the budget on, every validation counts, the one past 0.95 * 15.8 too
    assert [compare.best_by(run, m) for m in marks] == [1.0, 3.0, 3.0, 3.0, 3.0, 3.0]
    assert [run_curves.best_by(points, m, 14.0) for m in marks] == [1.0, 3.0, 3.0, 3.0, 3.0, 3.0]
    assert run_curves.best_by([(4.0, 1.0), (14.1, 0.5)], 14, 14.0) == 1.0  # the best, not the last
