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
from experiments import alignment_maps
from experiments.study import load_study

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.slow
def test_global_attention_learns_the_synthetic_alignment(tmp_path: Path) -> None:
    study = load_study(CONFIGS / "study" / "alignment_luong.yaml")  # the table's settings ...
    cut = {"trainer.max_steps": "400", "trainer.val_every_steps": "400"}  # ... cut to 400
    overrides = [
        *(o if o.split("=")[0] not in cut else f"{o.split('=')[0]}={cut[o.split('=')[0]]}"
          for o in study.overrides),
        f"data.root={tmp_path / 'data'}",
        "model.attention.score=general",
        "model.attention.mode=global",
        "device=cpu",
        "seed=1",
    ]  # fmt: skip
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    train(cfg, tmp_path / "run")
    evaluate({"ckpt": str(tmp_path / "run"), "split": "test"}, io.StringIO())
    (scores,) = (tmp_path / "run" / "eval").glob("*-test-beam1-*/scores.json")
    (entry,) = json.loads(scores.read_text()).values()
    # these settings gave AER 0.095 through train.py and evaluate.py split=test (2-core EPYC,
    # 2026-11-25); 0.2 is the bar for "learns within a few hundred updates". Not
    # fewer updates: at 300 seed 1 gave 0.127 and seeds 2, 3 valid AER 0.146, 0.244 (at 400:
    # 0.079, 0.171; 2026-12-07)
    assert entry["aer"] <= 0.2, entry["alignment"]
    assert entry["aer_recall"] > 0.8 and entry["aer_precision"] > 0.7

    # the guide's figure keeps this run's map of the example pair beside its gold
    kept = alignment_maps.keep(tmp_path / "run", "luong general global", tmp_path / "m.json")
    rec = json.loads(kept.read_text())
    assert (rec["source"], rec["reference"]) == (
        alignment_maps.EXAMPLE_SOURCE,
        alignment_maps.EXAMPLE_REFERENCE,
    )
    weights = rec["map"]
    assert len(weights) == len(rec["target_pieces"])
    assert all(len(row) == len(rec["source_pieces"]) for row in weights)
    assert all(abs(sum(row) - 1) < 0.01 for row in weights)
    gold_lines = (tmp_path / "data").glob("toy_align-*/test.src-tgt.align")
    gold = next(gold_lines).read_text().splitlines()[alignment_maps.EXAMPLE].split()
    assert sorted(f"{i}-{j}" for i, j in rec["gold_sure"]) == sorted(x for x in gold if "-" in x)
    assert sorted(f"{i}?{j}" for i, j in rec["gold_possible"]) == sorted(
        x for x in gold if "?" in x
    )
    assert 0 <= rec["aer"] <= 0.5  # a model at test AER <= 0.2 aligns this pair too
    maps = tmp_path / "maps"
    maps.mkdir()
    kept.rename(maps / "luong-general-global-seed1.json")
    png = alignment_maps.draw(maps, tmp_path / "maps.png")
    assert png is not None and png.read_bytes()[:4] == b"\x89PNG"
