"""Checkpoint averaging at the end of a run (trainer.average_best) and how often
validation draws heatmaps (trainer.heatmaps_every)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.toy_train import toy_train_config

import attnmt.train.loop as loop
import attnmt.train.reporting as reporting
from attnmt.checkpoint import load_checkpoint
from attnmt.train.loop import train


def _cfg(data_root: Path, *overrides: str):
    small = ("data.toy.train=120", "data.toy.valid=4", "data.toy.test=4")
    rest = ("trainer.max_tokens=256", "trainer.num_samples=0", "trainer.val_every_steps=2")
    steps = ("trainer.max_steps=6", "trainer.average_best=true")
    return toy_train_config(data_root, *small, *rest, *steps, *overrides)


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


def _final_bleu(monkeypatch: pytest.MonkeyPatch, final: float) -> list[float]:
    """Validations score as they do, but the 4th (the average's) scores ``final``."""
    seen: list[float] = []
    real = loop.validate

    def fake(*args: Any, **kwargs: Any):
        res = real(*args, **kwargs)
        if len(seen) == 3:
            res.bleu = final
        seen.append(res.bleu)
        return res

    monkeypatch.setattr(loop, "validate", fake)  # the rounds and the average's
    return seen


def _best(run: Path) -> list[dict[str, Any]]:
    return json.loads((run / "checkpoints" / "best.json").read_text())


def test_an_average_that_validates_better_joins_the_best_and_is_the_mean(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _final_bleu(monkeypatch, 99.0)
    result = train(_cfg(data_root, "trainer.keep_best=3"), tmp_path)
    assert len(seen) == 4  # steps 2, 4, 6, then the average
    best = _best(tmp_path)
    assert best[0]["file"] == "averaged.pt" and best[0]["val_bleu"] == 99.0
    assert len(best) == 4  # beside the k best it averages
    assert result["best_val_bleu"] == 99.0
    avg = load_checkpoint(tmp_path / "checkpoints" / "averaged.pt")
    assert avg.training is None and avg.averaged_from is not None  # evaluates, not resumes
    singles = [load_checkpoint(Path(f)) for f in avg.averaged_from]
    assert len(singles) == 3
    for key, value in avg.weights.items():
        if value.is_floating_point():
            mean = torch.stack([s.weights[key].double() for s in singles]).mean(0)
            torch.testing.assert_close(value, mean.to(value.dtype))


def test_the_model_keeps_its_trained_weights_after_averaging(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _final_bleu(monkeypatch, 99.0)
    trainer = loop.Trainer(_cfg(data_root, "trainer.keep_best=3"), tmp_path)
    try:
        trainer.run()
    finally:
        trainer.close()
    assert len(seen) == 4
    last = load_checkpoint(tmp_path / "checkpoints" / "last.pt").weights
    for key, value in trainer.parts.model.state_dict().items():
        assert torch.equal(value, last[key]), key


def test_an_average_that_validates_worse_is_not_kept(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _final_bleu(monkeypatch, -1.0)
    train(_cfg(data_root, "trainer.keep_best=3"), tmp_path)
    assert len(seen) == 4
    assert all(e["file"].startswith("best-") for e in _best(tmp_path))
    assert not (tmp_path / "checkpoints" / "averaged.pt").exists()


def test_average_best_false_or_a_single_best_does_not_average(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _final_bleu(monkeypatch, 99.0)
    train(_cfg(data_root, "trainer.average_best=false"), tmp_path / "off")
    assert len(seen) == 3
    seen.clear()
    train(_cfg(data_root, "trainer.keep_best=1"), tmp_path / "one")
    assert len(seen) == 3


def test_heatmaps_are_drawn_every_nth_validation(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[int] = []

    def fake_images(translator: Any, data: Any, index: int, step: int) -> list:
        drawn.append(step)
        return []

    monkeypatch.setattr(reporting, "attention_images", fake_images)
    cfg = _cfg(data_root, "trainer.num_heatmaps=1", "trainer.heatmaps_every=2")
    train(
        cfg,
        tmp_path / "every2",
    )
    assert drawn == [2, 6]  # validations 1 and 3 of 3
    drawn.clear()
    train(_cfg(data_root, "trainer.num_heatmaps=1", "trainer.heatmaps_every=0"), tmp_path / "never")
    assert drawn == []


def test_the_end_block_shows_three_fixed_test_translations_and_quoted_commands(
    data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "a run"
    result = train(_cfg(data_root, "trainer.average_best=false", "trainer.test=true"), run)
    out = capsys.readouterr().out
    hyps = (run / "hyps" / "test.txt").read_text(encoding="utf-8").splitlines()
    corpus = next(p for p in data_root.rglob("test.src"))
    src = corpus.read_text(encoding="utf-8").splitlines()
    ref = corpus.with_suffix(".tgt").read_text(encoding="utf-8").splitlines()
    assert "test_bleu" in result
    for i in range(3):
        assert f"test #{i + 1}          source     {src[i]}" in out
        assert f"reference  {ref[i]}\n" in out
        assert f"model      {hyps[i]}\n" in out
    assert "test #4" not in out
    assert f"python evaluate.py ckpt='{run}' split=test" in out
