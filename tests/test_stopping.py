"""Stopping rules of the trainer: epochs, early stopping (across a resume), time budget."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.toy_train import toy_train_config
from omegaconf import DictConfig

from attnmt.checkpoint import load_checkpoint
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
