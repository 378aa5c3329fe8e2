"""Appending lines to a file so that it never holds half of one.

``os.write`` may write less than it was given: a disk that fills up in the middle of a
write returns the bytes it took, and the next write fails with ENOSPC. :func:`write_lines`
loops until every byte is written; when a write fails, what reached a regular file past
the last whole line of ``data`` is cut off again (``os.ftruncate``), so the file ends in a
whole line and the next append starts a line of its own. :class:`PartialWrite` says how
many of ``data``'s lines reached the file whole, and whether part of the next one is left
(a pipe cannot be cut; a cut can itself fail).
"""

from __future__ import annotations

import errno
import os
import stat


class PartialWrite(Exception):
    """A write of whole lines failed: ``lines`` of them reached the output whole;
    ``torn``: part of the next one is there too. ``error`` is the OSError that ended it."""

    def __init__(self, error: OSError, lines: int, torn: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.lines = lines
        self.torn = torn


def _cut(fd: int, extra: int) -> bool:
    """Remove the last ``extra`` bytes written through ``fd`` (a regular file; its offset
    is just past them, also with O_APPEND); whether that worked."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        end = os.lseek(fd, 0, os.SEEK_CUR)
        os.ftruncate(fd, end - extra)
        os.lseek(fd, end - extra, os.SEEK_SET)
    except OSError:
        return False
    return True


def write_lines(fd: int, data: bytes) -> None:
    """Write ``data`` (lines, each ending in ``\\n``) to ``fd`` at its offset, all of it.

    On an OSError (BrokenPipeError aside, which is raised as it is) a regular file is cut
    back to the end of the last whole line written, and :class:`PartialWrite` is raised.
    """
    view, done = memoryview(data), 0
    try:
        while done < len(data):
            n = os.write(fd, view[done:])
            if n <= 0:  # no progress: the device takes nothing more
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            done += n
    except BrokenPipeError:
        raise
    except OSError as err:
        whole = data.rfind(b"\n", 0, done) + 1  # bytes of the whole lines written
        torn = done > whole and not _cut(fd, done - whole)
        raise PartialWrite(err, data.count(b"\n", 0, whole), torn) from None
