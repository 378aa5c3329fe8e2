"""Shared test setup: one thread (CI has 2 cores), deterministic seeds, the longest files first."""

from __future__ import annotations

import os
import random

import pytest
import torch

torch.set_num_threads(1)
os.environ.setdefault("OMP_NUM_THREADS", "1")
"""The processes the tests start (train.py, evaluate.py, ...) get one torch thread too: with
two each on 2 cores beside the other test worker, a toy train.py spent twice the CPU
(10.4 against 5.6 s, 2-core AMD EPYC, 2026-12-07)."""

LONGEST_FIRST = (
    "test_multinode.py",
    "test_run_folder.py",
    "test_ddp.py",
    "test_alignment_learning.py",
    "test_docs.py",
    "test_config.py",
    "test_train_e2e.py",
)
"""The files that take longest (seconds summed over their tests, `make test
PYTEST_ARGS=--durations=0`, 2-core Xeon, 2026-11-27: 77, 64, 46, 43, 36, 28, 27, 27 of 661).
`make test` hands whole files to its two workers in collection order
(``--no-loadscope-reorder``): started first, they no longer end the run on one worker while
the other sits idle. Order only: a file missing here or renamed runs after them."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the files of :data:`LONGEST_FIRST` to the front, in its order; the rest, and the
    tests inside each file, keep their order."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(autouse=True)
def _seed() -> None:
    random.seed(0)
    torch.manual_seed(0)
