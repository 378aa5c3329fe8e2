"""TokenBatchSampler: packing, coverage, seeding, resume and sharding."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.reference import ParallelDataset, greedy_pack
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmt.data.batching import pack_token_batches
from attnmt.data.dataset import make_loader
from attnmt.data.sampler import TokenBatchSampler
from attnmt.errors import CheckpointError, ConfigError, DataError


def random_lengths(n: int, seed: int = 0, high: int = 30) -> tuple[list[int], list[int]]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, high, n).tolist(), rng.integers(0, high, n).tolist()


def cost(src: list[int], tgt: list[int], batch: list[int]) -> int:
    """Padded size of a batch: n * max over pairs of max(src + 1, tgt + 1)."""
    return len(batch) * max(max(src[i], tgt[i]) + 1 for i in batch)


def test_hand_worked_packing() -> None:
    # costs max(s+1, t+1) = [2, 3, 6, 10]; budget 6
    sampler = TokenBatchSampler([1, 2, 3, 9], [1, 1, 5, 1], max_tokens=6, shuffle=False)
    assert list(sampler) == [[0, 1], [2], [3]]  # 3*2=6 fits; 6*2 does not; 10 > 6 alone
    assert [b.tolist() for b in pack_token_batches([0, 1, 2], [4, 4, 4], 8)] == [[0, 1], [2]]
    # source only (inference): cost = src + 1
    assert list(TokenBatchSampler([3, 3, 3], None, max_tokens=8, shuffle=False)) == [[0, 1], [2]]


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 120),
    max_tokens=st.integers(1, 200),
    seed=st.integers(0, 5),
    bucket=st.one_of(st.none(), st.integers(1, 50)),
)
def test_every_index_once_and_budget_kept(
    n: int, max_tokens: int, seed: int, bucket: int | None
) -> None:
    src, tgt = random_lengths(n, seed)
    sampler = TokenBatchSampler(src, tgt, max_tokens=max_tokens, seed=seed, bucket_size=bucket)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(n))
    for b in batches:
        assert cost(src, tgt, b) <= max_tokens or len(b) == 1
    assert len(batches) == len(sampler.batches(0))


@settings(max_examples=60, deadline=None)
@given(
    costs=st.lists(st.integers(1, 60), max_size=300),
    max_tokens=st.integers(1, 400),
    sort=st.booleans(),
)
def test_packing_equals_the_pair_loop(costs: list[int], max_tokens: int, sort: bool) -> None:
    """pack_token_batches: the per-row loop's batches (a binary search per batch on
    ascending costs; other orders go through the loop)."""
    cost = np.array(costs, dtype=np.int64)
    order = np.argsort(cost, kind="stable") if sort else np.arange(len(cost))[::-1]
    fast = pack_token_batches(order, cost, max_tokens)
    assert [b.tolist() for b in fast] == greedy_pack(order.tolist(), cost, max_tokens)
    assert all(b.dtype == np.int64 for b in fast)


def test_numpy_lengths_give_the_batches_of_lists() -> None:
    src, tgt = random_lengths(500, seed=3)
    lists = TokenBatchSampler(src, tgt, max_tokens=120, seed=1, bucket_size=64)
    arrays = TokenBatchSampler(np.array(src), np.array(tgt), max_tokens=120, seed=1, bucket_size=64)
    assert list(lists) == list(arrays) == lists.batches(0)
    assert all(type(i) is int for b in arrays.batches(0) for i in b)


def test_bucketing_keeps_padding_low() -> None:
    src, tgt = random_lengths(2000, high=60)
    batches = list(TokenBatchSampler(src, tgt, max_tokens=600, seed=1))
    real = sum(max(src[i], tgt[i]) + 1 for b in batches for i in b)
    padded = sum(cost(src, tgt, b) for b in batches)
    assert real / padded > 0.95
    assert np.mean([cost(src, tgt, b) for b in batches]) > 0.85 * 600  # batches are full


def test_seed_and_epoch_change_order() -> None:
    src, tgt = random_lengths(300)

    def epoch_batches(seed: int, epoch: int, bucket: int | None = None) -> list[list[int]]:
        sampler = TokenBatchSampler(src, tgt, max_tokens=100, seed=seed, bucket_size=bucket)
        sampler.set_epoch(epoch)
        return list(sampler)

    assert epoch_batches(7, 0) == epoch_batches(7, 0)
    assert epoch_batches(7, 0) != epoch_batches(7, 1)
    assert epoch_batches(7, 0) != epoch_batches(8, 0)
    assert epoch_batches(7, 1) != epoch_batches(8, 0)  # (seed, epoch) is not seed + epoch
    # buckets change which sentences share a batch, not only the batch order
    comp = [{frozenset(b) for b in epoch_batches(7, e, bucket=40)} for e in (0, 1)]
    assert comp[0] != comp[1]
    # without shuffling: sorted by length, identical every epoch
    plain = TokenBatchSampler(src, tgt, max_tokens=100, shuffle=False)
    first = list(plain)
    assert first == list(plain)
    widths = [max(max(src[i], tgt[i]) for i in b) for b in first]
    assert widths == sorted(widths)


def test_resume_yields_exactly_the_rest() -> None:
    src, tgt = random_lengths(200)
    sampler = TokenBatchSampler(src, tgt, max_tokens=80, seed=5)
    sampler.set_epoch(2)
    full = sampler.batches()
    it = iter(sampler)
    taken = [next(it) for _ in range(4)]
    state = sampler.state_dict()
    assert state == {"epoch": 2, "position": 4}
    assert all(type(v) is int for v in state.values())

    fresh = TokenBatchSampler(src, tgt, max_tokens=80, seed=5)
    fresh.load_state_dict(state)
    fresh.set_epoch(2)  # a resumed loop may call set_epoch with the same epoch: no effect
    assert taken + list(fresh) == full
    assert fresh.state_dict() == {"epoch": 3, "position": 0}  # finished: next epoch
    assert len(fresh) == len(fresh.batches(3))
    fresh.set_epoch(9)
    assert fresh.state_dict() == {"epoch": 9, "position": 0}


def test_resume_through_dataloader_counts_consumed_batches() -> None:
    src, tgt = random_lengths(100)
    ds = ParallelDataset([[5] * a for a in src], [[6] * b for b in tgt])
    sampler = TokenBatchSampler(src, tgt, max_tokens=90, seed=2)
    loader = make_loader(ds, sampler, num_workers=0)
    seen = []
    for step, batch in enumerate(loader):
        seen.append(batch.index.tolist())
        if step == 2:
            break
    assert sampler.state_dict() == {"epoch": 0, "position": 3}
    resumed = TokenBatchSampler(src, tgt, max_tokens=90, seed=2)
    resumed.load_state_dict(sampler.state_dict())
    rest = [b.index.tolist() for b in make_loader(ds, resumed)]
    assert seen + rest == sampler.batches(0)


def test_distributed_ranks_partition_batches() -> None:
    src, tgt = random_lengths(250)
    full = TokenBatchSampler(src, tgt, max_tokens=70, seed=4, num_replicas=3).all_batches(0)
    single = TokenBatchSampler(src, tgt, max_tokens=70, seed=4).all_batches(0)
    assert len(full) % 3 == 0 and full == single[: len(full)]  # truncated to a multiple of 3
    per_rank = [
        list(TokenBatchSampler(src, tgt, 70, seed=4, num_replicas=3, rank=r)) for r in range(3)
    ]
    assert len({len(b) for b in per_rank}) == 1
    assert [len(b) for b in per_rank] == [len(full) // 3] * 3
    for r in range(3):
        assert per_rank[r] == full[r::3]
    flat = [i for rank in per_rank for b in rank for i in b]
    assert len(flat) == len(set(flat))  # no pair on two ranks


def test_bad_settings_and_state() -> None:
    with pytest.raises(ConfigError, match="max_tokens"):
        TokenBatchSampler([1], [1], max_tokens=0)
    with pytest.raises(ConfigError, match="rank=2"):
        TokenBatchSampler([1], [1], max_tokens=5, num_replicas=2, rank=2)
    with pytest.raises(DataError, match="3 source lengths but 2 target lengths"):
        TokenBatchSampler([1, 2, 3], [1, 2], max_tokens=5)
    with pytest.raises(DataError, match=r"only 1 batches .* for 4 replicas"):
        list(TokenBatchSampler([1, 1], [1, 1], max_tokens=50, num_replicas=4))
    sampler = TokenBatchSampler([1], [1], max_tokens=5)
    with pytest.raises(CheckpointError, match="lacks 'epoch' or 'position'"):
        sampler.load_state_dict({"epoch": 1})
    with pytest.raises(CheckpointError, match="non-negative ints"):
        sampler.load_state_dict({"epoch": 1, "position": -2})
    assert len(TokenBatchSampler([], [], max_tokens=5)) == 0
