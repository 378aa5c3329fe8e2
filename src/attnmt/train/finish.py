"""The end of a training run, whichever way it ends.

* :func:`average_best`: after the last validation, the average of the k best checkpoints
  is kept as ``averaged.pt`` if it validates better than each of them;
* :func:`conclude`: the run's figures, the test split decoded with the best checkpoint,
  the HParams of TensorBoard and the end block printed for the user;
* :func:`diverged` / :func:`interrupted`: the exception that ends a run stopped by
  non-finite updates (:class:`TrainingDiverged`) or by a signal
  (:class:`~attnmt.train.interrupt.TrainingInterrupted`, after saving ``last.pt``).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from attnmt.errors import AttnmtError
from attnmt.train.averaging import average_payloads
from attnmt.train.interrupt import TrainingInterrupted
from attnmt.train.report import test_checkpoint
from attnmt.train.session import TrainingSession
from attnmt.train.summary import end_block, hparams
from attnmt.train.validate import validate

log = logging.getLogger(__name__)


class TrainingDiverged(AttnmtError):
    """Too many non-finite updates in a row (see ``trainer.max_bad_updates``)."""


def average_best(run: TrainingSession) -> None:
    """Average the k best checkpoints' weights into ``averaged.pt``, listed first in
    best.json (so it is the one tested and the one ``evaluate.py ckpt=RUN`` picks) only
    if it validates better than the best of them; the k best stay."""
    t, ckpt_dir = run.tcfg, run.ckpts.directory
    files = [ckpt_dir / e["file"] for e in run.ckpts.best if e["file"].startswith("best-")]
    if len(files) < 2:
        return
    payload = average_payloads(files)
    trained = {k: v.detach().clone() for k, v in run.model.state_dict().items()}
    run.model.load_state_dict(payload["model"])
    try:
        res = validate(
            run.translator, run.data.valid, run.precision, t.val_max_tokens, t.val_beam_size
        )
    finally:
        run.model.load_state_dict(trained)  # the run's own weights stay in the model
    best = run.state["best_bleu"]
    better = res.bleu > best
    log.info(
        "average of the %d best (%s): valid BLEU %.2f, chrF %.2f against %.2f: %s",
        len(files),
        ", ".join(f.name for f in files),
        res.bleu,
        res.chrf,
        best,
        "kept as averaged.pt" if better else "not kept",
    )
    run.tb.scalar("val/averaged_bleu", res.bleu, run.step)
    if better:
        payload["metrics"] = {"val_bleu": res.bleu, "val_chrf": res.chrf, "val_loss": res.loss}
        run.ckpts.add_best(payload, "averaged.pt", run.step, res.bleu)
        run.state.update(best_bleu=res.bleu, best_chrf=res.chrf, best_step=run.step)


def conclude(run: TrainingSession, reason: str) -> dict[str, Any]:
    """The run's figures; rank 0 also decodes the test split (``trainer.test``) and
    reports the final metrics to TensorBoard's HParams and the user."""
    result: dict[str, Any] = {
        "step": run.step,
        "epoch": run.data.sampler.epoch,
        "stop_reason": reason,
        "best_val_bleu": run.state["best_bleu"],
        "run_dir": str(run.run_dir),
    }
    if run.dist.is_main and run.tcfg.test and run.step > 0:
        best = run.ckpts.best_path() or run.ckpts.last_path
        src, ref = run.data.test_split()
        result.update(test_checkpoint(run.translator, best, src, ref, run.run_dir))
        print(f"test BLEU = {result['test_bleu']:.2f} (chrF {result['test_chrf']:.2f})")
    if run.dist.is_main:
        metrics = {"val/best_bleu": result["best_val_bleu"]}
        if "test_bleu" in result:
            metrics.update({"val/test_bleu": result["test_bleu"]})
            metrics.update({"val/test_chrf": result["test_chrf"]})
        metrics = {k: float(v) for k, v in metrics.items() if math.isfinite(v)}
        n_params = sum(p.numel() for p in run.model.parameters())
        vocab = run.data.tokenizer.tgt_vocab_size
        run.tb.hparams(hparams(run.cfg, n_params, vocab, run.precision.name), metrics, run.step)
        print(end_block(result, run.state, run.ckpts.best_path()), flush=True)
    return result


def diverged(run: TrainingSession) -> TrainingDiverged:
    """The error for ``max_bad_updates`` non-finite updates in a row; nothing is saved,
    so the last checkpoint written stays the last good one."""
    t, last = run.tcfg, run.ckpts.last_path
    kept = (
        f"the last good checkpoint is {last} (resume={run.run_dir})"
        if last.is_file()
        else "no checkpoint had been written yet"
    )
    return TrainingDiverged(
        f"training stopped at step {run.step}: {run.state['bad_updates']} updates in a "
        f"row had a non-finite loss or gradient (trainer.max_bad_updates="
        f"{t.max_bad_updates}). Lower trainer.lr (now {t.lr:g}) or raise "
        f"trainer.warmup_steps (now {t.warmup_steps}), or train in full precision with "
        f"trainer.precision=fp32 (now {run.precision.name}); {kept}"
    )


def interrupted(run: TrainingSession) -> TrainingInterrupted:
    """Save last.pt unless interrupted inside an update; the exception to raise."""
    if run.mid_update:
        log.warning("aborted inside update %d: last.pt is left as it was", run.step + 1)
        path = run.ckpts.last_path if run.ckpts.last_path.is_file() else None
        return TrainingInterrupted(run.step, path, False, run.stop_flag.signum)
    log.warning("interrupted at step %d; saving %s", run.step, run.ckpts.last_path)
    run.save_last()
    return TrainingInterrupted(run.step, run.ckpts.last_path, True, run.stop_flag.signum)
