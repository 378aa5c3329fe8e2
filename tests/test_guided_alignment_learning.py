"""Guided alignment learns: a tiny Transformer trained on the synthetic task towards the gold
links of its train split aligns its test split better than its unguided twin after the same
updates (issue 65), and the alignment loss is recorded apart from the translation loss."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from attnmt.cli.evaluate import run as evaluate
from attnmt.data.corpora import prepare_corpus
from attnmt.decode.forced_alignment import ALL_LAYERS
from attnmt.train.loop import train
from attnmt.train.run_config import validate_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
UPDATES = 150
"""Not fewer: at 100 the alignment loss of seed 1 fell only to 0.784 of its first (the bar is
0.75; at 150: 0.614), though the AER gaps widened (2026-12-07)."""


def _config(data_root: Path, *overrides: str) -> object:
    settings = [
        "data=toy_align",
        f"data.root={data_root}",
        "data.toy.train=2000",
        "data.toy.valid=20",
        "data.toy.test=100",
        "model=transformer_tiny",
        "device=cpu",
        "seed=1",
        f"trainer.max_steps={UPDATES}",
        f"trainer.val_every_steps={UPDATES}",
        "trainer.log_every_steps=50",
        "trainer.lr=0.003",
        "trainer.warmup_steps=50",
        "trainer.time_budget_min=0",
        "trainer.early_stopping_patience=0",
        "trainer.precision=fp32",
        "trainer.test=false",
        "trainer.num_heatmaps=0",
        "trainer.num_samples=0",
        "trainer.progress_bar=false",
        *overrides,
    ]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose(config_name="train", overrides=settings)


def _test_aer(run: Path) -> tuple[float, float]:
    """Test AER of the guided layer (the last, ``align_layer=-1``) and of evaluate.py's
    default map (the mean over layers: the table's ``all`` row)."""
    evaluate({"ckpt": str(run), "split": "test", "align_layer": -1}, io.StringIO())
    (scores,) = (run / "eval").glob("*-test-beam1-*/scores.json")
    (entry,) = json.loads(scores.read_text()).values()
    (mean,) = [r for r in entry["aer_table"]["rows"] if r["layer"] == ALL_LAYERS]
    return float(entry["aer"]), float(mean["aer"])


def _train_events(run: Path) -> list[dict[str, float]]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == "train"]


@pytest.mark.slow
def test_guided_training_aligns_better_than_its_unguided_twin(tmp_path: Path) -> None:
    data = tmp_path / "data"
    corpus = prepare_corpus(validate_config(_config(data)).data)
    gold = corpus.gold_alignments("train")
    assert gold is not None
    train(_config(data), tmp_path / "unguided")
    guided = (
        "trainer.guided_alignment.weight=0.5",
        f"trainer.guided_alignment.links={gold}",
    )
    train(_config(data, *guided), tmp_path / "guided")

    plain, aligned = _train_events(tmp_path / "unguided"), _train_events(tmp_path / "guided")
    assert [e["step"] for e in plain] == [e["step"] for e in aligned] == [1, 50, 100, 150]
    assert all("align" not in e for e in plain)
    # the alignment loss is logged apart, and falls; the translation loss stays its own
    assert aligned[-1]["align"] < 0.75 * aligned[0]["align"]
    assert all(e["nll"] <= e["loss_smoothed"] for e in aligned)

    plain_aer, guided_aer = _test_aer(tmp_path / "unguided"), _test_aer(tmp_path / "guided")
    print(f"test AER after {UPDATES} updates (last layer, all layers): {plain_aer} -> {guided_aer}")
    # last layer 0.615 -> 0.249, mean over layers 0.587 -> 0.242 (2-core AMD EPYC,
    # 2026-12-06; about 40 s of CPU for the test)
    assert guided_aer[0] < plain_aer[0] - 0.2, (plain_aer, guided_aer)
    assert guided_aer[1] < plain_aer[1] - 0.2, (plain_aer, guided_aer)
