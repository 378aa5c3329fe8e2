"""Exact resume: interrupted (max_steps or Ctrl-C) + resumed == uninterrupted, step for step."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import pytest
import torch
from helpers.toy_train import toy_train_config
from omegaconf import DictConfig

from attnmt.checkpoint import load_checkpoint
from attnmt.train import loop as training
from attnmt.train import setup
from attnmt.train.interrupt import TrainingInterrupted
from attnmt.train.loop import train
from attnmt.train.precision import Precision


def _cfg(data_root: Path, *overrides: str) -> DictConfig:
    settings = [
        "data.toy.train=200",
        "data.toy.valid=8",
        "data.toy.test=8",
        "model.dropout=0.2",  # dropout on: the torch RNG state must be restored too
        "trainer.max_tokens=256",  # ~8 batches per epoch: the runs cross epoch ends
        "trainer.warmup_steps=5",
        "trainer.lr=0.003",
        "trainer.val_every_steps=5",
        "trainer.val_every_epoch=true",
        "trainer.num_samples=1",
        "trainer.log_every_steps=1",
        "trainer.early_stopping_patience=0",
        "trainer.accum_steps=2",
    ]
    return toy_train_config(data_root, *settings, *overrides)


def _recorder(losses: dict[int, float], stop_at: int | None = None):  # type: ignore[no-untyped-def]
    """Record each step's loss; at ``stop_at`` press Ctrl-C (a real SIGINT)."""

    def hook(step: int, fig: dict[str, float]) -> None:
        losses[step] = fig["loss"]
        if step == stop_at:
            signal.raise_signal(signal.SIGINT)

    return hook


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def uninterrupted(data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[int, float]:
    losses: dict[int, float] = {}
    run = tmp_path_factory.mktemp("full")
    result = train(_cfg(data_root, "trainer.max_steps=14"), run, on_step=_recorder(losses))
    assert result["step"] == 14 and result["epoch"] >= 1  # crossed an epoch end
    return losses


def test_resume_after_max_steps_repeats_losses_exactly(
    data_root: Path, uninterrupted: dict[int, float], tmp_path: Path, caplog
) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.INFO)  # as under Hydra
    first: dict[int, float] = {}
    train(_cfg(data_root, "trainer.max_steps=7"), tmp_path, on_step=_recorder(first))
    second: dict[int, float] = {}
    cfg = _cfg(data_root, "trainer.max_steps=14", f"resume={tmp_path}")
    result = train(cfg, tmp_path / "new-hydra-dir", on_step=_recorder(second))
    assert sorted(first) == list(range(1, 8)) and sorted(second) == list(range(8, 15))
    assert {**first, **second} == uninterrupted  # exact float equality, step for step
    assert result["run_dir"] == str(tmp_path)  # the resumed run continues in its directory
    assert "resumed from" in (tmp_path / "train.log").read_text()  # and in its train.log


def test_ctrl_c_saves_last_and_resume_continues_exactly(
    data_root: Path, uninterrupted: dict[int, float], tmp_path: Path
) -> None:
    first: dict[int, float] = {}
    with pytest.raises(TrainingInterrupted) as err:
        train(_cfg(data_root, "trainer.max_steps=14"), tmp_path, on_step=_recorder(first, 9))
    assert sorted(first) == list(range(1, 10))  # the SIGINT let step 9 finish, no more
    last = tmp_path / "checkpoints" / "last.pt"
    assert err.value.saved and err.value.checkpoint == last
    assert f"resume={tmp_path}" in err.value.message()
    raw = torch.load(last, weights_only=True)  # plain data and tensors only
    assert raw["step"] == 9 and load_checkpoint(last).step == 9
    assert set(raw) >= {"optimizer", "scheduler", "scaler", "rng", "sampler", "tokenizer"}
    second: dict[int, float] = {}
    cfg = _cfg(data_root, "trainer.max_steps=14", f"resume={last}")
    train(cfg, tmp_path / "y", on_step=_recorder(second))
    assert sorted(second) == list(range(10, 15))
    assert {**first, **second} == uninterrupted


def test_second_ctrl_c_inside_an_update_keeps_the_last_checkpoint(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two SIGINTs in the middle of an update (accum_steps=2, so the 15th micro-batch is in
    # update 8 or 9): the second aborts at once; last.pt stays the last validation's
    calls = {"n": 0}
    original = training.label_smoothed_nll

    def loss_then_ctrl_c_twice(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 15:
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
        return original(*args, **kwargs)

    monkeypatch.setattr(training, "label_smoothed_nll", loss_then_ctrl_c_twice)
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when pytest runs as a background job
    with pytest.raises(TrainingInterrupted) as err:
        train(_cfg(data_root, "trainer.max_steps=14"), tmp_path)
    assert not err.value.saved and 7 <= err.value.step <= 8  # updates done before the abort
    assert "interrupted update is lost" in err.value.message()
    kept = load_checkpoint(tmp_path / "checkpoints" / "last.pt")  # a validation's, untouched
    assert kept.training is not None
    assert kept.step == kept.training.trainer["val_step"] <= err.value.step
    assert signal.getsignal(signal.SIGINT) is before  # the handler it found is restored


def test_a_run_trained_without_loss_scaling_resumes_in_fp16(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:  # type: ignore[no-untyped-def]
    """``trainer.precision=auto`` is decided again at a resume where the device cannot run
    the checkpoint's precision natively: a run whose first start trained in bf16 (a disabled
    GradScaler, whose state is empty) may resume in fp16 on a GPU without native bf16. Its
    scaler then starts afresh instead of failing on the empty state (simulated: an enabled
    CPU GradScaler, no autocast)."""
    train(_cfg(data_root, "trainer.max_steps=3"), tmp_path)
    assert load_checkpoint(tmp_path / "checkpoints" / "last.pt").training.scaler == {}

    def fp16(*args, **kwargs) -> Precision:  # type: ignore[no-untyped-def]
        return Precision("fp16", None, "cpu", torch.amp.GradScaler("cpu", enabled=True))

    monkeypatch.setattr(setup, "choose_precision", fp16)
    caplog.set_level(logging.INFO)
    result = train(_cfg(data_root, "trainer.max_steps=5", f"resume={tmp_path}"), tmp_path / "y")
    assert result["step"] == 5
    assert "was trained without fp16 loss scaling: the loss scale starts afresh" in caplog.text
    scaler = load_checkpoint(tmp_path / "checkpoints" / "last.pt").training.scaler
    assert scaler["scale"] > 0  # the fp16 run's own scaler state is saved from then on


def test_auto_precision_resumes_in_the_precision_the_run_trained_in(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:  # type: ignore[no-untyped-def]
    """The checkpoint records what ``auto`` resolved to; a resume on a device that runs it
    natively keeps it instead of probing again (where a probe on a busier or another
    machine could choose the other precision), so the continuation stays exact."""
    import attnmt.train.precision_probe as pp

    monkeypatch.setattr(pp, "cpu_has_fast_bf16", lambda: True)
    monkeypatch.setattr(pp, "probe", lambda *a, **k: ("bf16", "timed step: faked"))
    train(_cfg(data_root, "trainer.max_steps=3", "trainer.precision=auto"), tmp_path)
    assert load_checkpoint(tmp_path / "checkpoints" / "last.pt").training.precision == "bf16"

    monkeypatch.setattr(pp, "probe", lambda *a, **k: pytest.fail("a resume must not re-probe"))
    caplog.set_level(logging.INFO)
    resumed = _cfg(data_root, "trainer.max_steps=5", "trainer.precision=auto", f"resume={tmp_path}")
    assert train(resumed, tmp_path / "y")["step"] == 5
    assert "precision auto -> bf16: the checkpoint's run trained in bf16 (kept" in caplog.text
    assert load_checkpoint(tmp_path / "checkpoints" / "last.pt").training.precision == "bf16"
