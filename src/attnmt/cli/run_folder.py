"""train.py's run folder, claimed before anything is written into it.

Hydra creates the run folder and opens its ``train.log`` before any task code runs (and by
default writes ``.hydra/`` there too), so a run that the trainer refused afterwards would
already have rewritten another run's files. train.py therefore works in three steps:

1. :class:`RunFolderCallback` (``hydra.callbacks`` in configs/train.yaml), before Hydra
   touches the folder: resolves ``hydra.run.dir`` from the same config object Hydra then
   uses (interpolations included) and checks that it can be written, that no live
   training holds it (attnmt.train.run_lock) and, for a new run, that it holds no other
   run's checkpoints. ``resume=`` without ``hydra.run.dir=`` runs in the resumed run's
   own folder (no new, empty one). A refusal is one line and exit status 2, with nothing
   written.
2. :func:`claimed`, in the task (a sweep's jobs too): the lock is taken and the
   checkpoints checked again under it, so of two runs started at once on one folder one
   is refused here; then ``.hydra/`` is written, whole or not at all, by the process that
   holds the folder, and only when a run starts there (``hydra.output_subdir: null``
   keeps Hydra from writing it); a resumed run keeps its own. The trainer goes on with
   the same lock (:func:`attnmt.train.run_lock.held`).
3. A sweep with failed jobs (reported one by one, the sweep going on) ends with exit
   status 2 naming them.

Under torchrun only rank 0 claims; every rank follows ``resume=`` to the same folder.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, read_write
from omegaconf.errors import OmegaConfBaseException

from attnmt.atomic import atomic_dir, check_writable_dir, write_error
from attnmt.checkpoint import auto_resume_candidates, resume_candidates
from attnmt.cli.common import run_cli
from attnmt.errors import CheckpointError, ConfigError, WriteError
from attnmt.run_dir import RunDir
from attnmt.train.run_lock import RunLock, acquire, check_free, check_fresh, held
from attnmt.train.setup import OUTPUTS


def is_main_rank() -> bool:
    """Whether this process is rank 0 of a torchrun job, or not under torchrun at all."""
    try:
        return int(os.environ.get("RANK") or 0) == 0
    except ValueError:
        return True  # the trainer names the bad RANK


def _no_resume(resume: Any) -> bool:
    return resume is None or str(resume) in ("", "null", "None")


def training_folder(resume: Any, output_dir: Path, outputs: Path = OUTPUTS) -> tuple[Path, bool]:
    """(the folder the training writes into, whether it continues a run there): the run
    folder of the checkpoint ``resume=`` names (``auto``: the newest run under ``outputs``
    but ``output_dir``), else ``output_dir`` (a new run, or a loose checkpoint file)."""
    if _no_resume(resume):
        return output_dir, False
    if str(resume) == "auto":
        found = auto_resume_candidates(outputs, exclude=output_dir)
    else:
        path = Path(str(resume))
        found = [path] if path.is_file() else resume_candidates(path) if path.is_dir() else []
        if not found:
            raise CheckpointError(
                f"resume={resume}: no checkpoint there; give a .pt file or a run folder "
                "holding checkpoints/last.pt (or resume=auto for the latest run)"
            )
    run = RunDir.of_checkpoint(found[0]) if found else None
    return (run.path, True) if run is not None else (output_dir, False)


def claim(folder: Path, fresh: bool) -> RunLock:
    """Hold ``folder``'s lock (kept if this process holds it already); a ``fresh`` run
    also refuses another run's checkpoints there, checked under the lock."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise write_error(folder, err) from None
    lock = held(folder) or acquire(folder)
    if fresh:
        try:
            check_fresh(folder)
        except BaseException:
            lock.release()
            raise
    return lock


def save_hydra_files(folder: Path, task_cfg: DictConfig, hydra_cfg: DictConfig) -> Path:
    """Write ``folder/.hydra/`` as Hydra would (config.yaml, hydra.yaml, overrides.yaml),
    all three or none: a full disk leaves the folder as it was (WriteError)."""
    texts = {
        "config.yaml": OmegaConf.to_yaml(task_cfg),
        "hydra.yaml": OmegaConf.to_yaml(hydra_cfg),
        "overrides.yaml": OmegaConf.to_yaml(hydra_cfg.hydra.overrides.task),
    }
    target = RunDir(folder).hydra
    with atomic_dir(target) as staging:
        for name, text in texts.items():
            (staging / name).write_text(text, encoding="utf-8")
    return target


@contextmanager
def claimed(task_cfg: DictConfig, output_dir: Path) -> Iterator[None]:
    """Hold the training's folder for the job (released at the end) and write its
    ``.hydra/`` when a run starts there; nothing is written when the claim is refused."""
    if not is_main_rank():
        yield
        return
    folder, continues = training_folder(task_cfg.get("resume"), output_dir)
    lock = claim(folder, fresh=not continues)
    try:
        if not continues:
            hydra_cfg = HydraConfig.instance().cfg
            assert isinstance(hydra_cfg, DictConfig)
            save_hydra_files(folder, task_cfg, hydra_cfg)
        yield
    finally:
        lock.release()


def _escaped(path: Path) -> str:
    """``path`` as an OmegaConf string value (``${`` would start an interpolation)."""
    return str(path).replace("${", "\\${")


def _resolved(config: DictConfig, key: str) -> tuple[str, Path]:
    """(the value as written, the folder it names) of ``hydra.run.dir`` /
    ``hydra.sweep.dir``, resolved as Hydra resolves it."""
    section = OmegaConf.to_container(config.hydra[key.split(".")[1]], resolve=False)
    assert isinstance(section, dict)
    raw = str(section["dir"])
    HydraConfig.instance().set_config(config)  # for ${hydra:...}, as run_job does
    try:
        return raw, Path(str(OmegaConf.select(config, key)))
    except OmegaConfBaseException as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"{key}={raw}: cannot resolve it ({first})") from None


def _given_on_command_line(config: DictConfig, key: str) -> bool:
    overrides = OmegaConf.to_container(config.hydra.overrides.hydra, resolve=False)
    assert isinstance(overrides, list)
    return any(str(o).lstrip("+~").partition("=")[0] == key for o in overrides)


def _writable(folder: Path, setting: str) -> None:
    """``folder`` can be created and written; a folder the check created is kept (Hydra
    creates it next, and a second train.py started at once on it may already have)."""
    try:
        check_writable_dir(folder, keep=True)
    except WriteError as err:
        advice = "" if ";" in str(err) else "; choose a writable folder"
        raise WriteError(f"{setting}: {err}{advice}") from None


def check_run_dir(config: DictConfig) -> None:
    """RUN mode, before Hydra writes: follow ``resume=`` to its run's folder (unless
    ``hydra.run.dir=`` is given); check the folder can be written and that the folder the
    training writes into is free (and, for a new run, holds no checkpoints)."""
    raw, run_dir = _resolved(config, "hydra.run.dir")
    setting = f"hydra.run.dir={raw}"
    resume = config.get("resume")
    folder, continues = training_folder(resume, run_dir)
    if continues and folder != run_dir and not _given_on_command_line(config, "hydra.run.dir"):
        with read_write(config), read_write(config.hydra):
            config.hydra.run.dir = _escaped(folder)  # the resumed run's log goes on there
            if str(resume) == "auto":
                config.resume = _escaped(folder)  # auto would pass over its own folder
        run_dir, setting = folder, f"resume={resume}"
    if not is_main_rank():
        return
    check_free(folder)
    if not continues:
        check_fresh(folder)
    _writable(run_dir, setting)  # last: it keeps the folder it creates


def check_sweep_dir(config: DictConfig) -> None:
    """MULTIRUN mode, before the sweeper creates ``hydra.sweep.dir``: it can be written."""
    raw, sweep_dir = _resolved(config, "hydra.sweep.dir")
    if is_main_rank():
        _writable(sweep_dir, f"hydra.sweep.dir={raw}")


def _failed(job_return: JobReturn) -> bool:
    """A job train.py reported as failed and went on from (it returned NaN)."""
    if job_return.status != JobStatus.COMPLETED:
        return False  # an exception: Hydra itself ends the sweep with it
    value = job_return.return_value
    return isinstance(value, float) and math.isnan(value)


class RunFolderCallback(Callback):
    """train.py's Hydra callback: the run folder's claim before Hydra writes into it, and
    a sweep's exit status (2 when any job failed)."""

    def __init__(self) -> None:
        self.jobs = 0
        self.failed: list[str] = []

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        run_cli(lambda: check_run_dir(config))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        run_cli(lambda: check_sweep_dir(config))

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if config.hydra.mode != RunMode.MULTIRUN:
            return
        self.jobs += 1
        if _failed(job_return):
            self.failed.append(f"job {config.hydra.job.num} ({config.hydra.runtime.output_dir})")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.failed:
            print(
                f"error: {len(self.failed)} of {self.jobs} sweep jobs failed: "
                f"{'; '.join(self.failed)}; each one's error is above and in its train.log",
                file=sys.stderr,
            )
            sys.exit(2)
