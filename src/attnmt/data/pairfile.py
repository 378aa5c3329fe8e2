"""Sentence pairs in one xz-compressed, tab-separated file (the corpora shipped in the package).

After decompression the file is UTF-8 text with ``\\n`` line ends::

    # free-text comment lines (origin, licence, how to rebuild)
    # removed<TAB>what the cleaning removed<TAB>how many     (in the cleaning's order)
    source<TAB>target                                         (one pair a line, in order)

:func:`dumps` gives the same bytes for the same input on every run and machine with the
same liblzma (a fixed preset and check; the xz format holds no timestamps), so a rebuilt
file can be compared byte for byte. :func:`load` checks the file's sha256 before reading.
"""

from __future__ import annotations

import hashlib
import lzma
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from attnmt.errors import DataError

Pair = tuple[str, str]
PRESET = 9 | lzma.PRESET_EXTREME
REMOVED = "# removed\t"


@dataclass
class PairFile:
    """What one pair file holds."""

    pairs: list[Pair]
    removed: Counter[str] = field(default_factory=Counter)
    comments: list[str] = field(default_factory=list)


def _check_pair(pair: Pair, index: int) -> None:
    for side in pair:
        if not side or side != side.strip() or "\t" in side or "\n" in side or "\r" in side:
            raise DataError(f"pair {index} {pair!r}: a side is empty or holds a tab or newline")
    if pair[0].startswith("#"):
        raise DataError(f"pair {index} {pair!r}: a source starting with # reads as a comment")


def dumps(
    pairs: Iterable[Pair], removed: Mapping[str, int] | None = None, comments: Iterable[str] = ()
) -> bytes:
    """The xz-compressed file holding ``comments``, ``removed`` and ``pairs``, in that order."""
    lines = [f"# {c}".rstrip() for c in comments]
    lines += [f"{REMOVED}{why}\t{n}" for why, n in (removed or {}).items()]
    for index, pair in enumerate(pairs):
        _check_pair(pair, index)
        lines.append(f"{pair[0]}\t{pair[1]}")
    text = "".join(f"{line}\n" for line in lines)
    return lzma.compress(
        text.encode("utf-8"), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=PRESET
    )


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 digest of ``data``."""
    return hashlib.sha256(data).hexdigest()


def loads(data: bytes, where: str = "<bytes>") -> PairFile:
    """Parse :func:`dumps`' output; DataError naming ``where`` and the line when malformed."""
    try:
        text = lzma.decompress(data, format=lzma.FORMAT_XZ).decode("utf-8")
    except (lzma.LZMAError, UnicodeDecodeError) as err:
        raise DataError(f"{where}: not an xz-compressed UTF-8 pair file ({err})") from None
    out = PairFile([])
    for lineno, line in enumerate(text.split("\n")[:-1], start=1):
        if line.startswith(REMOVED):
            why, _, count = line[len(REMOVED) :].rpartition("\t")
            if not why or not count.isdigit():
                raise DataError(f"{where}:{lineno}: expected '# removed<TAB>what<TAB>count'")
            out.removed[why] += int(count)
        elif line.startswith("#"):
            out.comments.append(line[1:].strip())
        else:
            cols = line.split("\t")
            if len(cols) != 2:
                raise DataError(f"{where}:{lineno}: expected source<TAB>target")
            out.pairs.append((cols[0], cols[1]))
    return out


def load(path: Path, sha256: str | None, advice: str) -> PairFile:
    """Read the pair file ``path`` after checking its sha256 (skipped when None).

    A missing, unreadable or altered file raises DataError naming it and ``advice``.
    """
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataError(f"{path}: cannot read it ({err.strerror or err}); {advice}") from None
    got = sha256_bytes(data)
    if sha256 is not None and got != sha256:
        raise DataError(
            f"{path}: sha256 is {got}, expected {sha256}: the file is damaged or was "
            f"changed; {advice}"
        )
    return loads(data, str(path))
