"""Attention learns an alignment: a small Luong model with global attention, trained a few
hundred updates on the synthetic task, aligns its test split to AER <= 0.2 (issue 33)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from attnmt.cli.evaluate import run as evaluate
from attnmt.train.loop import train
from experiments.alignment_aer import COMMON, SMALL

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.slow
def test_global_attention_learns_the_synthetic_alignment(tmp_path: Path) -> None:
    overrides = [
        *COMMON,  # the alignment table's training settings (experiments/alignment_aer.py) ...
        "trainer.max_steps=400",  # ... cut to 400 updates
        "trainer.val_every_steps=400",
        f"data.root={tmp_path / 'data'}",
        "model=rnn_luong",
        *SMALL,
        "model.attention.score=general",
        "model.attention.mode=global",
        "device=cpu",
        "seed=1",
    ]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    train(cfg, tmp_path / "run")
    evaluate({"ckpt": str(tmp_path / "run"), "split": "test"}, io.StringIO())
    (scores,) = (tmp_path / "run" / "eval").glob("*-test-beam1-*/scores.json")
    (entry,) = json.loads(scores.read_text()).values()
    # these settings gave AER 0.095 through train.py and evaluate.py split=test (2-core EPYC,
    # 2026-11-25); 0.2 is the bar for "learns within a few hundred updates"
    assert entry["aer"] <= 0.2, entry["alignment"]
    assert entry["aer_recall"] > 0.8 and entry["aer_precision"] > 0.7
