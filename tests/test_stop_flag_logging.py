"""StopFlag's handler records and never logs: a signal that lands while a log handler is
writing must not re-enter it. The messages come out once, at the next ``poll`` (or when the
flag's block ends)."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator

import pytest

from attnmt.train.interrupt import StopFlag

LOGGER = "attnmt.train.interrupt"


class _SignalsWhileWriting(logging.Handler):
    """Sends SIGTERM to this process from inside ``emit`` of a record saying "trigger", and
    notes any record that arrives while an ``emit`` is still running (a re-entered write)."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []
        self.reentered: list[str] = []
        self._writing = False

    def emit(self, record: logging.LogRecord) -> None:
        if self._writing:
            self.reentered.append(record.getMessage())
            return
        self._writing = True
        try:
            if record.getMessage() == "trigger":
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(1000):  # the handler runs between these bytecodes
                    pass
            self.messages.append(record.getMessage())
        finally:
            self._writing = False


@pytest.fixture
def handler() -> Iterator[_SignalsWhileWriting]:
    h = _SignalsWhileWriting()
    logger = logging.getLogger(LOGGER)
    logger.addHandler(h)
    try:
        yield h
    finally:
        logger.removeHandler(h)


def test_sigterm_inside_a_log_write_is_logged_after_it_once(handler: _SignalsWhileWriting) -> None:
    with StopFlag() as flag:
        logging.getLogger(LOGGER).warning("trigger")
        assert flag.requested and flag.signum == signal.SIGTERM
        assert handler.reentered == []
        assert handler.messages == ["trigger"]  # recorded, not yet logged
        assert flag.poll() is True
        assert flag.poll() is True  # a second poll logs nothing new
    assert handler.messages == [
        "trigger",
        "SIGTERM: stopping after this update and saving checkpoints/last.pt "
        "(Ctrl-C, SIGINT, now aborts at once)",
    ]


def test_a_repeated_sigterm_is_logged_when_the_block_ends(handler: _SignalsWhileWriting) -> None:
    with StopFlag() as flag:
        os.kill(os.getpid(), signal.SIGTERM)
        assert flag.poll()
        logging.getLogger(LOGGER).warning("trigger")  # the copy lands inside this write
        assert handler.reentered == []
    assert handler.messages[-1] == "SIGTERM again: already stopping after this update"
    assert sum("SIGTERM again" in m for m in handler.messages) == 1


def test_a_second_ctrl_c_still_aborts_at_once() -> None:
    with StopFlag() as flag, pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        assert flag.poll() and flag.signum == signal.SIGINT
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass


def test_nested_blocks_keep_the_handlers_until_the_outermost_ends() -> None:
    # loop.train holds the trainer's flag around Trainer.run's own block, so a SIGTERM copy
    # that reaches a rank waiting in the last barrier is one stop, not a new KeyboardInterrupt
    before = signal.getsignal(signal.SIGTERM)
    before_int = signal.getsignal(signal.SIGINT)  # SIG_IGN when pytest runs in a background job
    flag = StopFlag()
    with flag:
        with flag:
            os.kill(os.getpid(), signal.SIGTERM)
            assert flag.poll() and flag.signum == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) == flag._handle  # the inner end: still ours
        os.kill(os.getpid(), signal.SIGTERM)  # the copy, after Trainer.run's block: no raise
        for _ in range(1000):
            pass
    assert signal.getsignal(signal.SIGTERM) == before
    assert signal.getsignal(signal.SIGINT) is before_int
    with flag:  # and it installs again
        assert signal.getsignal(signal.SIGTERM) == flag._handle
    assert signal.getsignal(signal.SIGTERM) == before
