"""The checkpoint type: one reader and one writer of the on-disk dict, every format attnmt
has written still read (a fixture written by the first trainer, commit 1cf301b)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnmt.checkpoint import load_checkpoint, save_checkpoint
from attnmt.checkpoint_format import FORMAT, Checkpoint, TrainingState, VocabInfo
from attnmt.decode.translator import load_translator
from attnmt.errors import CheckpointError

OLDEST = Path(__file__).parent / "fixtures" / "checkpoint-1cf301b.torch"


def _minimal(**more: object) -> dict:
    return {
        "format": FORMAT,
        "model_name": "transformer",
        "model_config": {"name": "transformer"},
        "vocab": {"src_size": 8, "tgt_size": 9, "joint": False},
        "model": {"w": torch.ones(2)},
        "tokenizer": {"spm.model": b"\x00"},
        "config": {"seed": 1},
        **more,
    }


def test_the_first_trainers_checkpoint_still_loads_and_translates() -> None:
    raw = torch.load(OLDEST, weights_only=True)
    ckpt = load_checkpoint(OLDEST)
    assert ckpt.model_name == "transformer" and ckpt.step == 4 and ckpt.epoch == 3
    assert ckpt.vocab == VocabInfo(36, 36, True)
    assert ckpt.metrics["val_bleu"] == raw["metrics"]["val_bleu"]
    assert ckpt.training is not None and ckpt.training.trainer["val_step"] == 4
    assert ckpt.corpus is None and ckpt.extra == {}  # no corpus record then; nothing unknown
    translator = load_translator(OLDEST, "cpu")
    (hyp,) = translator.translate(["a b c"])
    assert isinstance(hyp, str)
    # written back, it is the dict it was read from
    again = ckpt.to_dict()
    assert set(again) == set(raw)
    for key in ("model_name", "model_config", "vocab", "tokenizer", "config", "step", "epoch"):
        assert again[key] == raw[key], key
    assert all(torch.equal(again["model"][k], v) for k, v in raw["model"].items())


def test_a_round_trip_keeps_every_field_and_unknown_keys(tmp_path: Path) -> None:
    training = TrainingState({"o": 1}, {"s": 2}, {"c": 3}, {"r": 4}, {"epoch": 1}, {"step": 5})
    ckpt = Checkpoint.from_dict(_minimal(step=5, future_key={"x": 1}))
    ckpt.training, ckpt.corpus = training, {"files": {}}
    back = load_checkpoint(save_checkpoint(ckpt, tmp_path / "c.pt"))
    assert back.training == training and back.corpus == {"files": {}}
    assert back.extra == {"future_key": {"x": 1}}  # a newer attnmt's key survives a rewrite
    assert back.vocab == VocabInfo(8, 9, False) and back.step == 5


@pytest.mark.parametrize(("stored", "read"), [("bf16", "bf16"), (None, None), ("fp8", None)])
def test_the_precision_a_run_trained_in_is_kept_and_older_files_have_none(
    stored: str | None, read: str | None, tmp_path: Path
) -> None:
    """``precision`` round-trips; a checkpoint written before it (or holding a value no
    trainer writes) reads as None, which a resume decides afresh."""
    state = {"optimizer": {}, "scheduler": {}, "scaler": {}, "rng": {}, "sampler": {"epoch": 0}}
    raw = _minimal(**state, **({} if stored is None else {"precision": stored}))
    ckpt = Checkpoint.from_dict(raw)
    assert ckpt.training is not None and ckpt.training.precision == read
    assert "precision" not in ckpt.extra
    back = load_checkpoint(save_checkpoint(ckpt, tmp_path / "c.pt"))
    assert back.training is not None and back.training.precision == read
    assert ("precision" in back.to_dict()) == (read is not None)


def test_a_checkpoint_without_training_state_evaluates_but_does_not_resume() -> None:
    ckpt = Checkpoint.from_dict(_minimal(averaged_from=["a.pt", "b.pt"]))
    assert ckpt.training is None and ckpt.averaged_from == ["a.pt", "b.pt"]
    assert "optimizer" not in ckpt.to_dict() and ckpt.step == 0 and ckpt.metrics == {}
    partial = Checkpoint.from_dict(_minimal(optimizer={}, rng={}))  # not the whole state
    assert partial.training is None and "optimizer" not in partial.to_dict()


def test_an_older_checkpoint_without_trainer_state_counts_from_its_step() -> None:
    state = {k: {} for k in ("optimizer", "scheduler", "scaler", "rng", "sampler")}
    ckpt = Checkpoint.from_dict(_minimal(step=7, **state))
    assert ckpt.training is not None and ckpt.training.trainer == {"step": 7}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"format": "other"}, "is not an attnmt checkpoint"),
        ([1, 2], "is not an attnmt checkpoint"),
        ({k: v for k, v in _minimal().items() if k != "tokenizer"}, "lacks tokenizer"),
        (_minimal(vocab={"src_size": 8}), "vocab must be"),
    ],
)
def test_what_is_not_a_checkpoint_is_named(data: object, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        Checkpoint.from_dict(data, "x.pt")
