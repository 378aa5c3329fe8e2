"""Reading and writing line-aligned UTF-8 text, with errors that name file and line."""

from __future__ import annotations

import logging
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from attnmt.atomic import atomic_path
from attnmt.errors import DataError

Pair = tuple[str, str]


def utf8_lines(raw_lines: Iterable[bytes], where: str, advice: str) -> Iterator[str]:
    """Lines without their line endings from raw byte lines; a leading BOM is dropped (a
    BOM alone is no line). Invalid UTF-8 raises DataError naming ``where``, the line and
    the column, and ``advice``."""
    for lineno, raw in enumerate(raw_lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(
                f"{where}{lineno}: invalid UTF-8 (byte 0x{raw[err.start]:02x} at column "
                f"{err.start + 1}); {advice}, e.g. iconv -f latin1 -t utf-8"
            ) from None
        if lineno == 1:
            text = text.removeprefix("\ufeff")
            if not text:  # only a BOM (an empty "UTF-8 with BOM" file)
                return
        yield text.rstrip("\r\n")


def _not_a_file(path: Path) -> str:
    """Why ``path``, which is no regular file, cannot be read as one ("" if it can)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return "file not found"
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    kinds = {
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISFIFO: "a pipe",
        stat.S_ISSOCK: "a socket",
    }
    kind = next((name for test, name in kinds.items() if test(mode)), "no regular file")
    return f"is {kind}, not a regular file"


def read_lines(path: str | Path, setting: str | None = None) -> list[str]:
    """Lines of a UTF-8 file without their line endings (a leading BOM is dropped).

    Raises DataError for a path that is missing, a directory or no regular file (a device
    such as /dev/zero, a pipe), naming ``setting`` (the key that chose the path, e.g.
    ``gold_alignments``; by default the corpus's ``data.path`` / ``data.root``), for an
    unreadable file (its path) and for invalid UTF-8 (file, line, column).
    """
    path = Path(path)
    why = _not_a_file(path)
    if why:
        where = f"{setting}={path}" if setting else str(path)
        advice = (
            "check the path"
            if why == "file not found"
            else "name the file itself"
            if why.startswith("is a directory")
            else "give a regular file (a pipe or a device cannot be read twice or never ends)"
        )
        hint = "" if setting else " (data.path / data.root)"
        raise DataError(f"{where}: {why}; {advice}{hint}")
    try:
        with path.open("rb") as f:
            return list(utf8_lines(f, f"{path}:", "convert the file to UTF-8"))
    except OSError as err:  # no read permission, an I/O error of the disk
        raise DataError(
            f"{path}: cannot read it ({err.strerror or err}); check its permissions "
            "(chmod u+r) or copy it somewhere readable"
        ) from None


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> list[Pair]:
    """Aligned (source, target) lines of two files; their line counts must match."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(
            f"line counts differ: {src_path} has {len(src)} lines but {tgt_path} has "
            f"{len(tgt)}; the files must be aligned line by line"
        )
    return list(zip(src, tgt))


def read_tsv(path: str | Path) -> list[Pair]:
    """Two-column tab-separated pairs; any other number of columns is an error."""
    pairs: list[Pair] = []
    for lineno, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            pairs.append(("", ""))  # an empty line is an empty pair, dropped and counted later
            continue
        cols = line.split("\t")
        if len(cols) != 2:
            raise DataError(
                f"{path}:{lineno}: expected 2 tab-separated columns (source<TAB>target), "
                f"found {len(cols)}"
            )
        pairs.append((cols[0], cols[1]))
    return pairs


def normalize_space(text: str) -> str:
    """Collapse every run of whitespace (tabs, newlines, NBSP...) into one space; strip.

    U+FEFF (zero-width no-break space, the byte-order mark) is dropped: it is invisible, and
    at the start of a cached file it would read back as a BOM and vanish.
    """
    return " ".join(text.replace("\ufeff", "").split())


def drop_empty(pairs: Iterable[Pair], where: str, log: logging.Logger) -> tuple[list[Pair], int]:
    """Normalise whitespace; drop pairs with an empty or whitespace-only side.

    Logs a warning with the count when any were dropped. Returns (kept, n_dropped).
    """
    kept: list[Pair] = []
    dropped = 0
    for src, tgt in pairs:
        src, tgt = normalize_space(src), normalize_space(tgt)
        if src and tgt:
            kept.append((src, tgt))
        else:
            dropped += 1
    if dropped:
        log.warning("%s: dropped %d empty or whitespace-only pairs", where, dropped)
    return kept, dropped


def write_lines(path: str | Path, lines: Sequence[str]) -> None:
    """Write one line per item, UTF-8, atomically (:func:`attnmt.atomic.atomic_path`).

    ValueError, before anything is written, if an item holds a line break.
    """
    for line in lines:
        if "\n" in line or "\r" in line:
            raise ValueError(f"{path}: a line contains a line break: {line[:60]!r}")
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")
