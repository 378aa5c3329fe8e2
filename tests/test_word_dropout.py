"""Word dropout: which pieces may become <unk>, at what rate, and what stays untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.toy_train import toy_train_config

from attnmt import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from attnmt.data.batching import make_batch
from attnmt.errors import ConfigError
from attnmt.train.run_config import validate_config
from attnmt.train.word_dropout import drop_pieces, word_dropout


def _batch():
    src = [[10, 11, 12, 13], [20, 21]]
    tgt = [[30, 31, 32], [40]]
    return make_batch(src, tgt)


def test_zero_probability_returns_the_batch_itself() -> None:
    batch = _batch()
    assert word_dropout(batch, 0.0, 0.0) is batch
    assert drop_pieces(batch.src, 0.0) is batch.src


def test_certain_dropout_replaces_every_real_piece_and_no_special() -> None:
    batch = _batch()
    out = word_dropout(batch, 0.999999, 0.999999)
    # real pieces -> UNK; EOS / BOS / PAD where they were
    assert out.src.tolist() == [
        [UNK_ID] * 4 + [EOS_ID],
        [UNK_ID, UNK_ID, EOS_ID, PAD_ID, PAD_ID],
    ]
    assert out.tgt_input.tolist() == [
        [BOS_ID, UNK_ID, UNK_ID, UNK_ID],
        [BOS_ID, UNK_ID, EOS_ID, PAD_ID],  # the short target's EOS is in the shifted input
    ]
    # the labels and masks are the input batch's
    assert torch.equal(out.tgt_out, batch.tgt_out)
    assert torch.equal(out.src_pad_mask, batch.src_pad_mask)
    assert out.n_tokens == batch.n_tokens
    # the input batch is not modified in place
    assert batch.src[0, 0].item() == 10


def test_source_and_target_rates_are_independent_and_close_to_p() -> None:
    torch.manual_seed(0)
    ids = torch.full((200, 500), 100)
    batch = make_batch(ids.tolist(), ids.tolist())
    out = word_dropout(batch, 0.25, 0.0)
    real = batch.src > EOS_ID
    rate = (out.src[real] == UNK_ID).float().mean().item()
    assert abs(rate - 0.25) < 0.01  # 100k draws: sd 0.0014
    assert torch.equal(out.tgt_input, batch.tgt_input)


def test_same_seed_same_mask() -> None:
    batch = _batch()
    torch.manual_seed(3)
    a = word_dropout(batch, 0.5, 0.5)
    torch.manual_seed(3)
    b = word_dropout(batch, 0.5, 0.5)
    assert torch.equal(a.src, b.src) and torch.equal(a.tgt_input, b.tgt_input)


@pytest.mark.parametrize("key", ["src_word_dropout", "tgt_word_dropout"])
@pytest.mark.parametrize("value", [-0.1, 1.0])
def test_probability_outside_0_1_is_a_config_error(key: str, value: float, tmp_path: Path) -> None:
    cfg = toy_train_config(tmp_path, f"trainer.{key}={value}")
    with pytest.raises(
        ConfigError, match=rf"trainer\.{key}: .* is out of range; allowed: 0 <= trainer\.{key} < 1"
    ):
        validate_config(cfg)
