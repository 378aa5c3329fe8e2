"""A run directory belongs to one run: the lock a training process holds for its life.

``<run>/.lock`` is created exclusively (``O_CREAT | O_EXCL``) and holds the owner's pid,
host and start time. A second process on the same directory fails at once naming the
owner; a lock whose process is gone (same host, pid not alive) is taken over with a
warning. A new run also refuses a directory that already holds another run's checkpoints.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from attnmt.atomic import process_alive
from attnmt.errors import ConfigError

log = logging.getLogger(__name__)
LOCK_NAME = ".lock"


@dataclass
class RunLock:
    """The held lock of one run directory; :meth:`release` removes it."""

    path: Path

    def release(self) -> None:
        """Remove the lock if it is still this process's."""
        try:
            owner = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname():
            self.path.unlink(missing_ok=True)


def acquire(run_dir: Path) -> RunLock:
    """Hold ``run_dir``'s lock, or fail naming the process that holds it.

    The lock appears with its content in one step (written beside it, then hard-linked
    to its name, which fails if it exists), so no reader ever sees an empty lock.
    """
    path = run_dir / LOCK_NAME
    me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
    draft = run_dir / f".lock.{os.getpid()}.draft"
    draft.write_text(json.dumps(me), encoding="utf-8")
    try:
        for _ in range(2):  # the second try follows a stale lock's removal
            try:
                os.link(draft, path)
            except FileExistsError:
                _take_over_if_stale(path)
                continue
            return RunLock(path)
    finally:
        draft.unlink(missing_ok=True)
    raise ConfigError(f"{path}: could not take the run directory's lock; try again")


def _take_over_if_stale(path: Path) -> None:
    """Remove a lock whose process is gone; else the error naming its owner."""
    try:
        owner = json.loads(path.read_text(encoding="utf-8"))
        pid, host = int(owner["pid"]), str(owner["host"])
    except FileNotFoundError:
        return  # released meanwhile
    except (OSError, ValueError, KeyError, TypeError):
        owner, pid, host = {}, -1, ""  # unreadable: treated as stale
    if host == socket.gethostname() and process_alive(pid):
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner.get("since", 0)))
        raise ConfigError(
            f"hydra.run.dir={path.parent}: another training (pid {pid} on {host}, since "
            f"{since}) is using this run directory; wait for it to end, or give this run "
            "its own directory (drop hydra.run.dir= for a fresh one)"
        )
    if host and host != socket.gethostname():
        raise ConfigError(
            f"hydra.run.dir={path.parent}: a training on host {host} (pid {pid}) holds this "
            f"run directory ({path}); if it has ended, delete that file, else give this run "
            "its own directory"
        )
    log.warning("%s: a lock left by process %s, which has ended; taking it over", path, pid)
    path.unlink(missing_ok=True)


def live_owner(run_dir: Path) -> str | None:
    """ "pid P on HOST" when a live process on this host (or any process on another host)
    holds ``run_dir``'s lock; None when the directory is free or its owner has ended."""
    try:
        owner = json.loads((run_dir / LOCK_NAME).read_text(encoding="utf-8"))
        pid, host = int(owner["pid"]), str(owner["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if host != socket.gethostname() or process_alive(pid):
        return f"pid {pid} on {host}"
    return None


def check_fresh(run_dir: Path) -> None:
    """A new run refuses a directory that holds another run's checkpoints."""
    ckpts = run_dir / "checkpoints"
    held = sorted(p.name for p in ckpts.glob("*") if p.suffix == ".pt" or p.name == "best.json")
    if held:
        raise ConfigError(
            f"hydra.run.dir={run_dir}: this directory already holds a run's checkpoints "
            f"({', '.join(held[:3])}{', ...' if len(held) > 3 else ''}); continue that run "
            f"with resume={run_dir}, or start a new one in another directory (drop "
            "hydra.run.dir= for a fresh one)"
        )
