"""Batch construction (shift, masks, n_tokens), the dataset, the length filter and collation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.reference import ParallelDataset, filter_pairs
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmt import BOS_ID, EOS_ID, PAD_ID
from attnmt.data.batching import (
    Batch,
    length_batches,
    make_batch,
    pack_token_batches,
    pad_sequences,
)
from attnmt.data.dataset import collate, make_loader
from attnmt.data.sampler import TokenBatchSampler
from attnmt.errors import ConfigError, DataError
from attnmt.models.registry import build_model
from attnmt.train.precision_probe import probe_batch

T, F = True, False


def test_make_batch_hand_worked() -> None:
    batch = make_batch([[5, 6, 7], [8]], [[9, 10], [11, 12, 13]], index=[4, 2])
    assert batch.src.tolist() == [[5, 6, 7, EOS_ID], [8, EOS_ID, PAD_ID, PAD_ID]]
    assert batch.src_pad_mask.tolist() == [[F, F, F, F], [F, F, T, T]]
    # full targets: [BOS 9 10 EOS PAD] and [BOS 11 12 13 EOS]
    assert batch.tgt_input.tolist() == [[BOS_ID, 9, 10, EOS_ID], [BOS_ID, 11, 12, 13]]
    assert batch.tgt_out.tolist() == [[9, 10, EOS_ID, PAD_ID], [11, 12, 13, EOS_ID]]
    assert batch.tgt_pad_mask.tolist() == [[F, F, F, T], [F, F, F, F]]
    assert batch.n_tokens == 7
    assert batch.index.tolist() == [4, 2]
    assert batch.src.dtype == batch.tgt_out.dtype == torch.long
    assert batch.src_pad_mask.dtype == torch.bool
    assert len(batch) == 2


def test_make_batch_empty_target_and_inference() -> None:
    batch = make_batch([[5]], [[]])
    assert batch.tgt_input.tolist() == [[BOS_ID]]
    assert batch.tgt_out.tolist() == [[EOS_ID]]
    assert batch.n_tokens == 1
    src_only = make_batch([[5, 6], [7]])
    assert src_only.tgt_input is None and src_only.tgt_out is None and src_only.n_tokens == 0
    assert src_only.index is None
    with pytest.raises(ValueError, match="2 sources but 1 targets"):
        make_batch([[5], [6]], [[7]])


def test_target_gives_the_three_target_tensors_or_a_clear_error() -> None:
    batch = make_batch([[5]], [[9, 10]])
    tgt_input, tgt_out, tgt_pad_mask = batch.target()
    assert tgt_input is batch.tgt_input and tgt_out is batch.tgt_out
    assert tgt_pad_mask is batch.tgt_pad_mask
    src_only = make_batch([[5, 6], [7]])
    with pytest.raises(ValueError, match="only sources"):
        src_only.target()
    # teacher forcing a source-only batch names the missing decoder input, for every model
    for name in ("transformer", "rnn_luong", "rnn_bahdanau"):
        model = build_model({"name": name}, 20, 20, shared_vocab=True)
        with pytest.raises(ValueError, match="only sources"):
            model(src_only)


def test_pad_sequences_keeps_width_one_for_empty() -> None:
    assert pad_sequences([[], []]).tolist() == [[PAD_ID], [PAD_ID]]


def test_batch_to_keeps_fields() -> None:
    batch = make_batch([[5, 6]], [[7]], index=[0]).to("cpu")
    assert isinstance(batch, Batch) and batch.n_tokens == 2 and batch.index.tolist() == [0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinning needs CUDA")
def test_batch_pin_memory() -> None:
    batch = make_batch([[5, 6]], [[7]]).pin_memory()
    assert batch.src.is_pinned() and batch.tgt_out.is_pinned() and batch.n_tokens == 2


token_lists = st.lists(st.lists(st.integers(4, 60), max_size=12), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), src=token_lists)
def test_make_batch_property(data: st.DataObject, src: list[list[int]]) -> None:
    tgt = data.draw(
        st.lists(st.lists(st.integers(4, 60), max_size=12), min_size=len(src), max_size=len(src))
    )
    batch = make_batch(src, tgt)
    b = len(src)
    src_len = torch.tensor([len(s) + 1 for s in src])  # + EOS
    tgt_len = torch.tensor([len(t) + 1 for t in tgt])  # + BOS (input) / + EOS (output)
    assert batch.src.shape == (b, int(src_len.max()))
    assert batch.tgt_input.shape == batch.tgt_out.shape == (b, int(tgt_len.max()))
    cols_s = torch.arange(batch.src.size(1))
    cols_t = torch.arange(batch.tgt_out.size(1))
    assert torch.equal(batch.src_pad_mask, cols_s[None, :] >= src_len[:, None])
    assert torch.equal(batch.tgt_pad_mask, cols_t[None, :] >= tgt_len[:, None])
    assert torch.equal(batch.src_pad_mask, batch.src.eq(PAD_ID))
    assert torch.equal(batch.tgt_pad_mask, batch.tgt_out.eq(PAD_ID))
    assert torch.equal(batch.tgt_input[:, 1:], batch.tgt_out[:, :-1])  # the shift
    assert (batch.tgt_input[:, 0] == BOS_ID).all()
    for i, (s, t) in enumerate(zip(src, tgt)):
        assert batch.src[i, : len(s)].tolist() == s and batch.src[i, len(s)] == EOS_ID
        assert batch.tgt_out[i, : len(t)].tolist() == t and batch.tgt_out[i, len(t)] == EOS_ID
        assert batch.tgt_input[i, 1 : len(t) + 1].tolist() == t
    assert batch.n_tokens == sum(len(t) + 1 for t in tgt) == int((~batch.tgt_pad_mask).sum())


def test_pack_token_batches_hand_worked() -> None:
    cost = [2, 3, 6, 10, 3]

    def pack(order: list[int], budget: int) -> list[list[int]]:
        return [b.tolist() for b in pack_token_batches(order, cost, budget)]

    # ascending 2, 3, 3, 6, 10 with budget 9: 2·1, 3·2 = 6, 3·3 = 9 fit; 6·4 does not;
    # 6 alone; 10 > 9 gets a batch of its own
    assert pack([0, 1, 4, 2, 3], 9) == [[0, 1, 4], [2], [3]]
    # longest first 10, 6, 3, 3, 2 with budget 12: 10 alone (10·2 > 12); 6 with 3
    # (6·2 = 12, 6·3 > 12); 3 with 2 (3·2 = 6)
    assert pack([3, 2, 1, 4, 0], 12) == [[3], [2, 1], [4, 0]]
    # unsorted: the largest so far counts, 2 then 10: 10·2 > 12
    assert pack([0, 3, 1], 12) == [[0], [3], [1]]
    assert pack([], 12) == []
    assert pack_token_batches(np.array([4, 1]), np.array(cost), 100)[0].dtype == np.int64


def _old_length_batches(lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """batching.length_batches as it was before it called pack_token_batches."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    for i in order:
        if batches and lengths[batches[-1][0]] * (len(batches[-1]) + 1) <= batch_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def _old_probe_rows(pairs: list[tuple[list[int], list[int], int]], max_tokens: int) -> int:
    """How many first pairs precision_probe.probe_batch took before pack_token_batches."""
    taken, longest = 0, 0
    for s, t, _ in pairs:
        longest = max(longest, len(s) + 1, len(t) + 1)
        if taken and longest * (taken + 1) > max_tokens:
            break
        taken += 1
    return taken


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(0, 40), max_size=60), budget=st.integers(1, 200))
def test_the_callers_give_the_batches_they_gave_before(lengths: list[int], budget: int) -> None:
    assert length_batches(lengths, budget) == _old_length_batches(lengths, budget)
    pairs = [([5] * n, [6] * (n * 7 % 13), k) for k, n in enumerate(lengths)]
    first = pairs[: _old_probe_rows(pairs, budget)]
    want = make_batch([s for s, _, _ in first], [t for _, t, _ in first])
    got = probe_batch(pairs, budget)
    assert torch.equal(got.src, want.src) and torch.equal(got.tgt_out, want.tgt_out)


def test_filter_pairs_counts() -> None:
    src = [[], [5] * 11, [5] * 6, [5] * 4, [5], [6, 7]]
    tgt = [[5], [5], [5] * 2, [5] * 2, [5], []]
    kept, removed = filter_pairs(src, tgt, max_len=10, max_len_ratio=2.0)
    assert kept == [3, 4]  # ratio 4/2 == 2.0 is kept
    assert removed == {"empty": 2, "too_long": 1, "ratio": 1}
    kept, removed = filter_pairs(src, tgt, max_len=None, max_len_ratio=None)
    assert kept == [1, 2, 3, 4] and removed == {"empty": 2, "too_long": 0, "ratio": 0}
    kept, _ = filter_pairs([[5] * 3, [5] * 20], None, max_len=10, max_len_ratio=1.5)
    assert kept == [0]


def test_filter_pairs_nothing_left_names_filters() -> None:
    with pytest.raises(DataError, match=r"train: no pair is left .*longer than max_len=2: 1"):
        filter_pairs([[5, 5, 5], []], [[5], [5]], max_len=2, max_len_ratio=9, name="train")
    with pytest.raises(ConfigError, match="max_len_ratio"):
        filter_pairs([[5]], [[5]], max_len=3, max_len_ratio=0.5)
    assert filter_pairs([], [], max_len=3, max_len_ratio=2) == (
        [],
        {"empty": 0, "too_long": 0, "ratio": 0},
    )


def test_dataset_and_collate() -> None:
    ds = ParallelDataset([[5, 6], [7]], [[8], [9, 10, 11]])
    assert len(ds) == 2 and ds[1] == ([7], [9, 10, 11], 1)
    assert ds.src_lengths == [2, 1] and ds.tgt_lengths == [1, 3]
    batch = collate([ds[1], ds[0]])
    assert batch.index.tolist() == [1, 0]
    assert batch.tgt_out.tolist() == [[9, 10, 11, EOS_ID], [8, EOS_ID, PAD_ID, PAD_ID]]
    sub = ds.subset([1])
    assert sub.src == [[7]] and sub.tgt == [[9, 10, 11]]
    mono = ParallelDataset([[5, 6]], None)
    assert mono[0] == ([5, 6], None, 0) and mono.tgt_lengths is None
    assert collate([mono[0]]).tgt_out is None
    empty_target = collate([([5], [], 0), ([6], [7], 1)])
    assert empty_target.tgt_out.tolist() == [[EOS_ID, PAD_ID], [7, EOS_ID]]
    with pytest.raises(ValueError, match="some items have a target and some do not"):
        collate([ds[0], mono[0]])
    with pytest.raises(ValueError, match="some items have a target and some do not"):
        collate([mono[0], ds[0]])
    with pytest.raises(DataError, match="2 sources but 1 targets"):
        ParallelDataset([[5], [6]], [[7]])


def test_loader_yields_batches_covering_dataset() -> None:
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 15, (40, 2), generator=gen).tolist()
    ds = ParallelDataset([[5] * a for a, _ in lengths], [[6] * b for _, b in lengths])
    sampler = TokenBatchSampler(ds.src_lengths, ds.tgt_lengths, max_tokens=48, seed=3)
    loader = make_loader(ds, sampler)
    seen = []
    for batch in loader:
        assert isinstance(batch, Batch)
        assert batch.src.numel() <= 48 or len(batch) == 1
        for row, i in enumerate(batch.index.tolist()):
            assert batch.src[row].ne(PAD_ID).sum() == len(ds.src[i]) + 1
            assert batch.tgt_out[row].ne(PAD_ID).sum() == len(ds.tgt[i]) + 1
        seen.extend(batch.index.tolist())
    assert sorted(seen) == list(range(40))
    assert len(loader) == len(sampler)
