"""Run-level checkpoint management on top of :mod:`attnmt.checkpoint`.

* ``last.pt``: rewritten at every validation, at the end and on Ctrl-C.
* the k best by validation BLEU: ``best-<step>.pt`` plus ``best.json`` (best first,
  ``[{"file", "step", "val_bleu"}]``); a checkpoint pushed out of the top k is deleted.
* every random generator's state as tensors and plain data (``weights_only`` safe).
"""

from __future__ import annotations

import json
import logging
import os
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnmt.checkpoint import read_best_json, save_checkpoint
from attnmt.errors import CheckpointError

log = logging.getLogger(__name__)


class CheckpointManager:
    """Keeps ``last.pt`` and the ``keep_best`` best checkpoints of one run directory."""

    def __init__(self, directory: str | Path, keep_best: int = 3) -> None:
        self.directory = Path(directory)
        self.keep_best = keep_best
        self.best: list[dict[str, Any]] = self._read_best()

    @property
    def last_path(self) -> Path:
        return self.directory / "last.pt"

    @property
    def best_json(self) -> Path:
        return self.directory / "best.json"

    def _read_best(self) -> list[dict[str, Any]]:
        """The listed best checkpoints that exist; a malformed best.json starts afresh."""
        try:
            entries = read_best_json(self.best_json)
        except CheckpointError as err:
            log.warning("%s; the k-best list starts afresh", err)
            return []
        return [e for e in entries if (self.directory / e["file"]).is_file()]

    def save_last(self, payload: dict[str, Any]) -> Path:
        """Atomically write ``last.pt``."""
        return save_checkpoint(payload, self.last_path)

    def is_best(self, bleu: float) -> bool:
        """Would a checkpoint with this validation BLEU enter the top k?"""
        if self.keep_best <= 0:
            return False
        return len(self.best) < self.keep_best or bleu > self.best[-1]["val_bleu"]

    def save_if_best(self, payload: dict[str, Any], step: int, bleu: float) -> bool:
        """Write ``best-<step>.pt`` if ``bleu`` is among the k best; update best.json.

        Ties keep the earlier checkpoint ahead. Returns whether it was written.
        """
        if not self.is_best(bleu):
            return False
        name = f"best-{step}.pt"
        save_checkpoint(payload, self.directory / name)
        entries = [e for e in self.best if e["file"] != name]
        entries.append({"file": name, "step": int(step), "val_bleu": float(bleu)})
        entries.sort(key=lambda e: (-e["val_bleu"], e["step"]))
        kept, dropped = entries[: self.keep_best], entries[self.keep_best :]
        self.best = kept
        self._write_best_json()
        for entry in dropped:
            (self.directory / entry["file"]).unlink(missing_ok=True)
        return True

    def _write_best_json(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".best.json.", dir=self.directory)
        with os.fdopen(fd, "w") as f:
            json.dump(self.best, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.best_json)

    def best_path(self) -> Path | None:
        """The best checkpoint so far (None before the first validation)."""
        return self.directory / self.best[0]["file"] if self.best else None


def latest_checkpoint(outputs: str | Path, exclude: Path | None = None) -> Path | None:
    """The newest ``<run>/checkpoints/last.pt`` under ``outputs`` (``resume=auto``)."""
    found = [
        p
        for p in Path(outputs).glob("**/checkpoints/last.pt")
        if exclude is None or exclude.resolve() not in p.resolve().parents
    ]
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


def resume_target(resume: str | None, outputs: str | Path, run_dir: Path) -> Path | None:
    """The checkpoint to resume from: None (fresh run), ``auto`` or a file / run dir.

    A run directory resumes from its ``last.pt`` (the newest state, not the best one).
    """
    if resume is None or str(resume) in ("", "null", "None"):
        return None
    if str(resume) == "auto":
        return latest_checkpoint(outputs, exclude=run_dir)
    path = Path(str(resume))
    for candidate in (path, path / "checkpoints" / "last.pt", path / "last.pt"):
        if candidate.is_file():
            return candidate
    raise CheckpointError(
        f"resume={resume}: no checkpoint there; give a .pt file or a run directory "
        "holding checkpoints/last.pt (or resume=auto for the latest run)"
    )


def run_dir_of(checkpoint: Path) -> Path | None:
    """``<run>`` for ``<run>/checkpoints/<file>.pt``, else None."""
    return checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" else None


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
