"""Subword regularisation (attnmt.data.resample): a new segmentation each epoch with
sampling, the cached one without; deterministic per (seed, epoch, pair); exact resume;
whole epochs and sampling as read give each pair the same segmentation."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from helpers.toy_train import toy_train_config

from attnmt import PAD_ID
from attnmt.data import resample
from attnmt.data.config import DataConfig, to_data_config
from attnmt.data.dataset import make_loader
from attnmt.data.indexed import IndexedDataset, TokenArray
from attnmt.data.resample import (
    EpochSegmentations,
    SamplingSettings,
    check_seeded_sampling,
    pair_seed,
    sample_array,
    sample_ids,
)
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
    files: tuple[Path, Path, Path],
    model_type: str = "unigram",
    seed: int = 1,
    max_len: int = 100,
    whole_epoch_pairs: int = 10_000,
) -> EpochSegmentations:
    root, src, tgt = files
    tok = _tokenizer(root, src, tgt, model_type)
    settings = UNIGRAM if model_type == "unigram" else BPE
    fixed = _fixed(tok, src, tgt)
    return EpochSegmentations(tok, settings, seed, fixed, max_len, whole_epoch_pairs)


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


def test_a_pair_sampled_alone_or_in_an_array_is_the_same_and_seeds_differ(
    files: tuple[Path, Path, Path],
) -> None:
    data = _segmentations(files)
    sp, best = data.processors["src"], data.fixed.src
    whole = sample_array(best, sp, "src", UNIGRAM, 1, 4)
    rows = sample_array(best, sp, "src", UNIGRAM, 1, 4, rows=[9, 3])
    alone = sample_ids(sp, best[3], UNIGRAM, pair_seed(1, 4, "src", 3))
    assert rows[1] == whole[3] == alone and rows[0] == whole[9]
    seeds = {
        pair_seed(s, e, side, i)
        for s in (1, 2)
        for e in (0, 1)
        for side in ("src", "tgt")
        for i in range(50)
    }
    assert len(seeds) == 400 and max(seeds) < 2**32 - 1
    unk = [sp.unk_id(), *best[0]]
    assert sample_ids(sp, unk, UNIGRAM, 5) == unk  # <unk>'s text is not the original's


def test_large_corpora_are_sampled_as_read_with_the_same_pairs_and_bounded_lengths(
    files: tuple[Path, Path, Path],
) -> None:
    whole = _segmentations(files)
    read = _segmentations(files, whole_epoch_pairs=100)  # 300 pairs: sampled as read
    assert whole.whole_epochs and not read.whole_epochs and whole.bounds is None
    src_bound, tgt_bound = read.lengths(0)
    assert read.lengths(7)[0] is src_bound  # bounds: the same every epoch
    assert (src_bound >= read.fixed.src_lengths).all() and (src_bound <= 100).all()
    kept = 0
    for k, ((s, t), (ws, wt)) in enumerate(zip(_epoch_ids(read, 2), _epoch_ids(whole, 2))):
        assert len(s) <= src_bound[k] and len(t) <= tgt_bound[k]
        # within its bound a pair is cut as whole epochs cut it; beyond, the best cut
        assert s == (ws if len(ws) <= src_bound[k] else read.fixed.src[k])
        assert t == (wt if len(wt) <= tgt_bound[k] else read.fixed.tgt[k])
        kept += (s == read.fixed.src[k]) + (t == read.fixed.tgt[k])
    assert kept < 0.3 * 2 * len(read)  # most sides are sampled


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


@pytest.mark.parametrize("whole_epoch_pairs", [10_000, 100])
def test_batches_follow_the_epochs_lengths_and_resume_mid_epoch_reproduces(
    files: tuple[Path, Path, Path], whole_epoch_pairs: int
) -> None:
    data = _segmentations(files, whole_epoch_pairs=whole_epoch_pairs)
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

    fresh = _segmentations(files, whole_epoch_pairs=whole_epoch_pairs)  # a new process
    sampler2, loader2 = _loader(fresh)
    sampler2.load_state_dict(state)
    assert [_ids(b) for b in loader2] == rest
    assert head + rest != epoch0  # epoch 1 is not epoch 0 again


@pytest.mark.parametrize("seeding", ["ignored", "only_the_first"])
def test_sampling_refuses_a_sentencepiece_whose_seed_does_not_reproduce(
    files: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch, seeding: str
) -> None:
    """sentencepiece < 0.2.3 seeds a thread's generator only when it first samples (later
    seeds are ignored): emulated, setting up sampling fails loudly instead of sampling
    irreproducibly; the installed sentencepiece passes (every other test builds one too)."""
    for model_type, settings in (("unigram", UNIGRAM), ("bpe", BPE)):
        sp = _segmentations(files, model_type).processors["src"]
        check_seeded_sampling(sp, settings)  # the real seeding reproduces: no error
    real = resample.spm.set_random_generator_seed
    calls: list[int] = []

    def old_seeding(seed: int) -> None:
        if seeding == "only_the_first" and not calls:
            real(seed)
        calls.append(seed)

    monkeypatch.setattr(resample.spm, "set_random_generator_seed", old_seeding)
    for model_type in ("unigram", "bpe"):
        calls.clear()
        with pytest.raises(ConfigError) as err:
            _segmentations(files, model_type)
        message = str(err.value)
        assert "data.tokenizer.sampling.enabled" in message
        assert f"sentencepiece {resample.spm.__version__}" in message
        assert 'pip install -U "sentencepiece>=0.2.3"' in message


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

    monkeypatch.setattr("attnmt.data.resample.sample_ids", no_sampling)
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
