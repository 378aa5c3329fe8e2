"""Checkpoints: atomic writes, safe reads, and finding the right file in a run.

A checkpoint is a dict of tensors and plain data only, so that it loads with
``torch.load(weights_only=True)``:

    format        "attnmt-checkpoint-v1"
    model_name    registry name (str)
    model_config  the model's config (plain dict)
    vocab         {"src_size": int, "tgt_size": int, "joint": bool}
    model         state_dict
    tokenizer     {file name: bytes}   SentencePiece model files (see Tokenizer.to_files_dict)
    config        the whole resolved run config (plain dict)
    step, epoch   ints
    metrics       {"val_bleu": float, ...}
    optimizer, scheduler, scaler, rng, sampler   training state (absent in averaged checkpoints)

Layout of a run directory: ``<run>/checkpoints/last.pt`` (rewritten at every validation,
at the end and on Ctrl-C) and the k best by validation BLEU as ``best-<step>.pt``;
``<run>/checkpoints/best.json`` lists those, best first (``[{"file", "step", "val_bleu"}]``),
and a checkpoint pushed out of the top k is deleted (:class:`CheckpointManager`).
Resolvers: :func:`resolve_checkpoint` (what to evaluate: best, else last) and
:func:`resume_target` (what to resume: last).
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch

from attnmt.errors import CheckpointError

log = logging.getLogger(__name__)
FORMAT = "attnmt-checkpoint-v1"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
REQUIRED_KEYS = ("format", "model_name", "model_config", "vocab", "model", "tokenizer", "config")


def save_checkpoint(payload: dict[str, Any], path: str | Path) -> Path:
    """Write ``payload`` to ``path`` atomically: temporary file, fsync, rename.

    A crash at any point leaves either the old file or the new one, never half of one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint with ``weights_only=True``; clear errors for missing/corrupt files."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises many types for truncated or foreign files
        first = _ANSI.sub("", str(err)).strip().splitlines()
        raise CheckpointError(
            f"cannot read checkpoint {path}: it is corrupt or not an attnmt checkpoint "
            f"({type(err).__name__}: {first[0] if first else ''})"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not an attnmt checkpoint (expected format {FORMAT})")
    missing = [k for k in REQUIRED_KEYS if k not in payload]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {', '.join(missing)}; it is incomplete")
    return payload


def read_best_json(best: Path) -> list[dict[str, Any]]:
    """The entries of a ``best.json`` (best first), each a dict with a str ``"file"``;
    [] when the file is absent, CheckpointError when it is unreadable or malformed."""
    if not best.is_file():
        return []
    try:
        entries = json.loads(best.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{best} is not a valid best.json list ({err})") from None
    rows = entries if isinstance(entries, list) else []
    if not rows or not all(isinstance(e, dict) and isinstance(e.get("file"), str) for e in rows):
        raise CheckpointError(
            f'{best} is not a valid best.json list: expected [{{"file": ...}}, ...]'
        )
    return rows


def _best_files(best: Path) -> list[str]:
    """The file names in ``best.json``; [] (with a warning) when it is malformed."""
    try:
        return [e["file"] for e in read_best_json(best)]
    except CheckpointError as err:
        log.warning("ignoring %s; falling back to last.pt", err)
        return []


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint file as given, or for a run directory its best checkpoint (else last).

    Accepts ``<run>``, ``<run>/checkpoints`` or a file.
    """
    path = Path(path)
    if path.is_file():
        return path
    if not path.exists():
        raise CheckpointError(f"checkpoint or run directory not found: {path}")
    ckpt_dir = path / "checkpoints" if (path / "checkpoints").is_dir() else path
    best = ckpt_dir / "best.json"
    for name in _best_files(best):
        candidate = ckpt_dir / name
        if candidate.is_file():
            return candidate
    last = ckpt_dir / "last.pt"
    if last.is_file():
        return last
    raise CheckpointError(
        f"no checkpoint in {path}: expected {ckpt_dir}/best.json or {ckpt_dir}/last.pt"
    )


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
