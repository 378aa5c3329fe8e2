"""Reference implementations that tests hold the real code to: the rule written as the
plain per-row loop it was before it was vectorised or merged."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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
