"""Token arrays and IndexedDataset: dtypes, the length filter, and the same batches as the
list path (ParallelDataset + filter_pairs) for the same seed."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from helpers.reference import ParallelDataset, filter_pairs, greedy_pack
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmt.data.dataset import filter_lengths, make_loader
from attnmt.data.idcache import cached_token_array
from attnmt.data.indexed import IndexedDataset, TokenArray, token_dtype
from attnmt.data.sampler import TokenBatchSampler
from attnmt.data.textio import read_lines
from attnmt.data.tokenizer import Tokenizer, load_or_train_tokenizer
from attnmt.errors import ConfigError, DataError

WORDS = ["der", "die", "das", "haus", "katze", "hund", "klein", "groß", "grün", "läuft"]
WORDS += ["schläft", "sieht", "über", "unter", "fluss"]


def write_corpus(root: Path, n: int, seed: int) -> tuple[Path, Path]:
    """n pairs of 1-30 words (some long or lopsided, so both length filters remove pairs)."""
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(n):
        k = rng.choice([rng.randint(1, 8), rng.randint(1, 30)])
        src.append(" ".join(rng.choice(WORDS) for _ in range(k)))
        j = max(1, k + rng.choice([0, 1, -1, 10, -(k // 2)]))
        tgt.append(" ".join(rng.choice(WORDS[::-1]) for _ in range(j)))
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.de").write_text("\n".join(src) + "\n", encoding="utf-8")
    (root / "train.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    return root / "train.de", root / "train.en"


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Tokenizer]:
    root = tmp_path_factory.mktemp("corpus")
    src, tgt = write_corpus(root, 600, 0)
    cfg = SimpleNamespace(model_type="unigram", vocab_size=40, joint=True, character_coverage=1.0)
    return src, tgt, load_or_train_tokenizer(src, tgt, cfg, root)


def reference_filter(
    src: Sequence[int], tgt: Sequence[int] | None, max_len: int | None, ratio: float | None
) -> tuple[list[int], dict[str, int]]:
    """filter_pairs' rules as the per-pair loop they were written as."""
    removed = {"empty": 0, "too_long": 0, "ratio": 0}
    kept = []
    for i in range(len(src)):
        lengths = (src[i],) if tgt is None else (src[i], tgt[i])
        if min(lengths) == 0:
            removed["empty"] += 1
        elif max_len is not None and max(lengths) > max_len:
            removed["too_long"] += 1
        elif ratio is not None and max(lengths) / min(lengths) > ratio:
            removed["ratio"] += 1
        else:
            kept.append(i)
    return kept, removed


def reference_batches(cost: np.ndarray, max_tokens: int, seed: int, epoch: int, bucket: int):
    """TokenBatchSampler.all_batches as it was: the per-pair packing loop per bucket."""
    n = len(cost)
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(n)
    batches: list[list[int]] = []
    for start in range(0, n, bucket):
        part = order[start : start + bucket]
        part = part[np.argsort(cost[part], kind="stable")]
        batches.extend(greedy_pack(part.tolist(), cost, max_tokens))
    return [batches[k] for k in rng.permutation(len(batches))]


def test_token_dtype_is_the_narrowest_that_holds_every_id() -> None:
    assert token_dtype(8000) == np.int16
    assert token_dtype(32768) == np.int16  # ids 0..32767
    assert token_dtype(32769) == np.uint16
    assert token_dtype(65536) == np.uint16
    assert token_dtype(65537) == np.int32
    rows = [[0, 65535, 7], [], [40000]]
    arr = TokenArray.from_lists(rows, token_dtype(65536))
    assert [arr[i] for i in range(3)] == rows and arr.lengths().tolist() == [3, 0, 1]
    assert all(type(t) is int for t in arr[0])


def test_token_array_checks_its_offsets() -> None:
    with pytest.raises(DataError, match="offsets run from 0 to 2, expected 0 to 3"):
        TokenArray(np.zeros(3, np.int16), np.array([0, 2]))
    with pytest.raises(DataError, match="1-D"):
        TokenArray(np.zeros((1, 3), np.int16), np.array([0, 3]))


def test_dataset_items_lengths_and_subset_match_the_list_dataset() -> None:
    src = [[5, 6, 7], [8], [9, 10], [11, 12, 13, 14]]
    tgt = [[20], [21, 22], [23, 24, 25], [26]]
    lists = ParallelDataset(src, tgt)
    arrays = IndexedDataset(
        TokenArray.from_lists(src, np.int16), TokenArray.from_lists(tgt, np.int16)
    )
    for a, b in ((lists, arrays), (lists.subset([3, 1]), arrays.subset([3, 1]))):
        assert len(a) == len(b)
        assert [a[i] for i in range(len(a))] == [b[i] for i in range(len(b))]
        assert a.src_lengths == b.src_lengths.tolist() and a.tgt_lengths == b.tgt_lengths.tolist()
    nested = arrays.subset([3, 2, 0]).subset([2, 0])  # positions, not array rows
    assert nested[0] == (src[0], tgt[0], 0) and nested[1] == (src[3], tgt[3], 1)
    assert nested.src.tokens is arrays.src.tokens  # no ids copied
    source_only = IndexedDataset(TokenArray.from_lists(src, np.int16))
    assert source_only[1] == ([8], None, 1) and source_only.tgt_lengths is None
    with pytest.raises(DataError, match="4 sources but 1 targets"):
        IndexedDataset(arrays.src, TokenArray.from_lists([[1]], np.int16))


@settings(max_examples=60, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=80),
    max_len=st.one_of(st.none(), st.integers(1, 45)),
    ratio=st.one_of(st.none(), st.floats(1.0, 5.0), st.sampled_from([1, 2, 1.5, 3.0])),
    source_only=st.booleans(),
)
def test_filter_lengths_keeps_exactly_what_the_pair_loop_keeps(
    pairs: list[tuple[int, int]], max_len: int | None, ratio: float | None, source_only: bool
) -> None:
    src = [s for s, _ in pairs]
    tgt = None if source_only else [t for _, t in pairs]
    expected = reference_filter(src, tgt, max_len, ratio)
    if pairs and not expected[0]:
        with pytest.raises(DataError, match="no pair is left"):
            filter_lengths(np.array(src), None if tgt is None else np.array(tgt), max_len, ratio)
        return
    kept, removed = filter_lengths(
        np.array(src, dtype=np.int64), None if tgt is None else np.array(tgt), max_len, ratio
    )
    assert (kept.tolist(), removed) == expected
    ids = lambda lengths: [[7] * n for n in lengths]  # noqa: E731
    assert filter_pairs(ids(src), None if tgt is None else ids(tgt), max_len, ratio) == expected


def test_filter_lengths_rejects_bad_limits() -> None:
    with pytest.raises(ConfigError, match="max_len=0"):
        filter_lengths(np.array([1]), np.array([1]), 0, None)
    with pytest.raises(ConfigError, match=r"max_len_ratio=0\.5"):
        filter_lengths(np.array([1]), np.array([1]), None, 0.5)
    with pytest.raises(DataError, match="2 sources but 1 targets"):
        filter_lengths(np.array([1, 2]), np.array([1]), None, None)


def test_first_epoch_batches_equal_the_list_path(toy, tmp_path: Path) -> None:
    """The same corpus through read + encode + ParallelDataset and through the id cache +
    IndexedDataset: the same kept pairs and, for one seed, the same batch tensors."""
    src_file, tgt_file, tok = toy
    src_ids, tgt_ids = tok.encode_src(read_lines(src_file)), tok.encode_tgt(read_lines(tgt_file))
    kept, removed = filter_pairs(src_ids, tgt_ids, 20, 2.0, "train")
    lists = ParallelDataset(src_ids, tgt_ids).subset(kept)
    full = IndexedDataset(
        cached_token_array(src_file, tok, "src", tmp_path),
        cached_token_array(tgt_file, tok, "tgt", tmp_path),
    )
    kept2, removed2 = filter_lengths(full.src_lengths, full.tgt_lengths, 20, 2.0, "train")
    assert (
        kept2.tolist() == kept and removed2 == removed and removed["too_long"] and removed["ratio"]
    )
    arrays = full.subset(kept2)

    def batches(data, epoch: int) -> list:
        sampler = TokenBatchSampler(
            data.src_lengths, data.tgt_lengths, max_tokens=60, seed=3, bucket_size=64
        )
        sampler.set_epoch(epoch)
        return list(make_loader(data, sampler)), sampler

    for epoch in (0, 1):
        old, old_sampler = batches(lists, epoch)
        new, new_sampler = batches(arrays, epoch)
        assert new_sampler.batches() == old_sampler.batches()
        cost = np.maximum(np.array(lists.src_lengths), np.array(lists.tgt_lengths)) + 1
        assert old_sampler.all_batches(epoch) == reference_batches(cost, 60, 3, epoch, 64)
        assert len(old) == len(new) > 5
        for a, b in zip(old, new):
            for name in ("src", "src_pad_mask", "tgt_input", "tgt_out", "tgt_pad_mask", "index"):
                assert torch.equal(getattr(a, name), getattr(b, name)), name
            assert a.n_tokens == b.n_tokens
