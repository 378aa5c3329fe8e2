"""Stopping rules of the trainer: epochs, early stopping (across a resume), time budget
(the run's own training minutes, across a kill and a resume, on a fake clock)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.fake_clock import FakeClock
from helpers.toy_train import toy_train_config
from omegaconf import DictConfig

from attnmt.checkpoint import load_checkpoint
from attnmt.run_record import read_record
from attnmt.train.loop import train


def _cfg(data_root: Path, *overrides: str) -> DictConfig:
    small = ("data.toy.train=120", "data.toy.valid=4", "data.toy.test=4")
    rest = ("trainer.max_tokens=256", "trainer.num_samples=0")
    return toy_train_config(data_root, *small, *rest, *overrides)


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


def _validated_steps(run: Path) -> list[int]:
    """Steps at which validation ran, from the hypotheses files it writes."""
    return sorted(int(p.stem.split("-")[-1]) for p in (run / "hyps").glob("valid-*.txt"))


def test_val_every_steps_zero_validates_at_each_epoch_end(data_root: Path, tmp_path: Path) -> None:
    steps: list[int] = []
    cfg = _cfg(data_root, "trainer.max_epochs=2", "trainer.val_every_steps=0")
    result = train(cfg, tmp_path, on_step=lambda s, fig: steps.append(s))
    assert result["stop_reason"] == "max_epochs" and result["epoch"] == 2
    per_epoch = len(steps) // 2
    assert _validated_steps(tmp_path) == [per_epoch, 2 * per_epoch]


def test_early_stopping_counts_validations_without_gain(data_root: Path, tmp_path: Path) -> None:
    # lr ~ 0: validation BLEU never improves after the first validation
    frozen = ("trainer.lr=1e-12", "trainer.schedule=constant", "trainer.val_every_steps=2")
    cfg = _cfg(data_root, *frozen, "trainer.early_stopping_patience=2", "trainer.max_steps=50")
    result = train(cfg, tmp_path)
    assert result["stop_reason"] == "early_stopping"
    assert result["step"] == 6  # improved at 2, no gain at 4 and 6
    assert _validated_steps(tmp_path) == [2, 4, 6]


def test_early_stopping_counter_survives_a_resume(data_root: Path, tmp_path: Path) -> None:
    frozen = ("trainer.lr=1e-12", "trainer.schedule=constant", "trainer.val_every_steps=2")
    patience = "trainer.early_stopping_patience=2"
    first = train(_cfg(data_root, *frozen, patience, "trainer.max_steps=4"), tmp_path)
    assert first["stop_reason"] == "max_steps"
    training = load_checkpoint(tmp_path / "checkpoints" / "last.pt").training
    assert training is not None and training.trainer["bad_vals"] == 1
    cfg = _cfg(data_root, *frozen, patience, "trainer.max_steps=50", f"resume={tmp_path}")
    second = train(cfg, tmp_path / "hydra-dir")
    assert second["stop_reason"] == "early_stopping" and second["step"] == 6


def test_time_budget_stops_after_the_update_that_crossed_it(
    data_root: Path, tmp_path: Path
) -> None:
    cfg = _cfg(data_root, "trainer.time_budget_min=1e-6", "trainer.val_every_steps=0")
    result = train(cfg, tmp_path)
    assert result["stop_reason"] == "time_budget" and result["step"] == 1
    assert load_checkpoint(tmp_path / "checkpoints" / "last.pt").step == 1


class Ticks:
    """The on_step hook of a run on a :class:`FakeClock`: each update takes one minute of
    training; the steps this process trained are kept; ``kill_at``: the update after which
    the process dies (``crash``: an error, nothing saved since the last validation;
    else a SIGTERM's stop, last.pt saved at that step)."""

    def __init__(self, clock: FakeClock, kill_at: int = 0, crash: bool = True) -> None:
        self.clock, self.kill_at, self.crash = clock, kill_at, crash
        self.steps: list[int] = []

    def __call__(self, step: int, figures: dict[str, float]) -> None:
        self.clock.advance(1.0)
        self.steps.append(step)
        if step == self.kill_at:
            raise RuntimeError("killed") if self.crash else KeyboardInterrupt


BUDGET = ("trainer.time_budget_min=5", "trainer.val_every_steps=2", "trainer.max_steps=50")
"""A 5-minute budget (one minute an update on the fake clock), validated every 2 updates."""


@pytest.fixture(scope="module")
def whole_run(data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list]:
    """The :data:`BUDGET` run trained without a kill (its result and the steps it trained):
    the same for both kinds of kill, so trained once."""
    whole = Ticks(FakeClock())
    run = tmp_path_factory.mktemp("whole")
    return train(_cfg(data_root, *BUDGET), run, whole, clock=whole.clock), whole.steps


@pytest.mark.parametrize("crash", [True, False], ids=["crash", "sigterm"])
def test_a_time_budget_spent_across_a_kill_and_a_resume_trains_its_minutes_in_total(
    data_root: Path, tmp_path: Path, crash: bool, whole_run: tuple[dict, list]
) -> None:
    """trainer.time_budget_min is the run's own training minutes: a run killed at minute 3
    of 5 and resumed trains the 2 minutes left from its checkpoint's (the minutes after
    that checkpoint are trained again, and counted once), not 5 more."""
    result, whole_steps = whole_run
    assert result["stop_reason"] == "time_budget" and result["step"] == 5
    assert whole_steps == [1, 2, 3, 4, 5]

    run = tmp_path / "run"
    cut = Ticks(FakeClock(), kill_at=3, crash=crash)
    with pytest.raises(RuntimeError if crash else KeyboardInterrupt):
        train(_cfg(data_root, *BUDGET), run, cut, clock=cut.clock)
    saved = load_checkpoint(run / "checkpoints" / "last.pt")
    assert saved.training is not None
    at = 2 if crash else 3  # a crash keeps the last validation's last.pt
    assert saved.step == at and saved.training.trainer["wall_s"] == 60.0 * at

    again = Ticks(FakeClock(start=5e6))  # another process: its own clock
    cfg = _cfg(data_root, *BUDGET, f"resume={run}")
    second = train(cfg, tmp_path / "hydra-dir", again, clock=again.clock)
    assert second["stop_reason"] == "time_budget" and second["step"] == 5
    assert again.steps == list(range(at + 1, 6))
    summary = read_record(run).summary
    assert summary is not None and summary.minutes == 5.0 and summary.step == 5


def test_a_resumed_run_whose_budget_is_spent_stops_at_once_and_a_larger_one_goes_on(
    data_root: Path, tmp_path: Path
) -> None:
    """Stopped by a signal after the update that spent the budget (before its final
    validation): resumed with the same budget it trains no update; with a larger budget,
    the minutes up to it."""
    budget = ("trainer.time_budget_min=3", "trainer.val_every_steps=2", "trainer.max_steps=50")
    first = Ticks(FakeClock(), kill_at=3, crash=False)
    with pytest.raises(KeyboardInterrupt):
        train(_cfg(data_root, *budget), tmp_path, first, clock=first.clock)
    spent = Ticks(FakeClock())
    again = train(_cfg(data_root, *budget, f"resume={tmp_path}"), tmp_path / "h1", spent,
                  clock=spent.clock)  # fmt: skip
    assert again["stop_reason"] == "time_budget" and again["step"] == 3 and spent.steps == []
    longer = Ticks(FakeClock())
    cfg = _cfg(data_root, *budget, f"resume={tmp_path}", "trainer.time_budget_min=5")
    more = train(cfg, tmp_path / "h2", longer, clock=longer.clock)
    assert more["step"] == 5 and longer.steps == [4, 5]  # 5 minutes in all
