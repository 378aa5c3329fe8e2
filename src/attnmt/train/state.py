"""The trainer's counters and curves (:class:`TrainState`), a checkpoint's
``trainer_state`` (attnmt.train.checkpointing writes and restores it): plain data only, so
``torch.load(weights_only=True)`` reads it back."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any


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
