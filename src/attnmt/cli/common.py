"""What the thin entry points share: user errors become one line on stderr, not a traceback."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import TypeVar

from attnmt.errors import AttnmtError

T = TypeVar("T")


def log_to_stderr() -> None:
    """Plain INFO logging on stderr (evaluate/translate keep stdout for results)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[%(name)s] %(message)s")


SIGPIPE_EXIT = 141  # 128 + SIGPIPE, what a shell reports for ``yes | head -1``


def run_cli(fn: Callable[[], T]) -> T:
    """Call ``fn``; on an :class:`AttnmtError` print ``error: <message>`` and exit 2.

    A closed stdout (``translate.py ... | head``) ends the program quietly with status 141,
    as Unix filters do, instead of a BrokenPipeError traceback.
    """
    try:
        return fn()
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:
        # stdout's reader is gone: point fd 1 at /dev/null so the flush at exit is silent
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(SIGPIPE_EXIT)
