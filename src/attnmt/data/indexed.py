"""Encoded sentences as flat token arrays with offsets, and a parallel dataset over them.

A :class:`TokenArray` stores ``n`` sentences in two arrays (.npy files read on demand in
practice, see :mod:`attnmt.data.idcache`): ``tokens`` [n_tokens] holds every piece id
back to back and ``offsets`` [n + 1] (int64, ``offsets[0] == 0``) where each sentence
starts, so sentence ``i`` is ``tokens[offsets[i]:offsets[i + 1]]``. Python objects exist
only for the pairs a batch reads; a corpus of millions of pairs costs its token bytes on
disk and a few arrays of ``n`` integers in memory.

:class:`IndexedDataset` is the training set (``dataset[i] -> (src_ids, tgt_ids, i)``,
lengths, ``subset``) over two token arrays and an index of the pairs it holds, so
filtering copies no ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from torch.utils.data import Dataset

from attnmt.data.dataset import Item
from attnmt.errors import DataError


def token_dtype(vocab_size: int) -> np.dtype:
    """The narrowest dtype for ids in ``[0, vocab_size)``: int16, uint16 or int32."""
    if vocab_size <= np.iinfo(np.int16).max + 1:
        return np.dtype(np.int16)
    if vocab_size <= np.iinfo(np.uint16).max + 1:
        return np.dtype(np.uint16)
    return np.dtype(np.int32)


class Tokens(Protocol):
    """Where a TokenArray reads ids: a 1-D array, memory map or file reader, sliced."""

    @property
    def ndim(self) -> int: ...

    @property
    def shape(self) -> tuple[int, ...]: ...

    def __len__(self) -> int: ...

    def __getitem__(self, part: slice, /) -> np.ndarray: ...


class TokenArray:
    """Sentences of piece ids: ``tokens`` [n_tokens] int, ``offsets`` [n + 1] int64."""

    def __init__(self, tokens: Tokens, offsets: np.ndarray) -> None:
        if tokens.ndim != 1 or offsets.ndim != 1 or len(offsets) < 1:
            raise DataError(
                f"token arrays: tokens {tokens.shape} and offsets {offsets.shape} "
                "must be 1-D, offsets non-empty"
            )
        if int(offsets[0]) != 0 or int(offsets[-1]) != len(tokens):
            raise DataError(
                f"token arrays: offsets run from {int(offsets[0])} to {int(offsets[-1])}, "
                f"expected 0 to {len(tokens)} (the number of tokens)"
            )
        self.tokens = tokens
        self.offsets = offsets

    @classmethod
    def from_lists(cls, rows: Sequence[Sequence[int]], dtype: np.dtype | type) -> TokenArray:
        """In-memory arrays of ``rows`` (tests, small data)."""
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        tokens = np.fromiter((t for row in rows for t in row), dtype=dtype, count=int(offsets[-1]))
        return cls(tokens, offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> list[int]:
        """Sentence ``i``'s ids as Python ints."""
        return self.tokens[int(self.offsets[i]) : int(self.offsets[i + 1])].tolist()

    def lengths(self) -> np.ndarray:
        """Pieces per sentence: [n] int32 (half the memory of int64 for the same counts)."""
        out = np.empty(len(self), dtype=np.int32)
        return np.subtract(self.offsets[1:], self.offsets[:-1], out=out, casting="unsafe")


class IndexedDataset(Dataset[Item]):
    """The pairs ``index`` [m] (int64, into the arrays; None: all, in order) of source and
    target arrays.

    ``dataset[k] -> (src ids, tgt ids or None, k)``: ``k`` is the position in this
    dataset (what ``Batch.index`` gets), not in the arrays.
    """

    def __init__(
        self, src: TokenArray, tgt: TokenArray | None = None, index: np.ndarray | None = None
    ) -> None:
        if tgt is not None and len(tgt) != len(src):
            raise DataError(f"IndexedDataset: {len(src)} sources but {len(tgt)} targets")
        self.src = src
        self.tgt = tgt
        self.index = index

    def __len__(self) -> int:
        return len(self.src) if self.index is None else len(self.index)

    def __getitem__(self, k: int) -> Item:
        i = k if self.index is None else int(self.index[k])
        return self.src[i], (None if self.tgt is None else self.tgt[i]), k

    def _pick(self, lengths: np.ndarray) -> np.ndarray:
        return lengths if self.index is None else lengths[self.index]

    @property
    def src_lengths(self) -> np.ndarray:
        """Source pieces per pair: [m] int32."""
        return self._pick(self.src.lengths())

    @property
    def tgt_lengths(self) -> np.ndarray | None:
        """Target pieces per pair: [m] int32, or None without targets."""
        return None if self.tgt is None else self._pick(self.tgt.lengths())

    def subset(self, indices: Sequence[int] | np.ndarray) -> IndexedDataset:
        """The pairs at ``indices`` (positions in this dataset); shares the token arrays."""
        picked = np.asarray(indices, dtype=np.int64)
        if picked.size and (picked.min() < 0 or picked.max() >= len(self)):
            raise IndexError(f"subset: indices outside [0, {len(self)})")
        return IndexedDataset(
            self.src, self.tgt, picked if self.index is None else self.index[picked]
        )
