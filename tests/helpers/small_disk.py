"""A real small filesystem (tmpfs) for full-disk tests; skipped where mount is refused."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_disk(path: Path, size: str = "1m") -> Iterator[Path]:
    """Mount a ``size`` tmpfs at ``path`` (created) for the block; pytest.skip where this
    process may not mount one (not root, no CAP_SYS_ADMIN)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        done = subprocess.run(["umount", str(path)], capture_output=True)
        if done.returncode != 0:  # a file left open there: detach it anyway, then fail
            subprocess.run(["umount", "-l", str(path)], capture_output=True)
        assert done.returncode == 0, done.stderr.decode()


def fill(path: Path) -> Path:
    """Write ``path`` until its filesystem is full; the file."""
    chunk = b"x" * 4096
    with path.open("wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError as err:
                assert err.errno == errno.ENOSPC, err
                break
        os.fsync(f.fileno())
    return path
