"""Non-finite values: a NaN/inf loss or gradient skips that update (counted, logged, in
TensorBoard); ``trainer.max_bad_updates`` in a row stop training with a message that points
at the learning rate and precision, keeping the last good checkpoint. Tested by injection."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.toy_train import toy_train_config
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from attnmt.checkpoint import load_checkpoint
from attnmt.train.loop import Trainer, TrainingDiverged


def _poison(trainer: Trainer, bad_steps: set[int]) -> None:
    """Make the forward pass of the listed update numbers return NaN logits."""
    forward = trainer.net.forward

    def poisoned(batch: Any) -> torch.Tensor:
        logits = forward(batch)
        return logits * float("nan") if trainer.step + 1 in bad_steps else logits

    trainer.net.forward = poisoned  # type: ignore[method-assign]


def _weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.parts.model.state_dict().items()}


def test_a_nan_update_is_skipped_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = toy_train_config(tmp_path / "data", "trainer.max_steps=6", "trainer.val_every_steps=6")
    trainer = Trainer(cfg, tmp_path / "run")
    _poison(trainer, {3, 4})
    seen: dict[int, dict[str, torch.Tensor]] = {}
    trainer.on_step = lambda step, fig: seen.__setitem__(step, _weights(trainer))
    try:
        with caplog.at_level(logging.WARNING):
            result = trainer.run()
    finally:
        trainer.close()
    assert result["step"] == 6 and result["stop_reason"] == "max_steps"
    for k in seen[2]:  # the two poisoned updates changed no weight, the others did
        assert torch.equal(seen[2][k], seen[3][k]) and torch.equal(seen[3][k], seen[4][k])
    assert any(not torch.equal(seen[4][k], seen[5][k]) for k in seen[4])
    assert all(torch.isfinite(w).all() for w in seen[6].values())
    assert (
        "step 3: non-finite loss or gradient (NaN/inf); update skipped (1 in a row" in caplog.text
    )
    assert (
        "step 4: non-finite loss or gradient (NaN/inf); update skipped (2 in a row" in caplog.text
    )
    acc = EventAccumulator(str(tmp_path / "run"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("train/skipped_updates")] == [(3, 1), (4, 2)]


def test_max_bad_updates_in_a_row_stop_and_keep_the_last_good_checkpoint(tmp_path: Path) -> None:
    cfg = toy_train_config(
        tmp_path / "data",
        "trainer.max_steps=50",
        "trainer.val_every_steps=4",
        "trainer.max_bad_updates=3",
    )
    run = tmp_path / "run"
    trainer = Trainer(cfg, run)
    _poison(trainer, set(range(6, 100)))
    good: dict[str, torch.Tensor] = {}
    trainer.on_step = lambda step, fig: good.update(_weights(trainer)) if step == 5 else None
    try:
        with pytest.raises(TrainingDiverged) as err:
            trainer.run()
    finally:
        trainer.close()
    message = str(err.value)
    assert "training stopped at step 8: 3 updates in a row" in message
    assert "trainer.lr" in message and "trainer.precision=fp32" in message
    assert f"the last good checkpoint is {run / 'checkpoints' / 'last.pt'}" in message
    last = load_checkpoint(run / "checkpoints" / "last.pt")
    # the last checkpoint holds the weights of the last good update (step 5): the skipped
    # updates 6-8 changed nothing, so the validation at step 8 saved them unchanged
    assert last.step == 8
    assert all(torch.equal(last.weights[k], good[k]) for k in good)
