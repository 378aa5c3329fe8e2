"""Keep a running training run's best checkpoint as it stood at given training minutes.

    python train.py experiment=small_data hydra.run.dir=RUN &
    python scripts/snapshot_best.py RUN --minutes 10 30 60      # -> RUN/snapshots/

A run keeps only its ``trainer.keep_best`` best checkpoints, so the model a 10-minute run
would have tested is gone by the end of a 2-hour one. Run beside the training, this copies,
once the run has trained past each mark, the best checkpoint among the validations by that
minute to ``snapshots/best-at-<m>min.pt`` and lists the copies in ``snapshots/snapshots.json``
(minutes, file, step, validation BLEU). The marks are training minutes of the run record
(``metrics.jsonl``, the clock of ``compare_runs.py --minutes``), not wall-clock minutes: a
resumed run goes on with the minutes it had, and a watcher started late or restarted still
takes the best as it stood at each mark. Restarting it (after a resume, or with other marks)
keeps what was kept: ``snapshots.json`` is merged, not rewritten. Decode them afterwards with
``python evaluate.py ckpt=RUN/snapshots/best-at-10min.pt split=test beam=5``. It stops when
the run ends (its summary.json no longer says "running", or no live ``.lock``) and says which
marks it missed. The logic is ``attnmt.train.snapshots``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from attnmt.train import snapshots


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="the run directory (hydra.run.dir)")
    parser.add_argument("--minutes", type=float, nargs="+", required=True)
    parser.add_argument("--out", type=Path, help="where to keep them (default RUN/snapshots)")
    args = parser.parse_args(argv)
    if not args.run.is_dir():
        raise SystemExit(f"error: {args.run}: no such run directory")
    handler = logging.StreamHandler(sys.stdout)  # "minute 10: best-at-10min.pt (step ...)"
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger(snapshots.__name__)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        watched = snapshots.watch(args.run, args.minutes, args.out)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    if watched.minutes is None:
        raise SystemExit(f"error: {args.run}: the run ended before its first update")
    if watched.missed:
        missed = ", ".join(f"{m:g}" for m in watched.missed)
        print(f"{args.run}: missed [{missed}] (its clock stood at minute {watched.minutes:.1f})")


if __name__ == "__main__":
    main()
