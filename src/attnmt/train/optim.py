"""Optimizers and learning-rate schedules, each behind an explicit registry dict.

A schedule sets the learning rate of every parameter group before each optimizer update
(``step`` counts updates from 1) and may react to validation BLEU. Its state is plain data,
so it fits a ``weights_only`` checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from attnmt.train.config import TrainerConfig


def _betas(cfg: TrainerConfig) -> tuple[float, float]:
    """``trainer.betas`` (a list of two, checked by TrainerConfig.check) as Adam's pair."""
    beta1, beta2 = cfg.betas
    return beta1, beta2


def _adam(params: Iterable[nn.Parameter], cfg: TrainerConfig) -> torch.optim.Optimizer:
    return torch.optim.Adam(
        params, lr=cfg.lr, betas=_betas(cfg), eps=cfg.eps, weight_decay=cfg.weight_decay
    )


def _adamw(params: Iterable[nn.Parameter], cfg: TrainerConfig) -> torch.optim.Optimizer:
    return torch.optim.AdamW(
        params, lr=cfg.lr, betas=_betas(cfg), eps=cfg.eps, weight_decay=cfg.weight_decay
    )


OPTIMIZERS: dict[str, Callable[[Iterable[nn.Parameter], TrainerConfig], torch.optim.Optimizer]] = {
    "adam": _adam,
    "adamw": _adamw,
}


def build_optimizer(params: Iterable[nn.Parameter], cfg: TrainerConfig) -> torch.optim.Optimizer:
    """The optimizer named ``cfg.optimizer`` (Adam or AdamW; validated by
    attnmt.train.run_config)."""
    return OPTIMIZERS[cfg.optimizer](params, cfg)


class Schedule:
    """Base: ``lr_at(step)``; :meth:`step` writes it into the optimizer."""

    def __init__(self, optimizer: torch.optim.Optimizer, cfg: TrainerConfig) -> None:
        self.optimizer = optimizer
        self.peak_lr = cfg.lr
        self.warmup = cfg.warmup_steps

    def lr_at(self, step: int) -> float:
        raise NotImplementedError

    def step(self, step: int) -> float:
        """Set the learning rate for update number ``step`` (1-based) and return it."""
        lr = self.lr_at(step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def on_validation(self, bleu: float) -> None:
        """React to a validation BLEU (only the plateau schedule does)."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""


class ConstantSchedule(Schedule):
    """lr(step) = lr · min(1, step / warmup)  (linear warmup, then constant)."""

    def lr_at(self, step: int) -> float:
        if self.warmup > 0 and step < self.warmup:
            return self.peak_lr * step / self.warmup
        return self.peak_lr


class NoamSchedule(Schedule):
    """Inverse square root with linear warmup (Vaswani et al. 2017, eq. 3):

    lr(step) = lr · min(step / warmup, sqrt(warmup / step))

    which equals ``d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)`` when
    ``lr = (d_model · warmup)^-0.5``; the peak ``lr`` is reached at ``step = warmup``.
    """

    def lr_at(self, step: int) -> float:
        step = max(step, 1)
        if self.warmup <= 0:
            return self.peak_lr / math.sqrt(step)
        return self.peak_lr * min(step / self.warmup, math.sqrt(self.warmup / step))


class PlateauSchedule(Schedule):
    """Linear warmup, then lr *= factor whenever validation BLEU has not improved for
    ``patience`` consecutive validations (never below ``min_lr``)."""

    def __init__(self, optimizer: torch.optim.Optimizer, cfg: TrainerConfig) -> None:
        super().__init__(optimizer, cfg)
        self.factor = cfg.plateau_factor
        self.patience = cfg.plateau_patience
        self.min_lr = cfg.min_lr
        self.current = cfg.lr
        self.best = -math.inf
        self.bad = 0

    def lr_at(self, step: int) -> float:
        if self.warmup > 0 and step < self.warmup:
            return self.current * step / self.warmup
        return self.current

    def on_validation(self, bleu: float) -> None:
        if bleu > self.best:
            self.best, self.bad = bleu, 0
            return
        self.bad += 1
        if self.bad > self.patience:
            self.current = max(self.current * self.factor, self.min_lr)
            self.bad = 0

    def state_dict(self) -> dict[str, Any]:
        return {"current": self.current, "best": self.best, "bad": self.bad}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.current = float(state["current"])
        self.best = float(state["best"])
        self.bad = int(state["bad"])


SCHEDULES: dict[str, type[Schedule]] = {
    "noam": NoamSchedule,
    "plateau": PlateauSchedule,
    "constant": ConstantSchedule,
}


def build_schedule(optimizer: torch.optim.Optimizer, cfg: TrainerConfig) -> Schedule:
    """The schedule named ``cfg.schedule`` (validated by attnmt.train.run_config)."""
    return SCHEDULES[cfg.schedule](optimizer, cfg)
