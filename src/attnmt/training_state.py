"""The trainer's checkpoint payload and its restoration (format: attnmt.checkpoint).

Everything is tensors and plain data, so ``torch.load(weights_only=True)`` reads it back.
``resume_point`` is the (sampler state, RNG state) captured right after the last
completed update, so a checkpoint written on Ctrl-C in the middle of an update still
resumes exactly at that update's end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from attnmt.checkpoint import FORMAT
from attnmt.checkpointing import set_rng_state
from attnmt.data.sampler import TokenBatchSampler
from attnmt.data.tokenizer import Tokenizer
from attnmt.optim import Schedule


@dataclass
class TrainingParts:
    """The stateful objects of a run that a checkpoint holds."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    schedule: Schedule
    scaler: torch.amp.GradScaler
    sampler: TokenBatchSampler
    tokenizer: Tokenizer
    model_config: dict[str, Any]
    config: dict[str, Any]  # the whole resolved run config


def make_payload(
    parts: TrainingParts,
    state: dict[str, Any],
    resume_point: tuple[dict[str, int], dict[str, Any]],
    metrics: dict[str, float],
) -> dict[str, Any]:
    """The checkpoint dict: model + every piece of training state (``state["step"]`` …)."""
    sampler_state, rng = resume_point
    return {
        "format": FORMAT,
        "model_name": getattr(parts.model, "name", ""),
        "model_config": dict(parts.model_config),
        "vocab": parts.tokenizer.vocab_info(),
        "model": parts.model.state_dict(),
        "tokenizer": parts.tokenizer.to_files_dict(),
        "config": parts.config,
        "step": int(state["step"]),
        "epoch": int(sampler_state["epoch"]),
        "metrics": dict(metrics),
        "optimizer": parts.optimizer.state_dict(),
        "scheduler": parts.schedule.state_dict(),
        "scaler": parts.scaler.state_dict(),
        "rng": rng,
        "sampler": dict(sampler_state),
        "trainer_state": dict(state),
    }


def restore(parts: TrainingParts, payload: dict[str, Any], state: dict[str, Any]) -> None:
    """Load a payload into ``parts`` and ``state``; the RNGs last (after model building)."""
    parts.model.load_state_dict(payload["model"])
    parts.optimizer.load_state_dict(payload["optimizer"])
    parts.schedule.load_state_dict(payload["scheduler"])
    parts.scaler.load_state_dict(payload["scaler"])
    parts.sampler.load_state_dict(payload["sampler"])
    state.update(payload.get("trainer_state", {"step": payload["step"]}))
    set_rng_state(payload["rng"])
