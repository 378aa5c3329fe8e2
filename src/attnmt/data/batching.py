"""Batch-first padded batches with shifted decoder input/output, padding masks, and the
one token-budget packing rule (:func:`pack_token_batches`) that training's sampler,
evaluation/decoding (:func:`length_batches`) and the precision probe all use.

A target sentence with pieces ``y_1..y_n`` becomes ``tgt = [BOS, y_1..y_n, EOS]``;
the decoder reads ``tgt_input = tgt[:, :-1]`` and predicts ``tgt_out = tgt[:, 1:]``.
A source sentence becomes ``[x_1..x_m, EOS]``.
Masks follow PyTorch's ``key_padding_mask`` convention: ``True`` marks padding.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from attnmt import BOS_ID, EOS_ID, PAD_ID
from attnmt.batch import Batch


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> Tensor:
    """Right-pad integer lists into a LongTensor [B, max_len] (max_len >= 1)."""
    width = max([len(s) for s in seqs] + [1])
    out = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s):
            out[i, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out


def make_batch(
    src: Sequence[Sequence[int]],
    tgt: Sequence[Sequence[int]] | None = None,
    index: Sequence[int] | None = None,
) -> Batch:
    """Build a :class:`Batch` from piece ids without special tokens.

    Appends EOS to every source; wraps every target as ``[BOS] + y + [EOS]`` and
    shifts it. With ``tgt=None`` (inference) only the source fields are filled.
    """
    src_t = pad_sequences([[*s, EOS_ID] for s in src])
    batch = Batch(src=src_t, src_pad_mask=src_t.eq(PAD_ID))
    if index is not None:
        batch.index = torch.as_tensor(list(index), dtype=torch.long)
    if tgt is not None:
        if len(tgt) != len(src):
            raise ValueError(f"make_batch: {len(src)} sources but {len(tgt)} targets")
        full = pad_sequences([[BOS_ID, *t, EOS_ID] for t in tgt])
        batch.tgt_input = full[:, :-1].clone()
        batch.tgt_out = full[:, 1:].clone()
        batch.tgt_pad_mask = batch.tgt_out.eq(PAD_ID)
        batch.n_tokens = int((~batch.tgt_pad_mask).sum())
    return batch


def pack_token_batches(
    order: Sequence[int] | np.ndarray, cost: Sequence[int] | np.ndarray, max_tokens: int
) -> list[np.ndarray]:
    """Cut ``order`` (row indices) into consecutive token-budget batches.

    Rule: walking ``order``, a batch takes the next row while
    ``rows × (largest cost[i] among them) ≤ max_tokens``; a row that alone costs more
    than ``max_tokens`` gets a batch of its own. ``cost[i]`` is row ``i``'s padded length.
    Callers sort the rows by cost first (training ascending, decoding longest first) so a
    batch wastes little padding; any order works. Returns slices of ``order`` (int64).

    Costs that never decrease along ``order`` (training's buckets, millions of rows) take
    a binary search per batch instead of a Python step per row: a batch of ``j`` rows then
    costs its last row's cost times ``j``, which grows with ``j``, so the batch is the
    longest prefix within the budget.
    """
    order = np.asarray(order, dtype=np.int64).reshape(-1)
    along = np.asarray(cost).reshape(-1)[order]  # [n] costs in walking order
    ascending = not bool(np.any(along[1:] < along[:-1]))
    costs: list[int] = along.tolist()
    n, cuts = len(costs), [0]
    while cuts[-1] < n:
        start, size, widest = cuts[-1], 0, 0
        if ascending:
            first = costs[start]
            stop = min(n, start + max_tokens // first) if first > 0 else n  # no more fit
            size = bisect.bisect_right(
                range(1, stop - start + 1), max_tokens, key=lambda j: costs[start + j - 1] * j
            )
        else:
            while start + size < n:
                widest = max(widest, costs[start + size])
                if widest * (size + 1) > max_tokens:
                    break
                size += 1
        cuts.append(start + max(size, 1))  # a row above max_tokens gets a batch of its own
    return [order[a:b] for a, b in itertools.pairwise(cuts)]


def length_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Indices grouped by length, longest first, so that count × longest ≤ batch_tokens
    (:func:`pack_token_batches` on the indices sorted by length, descending; ties by index).

    For evaluation and decoding (training uses :class:`~attnmt.data.sampler.TokenBatchSampler`).
    A sequence longer than ``batch_tokens`` gets a batch of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [b.tolist() for b in pack_token_batches(order, lengths, batch_tokens)]
