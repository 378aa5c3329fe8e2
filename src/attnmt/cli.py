"""What the thin entry points share: user errors become one line on stderr, not a traceback."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TypeVar

from attnmt.errors import AttnmtError

T = TypeVar("T")


def log_to_stderr() -> None:
    """Plain INFO logging on stderr (evaluate/translate keep stdout for results)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[%(name)s] %(message)s")


def run_cli(fn: Callable[[], T]) -> T:
    """Call ``fn``; on an :class:`AttnmtError` print ``error: <message>`` and exit 2."""
    try:
        return fn()
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
