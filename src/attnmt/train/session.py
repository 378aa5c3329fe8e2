"""A training session: the objects one run holds, built from its config, and their checkpoint.

:class:`TrainingSession` resolves the config (a resume takes the checkpoint's settings, a
finetune its weights and tokenizer), checks the run directory, and builds data, model,
precision, translator, optimizer, schedule, TensorBoard logger and checkpoint manager;
it restores a resumed run's state and writes ``last.pt``. What is done with them lives
elsewhere: updates and the fit loop in attnmt.train.loop, a validation round in
attnmt.train.validation, the end of a run in attnmt.train.finish.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from attnmt.checkpoint import CheckpointManager, load_resolved, load_resume, run_dir_of
from attnmt.config import RunConfig, validate_config
from attnmt.data.corpora import check_splits
from attnmt.decode.translator import Translator
from attnmt.devices import resolve_device
from attnmt.errors import ConfigError
from attnmt.models.registry import build_model
from attnmt.schema import plain
from attnmt.train import distributed as ddp
from attnmt.train.continuation import finetune_config, resumed_config
from attnmt.train.data import build_data
from attnmt.train.interrupt import StopFlag
from attnmt.train.optim import build_optimizer, build_schedule
from attnmt.train.precision_probe import choose_precision, probe_batch
from attnmt.train.state import TrainingParts, make_payload, restore, rng_state, seed_everything
from attnmt.train.summary import History
from attnmt.train.tensorboard import TBLogger

log = logging.getLogger(__name__)
StepHook = Callable[[int, dict[str, float]], None]
"""Called after every update with (step, {"loss", "nll", "lr", "grad_norm", "tokens"})."""
OUTPUTS = Path("outputs")  # where resume=auto looks for runs


class TrainingSession:
    """Holds the run's objects and its trainer state; writes ``last.pt``."""

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
        """The number of updates done so far (a resumed run goes on counting)."""
        return int(self.state["step"])

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

    def minutes(self) -> float:
        """Wall-clock minutes of this run so far (a resumed run goes on counting)."""
        self.state["wall_s"] = time.monotonic() - self.clock0
        return self.state["wall_s"] / 60.0

    def close(self) -> None:
        """Close the TensorBoard writer and detach the resumed run's own log file."""
        self.tb.close()
        if self.log_handler is not None:
            logging.getLogger().removeHandler(self.log_handler)
            self.log_handler.close()


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
