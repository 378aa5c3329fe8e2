"""Every random generator's state, as tensors and plain data (``torch.load(weights_only=True)``
reads it back), and seeding.

A checkpoint holds the snapshot taken right after the last completed update, so a resumed
run draws the same dropout masks and batches as the uninterrupted one.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def rng_state() -> dict[str, Any]:
    """Every random generator's state as tensors / plain data."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _as_tuple(value: Any) -> Any:
    """Lists back to tuples (``random.setstate`` wants nested tuples)."""
    return tuple(_as_tuple(v) for v in value) if isinstance(value, (list, tuple)) else value


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore :func:`rng_state` (CUDA states only when CUDA is present)."""
    random.setstate(_as_tuple(state["python"]))
    npst = state["numpy"]
    keys = npst["keys"].numpy().astype(np.uint32)
    np.random.set_state(
        (npst["kind"], keys, npst["pos"], npst["has_gauss"], npst["cached_gaussian"])
    )
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        cuda_states = [s.cpu() for s in state["cuda"]][: torch.cuda.device_count()]
        torch.cuda.set_rng_state_all(cuda_states)


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (every CUDA device too)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
