"""Encoded parallel data: the item type, the length filter, collation and the loader.

The dataset is :class:`attnmt.data.indexed.IndexedDataset` (``dataset[i] -> (src_ids,
tgt_ids or None, i)``; ``i`` ends up in ``Batch.index`` so that outputs can be put back in
corpus order).

Lengths here are piece counts *without* specials; :func:`make_batch` adds EOS to a
source and BOS/EOS to a target, so a pair costs ``len + 1`` positions per side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from attnmt.batch import Batch
from attnmt.data.batching import make_batch
from attnmt.errors import ConfigError, DataError

Item = tuple[list[int], list[int] | None, int]


def _check_limits(max_len: int | None, max_len_ratio: float | None, name: str) -> None:
    if max_len is not None and (isinstance(max_len, bool) or int(max_len) < 1):
        raise ConfigError(f"{name}: max_len={max_len!r} must be a positive integer or null")
    if max_len_ratio is not None and float(max_len_ratio) < 1.0:
        raise ConfigError(f"{name}: max_len_ratio={max_len_ratio!r} must be >= 1 or null")


def filter_lengths(
    src_len: np.ndarray,
    tgt_len: np.ndarray | None,
    max_len: int | None,
    max_len_ratio: float | None,
    name: str = "data",
) -> tuple[np.ndarray, dict[str, int]]:
    """Which pairs to keep, from their piece counts ``src_len``, ``tgt_len`` [n] ints:
    (kept indices [k] int64, how many pairs each filter removed), without a Python loop.

    Filters, applied in this order (a pair is counted under the first that removes it):
      ``empty``     either side has no pieces
      ``too_long``  either side has more than ``max_len`` pieces (``None`` = no limit)
      ``ratio``     ``max(|x|, |y|) / min(|x|, |y|) > max_len_ratio`` (``None`` = no limit)
    With ``tgt_len=None`` only the source is checked. Raises DataError naming ``name`` and
    the counts when a non-empty input loses every pair.
    """
    _check_limits(max_len, max_len_ratio, name)
    src_len = np.asarray(src_len).reshape(-1)
    lo = hi = src_len
    if tgt_len is not None:
        tgt_len = np.asarray(tgt_len).reshape(-1)
        if len(tgt_len) != len(src_len):
            raise DataError(f"{name}: {len(src_len)} sources but {len(tgt_len)} targets")
        lo, hi = np.minimum(src_len, tgt_len), np.maximum(src_len, tgt_len)
    empty = lo == 0
    too_long = ~empty & (hi > max_len) if max_len is not None else np.zeros_like(empty)
    ratio = np.zeros_like(empty)
    if max_len_ratio is not None:
        with np.errstate(divide="ignore", invalid="ignore"):  # empty pairs: masked below
            ratio = np.true_divide(hi, lo) > max_len_ratio  # float64, as Python's int / int
        ratio &= ~(empty | too_long)
    kept = np.flatnonzero(~(empty | too_long | ratio))
    removed = {
        "empty": int(empty.sum()),
        "too_long": int(too_long.sum()),
        "ratio": int(ratio.sum()),
    }
    if len(src_len) and not len(kept):
        raise DataError(
            f"{name}: no pair is left after filtering {len(src_len)} pairs "
            f"(empty: {removed['empty']}, longer than max_len={max_len}: {removed['too_long']}, "
            f"length ratio above max_len_ratio={max_len_ratio}: {removed['ratio']}); "
            "raise max_len / max_len_ratio"
        )
    return kept, removed


def collate(items: Sequence[Item]) -> Batch:
    """``[(src, tgt | None, i), ...] -> Batch`` via :func:`make_batch`, with ``index`` filled."""
    if not items:
        raise ValueError("collate: empty batch")
    src = [s for s, _, _ in items]
    tgts = [t for _, t, _ in items if t is not None]
    if tgts and len(tgts) != len(items):
        raise ValueError("collate: some items have a target and some do not")
    return make_batch(src, tgts or None, index=[i for _, _, i in items])


def make_loader(
    dataset: Dataset[Item],
    sampler: Sampler[list[int]],
    num_workers: int = 0,
    collate_fn: Callable[[Sequence[Item]], Batch] = collate,
) -> DataLoader:
    """A DataLoader yielding :class:`Batch` objects, one per list the ``sampler`` yields
    (``collate_fn`` builds them: :func:`collate`, or one that adds guided alignment's links).

    Keep ``num_workers=0`` when resuming from ``sampler.state_dict()``: worker processes
    prefetch batch indices, so the sampler's count runs ahead of the consumed batches.
    Memory is pinned when CUDA is present so that ``batch.to(device)`` can overlap.
    The loader has a private generator: starting an iterator draws a seed from it, and
    drawing from the global torch RNG would shift the dropout masks of a resumed run.
    """
    return DataLoader(
        dataset,
        batch_sampler=sampler,
        collate_fn=collate_fn,
        num_workers=num_workers,
        pin_memory=torch.cuda.is_available(),
        generator=torch.Generator(),
    )
