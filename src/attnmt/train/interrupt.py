"""Ctrl-C (SIGINT) and SIGTERM during training: finish the current update, then stop and save.

SIGTERM is what SLURM, ``docker stop``, systemd and ``kill`` send; both signals take one
path. A signal raised in the middle of an update (after ``optimizer.step`` but before the
step counter, sampler position and RNG snapshot move on) would save weights and position
that disagree, and a resumed run would repeat an update. :class:`StopFlag` turns the first
signal into a request that the loop reads between updates; a second Ctrl-C raises
KeyboardInterrupt at once (the last checkpoint written stays as it was). A repeated SIGTERM
does not: SLURM signals every process of a job step and torchrun forwards its own SIGTERM to
its workers, so one stop request can reach a worker twice. The process then
exits with 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), as shells expect;
:class:`TrainingInterrupted` carries that status and the checkpoint to resume from.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from attnmt.run_dir import RunDir

log = logging.getLogger(__name__)

SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop training after the current update."""


def exit_code(signum: int) -> int:
    """The conventional exit status of a process ended by ``signum``: 128 + its number."""
    return 128 + int(signum)


class StopFlag:
    """Context manager: ``requested`` becomes True on the first SIGINT or SIGTERM, and
    ``signum`` says which; a second SIGINT raises KeyboardInterrupt, a second SIGTERM is
    ignored (the sender's SIGKILL ends the process if it must).

    The handler only records; :meth:`poll`, called where the loop reads the flag, logs
    what it recorded. A handler that logged itself could land inside a log handler's own
    write and re-enter it (logging then prints "--- Logging error ---" and a traceback).
    Outside the main thread (where Python cannot install signal handlers) it is inert
    and Ctrl-C raises KeyboardInterrupt as usual. ``with`` blocks may nest: the outermost
    installs the handlers and restores the previous ones.
    """

    def __init__(self) -> None:
        self.requested = False
        self.signum: int = signal.SIGINT
        self._previous: dict[int, Any] = {}
        self._unlogged: list[str] = []
        self._depth = 0  # nested ``with``: the outermost installs and restores

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested and signum == signal.SIGTERM:  # a copy (SLURM and torchrun)
            self._unlogged.append("SIGTERM again: already stopping after this update")
            return
        if self.requested:  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.requested, self.signum = True, signum
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        self._unlogged.append(
            f"{name}: stopping after this update and saving checkpoints/last.pt "
            "(Ctrl-C, SIGINT, now aborts at once)"
        )

    def poll(self) -> bool:
        """``requested``, after logging (once each) the messages the handler recorded."""
        while self._unlogged:
            log.warning(self._unlogged.pop(0))
        return self.requested

    def __enter__(self) -> StopFlag:
        self._depth += 1
        if self._depth == 1 and threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._depth -= 1
        if self._depth == 0:
            for sig, previous in self._previous.items():
                signal.signal(sig, previous)
            self._previous.clear()
        self.poll()  # a signal after the loop's last poll is still logged


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM ended training; ``checkpoint`` is what ``resume=`` continues from
    (or None); ``exit_code`` is 128 + the signal's number. ``main_host`` is set in the
    other ranks of a distributed job: rank 0 on that host wrote (or kept) the checkpoint."""

    def __init__(
        self,
        step: int,
        checkpoint: Path | None,
        saved: bool,
        signum: int = signal.SIGINT,
        main_host: str | None = None,
    ) -> None:
        super().__init__(step, checkpoint)
        self.step, self.checkpoint, self.saved = step, checkpoint, saved
        self.exit_code = exit_code(signum)
        self.main_host = main_host

    def message(self) -> str:
        """One line for the user: the step, the checkpoint and how to continue."""
        if self.main_host is not None:
            what = "saved" if self.saved else "kept"
            return (
                f"interrupted at step {self.step} with every rank: rank 0, on host "
                f"{self.main_host}, {what} checkpoints/last.pt in its run folder and "
                "printed how to continue"
            )
        if self.checkpoint is None:
            return f"interrupted at step {self.step} before any checkpoint was written"
        what = "saved" if self.saved else "kept (the interrupted update is lost)"
        return (
            f"interrupted at step {self.step}: {self.checkpoint} {what}; "
            f"continue with resume={self.checkpoint.parent.parent}"
        )


class FinalTestInterrupted(TrainingInterrupted):
    """Ctrl-C or SIGTERM during the final test decoding: training is complete and its
    checkpoints stay; the message lists them and how to redo the test."""

    def __init__(self, step: int, run_dir: Path, signum: int = signal.SIGINT) -> None:
        last = RunDir(run_dir).last
        super().__init__(step, last if last.is_file() else None, True, signum)
        self.run_dir = run_dir

    def message(self) -> str:
        ckpt_dir = RunDir(self.run_dir).checkpoints
        files = sorted(p.name for p in ckpt_dir.glob("*.pt")) if ckpt_dir.is_dir() else []
        kept = f"checkpoints kept in {ckpt_dir}: {', '.join(files)}" if files else "no checkpoint"
        return (
            f"interrupted during the final test decoding (training finished at step "
            f"{self.step}); {kept}; redo the test with: python evaluate.py "
            f"ckpt={self.run_dir} split=test"
        )


class Interrupted(KeyboardInterrupt):
    """A signal turned into KeyboardInterrupt by :func:`signals_interrupt`; ``signum``
    says which (so the exit status is 128 + it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """While active (main thread only), SIGTERM raises :class:`Interrupted` as Ctrl-C
    raises KeyboardInterrupt, instead of ending the process without a word."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted_exit_code(err: KeyboardInterrupt) -> int:
    """128 + the signal that raised ``err`` (SIGINT for a plain KeyboardInterrupt)."""
    return exit_code(getattr(err, "signum", signal.SIGINT))


def stop_under_way(err: BaseException) -> TrainingInterrupted | None:
    """``err`` when it is a training stop, else the one it interrupted, if any: a signal
    that arrives while a :class:`TrainingInterrupted` is on its way out (the process
    group's last barrier, the run folder's release) raises inside its handling, so it is
    in ``err``'s context chain. Its message, not "interrupted before training started",
    is the one that is true."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, TrainingInterrupted):
            return cause
        seen.add(id(cause))
        cause = cause.__context__
    return None
