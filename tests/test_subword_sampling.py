"""Subword regularisation (attnmt.data.resample): a new segmentation each epoch with
sampling, the cached one without; deterministic per (seed, epoch); exact resume."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from helpers.toy_train import toy_train_config

from attnmt import PAD_ID
from attnmt.data.config import DataConfig, to_data_config
from attnmt.data.dataset import make_loader
from attnmt.data.indexed import IndexedDataset, TokenArray
from attnmt.data.resample import EpochSegmentations, SamplingSettings, sample_file
from attnmt.data.sampler import TokenBatchSampler
from attnmt.data.tokenizer import Tokenizer, load_or_train_tokenizer
from attnmt.errors import ConfigError
from attnmt.train.config import TrainerConfig
from attnmt.train.data import build_data
from attnmt.train.distributed import DistInfo
from attnmt.train.loop import train

SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "de", "gu"]


def _corpus(root: Path, n: int = 300) -> tuple[Path, Path]:
    """Sentences of words built from syllables: many ways to cut each word into pieces."""
    rnd = random.Random(7)
    root.mkdir(parents=True, exist_ok=True)
    src, tgt = root / "train.src", root / "train.tgt"
    lines = []
    for _ in range(n):
        words = ["".join(rnd.choices(SYLLABLES, k=rnd.randint(1, 4))) for _ in range(5)]
        lines.append(" ".join(words))
    src.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    tgt.write_text("".join(f"{line[::-1]}\n" for line in lines), encoding="utf-8")
    return src, tgt


def _tokenizer(root: Path, src: Path, tgt: Path, model_type: str) -> Tokenizer:
    cfg = {"model_type": model_type, "vocab_size": 60, "joint": True}
    return load_or_train_tokenizer(src, tgt, cfg, root / f"spm-{model_type}")


def _fixed(tok: Tokenizer, src: Path, tgt: Path) -> IndexedDataset:
    read = [p.read_text(encoding="utf-8").splitlines() for p in (src, tgt)]
    arrays = [
        TokenArray.from_lists(enc(lines), np.int16)
        for enc, lines in zip((tok.encode_src, tok.encode_tgt), read)
    ]
    return IndexedDataset(*arrays)


UNIGRAM = SamplingSettings("unigram", alpha=0.1, nbest=-1)
BPE = SamplingSettings("bpe", alpha=0.1)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("sampling")
    return (root, *_corpus(root))


def _segmentations(
    files: tuple[Path, Path, Path], model_type: str = "unigram", seed: int = 1, max_len: int = 100
) -> EpochSegmentations:
    root, src, tgt = files
    tok = _tokenizer(root, src, tgt, model_type)
    settings = UNIGRAM if model_type == "unigram" else BPE
    return EpochSegmentations(src, tgt, tok, settings, seed, _fixed(tok, src, tgt), max_len)


def _epoch_ids(data: EpochSegmentations, epoch: int) -> list[tuple[list[int], list[int]]]:
    data.set_epoch(epoch)
    return [(s, t) for s, t, _ in (data[k] for k in range(len(data)))]


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_each_epoch_samples_another_segmentation_of_the_same_text(
    files: tuple[Path, Path, Path], model_type: str
) -> None:
    data = _segmentations(files, model_type)
    e0, e1 = _epoch_ids(data, 0), _epoch_ids(data, 1)
    changed = sum(a != b for a, b in zip(e0, e1))
    assert changed > len(e0) // 2  # most pairs are cut differently in the next epoch
    tok = data.tokenizer
    src_lines = files[1].read_text(encoding="utf-8").splitlines()
    tgt_lines = files[2].read_text(encoding="utf-8").splitlines()
    for ids in (e0, e1):  # only the cut changes: every segmentation decodes to its line
        assert tok.decode_src([s for s, _ in ids]) == src_lines
        assert tok.decode_tgt([t for _, t in ids]) == tgt_lines
    fixed = [(data.fixed.src[i], data.fixed.tgt[i]) for i in range(len(data.fixed))]
    assert e0 != fixed  # not the best segmentation either
    pieces = lambda ids: sum(len(s) + len(t) for s, t in ids)  # noqa: E731
    assert pieces(e0) > pieces(fixed)  # sampled segmentations are finer on average


def test_deterministic_per_seed_and_epoch(files: tuple[Path, Path, Path]) -> None:
    a, b = _segmentations(files, seed=1), _segmentations(files, seed=1)
    assert _epoch_ids(a, 3) == _epoch_ids(b, 3)
    assert _epoch_ids(a, 2) != _epoch_ids(b, 3)
    assert _epoch_ids(a, 3) != _epoch_ids(_segmentations(files, seed=2), 3)
    first = _epoch_ids(a, 5)
    _epoch_ids(a, 6)
    assert _epoch_ids(a, 5) == first  # sampled again, the same


def test_the_files_are_streamed_in_chunks_with_the_same_result(
    files: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, src, tgt = files
    tok = _tokenizer(root, src, tgt, "unigram")
    whole = sample_file(src, tok, "src", UNIGRAM, 1, 0)
    monkeypatch.setattr("attnmt.data.resample.CHUNK_LINES", 7)
    chunked = sample_file(src, tok, "src", UNIGRAM, 1, 0)
    again = sample_file(src, tok, "src", UNIGRAM, 1, 0)
    assert [chunked[i] for i in range(len(chunked))] == [again[i] for i in range(len(again))]
    assert len(whole) == len(chunked) == 300  # the chunks' seeds differ, the lines do not


def test_a_sampled_side_longer_than_max_len_keeps_the_best_segmentation(
    files: tuple[Path, Path, Path],
) -> None:
    data = _segmentations(files, max_len=12)
    src_len, tgt_len = data.lengths(0)
    assert src_len.max() <= max(12, int(data.fixed.src_lengths.max()))
    for k, (s, t) in enumerate(_epoch_ids(data, 0)):
        assert len(s) <= 12 or s == data.fixed.src[k]
        assert len(t) <= 12 or t == data.fixed.tgt[k]
        assert (len(s), len(t)) == (src_len[k], tgt_len[k])


def _loader(data: EpochSegmentations) -> tuple[TokenBatchSampler, object]:
    lengths = data.fixed.src_lengths, data.fixed.tgt_lengths
    sampler = TokenBatchSampler(*lengths, max_tokens=120, seed=3, segmentation=data)
    return sampler, make_loader(data, sampler)


def _ids(batch: object) -> list[list[int]]:
    return batch.src.tolist() + batch.tgt_out.tolist()  # type: ignore[attr-defined]


def test_batches_follow_the_epochs_lengths_and_resume_mid_epoch_reproduces(
    files: tuple[Path, Path, Path],
) -> None:
    data = _segmentations(files)
    sampler, loader = _loader(data)
    epoch0 = [_ids(b) for b in loader]
    for batch_idx in sampler.batches(1):  # packed from epoch 1's sampled lengths
        src_len, tgt_len = data.lengths(1)
        cost = np.maximum(src_len[batch_idx], tgt_len[batch_idx]) + 1
        assert cost.max() * len(batch_idx) <= 120 or len(batch_idx) == 1
    it = iter(loader)
    head = [_ids(next(it)) for _ in range(3)]
    state = sampler.state_dict()
    assert state == {"epoch": 1, "position": 3}
    rest = [_ids(b) for b in it]

    fresh = _segmentations(files)  # a new process: nothing sampled yet
    sampler2, loader2 = _loader(fresh)
    sampler2.load_state_dict(state)
    assert [_ids(b) for b in loader2] == rest
    assert head + rest != epoch0  # epoch 1 is not epoch 0 again


def test_config_checks_and_default_off() -> None:
    assert DataConfig().tokenizer.sampling.enabled is False
    for key, value in (("nbest", 1), ("nbest", 0), ("alpha", 0.0), ("dropout", 1.0)):
        with pytest.raises(ConfigError, match=f"data.tokenizer.sampling.{key}"):
            to_data_config({"tokenizer": {"sampling": {key: value}}})
    with pytest.raises(ConfigError, match="unigram or bpe"):
        SamplingSettings("char", 0.1)


def test_sampling_off_reads_the_cached_ids_and_no_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off (the default), the loader serves the cached ids: every epoch alike, and a warm
    start neither samples nor reads the train text; on, the loader samples."""
    data = {"name": "toy_reverse", "root": str(tmp_path), "toy": {"train": 200}}
    dcfg = to_data_config(data)
    tcfg = TrainerConfig(max_tokens=256, test=False)
    build_data(dcfg, tcfg, 1, DistInfo())  # cold: trains the tokenizer, caches the ids

    def no_sampling(*args: object, **kw: object) -> None:
        raise AssertionError("sampled with sampling off")

    monkeypatch.setattr("attnmt.data.resample.sample_file", no_sampling)
    monkeypatch.setattr("attnmt.data.idcache.encode_file", no_sampling)  # warm: no encoding
    warm = build_data(dcfg, tcfg, 1, DistInfo())
    assert warm.loader.dataset is warm.train and warm.sampler.segmentation is None
    assert _pairs(warm.loader) == _pairs(warm.loader)  # epochs 0 and 1: the same ids
    monkeypatch.undo()
    sampled = {**data, "tokenizer": {"sampling": {"enabled": True, "dropout": 0.5}}}
    on = build_data(to_data_config(sampled), tcfg, 1, DistInfo())
    assert isinstance(on.loader.dataset, EpochSegmentations)
    assert _pairs(on.loader) != _pairs(on.loader)


def _pairs(loader: object) -> dict[int, list[int]]:
    """One epoch of the loader: pair index -> its source ids (padding dropped)."""
    return {
        int(i): [t for t in row if t != PAD_ID]
        for batch in loader  # type: ignore[attr-defined]
        for i, row in zip(batch.index.tolist(), batch.src.tolist())
    }


def test_a_short_run_with_sampling_trains(tmp_path: Path) -> None:
    cfg = toy_train_config(
        tmp_path / "d",
        "trainer.max_tokens=256",
        "trainer.val_every_steps=0",
        "data.toy.train=200",
        "trainer.max_steps=6",
        "data.tokenizer.sampling.enabled=true",
        "data.tokenizer.sampling.dropout=0.3",
    )
    assert train(cfg, tmp_path / "run")["step"] == 6
