"""Start a command that stops when the runner that started it dies.

    python -m experiments.die_with_parent PID CMD [ARG ...]

Asks Linux to send this process SIGTERM when the thread that started it ends (``prctl
PR_SET_PDEATHSIG``), then becomes CMD (``exec``: the same pid, the request kept). The
experiment runners (experiments/sweep.py, experiments/results_run.py) start train.py through
it: a runner killed outright (SIGKILL, the OOM killer) would otherwise leave train.py
training on unwatched, holding its run folder's lock; now it gets the SIGTERM a stopped
runner sends, saves ``last.pt`` and exits, and the next runner redoes or resumes the run.
PID is the runner's pid: if the runner is already gone when the request is made (the race
between its start and its death), CMD is not started and the exit status is 143. Where
``prctl`` is not available (not Linux) CMD starts as is.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Sequence

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def command(cmd: Sequence[str]) -> list[str]:
    """``cmd`` started through this module by the calling process (run it with cwd = the
    repository root, where ``experiments`` is importable)."""
    return [sys.executable, "-m", "experiments.die_with_parent", str(os.getpid()), *cmd]


def request_parent_death_signal(sig: int = signal.SIGTERM) -> bool:
    """Ask for ``sig`` when the parent ends; False where the kernel call is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or not args[0].isdigit():
        print("usage: python -m experiments.die_with_parent PID CMD [ARG ...]", file=sys.stderr)
        return 2
    parent, cmd = int(args[0]), args[1:]
    if request_parent_death_signal() and os.getppid() != parent:
        return 128 + signal.SIGTERM  # the runner died before the request: do not start
    os.execvp(cmd[0], cmd)
    return 0  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main())
