"""Validation helpers: token-budget evaluation batches, the train meter."""

from __future__ import annotations

import math

import pytest
import torch

from attnmt.data.batching import length_batches
from attnmt.train.meter import TrainMeter


def test_length_batches_cover_every_index_once_within_budget() -> None:
    lengths = [9, 3, 5, 5, 23, 4, 18]
    seen: list[int] = []
    for rows in length_batches(lengths, 40):
        seen += rows
        assert max(lengths[i] for i in rows) * len(rows) <= 40 or len(rows) == 1
        assert [lengths[i] for i in rows] == sorted((lengths[i] for i in rows), reverse=True)
    assert sorted(seen) == list(range(len(lengths)))


def test_train_meter_token_weighted_means() -> None:
    meter = TrainMeter()
    meter.add(
        {"loss": 2.0, "nll": 1.0, "tokens": 100.0, "seconds": 1.0, "lr": 1e-3, "grad_norm": 3.0}
    )
    meter.add(
        {"loss": 4.0, "nll": 2.0, "tokens": 300.0, "seconds": 1.0, "lr": 2e-3, "grad_norm": 1.0}
    )
    sc = meter.scalars()
    assert sc["train/loss_smoothed"] == pytest.approx((200 + 1200) / 400)  # 3.5
    assert sc["train/nll"] == pytest.approx((100 + 600) / 400)  # on val/nll's scale
    assert sc["train/ppl"] == pytest.approx(math.exp((100 + 600) / 400))
    assert sc["train/tokens_per_sec"] == pytest.approx(200.0)
    assert sc["train/lr"] == 2e-3 and sc["train/grad_norm"] == 1.0
    assert "nll 1.750 (smoothed 3.500)" in meter.line(step=2, epoch=0)
    meter.reset()
    assert meter.tokens == 0.0 and torch.isfinite(torch.tensor(meter.tokens_per_sec))
