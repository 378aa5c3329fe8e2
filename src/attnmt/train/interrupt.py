"""Ctrl-C (SIGINT) and SIGTERM during training: finish the current update, then stop and save.

SIGTERM is what SLURM, ``docker stop``, systemd and ``kill`` send; both signals take one
path. A signal raised in the middle of an update (after ``optimizer.step`` but before the
step counter, sampler position and RNG snapshot move on) would save weights and position
that disagree, and a resumed run would repeat an update. :class:`StopFlag` turns the first
signal into a request that the loop reads between updates; a second one raises
KeyboardInterrupt at once (the last checkpoint written stays as it was). The process then
exits with 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), as shells expect;
:class:`TrainingInterrupted` carries that status and the checkpoint to resume from.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

log = logging.getLogger(__name__)

SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop training after the current update."""


def exit_code(signum: int) -> int:
    """The conventional exit status of a process ended by ``signum``: 128 + its number."""
    return 128 + int(signum)


class StopFlag:
    """Context manager: ``requested`` becomes True on the first SIGINT or SIGTERM, and
    ``signum`` says which; the second one raises KeyboardInterrupt.

    Outside the main thread (where Python cannot install signal handlers) it is inert
    and Ctrl-C raises KeyboardInterrupt as usual.
    """

    def __init__(self) -> None:
        self.requested = False
        self.signum: int = signal.SIGINT
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:  # the second signal: stop now
            raise KeyboardInterrupt
        self.requested, self.signum = True, signum
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        log.warning(
            "%s: stopping after this update and saving checkpoints/last.pt "
            "(send it again to abort at once)",
            name,
        )

    def __enter__(self) -> StopFlag:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()


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
        """One line for the user: the step, the checkpoint and how to continue."""
        if self.checkpoint is None:
            return f"interrupted at step {self.step} before any checkpoint was written"
        what = "saved" if self.saved else "kept (the interrupted update is lost)"
        return (
            f"interrupted at step {self.step}: {self.checkpoint} {what}; "
            f"continue with resume={self.checkpoint.parent.parent}"
        )
