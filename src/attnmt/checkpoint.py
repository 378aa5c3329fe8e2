"""Checkpoints: atomic writes, safe reads, and finding the right file in a run.

A checkpoint is a :class:`~attnmt.checkpoint_format.Checkpoint` (its on-disk keys are
described there); :func:`save_checkpoint` writes one, :func:`load_checkpoint` reads one
with ``torch.load(weights_only=True)``.

Layout of a run directory: ``<run>/checkpoints/last.pt`` (rewritten at every validation,
at the end and on Ctrl-C) and the k best by validation BLEU as ``best-<step>.pt``;
``<run>/checkpoints/best.json`` lists those, best first (``[{"file", "step", "val_bleu"}]``),
and a checkpoint pushed out of the top k is deleted (:class:`CheckpointManager`). The best
as of given training minutes (``trainer.keep_best_at_minutes``) are ``best-at-<m>min.pt``:
hard links that no pruning touches (attnmt.train.best_at, :func:`link_or_copy`).

Finding the file: a run directory offers several checkpoints, and an unreadable one (a
truncated copy, a full disk) is skipped with a warning naming it and why, in favour of the
next (:func:`load_first_readable`):

    evaluate / translate   best.json's best, then as resume=RUN    :func:`load_resolved`
    ensemble=k             best.json's first k, all present        :func:`best_checkpoints`
    resume=RUN             last.pt, then best-<step>.pt, newest first   :func:`load_resume`
    resume=auto            the same for every run under outputs/, newest run first;
                           runs without a checkpoint are passed over
An explicitly named file is read as given: its error stands. Temporary files that killed
writes leave behind are removed when a :class:`CheckpointManager` opens the directory
(:func:`remove_stale_tmp`).
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeGuard

import torch

from attnmt import atomic
from attnmt.atomic import STALE_TMP_AGE_S, atomic_path, write_json
from attnmt.checkpoint_format import Checkpoint
from attnmt.errors import CheckpointError
from attnmt.run_dir import BEST_FILE, BEST_JSON, LAST, RunDir, best_name

log = logging.getLogger(__name__)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TORCH_WRITE_FAILURE = re.compile(r"write|unexpected pos|iostream error", re.IGNORECASE)
FULL_DISK_BYTES = 1 << 20
"""Less free space than this after a failed checkpoint write: the disk is full."""
# torch's own advice in its load errors (e.g. "Re-running `torch.load` with `weights_only` set
# to `False` will likely succeed"): never passed on, it points users at unsafe loading
_TORCH_ADVICE = re.compile(
    r"weights_only|trusted source|load failed|arbitrary code|file an issue|documentation"
    r"|internal miniz error|likelihood|can happen if|safe_globals|allowlist",
    re.IGNORECASE,
)


def free_bytes(directory: Path) -> int | None:
    """The bytes an unprivileged process may still write on ``directory``'s filesystem
    (None when the filesystem does not say)."""
    try:
        stats = os.statvfs(directory)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def _torch_write_error(err: RuntimeError, directory: Path) -> OSError | None:
    """The OSError behind a failed ``torch.save``, or None when ``err`` is no write failure.

    torch's zip writer reports a short write without an errno: as ``[enforce fail at
    inline_container.cc:...] . unexpected pos 576 vs 534`` (the next record's offset no
    longer matches), ``... file write failed`` or ``basic_ios::clear: iostream error``.
    Called while the partial temporary file still fills the disk, so less than
    :data:`FULL_DISK_BYTES` free means a full disk.
    """
    text = str(err)
    if not _TORCH_WRITE_FAILURE.search(text):
        return None
    free = free_bytes(directory)
    if free is not None and free < FULL_DISK_BYTES:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    detail = text.splitlines()[0] if text else type(err).__name__
    return OSError(errno.EIO, f"the write failed ({detail}); check the disk's quota and health")


def save_checkpoint(checkpoint: Checkpoint, path: str | Path) -> Path:
    """Write ``checkpoint`` to ``path`` atomically (:func:`attnmt.atomic.atomic_path`).

    A crash at any point leaves either the old file or the new one, never half of one; a
    full disk is a :class:`~attnmt.errors.WriteError` naming ``path``.
    """
    path = Path(path)
    with atomic_path(path) as tmp:
        cause = None
        try:
            torch.save(checkpoint.to_dict(), tmp)
        except RuntimeError as err:
            cause = _torch_write_error(err, path.parent)
            if cause is None:
                raise
        if cause is not None:  # raised here, torch's writer (err's frames) is freed at once:
            raise cause  # it holds the temporary file open, and its space, until then
    return path


def load_weights(model: torch.nn.Module, state: dict[str, Any], source: str | Path) -> None:
    """``model.load_state_dict(state)``; a CheckpointError naming ``source`` and the first
    tensor that is missing, unexpected or of another shape, instead of torch's long list."""
    own = model.state_dict()
    for name, tensor in state.items():
        if name in own and tuple(own[name].shape) != tuple(tensor.shape):
            raise CheckpointError(
                f"{source}: tensor {name} has shape {tuple(tensor.shape)} but the model "
                f"expects {tuple(own[name].shape)}; the checkpoint belongs to another model "
                "or vocabulary (resume/finetune it with its own settings, or start afresh)"
            )
    missing = [n for n in own if n not in state]
    unexpected = [n for n in state if n not in own]
    if missing or unexpected:
        what = f"lacks tensor {missing[0]}" if missing else f"has unexpected tensor {unexpected[0]}"
        raise CheckpointError(
            f"{source}: {what}; the checkpoint belongs to another model (resume/finetune it "
            "with its own settings, or start afresh)"
        )
    model.load_state_dict(state)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _load_error_detail(err: Exception) -> str:
    """The first sentence of ``err`` that says what is wrong, without torch's advice."""
    text = _ANSI.sub("", str(err))
    if "WeightsUnpickler error:" in text:  # older torch: the reason follows this marker
        text = text.split("WeightsUnpickler error:", 1)[1]
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n", text) if s.strip()]
    kept = [s for s in sentences if not _TORCH_ADVICE.search(s)]
    detail = kept[0] if kept else ""
    return detail if len(detail) <= 200 else detail[:197] + "..."


def _unreadable(path: Path, err: Exception) -> CheckpointError:
    """The CheckpointError for a file that ``torch.load(weights_only=True)`` refused."""
    if isinstance(err, PermissionError):
        return CheckpointError(f"cannot read checkpoint {path}: permission denied; check its mode")
    detail = _load_error_detail(err)
    if "Weights only load failed" in str(err) or "WeightsUnpickler" in str(err):
        return CheckpointError(
            f"cannot read checkpoint {path}: it holds more than tensors and plain data"
            f"{f' ({detail})' if detail else ''}; attnmt never unpickles such objects, since "
            "that can run code hidden in the file. Use a checkpoint written by attnmt "
            "(train.py or scripts/average_checkpoints.py)"
        )
    if _size(path) == 0:
        detail = "the file is empty"
    return CheckpointError(
        f"cannot read checkpoint {path}: it is corrupt (e.g. truncated) or not an attnmt "
        f"checkpoint ({type(err).__name__}{f': {detail}' if detail else ''}); use another "
        "checkpoint of its run, or train again"
    )


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> Checkpoint:
    """Read a checkpoint with ``weights_only=True``; clear errors for missing/corrupt files.

    The error never suggests ``weights_only=False``, which would run any code in the file.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises many types for truncated or foreign files
        raise _unreadable(path, err) from None
    return Checkpoint.from_dict(payload, str(path))


def load_first_readable(
    candidates: Sequence[str | Path],
    map_location: str | torch.device = "cpu",
    where: str = "",
    advice: str = "use another checkpoint, or train again",
) -> tuple[Path, Checkpoint]:
    """(path, checkpoint) of the first of ``candidates`` that :func:`load_checkpoint` reads.

    Each unreadable one is skipped with a warning naming it and why; when none is readable,
    a CheckpointError names every file tried and why it failed (``where`` says what was
    searched, ``advice`` what to do).
    """
    paths = [Path(c) for c in candidates]
    failures: list[str] = []
    for i, path in enumerate(paths):
        try:
            return path, load_checkpoint(path, map_location)
        except CheckpointError as err:
            failures.append(str(err))
            if i + 1 < len(paths):
                log.warning("skipping %s, trying %s instead: %s", path, paths[i + 1], err)
    place = f" in {where}" if where else ""
    if not paths:
        raise CheckpointError(f"no checkpoint{place}; {advice}")
    tried = "".join(f"\n  {f}" for f in failures)
    raise CheckpointError(
        f"no readable checkpoint{place}: tried {len(paths)} file(s):{tried}\n{advice}"
    )


def _is_step(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_score(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _entry_problem(entry: dict[str, Any], scored: bool) -> str | None:
    """What is wrong with one best.json entry that names its file (None: nothing);
    ``scored``: ``step`` and ``val_bleu`` must be there, else only checked when present."""
    for key, ok, what in (("step", _is_step, "an integer"), ("val_bleu", _is_score, "a number")):
        if key not in entry:
            if scored:
                return f'lacks "{key}" ({what})'
        elif not ok(entry[key]):
            return f'has "{key}": {json.dumps(entry[key])}, expected {what}'
    return None


def read_best_json(best: Path, scored: bool = False) -> list[dict[str, Any]]:
    """The entries of a ``best.json`` (best first), each a dict with a str ``"file"``, an
    integer ``"step"`` and a finite number ``"val_bleu"`` where present (``scored``: both
    required, as the trainer's k-best list needs them); [] when the file is absent,
    CheckpointError naming the file and the entry when it is unreadable or malformed."""
    if not best.is_file():
        return []
    try:
        entries = json.loads(best.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{best} is not a valid best.json list ({err})") from None
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("file"), str) for e in entries
    ):
        raise CheckpointError(
            f'{best} is not a valid best.json list: expected [{{"file": ...}}, ...]'
        )
    for i, entry in enumerate(entries, 1):
        problem = _entry_problem(entry, scored)
        if problem is not None:
            raise CheckpointError(
                f"{best} is not a valid best.json list: entry {i} ({entry['file']}) {problem}"
            )
    return entries


def _best_files(best: Path) -> list[str]:
    """The file names in ``best.json``; [] (with a warning) when it is malformed."""
    try:
        return [e["file"] for e in read_best_json(best)]
    except CheckpointError as err:
        log.warning("ignoring %s; falling back to last.pt", err)
        return []


def evaluation_candidates(path: str | Path) -> list[Path]:
    """What to evaluate, in order: a file as given; for a run directory (``<run>`` or
    ``<run>/checkpoints``) the best checkpoint of its best.json, then, should that one be
    missing or unreadable, the newest training state first (:func:`resume_candidates`:
    last.pt, then best-<step>.pt by step, descending), then any other listed file.

    A listed file that is missing is reported by name (a warning): an older, worse best
    checkpoint is never taken silently in place of the newer last.pt."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.exists():
        raise CheckpointError(f"checkpoint or run directory not found: {path}")
    ckpt_dir = RunDir.checkpoint_dir(path)
    listed = _best_files(ckpt_dir / BEST_JSON)
    missing = [n for n in listed if not (ckpt_dir / n).is_file()]
    if missing:
        log.warning(
            "%s lists %s but %s missing; using the newest readable checkpoint of the run",
            ckpt_dir / BEST_JSON,
            ", ".join(str(ckpt_dir / n) for n in missing),
            "it is" if len(missing) == 1 else "they are",
        )
    best = [ckpt_dir / listed[0]] if listed and listed[0] not in missing else []
    rest = [ckpt_dir / n for n in listed[1:] if n not in missing]
    found = list(dict.fromkeys([*best, *resume_candidates(ckpt_dir), *rest]))
    if not found:
        raise CheckpointError(
            f"no checkpoint in {path}: expected {ckpt_dir}/best.json or {ckpt_dir}/last.pt"
        )
    return found


def load_resolved(
    path: str | Path, map_location: str | torch.device = "cpu"
) -> tuple[Path, Checkpoint]:
    """(file, checkpoint) to evaluate for ``path``: a file as given (its error stands); for a run
    directory the first readable of :func:`evaluation_candidates`, skipping unreadable ones
    with a warning."""
    candidates = evaluation_candidates(path)
    if Path(path).is_file():
        return candidates[0], load_checkpoint(candidates[0], map_location)
    return load_first_readable(
        candidates,
        map_location,
        where=str(path),
        advice="evaluate a checkpoint file that is intact, or train again",
    )


def best_checkpoints(path: str | Path, k: int) -> list[Path]:
    """The first ``k`` files of a run's ``best.json``, best first (an ensemble of a run's k
    best, ``ensemble=k``); CheckpointError naming the run when it lists fewer, or when a
    listed file is missing."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(
            f"ensemble={k} needs a run directory (its best.json lists the best checkpoints), "
            f"got {path}; or name the files: ckpt=[A.pt,B.pt]"
        )
    ckpt_dir = RunDir.checkpoint_dir(path)
    listed = [ckpt_dir / name for name in _best_files(ckpt_dir / BEST_JSON)]
    if len(listed) < k:
        raise CheckpointError(
            f"ensemble={k}: {ckpt_dir / BEST_JSON} lists {len(listed)} checkpoint(s); "
            f"lower ensemble to at most {len(listed)} (trainer.keep_best sets how many are kept)"
        )
    missing = [str(p) for p in listed[:k] if not p.is_file()]
    if missing:
        raise CheckpointError(f"ensemble={k}: {', '.join(missing)} listed but missing")
    return listed[:k]


def remove_stale_tmp(directory: str | Path, min_age_s: float = STALE_TMP_AGE_S) -> list[Path]:
    """Delete the temporary files that killed writes left in ``directory`` once
    ``min_age_s`` old (:func:`attnmt.atomic.remove_stale_tmp`), and the
    ``.best.json.<random>`` that versions before :mod:`attnmt.atomic` wrote."""
    return atomic.remove_stale_tmp(directory, min_age_s, legacy=(".best.json.",))


def peek_checkpoint(path: Path) -> Checkpoint | None:
    """A checkpoint with its tensors memory-mapped, not read (cheap: for its ``step`` and
    ``metrics``); None when it is unreadable."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        return Checkpoint.from_dict(payload, str(path))
    except Exception:  # torch raises many types for truncated or foreign files
        return None


def _scores_of(checkpoint: Checkpoint | None) -> tuple[int, float] | None:
    """(step, validation BLEU) of a checkpoint written at a validation, else None."""
    if checkpoint is None:
        return None
    bleu = checkpoint.val_bleu
    if not (_is_step(checkpoint.step) and _is_score(bleu)):
        return None
    return checkpoint.step, float(bleu)


def _copy_file(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` atomically."""
    with source.open("rb") as src, atomic_path(target) as tmp, tmp.open("wb") as out:
        shutil.copyfileobj(src, out)


def link_or_copy(source: Path, target: Path) -> Path:
    """Make ``target`` the same checkpoint as ``source``: a hard link (no bytes written, and
    deleting ``source`` later leaves it whole), or a copy where the filesystem has no hard
    links. Atomic: ``target`` is replaced whole or left as it was."""
    with atomic_path(target) as tmp:
        tmp.unlink()
        try:
            os.link(source, tmp)
        except OSError as err:
            if err.errno == errno.ENOENT:
                raise
            shutil.copyfile(source, tmp)
    return target


class CheckpointManager:
    """Keeps ``last.pt`` and the ``keep_best`` best checkpoints of one run directory.

    best.json stays true to the files: opening the directory, a best.json that is malformed
    or lacks an entry's ``step`` or ``val_bleu`` is rebuilt from the ``best-<step>.pt``
    files' own metrics, and a ``last.pt`` written at a validation whose BLEU belongs among
    the k best but is not listed (a process killed between the two writes) is copied to
    its ``best-<step>.pt``; before each write, listed files deleted from outside are
    named in a warning and no longer listed.
    """

    def __init__(self, directory: str | Path, keep_best: int = 3) -> None:
        self.directory = Path(directory)
        self.keep_best = keep_best
        self._wrote_last = False  # last.pt is this process's: its loss is worth a warning
        remove_stale_tmp(self.directory)  # before this process writes anything here
        self.best: list[dict[str, Any]] = self._read_best()
        self._recover_from_last()

    @property
    def last_path(self) -> Path:
        return self.directory / LAST

    @property
    def best_json(self) -> Path:
        return self.directory / BEST_JSON

    def _read_best(self) -> list[dict[str, Any]]:
        """The listed best checkpoints that exist (a warning names those that do not); a
        malformed best.json is rebuilt from the best checkpoints' files."""
        try:
            self.best = read_best_json(self.best_json, scored=True)
        except CheckpointError as err:
            self.best = self._rebuilt_best()
            names = ", ".join(e["file"] for e in self.best) or "none there"
            log.warning("%s; rebuilt the k-best list from the files' own scores: %s", err, names)
            self._write_best_json()
            return self.best
        if self._forget_missing("missing"):
            self._write_best_json()
        return self.best

    def _rebuilt_best(self) -> list[dict[str, Any]]:
        """best.json's entries from the ``best-<step>.pt`` files in the directory that hold
        a validation BLEU, best first."""
        entries = []
        for path in self.directory.glob("best-*.pt"):
            match, scores = BEST_FILE.fullmatch(path.name), _scores_of(peek_checkpoint(path))
            if match and scores is not None:
                entries.append(
                    {"file": path.name, "step": int(match.group(1)), "val_bleu": scores[1]}
                )
        return sorted(entries, key=lambda e: (-e["val_bleu"], e["step"]))

    def _recover_from_last(self) -> None:
        """Copy ``last.pt`` to ``best-<step>.pt`` when it was written at a validation whose
        BLEU belongs among the k best but best.json does not list it (a process killed
        after writing last.pt and before its best checkpoint)."""
        if self.keep_best <= 0 or not self.last_path.is_file():
            return
        scores = _scores_of(peek_checkpoint(self.last_path))
        if scores is None:
            return
        step, bleu = scores
        name = best_name(step)
        if any(e["file"] == name for e in self.best) or not self.is_best(bleu):
            return
        self._admit(name, step, bleu, lambda target: _copy_file(self.last_path, target))
        log.warning(
            "recovered %s from last.pt: its validation BLEU %.2f at step %d is among the %d "
            "best, but an earlier process ended before writing its best checkpoint",
            self.directory / name,
            bleu,
            step,
            self.keep_best,
        )

    def _forget_missing(self, how: str = "deleted while the run was going") -> bool:
        """Drop the listed files that are gone from the k-best list, with a warning naming
        them (and ``last.pt`` when this process wrote it and it is gone too); whether the
        list changed."""
        gone = [e for e in self.best if not (self.directory / e["file"]).is_file()]
        lost = [str(self.directory / e["file"]) for e in gone]
        if self._wrote_last and not self.last_path.is_file():
            lost.append(str(self.last_path))
            self._wrote_last = False
        if lost:
            log.warning(
                "%s %s %s, not by attnmt; best.json no longer lists what is gone",
                ", ".join(lost),
                "was" if len(lost) == 1 else "were",
                how,
            )
        self.best = [e for e in self.best if e not in gone]
        return bool(gone)

    def save_last(self, checkpoint: Checkpoint) -> Path:
        """Atomically write ``last.pt``."""
        if self._forget_missing():
            self._write_best_json()
        path = save_checkpoint(checkpoint, self.last_path)
        self._wrote_last = True
        return path

    def is_best(self, bleu: float) -> bool:
        """Would a checkpoint with this validation BLEU enter the top k?"""
        if self.keep_best <= 0:
            return False
        return len(self.best) < self.keep_best or bleu > self.best[-1]["val_bleu"]

    def save_if_best(self, checkpoint: Checkpoint, step: int, bleu: float) -> bool:
        """Write ``best-<step>.pt`` if ``bleu`` is among the k best; update best.json.

        Ties keep the earlier checkpoint ahead. Returns whether it was written.
        """
        changed = self._forget_missing()
        if not self.is_best(bleu):
            if changed:
                self._write_best_json()
            return False
        name = best_name(step)
        self._admit(name, step, bleu, lambda target: save_checkpoint(checkpoint, target))
        return True

    def _admit(self, name: str, step: int, bleu: float, write: Callable[[Path], Any]) -> None:
        """``write(<dir>/name)``, then list it by ``bleu``, keep the k best in best.json
        and delete the files pushed out."""
        write(self.directory / name)
        entries = [e for e in self.best if e["file"] != name]
        entries.append({"file": name, "step": int(step), "val_bleu": float(bleu)})
        entries.sort(key=lambda e: (-e["val_bleu"], e["step"]))
        kept, dropped = entries[: self.keep_best], entries[self.keep_best :]
        self.best = kept
        self._write_best_json()
        for entry in dropped:
            (self.directory / entry["file"]).unlink(missing_ok=True)

    def add_best(self, checkpoint: Checkpoint, name: str, step: int, bleu: float) -> Path:
        """Write ``name`` and list it in best.json by ``bleu`` beside the k best (none of
        them is dropped: e.g. the average of the k best, which are kept)."""
        self._forget_missing()
        path = save_checkpoint(checkpoint, self.directory / name)
        entries = [e for e in self.best if e["file"] != name]
        entries.append({"file": name, "step": int(step), "val_bleu": float(bleu)})
        self.best = sorted(entries, key=lambda e: (-e["val_bleu"], e["step"]))
        self._write_best_json()
        return path

    def _write_best_json(self) -> None:
        write_json(self.best_json, self.best, indent=1)

    def best_path(self) -> Path | None:
        """The best checkpoint so far (None before the first validation)."""
        return self.directory / self.best[0]["file"] if self.best else None


def resume_candidates(path: str | Path) -> list[Path]:
    """A run directory's checkpoints (``<run>`` or ``<run>/checkpoints``), newest training
    state first: ``last.pt``, then ``best-<step>.pt`` by step, descending."""
    path = Path(path)
    ckpt_dir = RunDir.checkpoint_dir(path)
    last = [ckpt_dir / LAST] if (ckpt_dir / LAST).is_file() else []
    best = [
        (int(m.group(1)), p)
        for p in ckpt_dir.glob("best-*.pt")
        if (m := BEST_FILE.fullmatch(p.name)) and p.is_file()
    ]
    return last + [p for _, p in sorted(best, key=lambda sp: sp[0], reverse=True)]


def auto_resume_candidates(outputs: str | Path, exclude: Path | None = None) -> list[Path]:
    """``resume=auto``'s candidates: the :func:`resume_candidates` of every run under
    ``outputs`` but ``exclude``, newest run (by its newest checkpoint) first. A run without
    checkpoints (killed before its first: ``checkpoints/`` empty or only temporary files)
    is passed over."""
    skip = exclude.resolve() if exclude is not None else None
    runs: list[tuple[float, list[Path]]] = []
    for ckpt_dir in Path(outputs).glob("**/checkpoints"):
        if not ckpt_dir.is_dir() or (skip is not None and skip in ckpt_dir.resolve().parents):
            continue
        files = resume_candidates(ckpt_dir)
        if files:
            runs.append((max(_mtime(f) for f in files), files))
    runs.sort(key=lambda run: run[0], reverse=True)
    return [f for _, files in runs for f in files]


def _no_resume(resume: str | None) -> bool:
    return resume is None or str(resume) in ("", "null", "None")


def _resume_missing(resume: str | None) -> CheckpointError:
    return CheckpointError(
        f"resume={resume}: no checkpoint there; give a .pt file or a run directory "
        "holding checkpoints/last.pt (or resume=auto for the latest run)"
    )


def load_resume(
    resume: str | None, outputs: str | Path, run_dir: Path
) -> tuple[Path | None, Checkpoint | None]:
    """What ``resume=`` continues from, read: (file, checkpoint), or (None, None) for a fresh
    run (resume unset, or ``auto`` with no checkpoint under ``outputs`` but in ``run_dir``).

    A file is read as given (its error stands). A run directory offers
    :func:`resume_candidates`, ``auto`` :func:`auto_resume_candidates`: the first readable
    one is used, each unreadable one skipped with a warning naming it and why; when none is
    readable, the CheckpointError names them all.
    """
    if _no_resume(resume):
        return None, None
    if str(resume) == "auto":
        candidates = auto_resume_candidates(outputs, exclude=run_dir)
        if not candidates:
            return None, None
        return load_first_readable(
            candidates,
            where=f"resume=auto (the runs under {outputs})",
            advice="drop resume=auto to start afresh, or resume=<a run or .pt file that is intact>",
        )
    path = Path(str(resume))
    if path.is_file():
        return path, load_checkpoint(path)
    candidates = resume_candidates(path) if path.is_dir() else []
    if not candidates:
        raise _resume_missing(resume)
    return load_first_readable(
        candidates,
        where=f"resume={resume}",
        advice="resume from another run or .pt file, or drop resume= to start afresh",
    )
