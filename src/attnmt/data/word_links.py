"""Word links of a corpus split, read once and checked against its sentences.

Guided alignment trains attention towards an aligner's links (attnmt.train.guided_alignment).
They come as a Pharaoh file (:mod:`attnmt.data.gold`: one line per pair, ``i-j`` between
0-based source word ``i`` and target word ``j``; plain or xz-compressed), the sure links
kept: a possible link ``i?j`` is checked but not trained towards. A file whose line count,
or one of whose links, does not fit the split's sentences (whitespace words) is refused with
the file, line and link named, before any training.

:class:`WordLinks` holds ``n`` pairs' links in three flat arrays, as
:class:`attnmt.data.indexed.TokenArray` holds ids: ``offsets`` [n + 1] int64, and
``src`` / ``tgt`` [L] int32 (pair ``k``'s links are ``src[offsets[k]:offsets[k+1]]``
etc.), and each pair's word counts ``src_words`` / ``tgt_words`` [n] int32, so a batch can
tell a pair whose pieces make other words than its line.
"""

from __future__ import annotations

import lzma
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnmt.data.gold import parse_links
from attnmt.errors import DataError


@dataclass(frozen=True)
class WordLinks:
    """Sure word links of ``n`` pairs (module docstring); ``offsets`` [n+1], ``src``/``tgt``
    [L], ``src_words``/``tgt_words`` [n]."""

    offsets: np.ndarray
    src: np.ndarray
    tgt: np.ndarray
    src_words: np.ndarray
    tgt_words: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def pair(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(source words [l], target words [l]) of pair ``k``'s links."""
        a, b = int(self.offsets[k]), int(self.offsets[k + 1])
        return self.src[a:b], self.tgt[a:b]

    @property
    def n_links(self) -> int:
        return len(self.src)

    def flipped(self) -> WordLinks:
        """The same links read in the other translation direction (target → source)."""
        return WordLinks(self.offsets, self.tgt, self.src, self.tgt_words, self.src_words)

    def subset(self, index: np.ndarray | None) -> WordLinks:
        """The pairs ``index`` [m] (None: all), in that order: what a filtered dataset holds."""
        if index is None:
            return self
        index = np.asarray(index, dtype=np.int64)
        starts, ends = self.offsets[index], self.offsets[index + 1]
        lengths = ends - starts
        offsets = np.zeros(len(index) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        picked = np.repeat(starts - offsets[:-1], lengths) + np.arange(int(offsets[-1]))
        return WordLinks(
            offsets,
            self.src[picked],
            self.tgt[picked],
            self.src_words[index],
            self.tgt_words[index],
        )


def _lines(path: Path) -> Iterator[str]:
    """Lines of a text file (``.xz``: decompressed), without their line ends."""
    opener = lzma.open if path.suffix == ".xz" else open
    try:
        with opener(path, "rt", encoding="utf-8", newline="\n") as f:
            for line in f:
                yield line.rstrip("\r\n")
    except (OSError, lzma.LZMAError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot read the links ({err}); give a Pharaoh file") from None


def read_word_links(path: str | Path, src_file: Path, tgt_file: Path, pairs: int) -> WordLinks:
    """The sure links of ``path``, one line per pair of ``src_file``/``tgt_file`` (a
    split's prepared files, ``pairs`` lines each), each link checked to lie within its
    pair's words.

    DataError (one line) for a missing or unreadable file, a malformed link, a line count
    other than the split's pairs, or a link outside its pair, naming file, line and link.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(
            f"{path}: links file not found; set trainer.guided_alignment.links to a Pharaoh "
            "file of the train split, or null for its silver links"
        )
    advice = f"the links do not match the corpus ({src_file.parent}): remake them for it"
    offsets, src, tgt, src_words, tgt_words = [0], [], [], [], []
    links = _lines(path)
    with src_file.open(encoding="utf-8") as fs, tgt_file.open(encoding="utf-8") as ft:
        for lineno, (s_line, t_line) in enumerate(zip(fs, ft), start=1):
            line = next(links, None)
            if line is None:
                raise DataError(
                    f"{path}: {lineno - 1} lines of links, but the split has {pairs} pairs "
                    f"({src_file}); {advice}"
                )
            n_src, n_tgt = len(s_line.split()), len(t_line.split())
            alignment = parse_links(line, f"{path}:{lineno}")
            for i, j in sorted(alignment.possible):
                if i >= n_src or j >= n_tgt:
                    raise DataError(
                        f"{path}:{lineno}: link {i}-{j} lies outside pair {lineno} "
                        f"({n_src} source and {n_tgt} target words in {src_file.name}/"
                        f"{tgt_file.name}); {advice}"
                    )
            for i, j in sorted(alignment.sure):
                src.append(i)
                tgt.append(j)
            offsets.append(len(src))
            src_words.append(n_src)
            tgt_words.append(n_tgt)
    read = len(offsets) - 1
    extra = sum(1 for _ in links)
    if extra or read != pairs:
        raise DataError(
            f"{path}: {read + extra} lines of links, but the split has {pairs} pairs "
            f"({src_file}); {advice}"
        )
    return WordLinks(
        np.asarray(offsets, dtype=np.int64),
        np.asarray(src, dtype=np.int32),
        np.asarray(tgt, dtype=np.int32),
        np.asarray(src_words, dtype=np.int32),
        np.asarray(tgt_words, dtype=np.int32),
    )
