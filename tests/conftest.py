"""Shared test setup: one thread (CI has 2 cores), deterministic seeds."""

from __future__ import annotations

import random

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed() -> None:
    random.seed(0)
    torch.manual_seed(0)
