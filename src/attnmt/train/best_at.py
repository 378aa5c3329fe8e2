"""The best checkpoint as it stood at given training minutes (``trainer.keep_best_at_minutes``).

A run keeps only its ``trainer.keep_best`` best checkpoints, so the model that a 30-minute
run would have tested is gone by the end of a 2-hour one. For each *mark* m (training
minutes: the run's clock, :mod:`attnmt.train.state`) the trainer keeps

    best at m = the checkpoint of argmax BLEU over the validations by minute m
                (valid rows with minutes <= m; ties: the earlier step, as best.json)

as ``checkpoints/best-at-<m>min.pt``: a hard link to its ``best-<step>.pt`` (a copy where
the filesystem has none), taken as soon as the clock has passed m, so before a later
validation can push that checkpoint out of the k best; the k-best manager neither lists nor
prunes it. The trainer looks after every update (the marks up to now), before it records a
validation (the marks before that validation's minute) and at the end of the run (the marks
up to its last minute). What it took is in the trainer state, so a resumed run keeps the
marks already taken and takes only the later ones, and in the summary's ``best_at``. A mark
with no validation by it, or whose checkpoint is gone (a run resumed from a checkpoint
written before this feature, whose best by then was pruned), is *missed*: logged once and
listed without a file.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from attnmt.checkpoint import link_or_copy
from attnmt.run_dir import RunDir
from attnmt.train.state import BestAt, History, TrainState

log = logging.getLogger(__name__)


def due(marks: Iterable[float], state: TrainState, now: float, before: bool = False) -> list[float]:
    """The marks not yet taken (nor missed) that the clock ``now`` has passed, in order:
    ``m <= now``, or with ``before`` (a validation about to be recorded at ``now``, which
    does not count for them) ``m < now``."""
    passed = (m for m in set(marks) if (m < now if before else m <= now))
    return sorted(m for m in passed if state.kept_at(m) is None)


def take(run: RunDir, history: History, mark: float) -> BestAt:
    """Link the best checkpoint among ``history``'s validations by minute ``mark`` to
    ``checkpoints/best-at-<m>min.pt``; what was kept, or missed."""
    row = history.best_by(mark)
    if row is None:
        log.warning("minute %g: no validation by then; no best-at checkpoint", mark)
        return BestAt(mark, None, None, None)
    step, bleu = int(row[0]), float(row[3])
    source = run.best(step)
    if not source.is_file():
        log.warning("minute %g: the best by then, %s, is gone; not kept", mark, source.name)
        return BestAt(mark, None, step, bleu)
    target = link_or_copy(source, run.best_at(mark))
    log.info(
        "minute %g: best so far kept as %s (step %d, valid BLEU %.2f)",
        mark,
        target.name,
        step,
        bleu,
    )
    return BestAt(mark, target.name, step, bleu)
