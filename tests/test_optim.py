"""Optimizers and schedules: Noam values by hand, plateau decay, config errors."""

from __future__ import annotations

import math

import pytest
import torch

from attnmt.errors import ConfigError
from attnmt.schema import parse
from attnmt.train.config import TrainerConfig
from attnmt.train.optim import SCHEDULES, build_optimizer, build_schedule
from attnmt.train.run_config import validate_config


def _opt(cfg: TrainerConfig) -> torch.optim.Optimizer:
    return build_optimizer([torch.nn.Parameter(torch.zeros(2))], cfg)


def test_noam_values_by_hand() -> None:
    cfg = TrainerConfig(schedule="noam", lr=1e-3, warmup_steps=100)
    opt = _opt(cfg)
    sched = build_schedule(opt, cfg)
    assert sched.step(1) == pytest.approx(1e-5)  # 1e-3 * 1/100
    assert sched.step(50) == pytest.approx(5e-4)
    assert sched.step(100) == pytest.approx(1e-3)  # peak at warmup
    assert sched.step(400) == pytest.approx(5e-4)  # 1e-3 * sqrt(100/400)
    assert opt.param_groups[0]["lr"] == pytest.approx(5e-4)


def test_noam_equals_vaswani_formula() -> None:
    d_model, warmup = 512, 4000
    cfg = TrainerConfig(lr=(d_model * warmup) ** -0.5, warmup_steps=warmup)
    sched = build_schedule(_opt(cfg), cfg)
    for step in (1, 100, 4000, 10000, 123456):
        vaswani = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert sched.lr_at(step) == pytest.approx(vaswani, rel=1e-9)


def test_constant_with_warmup() -> None:
    cfg = TrainerConfig(schedule="constant", lr=2e-3, warmup_steps=4)
    sched = build_schedule(_opt(cfg), cfg)
    assert [sched.lr_at(s) for s in (1, 2, 4, 100)] == pytest.approx([5e-4, 1e-3, 2e-3, 2e-3])


def test_plateau_halves_after_patience_and_state_round_trips() -> None:
    cfg = TrainerConfig(
        schedule="plateau", lr=1e-3, warmup_steps=0, plateau_patience=1, plateau_factor=0.5
    )
    sched = build_schedule(_opt(cfg), cfg)
    for bleu in (10.0, 12.0, 11.0):  # improvement, improvement, 1 bad (= patience): no decay
        sched.on_validation(bleu)
    assert sched.lr_at(10) == pytest.approx(1e-3)
    sched.on_validation(12.0)  # 2nd bad validation in a row (> patience) -> halve
    assert sched.lr_at(10) == pytest.approx(5e-4)
    clone = build_schedule(_opt(cfg), cfg)
    clone.load_state_dict(sched.state_dict())
    assert clone.lr_at(10) == pytest.approx(5e-4) and clone.best == 12.0


def test_plateau_respects_min_lr() -> None:
    cfg = TrainerConfig(
        schedule="plateau",
        lr=1e-3,
        warmup_steps=0,
        plateau_patience=0,
        plateau_factor=0.1,
        min_lr=5e-5,
    )
    sched = build_schedule(_opt(cfg), cfg)
    for _ in range(5):
        sched.on_validation(1.0)
    assert sched.lr_at(1) == pytest.approx(5e-5)


def test_registries() -> None:
    assert set(SCHEDULES) == {"noam", "plateau", "constant"}
    assert isinstance(_opt(TrainerConfig(optimizer="adamw")), torch.optim.AdamW)
    assert type(_opt(TrainerConfig(optimizer="adam"))) is torch.optim.Adam


def test_trainer_config_rejects_typos_types_and_bad_choices() -> None:
    """Through the one schema helper and the run config's choice check (attnmt.train.run_config)."""
    with pytest.raises(ConfigError, match=r"trainer\.max_stpes.*trainer\.max_steps"):
        parse({"max_stpes": 3}, TrainerConfig, "trainer.")
    with pytest.raises(ConfigError, match=r"trainer\.max_steps: expected int"):
        parse({"max_steps": "abc"}, TrainerConfig, "trainer.")
    with pytest.raises(ConfigError, match="label_smoothing"):
        parse({"label_smoothing": 1.5}, TrainerConfig, "trainer.")
    cfg = parse({"lr": 1, "betas": [0.9, 0.99]}, TrainerConfig, "trainer.")
    assert cfg.lr == 1.0 and isinstance(cfg.lr, float) and cfg.betas == [0.9, 0.99]
    assert not math.isnan(cfg.eps)
    for key, bad in (("optimizer", "sgdd"), ("schedule", "cosine"), ("precision", "fp8")):
        with pytest.raises(ConfigError, match=rf"trainer\.{key}: '{bad}' is not one of"):
            validate_config({"model": {"name": "transformer"}, "trainer": {key: bad}})
