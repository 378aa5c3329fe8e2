"""The training loop: ``train(cfg, run_dir) -> dict`` (``train.py`` is its Hydra entry).

One code path for a single process and for ``torchrun`` (attnmt.train.distributed): rank 0 logs,
validates and writes checkpoints; the others wait for its decisions. Each update
accumulates ``trainer.accum_steps`` batches and minimises the token-normalised loss

    L = Σ_batches Σ_tokens ℓ_smoothed / N          (N = non-pad target tokens, all ranks)

Resume restores model, optimizer, schedule, scaler, sampler position and every RNG, so a
resumed CPU run repeats the uninterrupted run's losses step for step.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from attnmt.checkpoint import CheckpointManager, load_resolved, load_resume, run_dir_of
from attnmt.config import RunConfig, validate_config
from attnmt.data.corpora import check_splits
from attnmt.decode.plots import figure_to_array
from attnmt.decode.translator import Translator
from attnmt.devices import resolve_device
from attnmt.errors import AttnmtError, ConfigError
from attnmt.models.registry import build_model
from attnmt.schema import plain
from attnmt.train import distributed as ddp
from attnmt.train.averaging import average_payloads
from attnmt.train.continuation import finetune_config, resumed_config
from attnmt.train.data import build_data
from attnmt.train.interrupt import StopFlag, exit_code
from attnmt.train.loss import label_smoothed_nll
from attnmt.train.optim import build_optimizer, build_schedule
from attnmt.train.precision_probe import choose_precision, probe_batch
from attnmt.train.report import TrainMeter, report_validation, test_checkpoint
from attnmt.train.state import TrainingParts, make_payload, restore, rng_state, seed_everything
from attnmt.train.summary import History, end_block, hparams, results_figure, save_figure
from attnmt.train.tensorboard import TBLogger
from attnmt.train.validate import validate
from attnmt.train.word_dropout import word_dropout

log = logging.getLogger(__name__)
StepHook = Callable[[int, dict[str, float]], None]
"""Called after every update with (step, {"loss", "nll", "lr", "grad_norm", "tokens"})."""
OUTPUTS = Path("outputs")  # where resume=auto looks for runs


class Trainer:
    """Holds the run's objects; :meth:`run` trains, validates, tests and returns metrics."""

    def __init__(
        self,
        cfg: RunConfig | DictConfig,
        run_dir: Path,
        on_step: StepHook | None = None,
        explicit: Collection[str] | None = None,
    ) -> None:
        """``explicit``: the keys given on the command line (train.py passes Hydra's
        overrides); a resumed run takes every other setting from its checkpoint. None
        (programmatic use) treats every key as given."""
        cfg = validate_config(cfg)
        self.on_step = on_step
        device = resolve_device(cfg.device)
        self.dist = ddp.init_distributed(device)
        self.device = ddp.local_device(device, self.dist)
        ckpt_path, payload = load_resume(cfg.resume, OUTPUTS, Path(run_dir))
        start: dict[str, Any] | None = None  # finetune: the checkpoint whose weights start
        if payload is not None:
            cfg = resumed_config(cfg, payload["config"], explicit, str(ckpt_path))
        elif cfg.resume == "auto":
            log.info("resume=auto: no checkpoint under %s/; starting afresh", OUTPUTS)
        if cfg.finetune:
            source, start = load_resolved(cfg.finetune)
            cfg = finetune_config(cfg, start["config"], explicit, str(source))
            log.info("finetune: a new run from the weights and tokenizer of %s", source)
        self.cfg, self.tcfg = cfg, cfg.trainer
        self.run_dir = (run_dir_of(ckpt_path) if ckpt_path else None) or Path(run_dir)
        if self.dist.is_main:
            check_writable(self.run_dir)
        check_splits(cfg.data, ("train", "valid", "test") if self.tcfg.test else ("train", "valid"))
        self.log_handler = _continue_log(self.run_dir, Path(run_dir), self.dist.is_main)
        seed_everything(cfg.seed)
        inherited = payload or start
        self.data = build_data(
            cfg.data, self.tcfg, cfg.seed, self.dist, inherited and inherited["tokenizer"]
        )
        tok = self.data.tokenizer
        self.model_cfg = plain(cfg.model)
        model = build_model(self.model_cfg, tok.src_vocab_size, tok.tgt_vocab_size, tok.joint)
        if start is not None:
            model.load_state_dict(start["model"])
        self.model = model.to(self.device)
        self.precision = choose_precision(
            self.tcfg.precision,
            self.device,
            self.model,
            lambda: probe_batch(self.data.train, self.tcfg.max_tokens),
            Path(cfg.data.root),
            self.dist,
            self.model_cfg,
            tok.tgt_vocab_size,
        )
        self.translator = Translator(self.model, tok, self.device, cfg.decode)
        self.optimizer = build_optimizer(self.model.parameters(), self.tcfg)
        self.schedule = build_schedule(self.optimizer, self.tcfg)
        self.state: dict[str, Any] = dict(step=0, best_bleu=-math.inf, bad_vals=0, val_step=-1)
        self.parts = TrainingParts(
            self.model,
            self.optimizer,
            self.schedule,
            self.precision.scaler,
            self.data.sampler,
            tok,
            dict(self.model_cfg),
            cfg.to_dict(),
        )
        if payload:
            restore(self.parts, payload, self.state, self.dist.rank)
            log.info("resumed from %s at step %d (run dir %s)", ckpt_path, self.step, self.run_dir)
        elif self.dist.rank > 0:  # the model is built alike everywhere; dropout differs per rank
            seed_everything(ddp.rank_seed(cfg.seed, self.dist.rank))
        self.net = ddp.wrap_ddp(self.model, self.dist, self.device)
        main = self.dist.is_main
        purge = self.step + 1 if payload else None
        # events in the run directory itself: TensorBoard names the run after it
        self.tb = TBLogger(self.run_dir, enabled=main, purge_step=purge)
        self.history = History(self.state)
        self.clock0 = time.monotonic() - float(self.state.get("wall_s", 0.0))
        self.ckpts = CheckpointManager(self.run_dir / "checkpoints", self.tcfg.keep_best)
        self.resume_point = (self.data.sampler.state_dict(), rng_state())
        self.rng_ranks: list[dict[str, Any]] | None = None  # every rank's, at the last save
        self.stop_flag = StopFlag()
        self.mid_update = False  # True from the first backward until the step is recorded
        n_params = sum(p.numel() for p in self.model.parameters())
        log.info(
            "model %s: %.2fM parameters on %s, precision %s, %d rank(s)",
            self.model.name,
            n_params / 1e6,
            self.device,
            self.precision.name,
            self.dist.world_size,
        )

    @property
    def step(self) -> int:
        return int(self.state["step"])

    # ---- checkpoints ---------------------------------------------------------------------

    def payload(self, metrics: dict[str, float]) -> dict[str, Any]:
        """Everything needed to evaluate or resume (see attnmt.checkpoint's format)."""
        return make_payload(self.parts, self.state, self.resume_point, metrics, self.rng_ranks)

    def gather_rngs(self) -> None:
        """Collect every rank's RNG snapshot for the next checkpoint (all ranks call it)."""
        self.rng_ranks = ddp.gather_object(self.resume_point[1], self.dist)

    def save_last(self, metrics: dict[str, float] | None = None) -> None:
        """Write checkpoints/last.pt on rank 0 (every rank calls it)."""
        self.gather_rngs()
        if self.dist.is_main:
            self.ckpts.save_last(self.payload(metrics or {}))

    # ---- one update ----------------------------------------------------------------------

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

    # ---- validation ----------------------------------------------------------------------

    def validate(self) -> dict[str, float]:
        """Rank 0 validates, logs and checkpoints; every rank gets the figures."""
        figures: dict[str, float] = {}
        self.gather_rngs()
        if self.dist.is_main:
            figures = self._validate_main()
        figures = ddp.broadcast_object(figures)
        if not self.dist.is_main:
            self.schedule.on_validation(figures["val/bleu"])
            self.state["val_step"] = self.step
        return figures

    def _validate_main(self) -> dict[str, float]:
        t, step, data = self.tcfg, self.step, self.data
        res = validate(
            self.translator, data.valid, self.precision, t.val_max_tokens, t.val_beam_size
        )
        if "signature" not in self.state:
            self.state["signature"] = " / ".join(res.signatures.values())
            log.info("sacrebleu signatures: %s", self.state["signature"])
        self.schedule.on_validation(res.bleu)  # before saving: the payload holds its state
        improved = res.bleu > self.state["best_bleu"]
        self.state.update(
            val_step=step,
            best_bleu=max(self.state["best_bleu"], res.bleu),
            bad_vals=0 if improved else self.state["bad_vals"] + 1,
        )
        log.info("valid step %d | %s", step, res.line())
        if improved:
            self.state.update(best_step=step, best_chrf=res.chrf)
        self.history.add_valid(step, self.minutes(), res.loss, res.bleu, res.chrf)
        n_val = self.state["n_vals"] = self.state.get("n_vals", 0) + 1
        heatmaps = t.heatmaps_every > 0 and (n_val - 1) % t.heatmaps_every == 0
        report_validation(
            self.tb, self.run_dir, self.translator, data.valid, res, step, t, heatmaps
        )
        self.tb.scalar("val/best_bleu", self.state["best_bleu"], step)
        self._draw_results(step)
        payload = self.payload({"val_bleu": res.bleu, "val_chrf": res.chrf, "val_loss": res.loss})
        self.ckpts.save_last(payload)
        if self.ckpts.save_if_best(payload, step, res.bleu) and improved:
            log.info(
                "new best: valid BLEU %.2f at step %d -> %s", res.bleu, step, self.ckpts.best_path()
            )
        return res.scalars()

    def _average_best(self) -> None:
        """Average the k best checkpoints' weights into ``averaged.pt``, listed first in
        best.json (so it is the one tested and the one ``evaluate.py ckpt=RUN`` picks) only
        if it validates better than the best of them; the k best stay."""
        t, ckpt_dir = self.tcfg, self.ckpts.directory
        files = [ckpt_dir / e["file"] for e in self.ckpts.best if e["file"].startswith("best-")]
        if len(files) < 2:
            return
        payload = average_payloads(files)
        trained = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.model.load_state_dict(payload["model"])
        try:
            res = validate(
                self.translator, self.data.valid, self.precision, t.val_max_tokens, t.val_beam_size
            )
        finally:
            self.model.load_state_dict(trained)  # the run's own weights stay in the model
        best = self.state["best_bleu"]
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
        self.tb.scalar("val/averaged_bleu", res.bleu, self.step)
        if better:
            payload["metrics"] = {"val_bleu": res.bleu, "val_chrf": res.chrf, "val_loss": res.loss}
            self.ckpts.add_best(payload, "averaged.pt", self.step, res.bleu)
            self.state.update(best_bleu=res.bleu, best_chrf=res.chrf, best_step=self.step)

    def minutes(self) -> float:
        """Wall-clock minutes of this run so far (a resumed run goes on counting)."""
        self.state["wall_s"] = time.monotonic() - self.clock0
        return self.state["wall_s"] / 60.0

    def _draw_results(self, step: int) -> None:
        """results.png in the run directory, and the same picture in TensorBoard."""
        cfg = self.cfg
        title = f"{self.run_dir.name}: {cfg.model.name} on {cfg.data.name}, step {step}"
        fig = results_figure(self.history, title)
        save_figure(fig, self.run_dir / "results.png")
        self.tb.image("valid_summary/results", figure_to_array(fig), step)

    # ---- the loop ------------------------------------------------------------------------

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
                    self.validate()
            if epoch_ended:
                log.debug("epoch %d done at step %d", self.data.sampler.epoch, self.step)
                at_epochs = t.val_every_epoch or not t.val_every_steps
                if at_epochs and self.state["val_step"] != self.step:
                    self.validate()
            reason = self._stop_reason(started)
        bar.close()
        return reason

    def _log_step(self, fig: dict[str, float], meter: TrainMeter, bar: tqdm) -> None:
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
        and :class:`TrainingInterrupted` raised. A second signal inside an update aborts
        without saving, since weights and position would disagree.
        """
        try:
            with self.stop_flag, _bar_safe_logging(self.tcfg.progress_bar):
                reason = self.fit()
            if reason == "interrupted":
                raise KeyboardInterrupt
            if reason == "non_finite":
                raise self._diverged()
            if self.state["val_step"] != self.step and self.step > 0:
                self.validate()  # also rewrites last.pt at the final step
            if self.dist.is_main and self.tcfg.average_best:
                self._average_best()
        except KeyboardInterrupt:
            raise self._interrupted() from None
        result: dict[str, Any] = {
            "step": self.step,
            "epoch": self.data.sampler.epoch,
            "stop_reason": reason,
            "best_val_bleu": self.state["best_bleu"],
            "run_dir": str(self.run_dir),
        }
        if self.dist.is_main and self.tcfg.test and self.step > 0:
            best = self.ckpts.best_path() or self.ckpts.last_path
            src, ref = self.data.test_split()
            result.update(test_checkpoint(self.translator, best, src, ref, self.run_dir))
            print(f"test BLEU = {result['test_bleu']:.2f} (chrF {result['test_chrf']:.2f})")
        if self.dist.is_main:
            metrics = {"val/best_bleu": result["best_val_bleu"]}
            if "test_bleu" in result:
                metrics.update({"val/test_bleu": result["test_bleu"]})
                metrics.update({"val/test_chrf": result["test_chrf"]})
            metrics = {k: float(v) for k, v in metrics.items() if math.isfinite(v)}
            n_params = sum(p.numel() for p in self.model.parameters())
            vocab = self.data.tokenizer.tgt_vocab_size
            self.tb.hparams(
                hparams(self.cfg, n_params, vocab, self.precision.name), metrics, self.step
            )
            print(end_block(result, self.state, self.ckpts.best_path()), flush=True)
        log.debug("finished (%s) at step %d: %s", reason, self.step, result)
        ddp.barrier()
        return result

    def _diverged(self) -> TrainingDiverged:
        """The error for ``max_bad_updates`` non-finite updates in a row; nothing is saved,
        so the last checkpoint written stays the last good one."""
        t, last = self.tcfg, self.ckpts.last_path
        kept = (
            f"the last good checkpoint is {last} (resume={self.run_dir})"
            if last.is_file()
            else "no checkpoint had been written yet"
        )
        return TrainingDiverged(
            f"training stopped at step {self.step}: {self.state['bad_updates']} updates in a "
            f"row had a non-finite loss or gradient (trainer.max_bad_updates="
            f"{t.max_bad_updates}). Lower trainer.lr (now {t.lr:g}) or raise "
            f"trainer.warmup_steps (now {t.warmup_steps}), or train in full precision with "
            f"trainer.precision=fp32 (now {self.precision.name}); {kept}"
        )

    def _interrupted(self) -> TrainingInterrupted:
        """Save last.pt unless interrupted inside an update; the exception to raise."""
        if self.mid_update:
            log.warning("aborted inside update %d: last.pt is left as it was", self.step + 1)
            path = self.ckpts.last_path if self.ckpts.last_path.is_file() else None
            return TrainingInterrupted(self.step, path, False, self.stop_flag.signum)
        log.warning("interrupted at step %d; saving %s", self.step, self.ckpts.last_path)
        self.save_last()
        return TrainingInterrupted(self.step, self.ckpts.last_path, True, self.stop_flag.signum)

    def close(self) -> None:
        self.tb.close()
        if self.log_handler is not None:
            logging.getLogger().removeHandler(self.log_handler)
            self.log_handler.close()


class TrainingDiverged(AttnmtError):
    """Too many non-finite updates in a row (see ``trainer.max_bad_updates``)."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM ended training; ``checkpoint`` is what ``resume=`` continues from
    (or None); ``exit_code`` is 128 + the signal's number."""

    def __init__(
        self, step: int, checkpoint: Path | None, saved: bool, signum: int = signal.SIGINT
    ) -> None:
        super().__init__(step, checkpoint)
        self.step, self.checkpoint, self.saved = step, checkpoint, saved
        self.exit_code = exit_code(signum)

    def message(self) -> str:
        if self.checkpoint is None:
            return f"interrupted at step {self.step} before any checkpoint was written"
        what = "saved" if self.saved else "kept (the interrupted update is lost)"
        return (
            f"interrupted at step {self.step}: {self.checkpoint} {what}; "
            f"continue with resume={self.checkpoint.parent.parent}"
        )


def _bar_safe_logging(progress_bar: bool) -> contextlib.AbstractContextManager[Any]:
    """Log lines go through tqdm.write while the progress bar is shown, so no line is
    printed over a stale bar."""
    return logging_redirect_tqdm() if progress_bar else contextlib.nullcontext()


def check_writable(run_dir: Path) -> None:
    """The run directory can be created and written to; else one line naming the setting."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise ConfigError(
            f"hydra.run.dir={run_dir}: cannot write the run directory there "
            f"({err.strerror or err}); choose a writable directory"
        ) from None


def _continue_log(run_dir: Path, new_dir: Path, is_main: bool) -> logging.Handler | None:
    """A resumed run keeps writing ``<run_dir>/train.log`` (besides the log of the fresh
    directory Hydra opened for this process), so one file tells the whole run."""
    if not is_main or run_dir.resolve() == new_dir.resolve():
        return None
    handler = logging.FileHandler(run_dir / "train.log", mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    logging.getLogger().addHandler(handler)
    log.info("this process's own directory: %s", new_dir)
    return handler


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
