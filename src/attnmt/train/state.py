"""The trainer's run state (:class:`TrainState`) and the checkpoint payload that holds it.

Everything is tensors and plain data, so ``torch.load(weights_only=True)`` reads it back.
``resume_point`` is the (sampler state, RNG state) captured right after the last
completed update; checkpoints are only written between updates (attnmt.train.interrupt), so
weights and position always agree.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnmt.checkpoint import FORMAT, load_weights
from attnmt.data.sampler import TokenBatchSampler
from attnmt.data.tokenizer import Tokenizer
from attnmt.errors import CheckpointError
from attnmt.train.continuation import check_same_corpus
from attnmt.train.distributed import rank_seed
from attnmt.train.optim import Schedule
from attnmt.train.rng import seed_everything, set_rng_state

RESUME_KEYS = ("optimizer", "scheduler", "scaler", "sampler", "rng")
"""What a checkpoint must hold to be resumed (besides the model)."""
TRAINING_STATE = (*RESUME_KEYS, "rng_ranks", "trainer_state")
"""Every key that only resuming uses (what an averaged checkpoint drops)."""


@dataclass
class History:
    """Rows ``[step, minutes, nll]`` (train) and ``[step, minutes, nll, bleu, chrf]`` (valid),
    kept in the checkpoint so a resumed run goes on drawing the same curves."""

    train: list[list[float]] = field(default_factory=list)
    valid: list[list[float]] = field(default_factory=list)

    def add_train(self, step: int, minutes: float, nll: float) -> None:
        self.train.append([step, minutes, nll])

    def add_valid(self, step: int, minutes: float, nll: float, bleu: float, chrf: float) -> None:
        self.valid.append([step, minutes, nll, bleu, chrf])


@dataclass
class TrainState:
    """What the trainer counts and remembers; a checkpoint's ``trainer_state``."""

    step: int = 0  # updates done (a resumed run goes on counting)
    val_step: int = -1  # the step of the last validation
    best_bleu: float = -math.inf  # best validation BLEU so far
    best_chrf: float = 0.0  # its chrF
    best_step: int | None = None  # its step (None before the first validation)
    bad_vals: int = 0  # validations in a row without improvement (early stopping)
    n_vals: int = 0  # validations so far (heatmaps every trainer.heatmaps_every)
    bad_updates: int = 0  # non-finite updates in a row (trainer.max_bad_updates)
    skipped_updates: int = 0  # non-finite updates in all
    wall_s: float = 0.0  # wall-clock seconds of training so far
    signature: str = ""  # sacrebleu signatures of the validation scores
    history: History = field(default_factory=History)

    def state_dict(self) -> dict[str, Any]:
        """Plain data for the checkpoint."""
        return dataclasses.asdict(self)

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Take the fields ``saved`` has (older checkpoints lack some: they keep their
        defaults); unknown keys are ignored."""
        for f in dataclasses.fields(self):
            if f.name not in saved:
                continue
            value = saved[f.name]
            if f.name == "history":
                value = History(list(value.get("train", [])), list(value.get("valid", [])))
            setattr(self, f.name, value)

    @property
    def minutes(self) -> float:
        """The wall-clock minutes of the last validation (0 before any)."""
        return self.history.valid[-1][1] if self.history.valid else 0.0


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
    # PreparedCorpus.fingerprint() of the train and valid files: stored, and compared when
    # resuming (None: neither)
    corpus: dict[str, Any] | None = None


def make_payload(
    parts: TrainingParts,
    state: TrainState,
    resume_point: tuple[dict[str, int], dict[str, Any]],
    metrics: dict[str, float],
    rng_ranks: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The checkpoint dict: model + every piece of training state.

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
        "step": state.step,
        "epoch": int(sampler_state["epoch"]),
        "metrics": dict(metrics),
        "optimizer": parts.optimizer.state_dict(),
        "scheduler": parts.schedule.state_dict(),
        "scaler": parts.scaler.state_dict(),
        "rng": rng,
        "sampler": dict(sampler_state),
        "trainer_state": state.state_dict(),
    }
    if rng_ranks is not None and len(rng_ranks) > 1:
        payload["rng_ranks"] = list(rng_ranks)
    if parts.corpus is not None:
        payload["corpus"] = parts.corpus
    return payload


def restore(
    parts: TrainingParts,
    payload: dict[str, Any],
    state: TrainState,
    rank: int = 0,
    source: str | Path = "the checkpoint",
) -> None:
    """Load a payload into ``parts`` and ``state``; the RNGs last (after model building).

    Rank r takes its own RNG snapshot when the checkpoint has one (same world size);
    otherwise rank 0's, reseeded per rank so that ranks > 0 still draw their own masks.
    The corpus must be the one the checkpoint was trained on
    (:func:`~attnmt.train.continuation.check_same_corpus`), checked before anything loads.
    """
    missing = [k for k in RESUME_KEYS if k not in payload]
    if missing:
        raise CheckpointError(
            f"the checkpoint holds no training state ({', '.join(missing)} missing; e.g. an "
            "averaged checkpoint): evaluate it with evaluate.py, or resume from last.pt"
        )
    if parts.corpus is not None:
        check_same_corpus(payload.get("corpus"), parts.corpus, str(source))
    load_weights(parts.model, payload["model"], source)
    parts.optimizer.load_state_dict(payload["optimizer"])
    parts.schedule.load_state_dict(payload["scheduler"])
    parts.scaler.load_state_dict(payload["scaler"])
    parts.sampler.load_state_dict(payload["sampler"])
    state.load_state_dict(payload.get("trainer_state", {"step": payload["step"]}))
    ranks = payload.get("rng_ranks") or [payload["rng"]]
    if rank < len(ranks):
        set_rng_state(ranks[rank])
    else:
        set_rng_state(payload["rng"])
        seed_everything(rank_seed(int(payload["step"]), rank))
