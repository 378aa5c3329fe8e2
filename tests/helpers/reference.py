"""Reference implementations that tests hold the real code to: the rule written as the
plain per-row loop it was before it was vectorised or merged, and the list-based dataset
that the memory-mapped :class:`~attnmt.data.indexed.IndexedDataset` replaced in training."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from torch.utils.data import Dataset

from attnmt.data.dataset import Item, filter_lengths
from attnmt.errors import DataError


def greedy_pack(order: Sequence[int], cost: np.ndarray, max_tokens: int) -> list[list[int]]:
    """Token-budget packing one row at a time (the sampler's ``pack_sorted`` as it was):
    a batch takes the next row while rows × largest cost ≤ max_tokens."""
    batches: list[list[int]] = []
    current: list[int] = []
    widest = 0
    for i in order:
        c = int(cost[i])
        if current and max(widest, c) * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, widest = [], 0
        current.append(int(i))
        widest = max(widest, c)
    if current:
        batches.append(current)
    return batches


class ParallelDataset(Dataset[Item]):
    """Piece-id pairs held as lists; ``tgt=None`` for inference (source only).

    ``dataset[i] -> (src_ids, tgt_ids or None, i)``, as IndexedDataset.
    """

    def __init__(self, src: list[list[int]], tgt: list[list[int]] | None = None) -> None:
        if tgt is not None and len(tgt) != len(src):
            raise DataError(f"ParallelDataset: {len(src)} sources but {len(tgt)} targets")
        self.src = src
        self.tgt = tgt

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i: int) -> Item:
        return self.src[i], (None if self.tgt is None else self.tgt[i]), i

    @property
    def src_lengths(self) -> list[int]:
        return [len(s) for s in self.src]

    @property
    def tgt_lengths(self) -> list[int] | None:
        return None if self.tgt is None else [len(t) for t in self.tgt]

    def subset(self, indices: Sequence[int]) -> ParallelDataset:
        """A new dataset of the pairs at ``indices`` (e.g. those :func:`filter_pairs` kept)."""
        return ParallelDataset(
            [self.src[i] for i in indices],
            None if self.tgt is None else [self.tgt[i] for i in indices],
        )


def filter_pairs(
    src: Sequence[Sequence[int]],
    tgt: Sequence[Sequence[int]] | None,
    max_len: int | None,
    max_len_ratio: float | None,
    name: str = "data",
) -> tuple[list[int], dict[str, int]]:
    """:func:`attnmt.data.dataset.filter_lengths` on lists of piece ids: (kept indices,
    removed per filter)."""
    src_len = np.fromiter(map(len, src), dtype=np.int64, count=len(src))
    tgt_len = None if tgt is None else np.fromiter(map(len, tgt), dtype=np.int64, count=len(tgt))
    kept, removed = filter_lengths(src_len, tgt_len, max_len, max_len_ratio, name)
    return kept.tolist(), removed
