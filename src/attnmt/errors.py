"""User-facing errors: entry points print ``str(err)`` and exit 2, without a traceback.

Raise these for bad input (files, config, checkpoints) with a message that names the
file, line or key and says what to do.
"""

from __future__ import annotations


class AttnmtError(Exception):
    """Base class of errors caused by the user's input, not by a bug."""


class DataError(AttnmtError):
    """A corpus file, recipe or data setting is unusable."""


class ConfigError(AttnmtError):
    """A config key is unknown, misspelt or has the wrong type or value."""


class CheckpointError(AttnmtError):
    """A checkpoint is missing, corrupt or incomplete."""


class WriteError(AttnmtError):
    """A file cannot be written (disk full, read-only filesystem, no permission)."""


class CommandInterrupted(AttnmtError):
    """Ctrl-C ended a command; the message says what it had written. Entry points print it
    and exit 130 (128 + SIGINT), as shells expect, without a traceback."""
