"""Atomic writes: the one place a file is replaced (temporary file, fsync, rename).

    with atomic_path(target) as tmp:      # any writer that wants a path (savefig, spm, ...)
        write_something(tmp)
    write_text(path, text) / write_bytes(path, data) / write_json(path, obj)
    with atomic_dir(target, complete=...) as staging:   # a directory (caches, exports)
        fill(staging)

A crash at any point leaves either the old file or the new one, never half of one; the
temporary file is ``.<name>.<random>.tmp`` beside the target (same filesystem, so the
rename is atomic) and is removed when the write fails. :func:`remove_stale_tmp` clears the
ones a killed process left behind. A full disk or a read-only filesystem ends in a
:class:`~attnmt.errors.WriteError` naming the path and what to do; the old file stays.
A directory is staged as ``.<name>.<random>.tmpdir``; :func:`atomic_dir` clears the
staging directories of the same target that killed processes left (untouched for
:data:`STALE_DIR_AGE_S`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from attnmt.errors import WriteError

log = logging.getLogger(__name__)

STALE_TMP_AGE_S = 10.0
"""A younger temporary file may still be being written by a live process."""
STALE_DIR_AGE_S = 3600.0
"""A staging directory with anything in it changed more recently may still be being filled
(an extraction or an encoding writes steadily, but a process may pause between files)."""
WRITE_CHECK_TRIES = 3
"""How often the write check creates again a new folder that vanished before its probe."""

_ADVICE = {
    errno.ENOSPC: "no space left on device; free some space or write elsewhere",
    errno.EDQUOT: "disk quota exceeded; free some space or write elsewhere",
    errno.EROFS: "read-only filesystem; choose a writable location",
    errno.EACCES: "permission denied; choose a writable location",
    errno.EPERM: "permission denied; choose a writable location",
}


def write_error(
    path: str | Path, err: OSError, outcome: str = "nothing there was changed"
) -> WriteError:
    """One line naming ``path``, the cause, what to do and the ``outcome`` (by default:
    the old file, if any, is kept)."""
    advice = _ADVICE.get(err.errno or 0, err.strerror or str(err))
    return WriteError(f"cannot write {path}: {advice} ({outcome})")


def is_tmp_name(name: str) -> bool:
    """Whether ``name`` is one of :func:`atomic_path`'s temporary names."""
    return name.startswith(".") and name.endswith(".tmp")


def _default_mode(path: Path) -> int:
    """The mode the target would get from a plain ``open``: the old file's, or 0o666 less
    the umask (mkstemp's own 0o600 would hide results from the user's group)."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable (best effort: some filesystems refuse directory fsync)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | Path, fsync: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on a clean exit it replaces ``path``.

    The caller writes the temporary file (by any means); on an exception it is removed and
    ``path`` is left as it was. ``OSError`` from the filesystem becomes :class:`WriteError`.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, _default_mode(path))
        os.close(fd)
    except OSError as err:
        raise write_error(path, err) from None
    tmp = Path(name)
    try:
        yield tmp
        if fsync:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise write_error(path, err) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        _fsync_dir(path.parent)


def check_writable_dir(path: str | Path, setting: str = "", keep: bool = False) -> Path:
    """Before any long work that would write into ``path``: create it (with its parents),
    write and remove a small file in it, and remove again the directories this created;
    :class:`WriteError` naming ``path`` (and the ``setting`` that chooses it, if given)
    when that fails (read-only filesystem, full disk, no permission).

    ``keep``: a check that passes keeps the directories it created, for a caller that
    creates them next anyway (Hydra's run folder). Another process may have created the
    same folder meanwhile and be about to open a file in it; removing it then would pull
    the folder from under that process.

    A folder that vanishes between its creation and the probe (another start's check of the
    same new folder removing what it created) is created again, up to ``WRITE_CHECK_TRIES``
    times: that is a race between two checks, not an unwritable folder."""
    path = Path(path)
    created = [p for p in [path, *path.parents] if not p.exists()]
    passed = False
    try:
        for tries_left in reversed(range(WRITE_CHECK_TRIES)):
            path.mkdir(parents=True, exist_ok=True)
            try:
                fd, name = tempfile.mkstemp(prefix=".write-check.", suffix=".tmp", dir=path)
                break
            except FileNotFoundError:
                if not tries_left:
                    raise
        try:
            os.write(fd, b"attnmt write check\n")
        finally:
            os.close(fd)
            os.unlink(name)
        passed = True
    except OSError as err:
        message = str(write_error(path, err)).replace(" (nothing there was changed)", "")
        raise WriteError(f"{message}{f' ({setting})' if setting else ''}") from None
    finally:
        for directory in [] if passed and keep else created:  # deepest first
            try:
                directory.rmdir()
            except OSError:
                break
    return path


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path: str | Path, text: str) -> Path:
    """Replace ``path`` with ``text`` (UTF-8, ``\\n`` line ends) atomically."""
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return Path(path)


def write_json(path: str | Path, obj: Any, indent: int | None = 2) -> Path:
    """Replace ``path`` with ``obj`` as JSON (UTF-8, trailing newline) atomically."""
    return write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def remove_stale_tmp(
    directory: str | Path, min_age_s: float = STALE_TMP_AGE_S, legacy: Sequence[str] = ()
) -> list[Path]:
    """Delete the temporary files (``.<name>.<random>.tmp``) that killed writes left in
    ``directory`` once they are ``min_age_s`` old; logs and returns them. ``legacy``: name
    prefixes of older temporary names to clear as well (e.g. ``".best.json."``)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    removed: list[Path] = []
    now = time.time()
    for path in sorted(directory.iterdir()):
        if not (is_tmp_name(path.name) or path.name.startswith(tuple(legacy))):
            continue
        try:
            if not path.is_file() or now - path.stat().st_mtime < min_age_s:
                continue
            path.unlink()
        except OSError as err:
            log.warning("cannot remove stale temporary file %s: %s", path, err)
            continue
        log.info("removed %s, a temporary file left by an interrupted write", path)
        removed.append(path)
    return removed


def _staging_name(name: str) -> re.Pattern[str]:
    """:func:`atomic_dir`'s staging names for target ``name``:
    ``.<name>.<host tag>-<pid>-<4 hex>.tmpdir``, and the older ``.<name>.<8 random>.tmpdir``
    and ``.<name>.<8 random>`` (``mkdtemp``) that carry no owner."""
    return re.compile(
        rf"\.{re.escape(name)}\.(?:(?P<host>[0-9a-f]{{8}})-(?P<pid>\d+)-[0-9a-f]{{4}}\.tmpdir"
        rf"|[a-z0-9_]{{8}}(?:\.tmpdir)?)"
    )


def host_tag() -> str:
    """8 hex digits naming this host in staging names (a hash: any hostname is safe)."""
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner_gone(match: re.Match[str]) -> bool:
    """The staging directory's owner ran on this host and has ended."""
    pid = match.group("pid")
    return pid is not None and match.group("host") == host_tag() and not process_alive(int(pid))


def _newest_mtime(directory: Path) -> float:
    """The latest modification time of ``directory`` and of everything under it."""
    newest = directory.stat().st_mtime
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            try:
                newest = max(newest, os.lstat(os.path.join(root, name)).st_mtime)
            except OSError:
                continue
    return newest


def remove_stale_staging(path: str | Path, min_age_s: float = STALE_DIR_AGE_S) -> list[Path]:
    """Delete the staging directories that killed processes left for ``path`` (see
    :func:`atomic_dir`): at once when the owner named in the directory ran on this host and
    has ended; otherwise (another host, an older name) once nothing in it has changed for
    ``min_age_s``. Logs and returns them."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    pattern, now = _staging_name(path.name), time.time()
    removed: list[Path] = []
    for staging in sorted(path.parent.iterdir()):
        match = pattern.fullmatch(staging.name)
        if match is None or staging.is_symlink():
            continue
        try:
            if not staging.is_dir():
                continue
            if not _owner_gone(match) and now - _newest_mtime(staging) < min_age_s:
                continue
            shutil.rmtree(staging)
        except OSError as err:
            log.warning("cannot remove stale staging directory %s: %s", staging, err)
            continue
        log.info("removed %s, a staging directory left by an interrupted write", staging)
        removed.append(staging)
    return removed


def _remove(path: Path) -> None:
    """Remove whatever is at ``path`` (directory tree, file or link); absent is fine."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _new_staging(path: Path) -> Path:
    """A new empty ``.<name>.<host tag>-<pid>-<4 hex>.tmpdir`` beside ``path`` (the owner in
    the name lets the next start remove it at once if this process is killed). ``os.mkdir``
    applies the umask (``mkdtemp``'s private 0700 would hide a shared cache)."""
    owner = f"{host_tag()}-{os.getpid()}"
    for _ in range(100):
        staging = path.parent / f".{path.name}.{owner}-{secrets.token_hex(2)}.tmpdir"
        try:
            staging.mkdir()
        except FileExistsError:
            continue
        return staging
    raise FileExistsError(errno.EEXIST, "no free staging directory name", str(path))


@contextmanager
def atomic_dir(path: str | Path, complete: Callable[[Path], bool] | None = None) -> Iterator[Path]:
    """Yield an empty staging directory beside ``path``; on a clean exit it becomes ``path``.

    Rule, on a clean exit: if ``complete(path)`` holds (another process finished the same
    directory first) the staging directory is discarded and ``path`` kept; otherwise
    whatever is at ``path`` (an old or damaged entry) is removed and the staging directory
    renamed into its place. A rename that loses a race to a process that completed
    ``path`` meanwhile is fine. On an exception the staging directory is removed and
    ``path`` left as it was. Stale staging directories of ``path`` are cleared first
    (:func:`remove_stale_staging`). ``OSError`` becomes :class:`WriteError`.
    """
    path = Path(path)
    done = complete or (lambda _: False)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(path)
        staging = _new_staging(path)
    except OSError as err:
        raise write_error(path, err) from None
    try:
        yield staging
        if not done(path):
            _remove(path)
            try:
                os.replace(staging, path)
            except OSError:
                if not done(path):
                    raise
    except OSError as err:
        raise write_error(path, err) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _fsync_dir(path.parent)
