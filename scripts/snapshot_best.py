"""Keep a running training run's best checkpoint as it stood at given minutes.

    python train.py experiment=small_data hydra.run.dir=RUN &
    python scripts/snapshot_best.py RUN --minutes 10 30 60      # -> RUN/snapshots/

A run keeps only its ``trainer.keep_best`` best checkpoints, so the model a 10-minute run
would have tested is gone by the end of a 2-hour one. Run beside the training, this copies
the top entry of ``RUN/checkpoints/best.json`` at each mark (training minutes, the clock of the
run record and of ``compare_runs.py --minutes``) to
``snapshots/best-at-<m>min.pt`` and lists the copies in ``snapshots/snapshots.json``
(minutes, step, validation BLEU). Decode them afterwards with
``python evaluate.py ckpt=RUN/snapshots/best-at-10min.pt split=test beam=5``. It stops when the run
ends (its summary.json no longer says "running", or no ``.lock``) and says which marks it
missed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from attnmt.atomic import atomic_path, write_json
from attnmt.checkpoint import read_best_json
from attnmt.run_dir import RunDir
from attnmt.run_record import RecordError, read_record
from attnmt.train.run_lock import live_owner


@dataclass(frozen=True)
class Snapshot:
    """One kept checkpoint: the run's best at ``minutes`` of training."""

    minutes: float
    file: str
    step: int
    val_bleu: float


def first_update(run: Path) -> float | None:
    """Epoch seconds when the run's training clock started (from its first update's event in
    the run record); None before that event."""
    try:
        record = read_record(run)
    except RecordError:
        return None
    first = next(iter(record.train), None)
    return None if first is None else first["time"] - 60.0 * first["minutes"]


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


def copy_best(run: Path, out: Path, minutes: float, tries: int = 3) -> Snapshot | None:
    """Copy the top of ``best.json`` to ``out/best-at-<m>min.pt`` (written whole, then renamed).

    The trainer may prune a checkpoint between our reading best.json and copying it: then the
    list is read again, ``tries`` times. None when the run has no validated checkpoint yet.
    """
    target = out / f"best-at-{minutes:g}min.pt"
    for _ in range(tries):
        best = read_best_json(RunDir(run).best_json)
        if not best:
            return None
        top = best[0]
        try:  # once open, a checkpoint pruned by the trainer stays readable to us
            source = (RunDir(run).checkpoints / top["file"]).open("rb")
        except FileNotFoundError:
            time.sleep(1.0)
            continue
        with source, atomic_path(target) as tmp, tmp.open("wb") as copy:
            shutil.copyfileobj(source, copy)
        return Snapshot(minutes, target.name, int(top["step"]), float(top["val_bleu"]))
    raise SystemExit(f"error: {run}: best.json kept naming checkpoints that were gone")


def snapshot(
    run: Path,
    marks: list[float],
    out: Path,
    now: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = 5.0,
) -> list[Snapshot]:
    """Wait for each mark in turn and keep the best checkpoint there; returns what was kept."""
    out.mkdir(parents=True, exist_ok=True)
    while (start := first_update(run)) is None:
        if run_ended(run):
            raise SystemExit(f"error: {run}: the run ended before its first update")
        sleep(poll_s)
    kept: list[Snapshot] = []
    for mark in sorted(marks):
        while now() < start + 60.0 * mark:
            if run_ended(run):
                missed = [m for m in sorted(marks) if m >= mark]
                print(f"{run}: the run ended before minute {missed[0]:g}; missed {missed}")
                return kept
            sleep(poll_s)
        shot = copy_best(run, out, mark)
        if shot is None:
            print(f"minute {mark:g}: no validated checkpoint yet")
            continue
        kept.append(shot)
        write_json(out / "snapshots.json", [asdict(s) for s in kept], indent=1)
        print(f"minute {mark:g}: {shot.file} (step {shot.step}, valid BLEU {shot.val_bleu:.2f})")
    return kept


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="the run directory (hydra.run.dir)")
    parser.add_argument("--minutes", type=float, nargs="+", required=True)
    parser.add_argument("--out", type=Path, help="where to keep them (default RUN/snapshots)")
    args = parser.parse_args(argv)
    if not args.run.is_dir():
        raise SystemExit(f"error: {args.run}: no such run directory")
    snapshot(args.run, args.minutes, args.out or args.run / "snapshots")


if __name__ == "__main__":
    sys.exit(main())
