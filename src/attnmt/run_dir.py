"""A run folder's layout, in one place: :class:`RunDir`.

    <run>/
      .hydra/config.yaml, overrides.yaml   the resolved config Hydra wrote
      .lock                                the live training process (attnmt.train.run_lock)
      train.log                            the log, for people
      metrics.jsonl, summary.json          the run record, for tools (attnmt.run_record)
      checkpoints/last.pt                  the newest training state
      checkpoints/best-<step>.pt           the k best by validation BLEU
      checkpoints/averaged.pt              the average of the k best, when it validated better
      checkpoints/best-at-<m>min.pt        the best as of training minute m (keep_best_at_minutes)
      checkpoints/best.json                those, best first
      hyps/                                hypotheses of validation and test
      eval/<split>-<key>/                  evaluate.py's outputs
      results.png, events.out.tfevents.*   curves, TensorBoard

The two rules every tool shares: a folder *is a run* when it holds ``checkpoints/`` or
``.hydra/`` (:meth:`RunDir.is_run`); a path that names a run's checkpoints means the run's
``checkpoints/`` when it has one, else the folder itself (:meth:`RunDir.checkpoint_dir`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

CHECKPOINTS = "checkpoints"
LAST = "last.pt"
BEST_JSON = "best.json"
AVERAGED = "averaged.pt"
LOCK = ".lock"
HYDRA = ".hydra"
MARKERS = (CHECKPOINTS, HYDRA)
"""What makes a folder a training run's: either subfolder (a loose ``train.log`` does not)."""
BEST_FILE = re.compile(r"best-(\d+)\.pt")


def best_name(step: int) -> str:
    """The file name of the best checkpoint of ``step``: ``best-<step>.pt``."""
    return f"best-{step}.pt"


def best_at_name(minutes: float) -> str:
    """The file name of the best checkpoint as of training minute ``minutes``
    (``trainer.keep_best_at_minutes``): ``best-at-<m>min.pt``."""
    return f"best-at-{minutes:g}min.pt"


@dataclass(frozen=True)
class RunDir:
    """The paths of one run folder (nothing is created or read here)."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS

    @property
    def last(self) -> Path:
        return self.checkpoints / LAST

    @property
    def best_json(self) -> Path:
        return self.checkpoints / BEST_JSON

    def best(self, step: int) -> Path:
        """``checkpoints/best-<step>.pt``."""
        return self.checkpoints / best_name(step)

    def best_at(self, minutes: float) -> Path:
        """``checkpoints/best-at-<m>min.pt``."""
        return self.checkpoints / best_at_name(minutes)

    @property
    def lock(self) -> Path:
        return self.path / LOCK

    @property
    def train_log(self) -> Path:
        return self.path / "train.log"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def summary(self) -> Path:
        return self.path / "summary.json"

    @property
    def hyps(self) -> Path:
        return self.path / "hyps"

    @property
    def eval(self) -> Path:
        return self.path / "eval"

    @property
    def hydra(self) -> Path:
        return self.path / HYDRA

    @property
    def config_yaml(self) -> Path:
        return self.hydra / "config.yaml"

    @property
    def overrides_yaml(self) -> Path:
        return self.hydra / "overrides.yaml"

    @property
    def results_png(self) -> Path:
        return self.path / "results.png"

    @staticmethod
    def trainer_writes(name: str) -> bool:
        """Whether the trainer writes checkpoints of this file name (``last.pt``,
        ``best-<step>.pt``, ``averaged.pt``)."""
        return name in (LAST, AVERAGED) or BEST_FILE.fullmatch(name) is not None

    @staticmethod
    def is_run(path: str | Path) -> bool:
        """Whether ``path`` is a training run's folder (it holds ``checkpoints/`` or
        ``.hydra/``)."""
        path = Path(path)
        return path.is_dir() and any((path / m).is_dir() for m in MARKERS)

    @staticmethod
    def checkpoint_dir(path: str | Path) -> Path:
        """Where a run's checkpoints lie for ``path`` given as ``<run>`` or
        ``<run>/checkpoints``: ``path/checkpoints`` when it exists, else ``path``."""
        path = Path(path)
        return path / CHECKPOINTS if (path / CHECKPOINTS).is_dir() else path

    @classmethod
    def of_checkpoint(cls, checkpoint: str | Path) -> RunDir | None:
        """The run of ``<run>/checkpoints/<file>.pt``, else None."""
        checkpoint = Path(checkpoint)
        if checkpoint.parent.name != CHECKPOINTS:
            return None
        return cls(checkpoint.parent.parent)

    @classmethod
    def of(cls, path: str | Path) -> RunDir:
        """The run that ``path`` names: a run folder, its ``checkpoints/``, or a file in
        ``checkpoints/`` (any other path is taken as the run folder itself)."""
        path = Path(path)
        if path.name == CHECKPOINTS and path.is_dir():
            return cls(path.parent)
        if path.is_file():
            return cls.of_checkpoint(path) or cls(path.parent)
        return cls(path)

    @classmethod
    def find(cls, paths: Iterable[str | Path], marker: str = "metrics.jsonl") -> list[RunDir]:
        """The runs at or under ``paths`` that hold ``marker`` (a file of the layout),
        sorted by path."""
        found: set[Path] = set()
        for path in map(Path, paths):
            if (path / marker).is_file():
                found.add(path)
            elif path.is_dir():
                found.update(p.parent for p in path.rglob(marker) if p.is_file())
        return [cls(p) for p in sorted(found)]
