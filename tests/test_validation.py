"""Validation helpers: token-budget eval batches, order restoring decode, the train meter."""

from __future__ import annotations

import math

import pytest
import torch

from attnmt.train.report import TrainMeter
from attnmt.train.validate import eval_batches


def test_eval_batches_cover_every_sentence_once_within_budget() -> None:
    src = [[5] * n for n in (7, 1, 3, 3, 12, 2, 9)]
    tgt = [[6] * n for n in (2, 4, 3, 1, 10, 2, 8)]
    seen: list[int] = []
    for batch in eval_batches(src, tgt, max_tokens=40):
        rows = batch.index.tolist()
        seen += rows
        width = max(len(src[i]) + 1 + len(tgt[i]) + 1 for i in rows)
        assert width * len(rows) <= 40 or len(rows) == 1
        # the batch holds exactly these sentences (EOS-terminated source)
        for r, i in enumerate(rows):
            assert int((~batch.src_pad_mask[r]).sum()) == len(src[i]) + 1
    assert sorted(seen) == list(range(len(src)))


def test_eval_batches_source_only_are_length_sorted() -> None:
    src = [[4] * n for n in (5, 1, 3)]
    batches = list(eval_batches(src, None, max_tokens=100))
    assert len(batches) == 1 and batches[0].index.tolist() == [1, 2, 0]
    assert batches[0].tgt_out is None


def test_train_meter_token_weighted_means() -> None:
    meter = TrainMeter()
    meter.add(
        {"loss": 2.0, "nll": 1.0, "tokens": 100.0, "seconds": 1.0, "lr": 1e-3, "grad_norm": 3.0}
    )
    meter.add(
        {"loss": 4.0, "nll": 2.0, "tokens": 300.0, "seconds": 1.0, "lr": 2e-3, "grad_norm": 1.0}
    )
    sc = meter.scalars()
    assert sc["train/loss"] == pytest.approx((200 + 1200) / 400)  # 3.5
    assert sc["train/ppl"] == pytest.approx(math.exp((100 + 600) / 400))
    assert sc["train/tokens_per_sec"] == pytest.approx(200.0)
    assert sc["train/lr"] == 2e-3 and sc["train/grad_norm"] == 1.0
    assert "loss 3.500" in meter.line(step=2, epoch=0)
    meter.reset()
    assert meter.tokens == 0.0 and torch.isfinite(torch.tensor(meter.tokens_per_sec))
