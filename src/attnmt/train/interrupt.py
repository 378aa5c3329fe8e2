"""Ctrl-C during training: finish the current update, then stop and save.

A KeyboardInterrupt raised in the middle of an update (after ``optimizer.step`` but before
the step counter, sampler position and RNG snapshot move on) would save weights and
position that disagree, and a resumed run would repeat an update. :class:`StopFlag`
turns the first SIGINT into a request that the loop reads between updates; a second
SIGINT raises KeyboardInterrupt at once (the last checkpoint written stays as it was).
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType, TracebackType
from typing import Any

log = logging.getLogger(__name__)


class StopFlag:
    """Context manager: ``requested`` becomes True on the first SIGINT.

    Outside the main thread (where Python cannot install signal handlers) it is inert
    and Ctrl-C raises KeyboardInterrupt as usual.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None
        self._installed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:  # the second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.requested = True
        log.warning("Ctrl-C: stopping after this update (press Ctrl-C again to abort at once)")

    def __enter__(self) -> StopFlag:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
