"""One decoding path: the test BLEU the trainer prints equals evaluate.py's on the same
checkpoint and decode settings, hypothesis for hypothesis, source-length cuts included."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from helpers.toy_train import toy_train_config

from attnmt.cli.evaluate import run as evaluate
from attnmt.train.loop import train


def test_trainer_test_bleu_equals_evaluate_py(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    decode = ["decode.beam=2", "decode.max_src_len=5", "decode.batch_tokens=24"]
    cfg = toy_train_config(
        tmp_path / "data",
        "data.toy.train=600",
        "data.toy.valid=12",
        "data.toy.test=30",
        "trainer.max_tokens=512",
        "trainer.max_steps=60",
        "trainer.val_every_steps=30",
        "trainer.lr=0.005",
        "trainer.warmup_steps=20",
        "trainer.test=true",
        *decode,
    )
    run = tmp_path / "run"
    with caplog.at_level(logging.WARNING):
        result = train(cfg, run)
    # toy_reverse sentences hold 3-10 symbols: some sources were cut to 5 pieces, and said so
    assert "longer than decode.max_src_len=5" in caplog.text
    trainer_hyps = (run / "hyps" / "test.txt").read_text(encoding="utf-8").splitlines()
    assert len(trainer_hyps) == 30 and any(trainer_hyps)

    scores = evaluate(
        {
            "ckpt": str(run),
            "split": "test",
            "device": "cpu",
            "out_dir": str(tmp_path / "eval"),
            **{k.removeprefix("decode."): v for k, v in (d.split("=") for d in decode)},
        }
    )
    hyp_file = tmp_path / "eval" / "hyps.txt"
    assert hyp_file.read_text(encoding="utf-8").splitlines() == trainer_hyps
    assert scores["bleu"].score == result["test_bleu"]
    assert scores["chrf"].score == result["test_chrf"]
    assert scores["bleu"].signature == result["test_signature"]
    assert result["test_bleu"] > 0  # a real comparison, not of two empty outputs


def test_trainer_test_ensemble_equals_evaluate_py_ensemble(tmp_path: Path) -> None:
    """trainer.test_ensemble=2 decodes the test split with the run's 2 best as one ensemble,
    hypothesis for hypothesis what evaluate.py ckpt=RUN ensemble=2 gives."""
    cfg = toy_train_config(
        tmp_path / "data",
        "data.toy.train=300",
        "data.toy.valid=12",
        "data.toy.test=20",
        "trainer.max_tokens=512",
        "trainer.max_steps=30",
        "trainer.val_every_steps=10",
        "trainer.lr=0.005",
        "trainer.warmup_steps=10",
        "trainer.test=true",
        "trainer.test_ensemble=2",
        "decode.beam=2",
    )
    run = tmp_path / "run"
    result = train(cfg, run)
    best = json.loads((run / "checkpoints" / "best.json").read_text())
    assert result["test_ensemble"] == [e["file"] for e in best[:2]]
    trainer_hyps = (run / "hyps" / "test.txt").read_text(encoding="utf-8").splitlines()
    scores = evaluate(
        {
            "ckpt": str(run),
            "ensemble": 2,
            "beam": 2,
            "device": "cpu",
            "out_dir": str(tmp_path / "e"),
        }
    )
    assert (tmp_path / "e" / "hyps.txt").read_text(encoding="utf-8").splitlines() == trainer_hyps
    assert scores["bleu"].score == result["test_bleu"]
