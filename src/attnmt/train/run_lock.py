"""A run directory belongs to one run: the lock a training process holds for its life.

``<run>/.lock`` is created exclusively (hard-linked from a draft, which fails if it exists)
and names its process: pid, host, start time (``/proc/<pid>/stat``) and boot id. A second
process on the same directory fails at once naming the owner and the file to delete if that
owner is gone. A lock whose process has ended is taken over with a warning: its pid is not
alive, or now belongs to another process (another start time: a container's PID 1 that was
killed and started again), or the machine has restarted since (another boot id). A new run
also refuses a directory that already holds another run's checkpoints.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnmt.atomic import process_alive, write_error
from attnmt.errors import ConfigError
from attnmt.run_dir import BEST_JSON, LOCK, RunDir

log = logging.getLogger(__name__)
LOCK_NAME = LOCK
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (field 22 of
    ``/proc/<pid>/stat``); None where there is no such process or no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
        return int(stat.rpartition(")")[2].split()[19])  # fields after "(comm)" start at 3
    except (OSError, ValueError, IndexError):
        return None


def boot_id() -> str | None:
    """This boot of the machine (None without /proc)."""
    try:
        return BOOT_ID.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def owner_record(pid: int | None = None) -> dict[str, Any]:
    """What a lock says about process ``pid`` (default: this one)."""
    pid = os.getpid() if pid is None else pid
    return {
        "pid": pid,
        "host": socket.gethostname(),
        "since": time.time(),
        "start": start_time(pid),
        "boot": boot_id(),
    }


def _state(owner: dict[str, Any]) -> str:
    """``mine`` (this very process), ``live`` (another live process on this host),
    ``elsewhere`` (a process on another host: not checkable here) or ``gone``."""
    pid, host = int(owner["pid"]), str(owner["host"])
    if host != socket.gethostname():
        return "elsewhere"
    boot = owner.get("boot")
    if boot is not None and boot_id() not in (None, boot):
        return "gone"  # written before the machine restarted
    if not process_alive(pid):
        return "gone"
    recorded, now = owner.get("start"), start_time(pid)
    if recorded is not None and now is not None:
        if int(recorded) != now:
            return "gone"  # the pid now belongs to another process
        return "mine" if pid == os.getpid() else "live"
    if pid == os.getpid():  # this process writes its start time wherever /proc has one
        return "mine" if recorded is None and now is None else "gone"
    return "live"  # a lock without a start time: the pid alone says it may be alive


def _read(path: Path) -> dict[str, Any] | None:
    """The lock's owner; None when there is no lock; {} when it cannot be read."""
    try:
        owner = json.loads(path.read_text(encoding="utf-8"))
        int(owner["pid"]), str(owner["host"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return owner if isinstance(owner, dict) else {}


@dataclass
class RunLock:
    """The held lock of one run directory; :meth:`release` removes it."""

    path: Path

    def release(self) -> None:
        """Remove the lock if it is still this process's."""
        owner = _read(self.path)
        if owner and _state(owner) == "mine":
            self.path.unlink(missing_ok=True)


def acquire(run_dir: Path) -> RunLock:
    """Hold ``run_dir``'s lock, or fail naming the process that holds it.

    The lock appears with its content in one step (written beside it, then hard-linked
    to its name, which fails if it exists), so no reader ever sees an empty lock.
    """
    path = run_dir / LOCK_NAME
    draft = run_dir / f".lock.{os.getpid()}.draft"
    try:
        draft.write_text(json.dumps(owner_record()), encoding="utf-8")
    except OSError as err:
        draft.unlink(missing_ok=True)
        raise write_error(path, err) from None
    try:
        for _ in range(3):  # the later tries follow a stale lock's removal
            try:
                os.link(draft, path)
            except FileExistsError:
                _take_over_if_stale(path)
                continue
            return RunLock(path)
    finally:
        draft.unlink(missing_ok=True)
    raise ConfigError(f"{path}: could not take the run folder's lock; try again")


def held(run_dir: Path) -> RunLock | None:
    """``run_dir``'s lock when this very process holds it (train.py claims the folder
    before Hydra writes into it; the trainer then goes on with that lock), else None."""
    path = run_dir / LOCK_NAME
    owner = _read(path)
    return RunLock(path) if owner and _state(owner) == "mine" else None


def _since(owner: dict[str, Any]) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(owner.get("since") or 0)))
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"


def _refusal(path: Path, owner: dict[str, Any]) -> ConfigError | None:
    """The error naming the live owner of lock ``path`` (and how to clear it if that
    process is gone after all); None when the lock is stale."""
    state = _state(owner) if owner else "gone"  # unreadable: treated as stale
    clear = f"If no training runs there any more, delete {path} and start again"
    since = _since(owner)
    if state in ("live", "mine"):
        return ConfigError(
            f"run folder {path.parent}: another training (pid {owner['pid']} on "
            f"{owner['host']}, since {since}) is using it; wait for it to end, or train in "
            f"another folder. {clear}"
        )
    if state == "elsewhere":
        return ConfigError(
            f"run folder {path.parent}: a training on host {owner['host']} (pid "
            f"{owner['pid']}, since {since}) holds it; wait for it to end, or train in "
            f"another folder. {clear}"
        )
    return None


def _take_over_if_stale(path: Path) -> None:
    """Remove a lock whose process is gone; else the error naming its owner."""
    owner = _read(path)
    if owner is None:
        return  # released meanwhile
    refusal = _refusal(path, owner)
    if refusal is not None:
        raise refusal
    _remove_stale(path, owner)


def check_free(run_dir: Path) -> None:
    """Before claiming ``run_dir``: the error :func:`acquire` would give if a live process
    holds it (a stale lock is left for :func:`acquire` to take over)."""
    path = run_dir / LOCK_NAME
    owner = _read(path)
    refusal = None if owner is None else _refusal(path, owner)
    if refusal is not None:
        raise refusal


def _remove_stale(path: Path, stale: dict[str, Any]) -> None:
    """Remove ``path`` if it still holds the ``stale`` owner: it is renamed aside first and
    put back if another process replaced it meanwhile (so two processes taking over one
    stale lock never remove each other's fresh one)."""
    aside = path.with_name(f"{LOCK_NAME}.{os.getpid()}-{secrets.token_hex(2)}.stale")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return
    if _read(aside) == stale:
        log.warning(
            "%s: a lock left by process %s, which has ended; taking it over",
            path,
            stale.get("pid", "?"),
        )
    else:
        with contextlib.suppress(FileExistsError):
            os.link(aside, path)  # someone else's fresh lock: theirs again
    aside.unlink(missing_ok=True)


def live_owner(run_dir: Path) -> str | None:
    """ "pid P on HOST" when a live process on this host (or any process on another host)
    holds ``run_dir``'s lock; None when the directory is free or its owner has ended."""
    owner = _read(run_dir / LOCK_NAME)
    if not owner or _state(owner) == "gone":
        return None
    return f"pid {owner['pid']} on {owner['host']}"


def check_fresh(run_dir: Path) -> None:
    """A new run refuses a directory that holds another run's checkpoints."""
    ckpts = RunDir(run_dir).checkpoints
    held = sorted(p.name for p in ckpts.glob("*") if p.suffix == ".pt" or p.name == BEST_JSON)
    if held:
        raise ConfigError(
            f"run folder {run_dir} already holds a run's checkpoints "
            f"({', '.join(held[:3])}{', ...' if len(held) > 3 else ''}); continue that run "
            f"with resume={run_dir}, or start the new one in another folder"
        )
