"""A validation round of a training run: score, keep track of the best, report, checkpoint.

:func:`validation_round` is what the loop calls every ``trainer.val_every_steps`` updates
(or at epoch ends) and once at the final step: rank 0 decodes the validation set
(attnmt.train.validate), feeds the BLEU to the schedule, updates best / patience / history,
reports (attnmt.train.report), redraws ``results.png`` and writes ``last.pt`` and, when the
BLEU is among the k best, a best checkpoint; the other ranks receive the figures.
"""

from __future__ import annotations

import logging

from attnmt.decode.plots import figure_to_array
from attnmt.train import distributed as ddp
from attnmt.train.report import report_validation
from attnmt.train.session import TrainingSession
from attnmt.train.summary import results_figure, save_figure
from attnmt.train.validate import validate

log = logging.getLogger(__name__)


def validation_round(run: TrainingSession) -> dict[str, float]:
    """Rank 0 validates, logs and checkpoints; every rank gets the figures."""
    figures: dict[str, float] = {}
    run.gather_rngs()
    if run.dist.is_main:
        figures = _validate_main(run)
    figures = ddp.broadcast_object(figures)
    if not run.dist.is_main:
        run.schedule.on_validation(figures["val/bleu"])
        run.state["val_step"] = run.step
    return figures


def _validate_main(run: TrainingSession) -> dict[str, float]:
    """Rank 0's part of :func:`validation_round`; the validation scalars."""
    t, step, data = run.tcfg, run.step, run.data
    res = validate(run.translator, data.valid, run.precision, t.val_max_tokens, t.val_beam_size)
    if "signature" not in run.state:
        run.state["signature"] = " / ".join(res.signatures.values())
        log.info("sacrebleu signatures: %s", run.state["signature"])
    run.schedule.on_validation(res.bleu)  # before saving: the payload holds its state
    improved = res.bleu > run.state["best_bleu"]
    run.state.update(
        val_step=step,
        best_bleu=max(run.state["best_bleu"], res.bleu),
        bad_vals=0 if improved else run.state["bad_vals"] + 1,
    )
    log.info("valid step %d | %s", step, res.line())
    if improved:
        run.state.update(best_step=step, best_chrf=res.chrf)
    run.history.add_valid(step, run.minutes(), res.loss, res.bleu, res.chrf)
    n_val = run.state["n_vals"] = run.state.get("n_vals", 0) + 1
    heatmaps = t.heatmaps_every > 0 and (n_val - 1) % t.heatmaps_every == 0
    report_validation(run.tb, run.run_dir, run.translator, data.valid, res, step, t, heatmaps)
    run.tb.scalar("val/best_bleu", run.state["best_bleu"], step)
    _draw_results(run, step)
    payload = run.payload({"val_bleu": res.bleu, "val_chrf": res.chrf, "val_loss": res.loss})
    run.ckpts.save_last(payload)
    if run.ckpts.save_if_best(payload, step, res.bleu) and improved:
        log.info(
            "new best: valid BLEU %.2f at step %d -> %s", res.bleu, step, run.ckpts.best_path()
        )
    return res.scalars()


def _draw_results(run: TrainingSession, step: int) -> None:
    """results.png in the run directory, and the same picture in TensorBoard."""
    cfg = run.cfg
    title = f"{run.run_dir.name}: {cfg.model.name} on {cfg.data.name}, step {step}"
    fig = results_figure(run.history, title)
    save_figure(fig, run.run_dir / "results.png")
    run.tb.image("valid_summary/results", figure_to_array(fig), step)
