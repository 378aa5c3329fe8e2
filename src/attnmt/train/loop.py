"""The training loop: ``train(cfg, run_dir) -> dict`` (``train.py`` is its Hydra entry).

One code path for a single process and for ``torchrun`` (attnmt.train.distributed): rank 0 logs,
validates and writes checkpoints; the others wait for its decisions. Each update
accumulates ``trainer.accum_steps`` batches and minimises the token-normalised loss

    L = Σ_batches Σ_tokens ℓ_smoothed / N          (N = non-pad target tokens, all ranks)

Resume restores model, optimizer, schedule, scaler, sampler position and every RNG, so a
resumed CPU run repeats the uninterrupted run's losses step for step.

:class:`Trainer` adds the updates, the stopping rules and the fit loop to the run's objects
(attnmt.train.session); a validation round is attnmt.train.validation, the end of a run
(averaging, test, summary, divergence and interruption) attnmt.train.finish.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from attnmt.config import RunConfig
from attnmt.train import distributed as ddp
from attnmt.train.finish import average_best, conclude, diverged, interrupted
from attnmt.train.loss import label_smoothed_nll
from attnmt.train.report import TrainMeter
from attnmt.train.session import StepHook, TrainingSession
from attnmt.train.state import rng_state
from attnmt.train.validation import validation_round
from attnmt.train.word_dropout import word_dropout

log = logging.getLogger(__name__)


class Trainer(TrainingSession):
    """The run's objects (:class:`TrainingSession`) and what trains them; :meth:`run`
    trains, validates, tests and returns metrics."""

    def update(self, batches: list[Any]) -> dict[str, float]:
        """Forward/backward over ``batches`` (accumulated), clip, step; the step's figures."""
        step, started = self.step + 1, time.perf_counter()
        lr = self.schedule.step(step)
        local = sum(b.n_tokens for b in batches)
        n_global = ddp.global_token_count(local, self.dist)
        scale = ddp.loss_scale(n_global, self.dist)
        sums = torch.zeros(3, dtype=torch.float64)
        self.net.train()
        self.mid_update = True
        for i, batch in enumerate(batches):
            batch = batch.to(self.device)
            batch = word_dropout(batch, self.tcfg.src_word_dropout, self.tcfg.tgt_word_dropout)
            with ddp.no_sync(self.net, sync=i == len(batches) - 1):
                with self.precision.autocast():
                    logits = self.net(batch)
                out = label_smoothed_nll(logits, batch.tgt_out, self.tcfg.label_smoothing)
                self.precision.scaler.scale(out.loss * scale).backward()
            sums += torch.tensor(
                [float(out.loss.detach()), float(out.nll), out.n_tokens], dtype=torch.float64
            )
        self.precision.scaler.unscale_(self.optimizer)
        max_norm = self.tcfg.clip_grad_norm if self.tcfg.clip_grad_norm > 0 else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        ddp.all_reduce_sum(sums)  # every rank decides alike whether the update is skipped
        # a non-finite loss, or gradient (with fp16 loss scaling the scaler owns inf gradients)
        finite = math.isfinite(float(sums[0])) and (
            self.precision.scaler.is_enabled() or math.isfinite(float(grad_norm))
        )
        if finite:
            self.precision.scaler.step(self.optimizer)
        self.precision.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self._count_bad_update(step, finite)
        self.state["step"] = step
        self.resume_point = (self.data.sampler.state_dict(), rng_state())
        self.mid_update = False
        tokens = max(float(sums[2]), 1.0)
        return {
            "loss": float(sums[0]) / tokens,
            "nll": float(sums[1]) / tokens,
            "lr": lr,
            "grad_norm": float(grad_norm),
            "tokens": tokens,
            "seconds": time.perf_counter() - started,
        }

    def _count_bad_update(self, step: int, finite: bool) -> None:
        """Skipped updates: a total (logged, TensorBoard train/skipped_updates) and a run."""
        if finite:
            self.state["bad_updates"] = 0
            return
        self.state["bad_updates"] = self.state.get("bad_updates", 0) + 1
        self.state["skipped_updates"] = self.state.get("skipped_updates", 0) + 1
        self.tb.scalar("train/skipped_updates", self.state["skipped_updates"], step)
        log.warning(
            "step %d: non-finite loss or gradient (NaN/inf); update skipped (%d in a row, "
            "%d in all; training stops at trainer.max_bad_updates=%d in a row)",
            step,
            self.state["bad_updates"],
            self.state["skipped_updates"],
            self.tcfg.max_bad_updates,
        )

    def _stop_reason(self, started: float | None) -> str | None:
        """Why training stops now, or None; ``started=None`` (before the first update of
        this process) leaves the time budget out."""
        t = self.tcfg
        reason = None
        if self.stop_flag.requested:
            reason = "interrupted"
        elif self.state.get("bad_updates", 0) >= t.max_bad_updates:
            reason = "non_finite"
        elif t.max_steps and self.step >= t.max_steps:
            reason = "max_steps"
        elif t.max_epochs and self.data.sampler.epoch >= t.max_epochs:
            reason = "max_epochs"
        elif t.early_stopping_patience and self.state["bad_vals"] >= t.early_stopping_patience:
            reason = "early_stopping"
        elif (
            started is not None
            and t.time_budget_min
            and (time.monotonic() - started > 60 * t.time_budget_min)
        ):
            reason = "time_budget"
        return ddp.broadcast_object(reason) if self.dist.enabled else reason

    def fit(self) -> str:
        """Train until a stopping rule fires; returns its name."""
        t, started = self.tcfg, time.monotonic()
        show = self.dist.is_main and t.progress_bar and sys.stderr.isatty()
        bar = tqdm(total=t.max_steps or None, initial=self.step, disable=not show, unit="step")
        meter = TrainMeter()
        batches = iter(self.data.loader)
        reason = self._stop_reason(None)
        while reason is None:
            group, epoch_ended = [], False
            while len(group) < t.accum_steps and not epoch_ended:
                batch = next(batches, None)
                if batch is None:
                    epoch_ended, batches = True, iter(self.data.loader)
                else:
                    group.append(batch)
            if group:
                fig = self.update(group)
                self._log_step(fig, meter, bar)
                if self.on_step is not None:
                    self.on_step(self.step, fig)
                if t.val_every_steps and self.step % t.val_every_steps == 0:
                    validation_round(self)
            if epoch_ended:
                log.debug("epoch %d done at step %d", self.data.sampler.epoch, self.step)
                at_epochs = t.val_every_epoch or not t.val_every_steps
                if at_epochs and self.state["val_step"] != self.step:
                    validation_round(self)
            reason = self._stop_reason(started)
        bar.close()
        return reason

    def _log_step(self, fig: dict[str, float], meter: TrainMeter, bar: tqdm) -> None:
        """Advance the progress bar; every ``trainer.log_every_steps`` log the window."""
        meter.add(fig)
        bar.set_postfix(meter.postfix(), refresh=False)
        bar.update(1)  # refreshes the bar with this update's figures
        if self.step % self.tcfg.log_every_steps == 0 or self.step == 1:
            scalars = meter.scalars()
            self.tb.scalars(scalars, self.step)
            self.history.add_train(self.step, self.minutes(), scalars["train/nll"])
            log.info(meter.line(self.step, self.data.sampler.epoch))
            meter.reset()

    def run(self) -> dict[str, Any]:
        """Fit, validate the final step, decode the test split; the run's figures.

        The first Ctrl-C or SIGTERM during training stops after the current update; then (or
        on a KeyboardInterrupt outside an update, e.g. during validation) ``last.pt`` is saved
        and :class:`~attnmt.train.interrupt.TrainingInterrupted` raised. A second signal
        inside an update aborts without saving, since weights and position would disagree.
        """
        try:
            with self.stop_flag, _bar_safe_logging(self.tcfg.progress_bar):
                reason = self.fit()
            if reason == "interrupted":
                raise KeyboardInterrupt
            if reason == "non_finite":
                raise diverged(self)
            if self.state["val_step"] != self.step and self.step > 0:
                validation_round(self)  # also rewrites last.pt at the final step
            if self.dist.is_main and self.tcfg.average_best:
                average_best(self)
        except KeyboardInterrupt:
            raise interrupted(self) from None
        result = conclude(self, reason)
        log.debug("finished (%s) at step %d: %s", reason, self.step, result)
        ddp.barrier()
        return result


def _bar_safe_logging(progress_bar: bool) -> contextlib.AbstractContextManager[Any]:
    """Log lines go through tqdm.write while the progress bar is shown, so no line is
    printed over a stale bar."""
    return logging_redirect_tqdm() if progress_bar else contextlib.nullcontext()


def train(
    cfg: RunConfig | DictConfig,
    run_dir: str | Path,
    on_step: StepHook | None = None,
    explicit: Collection[str] | None = None,
) -> dict[str, Any]:
    """Train as ``cfg`` says, writing checkpoints/TensorBoard/hyps under ``run_dir``.

    Returns {"step", "epoch", "stop_reason", "best_val_bleu", "run_dir", "test_bleu", ...}.
    A KeyboardInterrupt saves ``checkpoints/last.pt`` and is re-raised.
    """
    trainer = None
    try:
        trainer = Trainer(cfg, Path(run_dir), on_step, explicit)
        return trainer.run()
    finally:
        if trainer is not None:
            trainer.close()
        ddp.cleanup()
