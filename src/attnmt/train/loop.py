"""The training loop: ``train(cfg, run_dir) -> dict`` (``train.py`` is its Hydra entry).

One code path for a single process and for ``torchrun`` (attnmt.train.distributed): rank 0 logs,
validates and writes checkpoints; the others wait for its decisions. Each update
accumulates ``trainer.accum_steps`` batches and minimises the token-normalised loss

    L = Σ_batches Σ_tokens ℓ_smoothed / N          (N = non-pad target tokens, all ranks)

Resume restores model, optimizer, schedule, scaler, sampler position and every RNG, so a
resumed CPU run repeats the uninterrupted run's losses step for step.

:class:`Trainer` holds the run's parts (built by attnmt.train.setup) and its typed
:class:`~attnmt.train.state.TrainState`; it updates, validates, checkpoints, averages the
best checkpoints, tests, and ends the run whichever way it ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import sys
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from attnmt.batch import Batch
from attnmt.checkpoint import CheckpointManager
from attnmt.checkpoint_format import Checkpoint
from attnmt.errors import AttnmtError, WriteError
from attnmt.machine import this_machine
from attnmt.run_dir import AVERAGED, RunDir
from attnmt.run_record import RecordWriter, source_commit
from attnmt.train import distributed as ddp
from attnmt.train.averaging import average_files
from attnmt.train.best_at import due, take
from attnmt.train.checkpointing import make_checkpoint, restore
from attnmt.train.evaluation import score_checkpoint, score_ensemble, validate
from attnmt.train.guided_alignment import GuidedAlignment, batch_alignment_loss, teacher_forced
from attnmt.train.interrupt import FinalTestInterrupted, StopFlag, TrainingInterrupted
from attnmt.train.loss import label_smoothed_nll
from attnmt.train.meter import TrainMeter
from attnmt.train.reporting import (
    end_block,
    hparams,
    report_validation,
    results_figure,
    save_figure,
)
from attnmt.train.rng import rng_state, seed_everything
from attnmt.train.run_config import RunConfig
from attnmt.train.setup import RunParts, start_run
from attnmt.train.state import TrainState
from attnmt.train.tensorboard import TBLogger
from attnmt.train.word_dropout import word_dropout

log = logging.getLogger(__name__)
StepHook = Callable[[int, dict[str, float]], None]
"""Called after every update with (step, {"loss", "nll", "lr", "grad_norm", "tokens"})."""
Clock = Callable[[], float]
"""Seconds on a monotonic clock: the run's clock reads it (``time.monotonic``; a test's
fake one makes training minutes deterministic)."""


RECORD_SCORES = ("bleu", "chrf", "bleu_signature", "chrf_signature")
"""The test scores the run record keeps (attnmt.decode.metrics.score_fields)."""

END_SAMPLES = 3
"""Test pairs shown at the end of a run: the split's first ones, so runs compare."""


class TrainingDiverged(AttnmtError):
    """Too many non-finite updates in a row (see ``trainer.max_bad_updates``)."""


class Trainer:
    """One training run: :meth:`run` trains, validates, tests and returns its figures."""

    def __init__(
        self,
        cfg: RunConfig | DictConfig,
        run_dir: str | Path,
        on_step: StepHook | None = None,
        explicit: Collection[str] | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        """``explicit``: the keys given on the command line (train.py passes Hydra's
        overrides); a resumed run takes every other setting from its checkpoint. None
        (programmatic use) treats every key as given. ``clock``: what the run's clock
        (:meth:`minutes`) reads."""
        parts: RunParts = start_run(cfg, Path(run_dir), explicit)
        self.on_step = on_step
        self.clock = clock
        try:
            self._take(parts)
        except BaseException:
            if parts.lock is not None:
                parts.lock.release()
            raise

    def _take(self, parts: RunParts) -> None:
        """Hold the built parts, restore a resumed run's state, open the run's outputs."""
        self.parts, settings = parts, parts.settings
        self.cfg, self.tcfg, self.run_dir = settings.cfg, settings.cfg.trainer, settings.run_dir
        self.state = TrainState()
        if (resume := settings.resume) is not None:
            restore(parts, resume.checkpoint, self.state, resume.path)
            log.info(
                "resumed from %s at step %d, minute %.1f of training (run dir %s)",
                resume.path,
                self.step,
                self.state.wall_s / 60.0,
                self.run_dir,
            )
        elif (
            self.parts.dist.rank > 0
        ):  # the model is built alike everywhere; dropout differs per rank
            seed_everything(ddp.rank_seed(self.cfg.seed, self.parts.dist.rank))
        self.net = ddp.wrap_ddp(self.parts.model, self.parts.dist, self.parts.device)
        purge = self.step + 1 if settings.resume is not None else None
        # events in the run directory itself: TensorBoard names the run after it
        self.tb = TBLogger(self.run_dir, enabled=self.parts.dist.is_main, purge_step=purge)
        self.clock0 = self.clock() - self.state.wall_s  # the run's clock goes on
        self.ckpts = CheckpointManager(RunDir(self.run_dir).checkpoints, self.tcfg.keep_best)
        self.resume_point = (self.parts.data.sampler.state_dict(), rng_state())
        self.rng_ranks: list[dict[str, Any]] | None = None  # every rank's, at the last save
        self.stop_flag = StopFlag()
        self.guide = GuidedAlignment.of(self.tcfg.guided_alignment)  # None: off
        self.parts.translator.should_stop = self.stop_flag.poll  # long decodes stop too
        self.mid_update = False  # True from the first backward until the step is recorded
        self.record = self._open_record(parts) if self.parts.dist.is_main else None
        log.info(
            "model %s: %.2fM parameters on %s, precision %s, %d rank(s)",
            self.parts.model.name,
            self.n_params / 1e6,
            self.parts.device,
            self.parts.precision.name,
            self.parts.dist.world_size,
        )

    def _open_record(self, parts: RunParts) -> RecordWriter:
        """Start the run record (attnmt.run_record): summary.json "running", a start event."""
        resume = parts.settings.resume
        about = {
            "run_dir": str(self.run_dir),
            "model": self.parts.model.name,
            "data": self.cfg.data.name,
            "seed": self.cfg.seed,
            "params": self.n_params,
            "precision": self.parts.precision.name,
            "device": str(self.parts.device),
            "world_size": self.parts.dist.world_size,
            "machine": this_machine().to_dict(),
            "commit": source_commit(),
            "started": parts.started,
            "resumed_from": str(resume.path) if resume is not None else None,
        }
        resume_step = self.step if resume is not None else None
        record = RecordWriter(RunDir(self.run_dir), resume_step, about)
        record.update(
            step=self.step,
            epoch=self.parts.data.sampler.epoch,
            minutes=self.minutes(),
            best=self._best(),  # a resumed run's, from its start (None before a validation)
        )
        if self.tcfg.keep_best_at_minutes or self.state.best_at:
            record.update(best_at=self._best_at())
        record.event(
            "start",
            self.step,
            resumed=resume is not None,
            setup_started=parts.started,
            data_ready=parts.data_ready,
            data_seconds=round(parts.data_seconds, 3),
            ids_seconds=round(self.parts.data.ids_seconds, 3),
            **{
                k: about[k]
                for k in ("params", "precision", "device", "world_size", "machine", "commit")
            },  # each process's own: a resumed run may go on on another machine
        )
        return record

    def _record(self, kind: str, **fields: Any) -> None:
        """One event of the run record at this step (rank 0), with epoch and minutes."""
        if self.record is not None:
            epoch, minutes = self.parts.data.sampler.epoch, round(self.minutes(), 4)
            self.record.event(kind, self.step, epoch=epoch, minutes=minutes, **fields)

    def end_record(self, status: str, reason: str, error: str | None = None) -> None:
        """The record's end event and final summary (a no-op off rank 0)."""
        if self.record is None:
            return
        self._record("end", status=status, reason=reason)
        self.record.update(
            status=status,
            reason=reason,
            error=error,
            step=self.step,
            epoch=self.parts.data.sampler.epoch,
            minutes=round(self.minutes(), 4),
        )

    @property
    def step(self) -> int:
        """The number of updates done so far (a resumed run goes on counting)."""
        return self.state.step

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.parts.model.parameters())

    def checkpoint(self, metrics: dict[str, float]) -> Checkpoint:
        """Everything needed to evaluate or resume (attnmt.checkpoint_format), the run's
        clock read now."""
        self.minutes()
        return make_checkpoint(self.parts, self.state, self.resume_point, metrics, self.rng_ranks)

    def gather_rngs(self) -> None:
        """Collect every rank's RNG snapshot for the next checkpoint (all ranks call it)."""
        self.rng_ranks = ddp.gather_object(self.resume_point[1], self.parts.dist)

    def save_last(self, metrics: dict[str, float] | None = None) -> None:
        """Write checkpoints/last.pt on rank 0 (every rank calls it)."""
        self.gather_rngs()
        if self.parts.dist.is_main:
            self.ckpts.save_last(self.checkpoint(metrics or {}))

    def minutes(self) -> float:
        """The run's training minutes so far (attnmt.train.state: a resumed run goes on
        from its checkpoint's), read from ``clock`` and kept in ``state.wall_s``."""
        self.state.wall_s = self.clock() - self.clock0
        return self.state.wall_s / 60.0

    def _keep_best_at(self, now: float, before: bool = False) -> None:
        """Keep the best checkpoint as of each ``trainer.keep_best_at_minutes`` mark that the
        clock ``now`` has passed (``before``: a validation is about to be recorded at
        ``now``); rank 0 (attnmt.train.best_at)."""
        if not self.parts.dist.is_main:
            return
        marks = due(self.tcfg.keep_best_at_minutes, self.state, now, before)
        if not marks:
            return
        for mark in marks:
            self.state.best_at.append(take(RunDir(self.run_dir), self.state.history, mark))
        self.state.best_at.sort(key=lambda b: b.minutes)
        if self.record is not None:
            self.record.update(best_at=self._best_at())

    def _best_at(self) -> list[dict[str, Any]]:
        """The marks kept or missed (the summary's ``best_at``)."""
        return [dataclasses.asdict(b) for b in self.state.best_at]

    def close(self) -> None:
        """Close the TensorBoard writer, detach the resumed run's own log file, release the
        run directory and drop the DDP wrapper (its reducer holds the process group, which
        :func:`~attnmt.train.distributed.cleanup` must be the one to end)."""
        self.net = self.parts.model
        self.tb.close()
        if self.parts.lock is not None:
            self.parts.lock.release()
        if self.parts.log_handler is not None:
            logging.getLogger().removeHandler(self.parts.log_handler)
            self.parts.log_handler.close()

    # ------------------------------------------------------------------ updates

    def update(self, batches: list[Batch]) -> dict[str, float]:
        """Forward/backward over ``batches`` (accumulated), clip, step; the step's figures."""
        step, started = self.step + 1, time.perf_counter()
        lr = self.parts.schedule.step(step)
        local = sum(b.n_tokens for b in batches)
        n_global = ddp.global_token_count(local, self.parts.dist)
        scale = ddp.loss_scale(n_global, self.parts.dist)
        guide = self.guide  # guided alignment: λ · Σ rows' cross-entropy / the update's rows
        if guide is not None:  # (no extra all-reduce without it)
            rows = ddp.global_token_count(sum(b.align_rows for b in batches), self.parts.dist)
            align_scale = ddp.loss_scale(rows, self.parts.dist)
        sums = torch.zeros(5, dtype=torch.float64)  # loss, nll, tokens, align loss, align rows
        self.net.train()
        self.mid_update = True
        for i, batch in enumerate(batches):
            batch = batch.to(self.parts.device)
            batch = word_dropout(batch, self.tcfg.src_word_dropout, self.tcfg.tgt_word_dropout)
            with ddp.no_sync(self.net, sync=i == len(batches) - 1):
                with self.parts.precision.autocast():
                    logits, attn = teacher_forced(self.net, batch, guide)
                out = label_smoothed_nll(logits, batch.target()[1], self.tcfg.label_smoothing)
                loss, align = out.loss * scale, 0.0
                if guide is not None and attn is not None:
                    aligned = batch_alignment_loss(attn, batch)
                    loss = loss + guide.weight * align_scale * aligned.total
                    align = float(aligned.total.detach())
                self.parts.precision.scaler.scale(loss).backward()
            sums += torch.tensor(
                [float(out.loss.detach()), float(out.nll), out.n_tokens, align, batch.align_rows],
                dtype=torch.float64,
            )
        self.parts.precision.scaler.unscale_(self.parts.optimizer)
        max_norm = self.tcfg.clip_grad_norm if self.tcfg.clip_grad_norm > 0 else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(self.parts.model.parameters(), max_norm)
        ddp.all_reduce_sum(sums)  # every rank decides alike whether the update is skipped
        # a non-finite loss, or gradient (with fp16 loss scaling the scaler owns inf gradients)
        finite = (
            math.isfinite(float(sums[0]))
            and math.isfinite(float(sums[3]))
            and (self.parts.precision.scaler.is_enabled() or math.isfinite(float(grad_norm)))
        )
        if finite:
            self.parts.precision.scaler.step(self.parts.optimizer)
        self.parts.precision.scaler.update()
        self.parts.optimizer.zero_grad(set_to_none=True)
        self._count_bad_update(step, finite)
        self.state.step = step
        self.resume_point = (self.parts.data.sampler.state_dict(), rng_state())
        self.mid_update = False
        tokens = max(float(sums[2]), 1.0)
        figures = {
            "loss": float(sums[0]) / tokens,  # the translation loss alone, as unguided runs
            "nll": float(sums[1]) / tokens,
            "lr": lr,
            "grad_norm": float(grad_norm),
            "tokens": tokens,
            "seconds": time.perf_counter() - started,
        }
        if guide is not None:  # L_align per row with a link, and those rows
            figures.update(
                align=float(sums[3]) / max(float(sums[4]), 1.0), align_rows=float(sums[4])
            )
        return figures

    def _count_bad_update(self, step: int, finite: bool) -> None:
        """Skipped updates: a total (logged, TensorBoard train/skipped_updates) and a run."""
        if finite:
            self.state.bad_updates = 0
            return
        self.state.bad_updates += 1
        self.state.skipped_updates += 1
        self.tb.scalar("train/skipped_updates", self.state.skipped_updates, step)
        log.warning(
            "step %d: non-finite loss or gradient (NaN/inf); update skipped (%d in a row, "
            "%d in all; training stops at trainer.max_bad_updates=%d in a row)",
            step,
            self.state.bad_updates,
            self.state.skipped_updates,
            self.tcfg.max_bad_updates,
        )

    def _stop_reason(self, first: bool = False) -> str | None:
        """Why training stops now, or None. ``first`` (before this process's first update)
        leaves the time budget out for a new run (it makes at least one update); a resumed
        run whose training minutes already reach the budget stops at once."""
        t = self.tcfg
        reason = None
        if self.stop_flag.poll():
            reason = "interrupted"
        elif self.state.bad_updates >= t.max_bad_updates:
            reason = "non_finite"
        elif t.max_steps and self.step >= t.max_steps:
            reason = "max_steps"
        elif t.max_epochs and self.parts.data.sampler.epoch >= t.max_epochs:
            reason = "max_epochs"
        elif t.early_stopping_patience and self.state.bad_vals >= t.early_stopping_patience:
            reason = "early_stopping"
        elif (
            t.time_budget_min
            and (self.step > 0 or not first)
            and self.minutes() >= t.time_budget_min
        ):
            reason = "time_budget"
        return ddp.agreed_stop_reason(reason, self.stop_flag, self.parts.dist)

    def fit(self) -> str:
        """Train until a stopping rule fires; returns its name."""
        t = self.tcfg
        show = self.parts.dist.is_main and t.progress_bar and sys.stderr.isatty()
        bar = tqdm(total=t.max_steps or None, initial=self.step, disable=not show, unit="step")
        meter = TrainMeter()
        batches = iter(self.parts.data.loader)
        self._keep_best_at(self.minutes())  # a resumed run's marks its checkpoint lacks
        reason = self._stop_reason(first=True)
        while reason is None:
            group: list[Batch] = []
            epoch_ended = False
            while len(group) < t.accum_steps and not epoch_ended:
                batch = next(batches, None)
                if batch is None:
                    epoch_ended, batches = True, iter(self.parts.data.loader)
                else:
                    group.append(batch)
            if group:
                fig = self.update(group)
                self._log_step(fig, meter, bar)
                if self.on_step is not None:
                    self.on_step(self.step, fig)
                if t.val_every_steps and self.step % t.val_every_steps == 0:
                    self.validation_round()
            if epoch_ended:
                log.debug("epoch %d done at step %d", self.parts.data.sampler.epoch, self.step)
                at_epochs = t.val_every_epoch or not t.val_every_steps
                if at_epochs and self.state.val_step != self.step:
                    self.validation_round()
            self._keep_best_at(self.minutes())
            reason = self._stop_reason()
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
            self.state.history.add_train(self.step, self.minutes(), scalars["train/nll"])
            log.info(meter.line(self.step, self.parts.data.sampler.epoch))
            self._record("train", **{k.removeprefix("train/"): v for k, v in scalars.items()})
            meter.reset()

    def run(self) -> dict[str, Any]:
        """Fit, validate the final step, decode the test split; the run's figures.

        The first Ctrl-C or SIGTERM during training stops after the current update; then (or
        on a KeyboardInterrupt outside an update, e.g. during validation) ``last.pt`` is saved
        and :class:`~attnmt.train.interrupt.TrainingInterrupted` raised. A second signal
        inside an update aborts without saving, since weights and position would disagree.
        A signal during validation or the final test stops the decoding between two
        decoder steps; during the test it raises :class:`FinalTestInterrupted` (what exists,
        how to redo the test).
        """
        with self.stop_flag:  # one handler from the first update to the end of the test
            try:
                with _bar_safe_logging(self.tcfg.progress_bar):
                    reason = self.fit()
                    if reason == "interrupted":
                        raise KeyboardInterrupt
                    if reason == "non_finite":
                        raise self.diverged()
                    if self.state.val_step != self.step and self.step > 0:
                        self.validation_round()  # also rewrites last.pt at the final step
                    with ddp.stop_together(self.stop_flag, self.parts.dist):
                        if self.parts.dist.is_main and self.tcfg.average_best:
                            self.average_best()
            except KeyboardInterrupt:
                raise self.interrupted() from None
            try:
                with ddp.stop_together(self.stop_flag, self.parts.dist):
                    result = self.conclude(reason)  # a signal stops the test decode at once
            except KeyboardInterrupt:
                raise FinalTestInterrupted(self.step, self.run_dir, self.stop_flag.signum) from None
        log.debug("finished (%s) at step %d: %s", reason, self.step, result)
        self._keep_best_at(self.minutes())  # the marks the final validation and test passed
        self.end_record("finished", reason)
        return result

    # ------------------------------------------------------------------ validation

    def validation_round(self) -> dict[str, float]:
        """Rank 0 validates, reports and checkpoints; every rank gets the figures and feeds
        the BLEU to the schedule."""
        figures: dict[str, float] = {}
        self.gather_rngs()
        with ddp.stop_together(self.stop_flag, self.parts.dist):  # a signal may stop rank 0 alone
            if self.parts.dist.is_main:
                figures = self._validate_main()
        figures = ddp.broadcast_object(figures)
        if not self.parts.dist.is_main:
            self.parts.schedule.on_validation(figures["val/bleu"])
            self.state.val_step = self.step
        return figures

    def _validate(self) -> Any:
        """The validation figures of the model as it is (attnmt.train.evaluation)."""
        t = self.tcfg
        return validate(
            self.parts.translator,
            self.parts.data.valid,
            self.parts.precision,
            t.val_max_tokens,
            t.val_beam_size,
            links=self.parts.data.valid_links,
        )

    def _validate_main(self) -> dict[str, float]:
        """Rank 0's part of :meth:`validation_round`: score, keep the best, write a best
        checkpoint when among the k best, then ``last.pt``, record the event; then report
        (TensorBoard, hypotheses, heatmaps) and draw ``results.png``."""
        t, step, state = self.tcfg, self.step, self.state
        res = self._validate()
        if not state.signature:
            state.signature = " / ".join(res.signatures.values())
            log.info("sacrebleu signatures: %s", state.signature)
        self.parts.schedule.on_validation(res.bleu)  # before saving: the payload holds its state
        improved = res.bleu > state.best_bleu
        state.val_step = step
        state.bad_vals = 0 if improved else state.bad_vals + 1
        if improved:
            state.best_bleu, state.best_chrf, state.best_step = res.bleu, res.chrf, step
            state.best_aer = res.aer
        log.info("valid step %d | %s", step, res.line())
        now = self.minutes()
        self._keep_best_at(now, before=True)  # before this validation's checkpoint prunes
        state.history.add_valid(step, now, res.loss, res.bleu, res.chrf)
        state.n_vals += 1
        payload = self.checkpoint(
            {"val_bleu": res.bleu, "val_chrf": res.chrf, "val_loss": res.loss}
        )
        # the best checkpoint first: a process killed in between keeps it, and last.pt
        # (the older one) resumes to this step again
        if self.ckpts.save_if_best(payload, step, res.bleu) and improved:
            log.info(
                "new best: valid BLEU %.2f at step %d -> %s", res.bleu, step, self.ckpts.best_path()
            )
        self.ckpts.save_last(payload)
        self._record(
            "valid",
            **{k.removeprefix("val/"): v for k, v in res.scalars().items()},
            attention_entropy=res.entropy,
            attention_entropy_norm=res.entropy_norm,
        )
        if self.record is not None:
            self.record.update(step=step, minutes=round(self.minutes(), 4), best=self._best())
        # last, since drawing the heatmaps decodes and a signal stops decoding: the scores,
        # the checkpoints and the record above are written by then
        heatmaps = t.heatmaps_every > 0 and (state.n_vals - 1) % t.heatmaps_every == 0
        valid = self.parts.data.valid
        report_validation(
            self.tb, self.run_dir, self.parts.translator, valid, res, step, t, heatmaps
        )
        self.tb.scalar("val/best_bleu", state.best_bleu, step)
        self._draw_results(step)
        return res.scalars()

    def _best(self) -> dict[str, Any] | None:
        """The best checkpoint so far and its validation scores (the summary's ``best``)."""
        path, s = self.ckpts.best_path(), self.state
        if path is None and s.best_step is None:
            return None
        scores = {"val_bleu": s.best_bleu, "val_chrf": s.best_chrf}
        if s.best_aer is not None:
            scores["val_aer"] = s.best_aer
        return {"file": path.name if path else None, "step": s.best_step, **scores}

    def _draw_results(self, step: int) -> None:
        """results.png in the run directory, and the same picture in TensorBoard."""
        cfg = self.cfg
        title = f"{self.run_dir.name}: {cfg.model.name} on {cfg.data.name}, step {step}"
        fig = results_figure(self.state.history, title)
        pixels = save_figure(fig, RunDir(self.run_dir).results_png)  # one drawing for both
        self.tb.image("valid_summary/results", pixels, step)

    # ------------------------------------------------------------------ the end of a run

    def average_best(self) -> None:
        """Average the k best checkpoints' weights into ``averaged.pt``, listed first in
        best.json (so it is the one tested and the one ``evaluate.py ckpt=RUN`` picks) only
        if it validates better than the best of them; the k best stay."""
        ckpt_dir = self.ckpts.directory
        files = [ckpt_dir / e["file"] for e in self.ckpts.best if e["file"].startswith("best-")]
        if len(files) < 2:
            return
        averaged = average_files(files)
        trained = {k: v.detach().clone() for k, v in self.parts.model.state_dict().items()}
        self.parts.model.load_state_dict(averaged.weights)
        try:
            res = self._validate()
        finally:
            self.parts.model.load_state_dict(trained)  # the run's own weights stay in the model
        better = res.bleu > self.state.best_bleu
        log.info(
            "average of the %d best (%s): valid BLEU %.2f, chrF %.2f against %.2f: %s",
            len(files),
            ", ".join(f.name for f in files),
            res.bleu,
            res.chrf,
            self.state.best_bleu,
            "kept as averaged.pt" if better else "not kept",
        )
        self.tb.scalar("val/averaged_bleu", res.bleu, self.step)
        files_used = [f.name for f in files]
        self._record(
            "average",
            files=files_used,
            bleu=res.bleu,
            chrf=res.chrf,
            nll=res.loss,
            kept=better,
            **({"aer": res.aer} if res.aer is not None else {}),
        )
        if better:
            averaged.metrics = {"val_bleu": res.bleu, "val_chrf": res.chrf, "val_loss": res.loss}
            self.ckpts.add_best(averaged, AVERAGED, self.step, res.bleu)
            self.state.best_bleu, self.state.best_chrf = res.bleu, res.chrf
            self.state.best_step, self.state.best_aer = self.step, res.aer

    def conclude(self, reason: str) -> dict[str, Any]:
        """The run's figures; rank 0 also decodes the test split (``trainer.test``) and
        reports the final metrics to TensorBoard's HParams and the user."""
        result: dict[str, Any] = {
            "step": self.step,
            "epoch": self.parts.data.sampler.epoch,
            "stop_reason": reason,
            "best_val_bleu": self.state.best_bleu,
            "run_dir": str(self.run_dir),
        }
        if not self.parts.dist.is_main:
            return result
        samples: list[tuple[str, str, str]] = []
        if self.tcfg.test and self.step > 0:
            best = self.ckpts.best_path() or self.ckpts.last_path
            src, ref = self.parts.data.test_split()
            members = self._test_ensemble()
            if len(members) > 1:
                figures, hyps = score_ensemble(
                    self.parts.translator, members, src, ref, self.run_dir
                )
            else:
                figures, hyps = score_checkpoint(
                    self.parts.translator, best, src, ref, self.run_dir
                )
            result.update(figures)
            samples = list(zip(src, ref, hyps))[:END_SAMPLES]
            test = {
                "checkpoint": best.name,
                "ensemble": figures.get("test_ensemble"),
                "beam": figures["test_beam"],
                **{k: figures[f"test_{k}"] for k in RECORD_SCORES},
            }
            self._record("test", **test)
            if self.record is not None:
                self.record.update(test=test, best=self._best())
            print(f"test BLEU = {result['test_bleu']:.2f} (chrF {result['test_chrf']:.2f})")
        metrics = {"val/best_bleu": result["best_val_bleu"]}
        if "test_bleu" in result:
            metrics.update({"val/test_bleu": result["test_bleu"]})
            metrics.update({"val/test_chrf": result["test_chrf"]})
        metrics = {k: float(v) for k, v in metrics.items() if math.isfinite(v)}
        vocab = self.parts.data.tokenizer.tgt_vocab_size
        settings = hparams(self.cfg, self.n_params, vocab, self.parts.precision.name)
        self.tb.hparams(settings, metrics, self.step)
        print(end_block(result, self.state, self.ckpts.best_path(), samples), flush=True)
        return result

    def _test_ensemble(self) -> list[Path]:
        """The checkpoints that ``trainer.test_ensemble=k`` decodes the test split with: the
        first k of best.json (fewer, warned, when the run kept fewer); [] when k is 1."""
        k = self.tcfg.test_ensemble
        if k <= 1:
            return []
        files = [self.ckpts.directory / e["file"] for e in self.ckpts.best][:k]
        if len(files) < k:
            log.warning(
                "trainer.test_ensemble=%d: the run kept %d best checkpoint(s); testing %s",
                k,
                len(files),
                "those as an ensemble" if len(files) > 1 else "the best alone",
            )
        return files

    def diverged(self) -> TrainingDiverged:
        """The error for ``max_bad_updates`` non-finite updates in a row; nothing is saved,
        so the last checkpoint written stays the last good one."""
        t, last = self.tcfg, self.ckpts.last_path
        kept = (
            f"the last good checkpoint is {last} (resume={self.run_dir})"
            if last.is_file()
            else "no checkpoint had been written yet"
        )
        return TrainingDiverged(
            f"training stopped at step {self.step}: {self.state.bad_updates} updates in a "
            f"row had a non-finite loss or gradient (trainer.max_bad_updates="
            f"{t.max_bad_updates}). Lower trainer.lr (now {t.lr:g}) or raise "
            f"trainer.warmup_steps (now {t.warmup_steps}), or train in full precision with "
            f"trainer.precision=fp32 (now {self.parts.precision.name}); {kept}"
        )

    def interrupted(self) -> TrainingInterrupted:
        """Save last.pt unless interrupted inside an update; the exception to raise."""
        last, signum = self.ckpts.last_path, self.stop_flag.signum
        host = None if self.parts.dist.is_main else self.parts.dist.main_host  # rank 0 alone writes
        if self.mid_update:
            log.warning("aborted inside update %d: last.pt is left as it was", self.step + 1)
            kept = last if last.is_file() else None
            return TrainingInterrupted(self.step, kept, False, signum, host)
        if self.parts.dist.is_main:
            log.warning("interrupted at step %d; saving %s", self.step, last)
        self.save_last()
        return TrainingInterrupted(self.step, last, True, signum, host)


def _bar_safe_logging(progress_bar: bool) -> contextlib.AbstractContextManager[Any]:
    """Log lines go through tqdm.write while the progress bar is shown, so no line is
    printed over a stale bar."""
    return logging_redirect_tqdm() if progress_bar else contextlib.nullcontext()


def _every_rank_ends_so(err: BaseException) -> bool:
    """Whether every rank of the run leaves training by ``err`` too: a stop they agreed on
    and saved last.pt for together (:class:`TrainingInterrupted` with ``saved``, the final
    test's :class:`FinalTestInterrupted`). Not an update aborted on one rank, nor an error."""
    return isinstance(err, TrainingInterrupted) and err.saved


def _ending(err: BaseException) -> tuple[str, str, str | None]:
    """(status, reason, error message) of the run record for a run that ``err`` ended."""
    if isinstance(err, FinalTestInterrupted):
        return "interrupted", "final_test", None
    if isinstance(err, (TrainingInterrupted, KeyboardInterrupt)):
        return "interrupted", "interrupted", None
    if isinstance(err, TrainingDiverged):
        return "failed", "non_finite", str(err)
    return "failed", type(err).__name__, str(err).splitlines()[0] if str(err) else None


def train(
    cfg: RunConfig | DictConfig,
    run_dir: str | Path,
    on_step: StepHook | None = None,
    explicit: Collection[str] | None = None,
    clock: Clock = time.monotonic,
) -> dict[str, Any]:
    """Train as ``cfg`` says, writing checkpoints/TensorBoard/hyps under ``run_dir``;
    ``clock``: what the run's training minutes are read from (:class:`Trainer`).

    Returns {"step", "epoch", "stop_reason", "best_val_bleu", "run_dir", "test_bleu", ...}.
    A KeyboardInterrupt saves ``checkpoints/last.pt`` and is re-raised.
    """
    try:
        trainer = Trainer(cfg, Path(run_dir), on_step, explicit, clock)
    except BaseException:
        ddp.cleanup()
        raise
    together = False
    # The stop flag's handlers stay until the process group is gone: a stop's SIGTERM can
    # reach a rank again while it waits in the last barrier (torchrun's agent forwards its
    # own, SLURM signals every process); it is a copy of the stop under way, not a new one.
    with trainer.stop_flag:
        try:
            result = trainer.run()
            together = True  # every rank gets here
            return result
        except BaseException as err:
            together = _every_rank_ends_so(err)
            try:
                trainer.end_record(*_ending(err))
            except (OSError, WriteError) as record_err:  # the run's own error is reported
                log.warning("the run record's end was not written: %s", record_err)
            raise
        finally:
            trainer.close()
            ddp.cleanup(together=together)
