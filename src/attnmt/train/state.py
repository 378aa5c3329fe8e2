"""The trainer's counters and curves (:class:`TrainState`), a checkpoint's
``trainer_state`` (attnmt.train.checkpointing writes and restores it): plain data only, so
``torch.load(weights_only=True)`` reads it back.

The run's clock is ``TrainState.wall_s``, its *training minutes* (``wall_s / 60``): wall
time from the end of setup (data and model ready) on, updates, validations and checkpoint
writes included, carried across a resume by the checkpoint. Time after the checkpoint a
resume continues from is not counted (those updates are done again), nor is the time a run
is stopped. It is the ``minutes`` of the run record and of the curves, what
``trainer.time_budget_min`` limits and what ``trainer.keep_best_at_minutes`` marks.
"""

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

    def best_by(self, minutes: float) -> list[float] | None:
        """The valid row of the best BLEU among the validations by ``minutes`` (rows with
        ``minutes <= m``; ties: the earlier step, as best.json ranks them); None before any:

            argmax_{row : row.minutes <= m} (row.bleu, -row.step)
        """
        by_then = [row for row in self.valid if row[1] <= minutes]
        return max(by_then, key=lambda row: (row[3], -row[0]), default=None)


@dataclass
class BestAt:
    """The best checkpoint as of training minute ``minutes`` (``trainer.keep_best_at_minutes``):
    kept as ``file`` (in checkpoints/) with its ``step`` and validation BLEU; ``file`` None:
    missed (no validation by then, or its checkpoint was gone)."""

    minutes: float
    file: str | None
    step: int | None
    val_bleu: float | None


@dataclass
class TrainState:
    """What the trainer counts and remembers; a checkpoint's ``trainer_state``."""

    step: int = 0  # updates done (a resumed run goes on counting)
    val_step: int = -1  # the step of the last validation
    best_bleu: float = -math.inf  # best validation BLEU so far
    best_chrf: float = 0.0  # its chrF
    best_aer: float | None = None  # its AER against the valid links (None: no links)
    best_step: int | None = None  # its step (None before the first validation)
    bad_vals: int = 0  # validations in a row without improvement (early stopping)
    n_vals: int = 0  # validations so far (heatmaps every trainer.heatmaps_every)
    bad_updates: int = 0  # non-finite updates in a row (trainer.max_bad_updates)
    skipped_updates: int = 0  # non-finite updates in all
    wall_s: float = 0.0  # the run's clock: training seconds so far (module docstring)
    signature: str = ""  # sacrebleu signatures of the validation scores
    history: History = field(default_factory=History)
    best_at: list[BestAt] = field(default_factory=list)  # the marks kept or missed, by minute

    def state_dict(self) -> dict[str, Any]:
        """Plain data for the checkpoint."""
        return dataclasses.asdict(self)

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Take the fields ``saved`` has (older checkpoints lack some: they keep their
        defaults, e.g. a checkpoint without ``wall_s`` starts the clock at 0); unknown keys
        are ignored."""
        for f in dataclasses.fields(self):
            if f.name not in saved:
                continue
            value = saved[f.name]
            if f.name == "history":
                value = History(list(value.get("train", [])), list(value.get("valid", [])))
            elif f.name == "best_at":
                value = [BestAt(**entry) for entry in value]
            setattr(self, f.name, value)

    def kept_at(self, minutes: float) -> BestAt | None:
        """The mark at ``minutes`` as kept or missed (None: not passed yet)."""
        return next((b for b in self.best_at if b.minutes == minutes), None)

    @property
    def minutes(self) -> float:
        """The training minutes of the last validation (0 before any)."""
        return self.history.valid[-1][1] if self.history.valid else 0.0
