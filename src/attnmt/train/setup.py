"""Starting a run, in one direction: settings → validated config → data → model → parts.

1. :func:`compose_settings`: the composed config as plain settings; ``resume=`` merges the
   checkpoint's settings into them (attnmt.train.continuation), ``finetune=`` its model's;
2. :func:`attnmt.train.run_config.validate_config`, once, into a typed :class:`RunConfig`;
3. :func:`start_run`: checks (the run directory is writable, not another run's, and
   locked for this one: attnmt.train.run_lock; the splits exist), data and tokenizer, the model, its
   precision, the translator, optimizer and schedule, each built from what it needs.

The :class:`~attnmt.train.loop.Trainer` takes the :class:`RunParts` this returns.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from attnmt.checkpoint import load_resolved, load_resume, load_weights
from attnmt.checkpoint_format import Checkpoint
from attnmt.data.corpora import check_splits
from attnmt.decode.translator import Translator
from attnmt.devices import resolve_device
from attnmt.errors import ConfigError
from attnmt.models.registry import build_model
from attnmt.run_dir import RunDir
from attnmt.schema import plain
from attnmt.train import distributed as ddp
from attnmt.train.continuation import check_unfinished, finetuned_settings, resumed_settings
from attnmt.train.data import TrainingData, build_data
from attnmt.train.optim import Schedule, build_optimizer, build_schedule
from attnmt.train.precision import Precision
from attnmt.train.precision_probe import choose_precision, probe_batch
from attnmt.train.rng import seed_everything
from attnmt.train.run_config import (
    RunConfig,
    check_exclusive,
    setting_keys,
    settings_of,
    validate_config,
)
from attnmt.train.run_lock import RunLock, acquire, check_fresh, held

log = logging.getLogger(__name__)
OUTPUTS = Path("outputs")  # where resume=auto looks for runs


@dataclass(frozen=True)
class Resume:
    """``resume=``: the run goes on from this checkpoint (weights and training state)."""

    path: Path
    checkpoint: Checkpoint


@dataclass(frozen=True)
class Finetune:
    """``finetune=``: a new run starts from this checkpoint's weights and tokenizer."""

    path: Path
    checkpoint: Checkpoint


@dataclass
class Settings:
    """A run's validated config, and the checkpoint it continues or starts from (None: a
    run from scratch)."""

    cfg: RunConfig
    run_dir: Path  # where the run writes (a resumed run: the checkpoint's run directory)
    origin: Resume | Finetune | None = None

    @property
    def resume(self) -> Resume | None:
        return self.origin if isinstance(self.origin, Resume) else None


@dataclass
class RunParts:
    """Everything a trainer needs, built."""

    settings: Settings
    dist: ddp.DistInfo
    device: torch.device
    data: TrainingData
    model: torch.nn.Module
    precision: Precision
    translator: Translator
    optimizer: torch.optim.Optimizer
    schedule: Schedule
    log_handler: logging.Handler | None
    lock: RunLock | None  # rank 0's hold on the run directory
    started: float = 0.0  # unix time when start_run began
    data_seconds: float = 0.0  # preparing the corpus, tokenizer, train ids and valid split
    data_ready: float = 0.0  # unix time when that was done
    corpus: dict[str, Any] = field(default_factory=dict)  # what checkpoints record of the data


def compose_settings(
    cfg: RunConfig | DictConfig | Mapping[str, Any],
    run_dir: Path,
    explicit: Collection[str] | None,
) -> Settings:
    """The run's validated config: ``cfg`` alone, or merged with the checkpoint that
    ``resume=`` continues / ``finetune=`` starts from. ``explicit``: the keys given on the
    command line (None: every key counts as given)."""
    if isinstance(cfg, RunConfig) and not cfg.resume and not cfg.finetune:
        return Settings(cfg, run_dir)
    raw = settings_of(cfg)
    resume, finetune = raw.get("resume"), raw.get("finetune")
    check_exclusive(resume, finetune)
    ckpt_path, resumed = load_resume(resume, OUTPUTS, run_dir)
    origin: Resume | Finetune | None = None
    if ckpt_path is not None and resumed is not None:
        raw = resumed_settings(raw, resumed.config, explicit, str(ckpt_path), setting_keys)
        origin = Resume(ckpt_path, resumed)
        run_dir = run.path if (run := RunDir.of_checkpoint(ckpt_path)) else run_dir
    elif resume == "auto":
        log.info("resume=auto: no checkpoint under %s/; starting afresh", OUTPUTS)
    if finetune:
        source, start = load_resolved(finetune)
        raw = finetuned_settings(raw, start.config, explicit, str(source), setting_keys)
        log.info("finetune: a new run from the weights and tokenizer of %s", source)
        origin = Finetune(source, start)
    cfg = validate_config(raw)
    if isinstance(origin, Resume):  # a finished run is not resumed to test it again
        check_unfinished(cfg.trainer, origin.checkpoint, origin.path, str(resume))
    return Settings(cfg, run_dir, origin)


def start_run(
    cfg: RunConfig | DictConfig | Mapping[str, Any],
    run_dir: Path,
    explicit: Collection[str] | None = None,
) -> RunParts:
    """Compose and validate the settings, check the run directory and the corpus, then
    build data, model, precision, translator, optimizer and schedule."""
    started = time.time()
    settings = compose_settings(cfg, run_dir, explicit)
    device = resolve_device(settings.cfg.device)
    dist = ddp.init_distributed(device)
    device = ddp.local_device(device, dist)
    lock = None
    if dist.is_main:
        check_writable(settings.run_dir)
        lock = held(settings.run_dir) or acquire(settings.run_dir)  # held: train.py's claim
    try:
        if lock is not None and settings.resume is None:
            check_fresh(settings.run_dir)  # under the lock: no other start can slip in
        return _build(settings, dist, device, lock, run_dir, started)
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def _build(
    settings: Settings,
    dist: ddp.DistInfo,
    device: torch.device,
    lock: RunLock | None,
    own_dir: Path,
    started: float,
) -> RunParts:
    """Data, model, precision, translator, optimizer and schedule of a checked run."""
    cfg, tcfg = settings.cfg, settings.cfg.trainer
    check_splits(cfg.data, ("train", "valid", "test") if tcfg.test else ("train", "valid"))
    log_handler = _continue_log(settings.run_dir, own_dir, dist.is_main)
    seed_everything(cfg.seed)
    inherited = settings.origin.checkpoint.tokenizer if settings.origin is not None else None
    data_started = time.perf_counter()
    data = build_data(cfg.data, tcfg, cfg.seed, dist, inherited)
    data_seconds, data_ready = time.perf_counter() - data_started, time.time()
    tok = data.tokenizer
    model_cfg = plain(cfg.model)
    model = build_model(model_cfg, tok.src_vocab_size, tok.tgt_vocab_size, tok.joint)
    if isinstance(settings.origin, Finetune):
        load_weights(model, settings.origin.checkpoint.weights, settings.origin.path)
    model = model.to(device)
    precision = choose_precision(
        tcfg.precision,
        device,
        model,
        lambda: probe_batch(data.train, tcfg.max_tokens),
        Path(cfg.data.root),
        dist,
        model_cfg,
        tok.tgt_vocab_size,
        mode=tcfg.precision_probe,
        resumed=resumed_precision(settings.origin),
    )
    optimizer = build_optimizer(model.parameters(), tcfg)
    return RunParts(
        settings=settings,
        dist=dist,
        device=device,
        data=data,
        model=model,
        precision=precision,
        translator=Translator(model, tok, device, cfg.decode),
        optimizer=optimizer,
        schedule=build_schedule(optimizer, tcfg),
        log_handler=log_handler,
        lock=lock,
        started=started,
        data_seconds=data_seconds,
        data_ready=data_ready,
        corpus=data.corpus.fingerprint(),
    )


def resumed_precision(origin: Resume | Finetune | None) -> str | None:
    """The precision a resumed run's checkpoint trained in (None: a new run, a fine-tune,
    or a checkpoint that did not record it)."""
    if isinstance(origin, Resume) and origin.checkpoint.training is not None:
        return origin.checkpoint.training.precision
    return None


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
    handler = logging.FileHandler(RunDir(run_dir).train_log, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    logging.getLogger().addHandler(handler)
    log.info("this process's own directory: %s", new_dir)
    return handler
