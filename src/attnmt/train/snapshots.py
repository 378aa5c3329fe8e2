"""A running training run's best checkpoint as it stood at given training minutes.

A run keeps only its ``trainer.keep_best`` best checkpoints, so the model a 10-minute run
would have tested is gone by the end of a 2-hour one. Looked at beside the training, the
run folder gives it back: for each *mark* m (a minute of training),

    best at m = the checkpoint of argmax BLEU over the run record's ``valid`` events with
                ``minutes <= m`` (ties: the earlier step, as ``best.json`` ranks them)

copied once the run's clock has passed m, where the clock is the largest ``minutes`` of the
record's events (:mod:`attnmt.run_record`: training minutes, which go on from the
checkpoint's across a resume; not the wall clock, which runs on while a run is stopped).
Events are written in the order of their minutes, so once the clock has passed m every
validation by m is in the record, and a later look takes the same checkpoint. Kept::

    <out>/best-at-<m>min.pt     the copy (written whole, then renamed)
    <out>/snapshots.json        [{"minutes", "file", "step", "val_bleu"}], by minutes

``<out>`` is ``<run>/snapshots`` by default. A look merges with what ``snapshots.json``
already lists (a restarted watcher keeps what was kept and copies nothing twice). A mark
whose checkpoint the trainer pruned before the look, or that has no validation by it, is
*missed*: said once and not looked for again.

:func:`keep_snapshots` is one look; :func:`watch` looks every few seconds until every mark
is kept or missed or the run has ended (scripts/snapshot_best.py, experiments/recipe.py).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from attnmt.atomic import atomic_path, write_json
from attnmt.run_dir import RunDir
from attnmt.run_record import RecordError, RunRecord, read_record
from attnmt.train.run_lock import live_owner

log = logging.getLogger(__name__)

SNAPSHOTS = "snapshots"
LISTING = "snapshots.json"
POLL_S = 5.0


@dataclass(frozen=True)
class Snapshot:
    """The run's best checkpoint validated by ``minutes`` of training, kept as ``file`` (in
    the output folder) with its ``step`` and validation BLEU."""

    minutes: float
    file: str
    step: int
    val_bleu: float


@dataclass(frozen=True)
class Watched:
    """What :func:`watch` ends with: every snapshot listed (by mark), the marks it did not
    keep (in order) and the run's clock at the last look (None: no training event yet)."""

    kept: dict[float, Snapshot]
    missed: list[float]
    minutes: float | None


def snapshot_dir(run: Path, out: Path | None = None) -> Path:
    """Where a run's snapshots are kept: ``out``, by default ``<run>/snapshots``."""
    return run / SNAPSHOTS if out is None else out


def snapshot_name(minutes: float) -> str:
    """``best-at-<m>min.pt``."""
    return f"best-at-{minutes:g}min.pt"


def read_snapshots(run: Path, out: Path | None = None) -> dict[float, Snapshot]:
    """The snapshots ``snapshots.json`` lists, by mark; empty when there is none yet."""
    listing = snapshot_dir(run, out) / LISTING
    if not listing.is_file():
        return {}
    kept = [Snapshot(**s) for s in json.loads(listing.read_text(encoding="utf-8"))]
    return {s.minutes: s for s in kept}


def clock(record: RunRecord) -> float | None:
    """The run's training minutes so far: the largest ``minutes`` among its events (None
    before the first event that has them)."""
    return max((float(e["minutes"]) for e in record.events if "minutes" in e), default=None)


def keep_snapshots(
    run: Path, marks: Sequence[float], missed: set[float] | None = None, out: Path | None = None
) -> dict[float, Snapshot]:
    """One look at a training run: for each mark neither kept nor in ``missed`` that the
    run's clock has passed, copy the best checkpoint among the validations by that minute
    to ``<out>/best-at-<m>min.pt`` and list it in ``<out>/snapshots.json`` (merged with
    the entries already there). A mark whose checkpoint is gone, or that has no validation
    by it, is logged once and added to ``missed``. Returns every snapshot listed."""
    missed = set() if missed is None else missed
    folder = snapshot_dir(run, out)
    kept = read_snapshots(run, out)
    try:
        record = read_record(run)
    except RecordError:
        return kept
    now = clock(record)
    new = False
    for mark in sorted(marks):
        if mark in kept or mark in missed or now is None or now < mark:
            continue
        by_then = [e for e in record.valid if float(e["minutes"]) <= mark]
        if not by_then:
            log.warning("%s: no validation by minute %g; nothing to keep", run.name, mark)
            missed.add(mark)
            continue
        best = max(by_then, key=lambda e: (float(e["bleu"]), -int(e["step"])))
        source = RunDir(run).best(int(best["step"]))
        target = folder / snapshot_name(mark)
        folder.mkdir(parents=True, exist_ok=True)
        try:  # once open, a checkpoint the trainer prunes stays readable to us
            with source.open("rb") as src, atomic_path(target) as tmp, tmp.open("wb") as copy:
                shutil.copyfileobj(src, copy)
        except FileNotFoundError:
            log.warning("%s: %s (best by minute %g) is gone", run.name, source.name, mark)
            missed.add(mark)
            continue
        shot = Snapshot(mark, target.name, int(best["step"]), float(best["bleu"]))
        kept[mark] = shot
        new = True
        log.info(
            "minute %g: %s (step %d, valid BLEU %.2f)", mark, shot.file, shot.step, shot.val_bleu
        )
    if new:
        write_json(folder / LISTING, [asdict(kept[m]) for m in sorted(kept)], indent=1)
    return kept


def run_ended(run: Path) -> bool:
    """True once the run's summary says it ended, or no live process holds its lock (a
    killed run leaves a stale one)."""
    if live_owner(run) is None:
        return True
    try:
        status = read_record(run).status
    except RecordError:
        return False
    return status not in (None, "running")


def watch(
    run: Path,
    marks: Sequence[float],
    out: Path | None = None,
    *,
    poll_s: float = POLL_S,
    sleep: Callable[[float], object] = time.sleep,
    ended: Callable[[Path], bool] = run_ended,
) -> Watched:
    """Look at ``run`` (:func:`keep_snapshots`) every ``poll_s`` seconds until every mark is
    kept or missed, or the run has ended; the marks not kept are returned as missed.

    Whether the run has ended is asked *before* each look, so the look after the end sees
    the final events (the trainer writes them just before it ends). ``sleep`` and ``ended``
    are injectable: a test's fake ``sleep`` can play the trainer.
    """
    wanted = sorted(set(marks))
    missed: set[float] = set()
    while True:
        over = ended(run)
        kept = keep_snapshots(run, wanted, missed, out)
        if over or all(m in kept or m in missed for m in wanted):
            break
        sleep(poll_s)
    try:
        minutes = clock(read_record(run))
    except RecordError:
        minutes = None
    return Watched(kept, [m for m in wanted if m not in kept], minutes)
