"""translate.py on a full disk (issue 66, item 11): the message counts only the lines that
reached the output whole, and a regular file is cut back to its last whole line."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path
from typing import Any

import pytest
from helpers.small_disk import small_disk
from helpers.tiny_checkpoint import shared_run

from attnmt.cli import translate
from attnmt.decode.translator import Translator
from attnmt.errors import WriteError

WIDTH = 300  # characters of each fake translation


@pytest.fixture
def ckpt(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tiny run, with decoding replaced by wide fixed lines (fast, and they fill disks)."""

    def wide(self: Translator, lines: list[str], *args: Any, **kw: Any) -> list[str]:
        return [f"{line} " + "w" * (WIDTH - len(line) - 1) for line in lines]

    monkeypatch.setattr(Translator, "translate", wide)
    return shared_run(tmp_path_factory)


def _stdin(n: int) -> io.BytesIO:
    return io.BytesIO(b"".join(b"%05d\n" % i for i in range(n)))


def _translate_into(ckpt: Path, out: Any, n: int, chunk_lines: int = 500) -> str:
    """Translate ``n`` lines into ``out``; the WriteError's message."""
    with pytest.raises(WriteError) as info:
        translate.run({"ckpt": str(ckpt), "chunk_lines": chunk_lines, "beam": 1}, _stdin(n), out)
    return str(info.value)


def _claimed(message: str) -> int:
    """N of "... the translations of the first N lines were written ..."."""
    return int(message.split("the first ")[1].split(" line")[0])


def test_a_real_full_disk_leaves_whole_lines_and_says_how_many(ckpt: Path, tmp_path: Path) -> None:
    """On 0e30e32 the message named the lines of the chunks written before the failing one,
    while the file held other whole lines and half of the next."""
    with small_disk(tmp_path / "disk") as disk:
        path = disk / "out.txt"
        with path.open("wb") as out:
            message = _translate_into(ckpt, out, 5000)
        data = path.read_bytes()
    assert message.startswith(f"cannot write {path}: no space left on device")
    assert message.endswith("were written, and nothing after them)")
    lines = data.decode().split("\n")
    assert lines[-1] == ""  # the file ends in a whole line
    assert len(lines) - 1 == _claimed(message) > 0
    assert all(line == f"{i:05d} ".ljust(WIDTH, "w") for i, line in enumerate(lines[:-1]))


def _half_then_full(monkeypatch: pytest.MonkeyPatch, fd_out: int) -> None:
    """``os.write`` to ``fd_out``: the first call writes half and returns that count, every
    later one fails with ENOSPC."""
    real, calls = os.write, {"n": 0}

    def write(fd: int, data: bytes) -> int:
        if fd != fd_out:
            return real(fd, data)
        calls["n"] += 1
        if calls["n"] == 1:
            return real(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", write)


def test_a_short_write_to_a_file_is_cut_back_to_the_last_whole_line(
    ckpt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "out.txt"
    with path.open("wb") as out:
        _half_then_full(monkeypatch, out.fileno())
        message = _translate_into(ckpt, out, 9, chunk_lines=9)
    # 9 lines of 301 bytes, half written: 4 whole lines and part of the 5th, cut off
    assert message == (
        f"cannot write {path}: no space left on device; free some space or write elsewhere "
        "(the translations of the first 4 lines were written, and nothing after them)"
    )
    assert path.read_bytes() == b"".join(
        f"{i:05d} ".ljust(WIDTH, "w").encode() + b"\n" for i in range(4)
    )


def test_a_short_write_to_a_pipe_says_part_of_a_line_went_through(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(write_end, "wb") as out:
            _half_then_full(monkeypatch, write_end)
            message = _translate_into(ckpt, out, 3, chunk_lines=3)
            monkeypatch.undo()
        got = os.read(read_end, 1 << 16)
    finally:
        os.close(read_end)
    assert message.endswith(
        "(the translations of the first 1 line were written, and part of the next one)"
    )
    assert got.count(b"\n") == 1 and not got.endswith(b"\n")  # the reader got part of line 2
