"""The trainer's checkpoint payload, its restoration, and every random generator's state.

Everything is tensors and plain data, so ``torch.load(weights_only=True)`` reads it back.
``resume_point`` is the (sampler state, RNG state) captured right after the last
completed update; checkpoints are only written between updates (attnmt.train.interrupt), so
weights and position always agree.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from attnmt.checkpoint import FORMAT
from attnmt.data.sampler import TokenBatchSampler
from attnmt.data.tokenizer import Tokenizer
from attnmt.errors import CheckpointError
from attnmt.train.distributed import rank_seed
from attnmt.train.optim import Schedule

RESUME_KEYS = ("optimizer", "scheduler", "scaler", "sampler", "rng")
"""What a checkpoint must hold to be resumed (besides the model)."""
TRAINING_STATE = (*RESUME_KEYS, "rng_ranks", "trainer_state")
"""Every key that only resuming uses (what an averaged checkpoint drops)."""


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
    rng_ranks: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The checkpoint dict: model + every piece of training state (``state["step"]`` …).

    ``rng`` is this (rank 0's) RNG snapshot; under DDP ``rng_ranks`` holds every rank's.
    """
    sampler_state, rng = resume_point
    payload = {
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
    if rng_ranks is not None and len(rng_ranks) > 1:
        payload["rng_ranks"] = list(rng_ranks)
    return payload


def restore(
    parts: TrainingParts, payload: dict[str, Any], state: dict[str, Any], rank: int = 0
) -> None:
    """Load a payload into ``parts`` and ``state``; the RNGs last (after model building).

    Rank r takes its own RNG snapshot when the checkpoint has one (same world size);
    otherwise rank 0's, reseeded per rank so that ranks > 0 still draw their own masks.
    """
    missing = [k for k in RESUME_KEYS if k not in payload]
    if missing:
        raise CheckpointError(
            f"the checkpoint holds no training state ({', '.join(missing)} missing; e.g. an "
            "averaged checkpoint): evaluate it with evaluate.py, or resume from last.pt"
        )
    parts.model.load_state_dict(payload["model"])
    parts.optimizer.load_state_dict(payload["optimizer"])
    parts.schedule.load_state_dict(payload["scheduler"])
    parts.scaler.load_state_dict(payload["scaler"])
    parts.sampler.load_state_dict(payload["sampler"])
    state.update(payload.get("trainer_state", {"step": payload["step"]}))
    ranks = payload.get("rng_ranks") or [payload["rng"]]
    if rank < len(ranks):
        set_rng_state(ranks[rank])
    else:
        set_rng_state(payload["rng"])
        seed_everything(rank_seed(int(payload["step"]), rank))


# ---------------------------------------------------------------- RNG state


def rng_state() -> dict[str, Any]:
    """Every random generator's state as tensors / plain data."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _as_tuple(value: Any) -> Any:
    """Lists back to tuples (``random.setstate`` wants nested tuples)."""
    return tuple(_as_tuple(v) for v in value) if isinstance(value, (list, tuple)) else value


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore :func:`rng_state` (CUDA states only when CUDA is present)."""
    random.setstate(_as_tuple(state["python"]))
    npst = state["numpy"]
    keys = npst["keys"].numpy().astype(np.uint32)
    np.random.set_state(
        (npst["kind"], keys, npst["pos"], npst["has_gauss"], npst["cached_gaussian"])
    )
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        cuda_states = [s.cpu() for s in state["cuda"]][: torch.cuda.device_count()]
        torch.cuda.set_rng_state_all(cuda_states)


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (every CUDA device too)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
