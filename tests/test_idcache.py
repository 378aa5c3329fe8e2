"""The train-id cache: written once, memory-mapped and reused; rebuilt for a new tokenizer or
a changed file; an interrupted write leaves nothing that passes for an entry; build_data's
warm start neither encodes nor reads the train text."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers.toy_train import toy_train_config

from attnmt.data import idcache
from attnmt.data.corpora import PreparedCorpus
from attnmt.data.idcache import FileTokens, cached_token_array, entry_dir
from attnmt.data.textio import read_lines
from attnmt.data.tokenizer import Tokenizer, load_or_train_tokenizer
from attnmt.errors import DataError
from attnmt.train.data import build_data
from attnmt.train.distributed import DistInfo
from attnmt.train.run_config import validate_config

SRC = ["ein kleiner hund läuft", "die katze schläft", "das haus ist grün", "der fluss"] * 30
TGT = ["a small dog runs", "the cat sleeps", "the house is green", "the river"] * 30


def tokenizer(root: Path, vocab: int) -> Tokenizer:
    cfg = SimpleNamespace(model_type="unigram", vocab_size=vocab, joint=True, character_coverage=1)
    return load_or_train_tokenizer(root / "train.de", root / "train.en", cfg, root / "spm")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    (tmp_path / "train.de").write_text("\n".join(SRC) + "\n", encoding="utf-8")
    (tmp_path / "train.en").write_text("\n".join(TGT) + "\n", encoding="utf-8")
    return tmp_path


def entries(cache: Path) -> list[str]:
    """Cache entries and leftovers (temporary directories start with a dot)."""
    return sorted(p.name for p in cache.iterdir()) if cache.is_dir() else []


def no_encoding(*_: object, **__: object) -> None:
    raise AssertionError("encoded although the cache holds the ids")


def test_written_once_then_memory_mapped_without_encoding(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tok, cache = tokenizer(corpus, 30), corpus / "cache"
    first = cached_token_array(corpus / "train.de", tok, "src", cache)
    expected = tok.encode_src(read_lines(corpus / "train.de"))
    assert [first[i] for i in range(len(first))] == expected
    assert first.tokens.dtype == np.int16 and first.offsets.dtype == np.int64
    (entry,) = entries(cache)
    assert entry.startswith("ids-train.de-")
    monkeypatch.setattr(tok, "encode_src", no_encoding)
    again = cached_token_array(corpus / "train.de", tok, "src", cache)
    assert [again[i] for i in range(len(again))] == expected
    assert isinstance(again.offsets.base, np.memmap) and not again.offsets.flags.writeable
    assert isinstance(again.tokens, FileTokens) and again.tokens.dtype == np.int16
    copy = pickle.loads(pickle.dumps(again))  # what a spawned DataLoader worker gets
    assert [copy[i] for i in range(len(copy))] == expected
    assert entries(cache) == [entry]


def test_a_new_tokenizer_or_a_changed_file_is_encoded_again(corpus: Path) -> None:
    cache = corpus / "cache"
    small, big = tokenizer(corpus, 30), tokenizer(corpus, 45)
    assert small.model_digest("src") != big.model_digest("src")
    cached_token_array(corpus / "train.de", small, "src", cache)
    arr = cached_token_array(corpus / "train.de", big, "src", cache)  # a checkpoint's, say
    assert [arr[i] for i in range(len(arr))] == big.encode_src(SRC)
    assert len(entries(cache)) == 2
    path = corpus / "train.de"
    before = path.stat().st_mtime_ns
    path.write_text("\n".join(SRC[:10]) + "\n", encoding="utf-8")
    os.utime(path, ns=(before + 10**9, before + 10**9))  # whatever the clock's resolution
    arr = cached_token_array(path, big, "src", cache)
    assert len(arr) == 10 and [arr[i] for i in range(10)] == big.encode_src(SRC[:10])
    assert len(entries(cache)) == 3
    path.write_text("\n".join(SRC[:10]).upper() + "\n", encoding="utf-8")  # same size
    os.utime(path, ns=(before + 2 * 10**9, before + 2 * 10**9))
    arr = cached_token_array(path, big, "src", cache)
    assert arr[0] == big.encode_src([SRC[0].upper()])[0]


def test_an_interrupted_write_leaves_no_entry(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tok, cache, path = tokenizer(corpus, 30), corpus / "cache", corpus / "train.de"
    real, calls = tok.encode_src, []

    def dies_on_the_second_chunk(texts: list[str], num_threads: int = -1) -> list[list[int]]:
        calls.append(len(texts))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(texts, num_threads)

    monkeypatch.setattr(idcache, "CHUNK_LINES", 50)
    monkeypatch.setattr(tok, "encode_src", dies_on_the_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        cached_token_array(path, tok, "src", cache)
    assert entries(cache) == []  # the temporary directory is gone too
    # a killed process leaves its temporary directory, and a hand-damaged entry lacks meta
    key = idcache.cache_key(path, tok.model_digest("src"))
    target = entry_dir(path, key, cache)
    (cache / f".{target.name}.x1y2").mkdir()
    np.save(cache / f".{target.name}.x1y2" / "tokens.npy", np.zeros(3, np.int16))
    target.mkdir()
    np.save(target / "tokens.npy", np.zeros(3, np.int16))
    monkeypatch.setattr(tok, "encode_src", real)
    arr = cached_token_array(path, tok, "src", cache)
    assert [arr[i] for i in range(len(arr))] == real(SRC)
    assert (target / "meta.json").is_file()


def test_a_file_changed_while_encoding_is_not_cached(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tok, cache, path = tokenizer(corpus, 30), corpus / "cache", corpus / "train.de"
    real = tok.encode_src

    def edits_the_file(texts: list[str], num_threads: int = -1) -> list[list[int]]:
        path.write_text("\n".join(SRC[:3]) + "\n", encoding="utf-8")
        return real(texts, num_threads)

    monkeypatch.setattr(tok, "encode_src", edits_the_file)
    with pytest.raises(DataError, match="changed while it was encoded"):
        cached_token_array(path, tok, "src", cache)
    assert entries(cache) == []


def test_build_data_warm_start_reads_no_train_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = validate_config(toy_train_config(tmp_path / "data"))
    first = build_data(cfg.data, cfg.trainer, cfg.seed, DistInfo())
    read = PreparedCorpus.read

    def no_train(self: PreparedCorpus, split: str) -> tuple[list[str], list[str]]:
        assert split != "train", "the train text was read at a warm start"
        return read(self, split)

    monkeypatch.setattr(PreparedCorpus, "read", no_train)
    monkeypatch.setattr(idcache, "encode_file", no_encoding)
    again = build_data(cfg.data, cfg.trainer, cfg.seed, DistInfo())
    assert len(again.train) == len(first.train) > 0
    assert again.sampler.batches() == first.sampler.batches()
    assert [again.train[i] for i in range(5)] == [first.train[i] for i in range(5)]
    # a checkpoint's tokenizer (finetuning, resuming) finds the ids its model made
    files = first.tokenizer.to_files_dict()
    same = build_data(cfg.data, cfg.trainer, cfg.seed, DistInfo(), files)
    assert same.sampler.batches() == first.sampler.batches()


def test_file_tokens_read_slices_of_a_npy_file(tmp_path: Path) -> None:
    values = np.arange(-5, 300, dtype=np.int16)
    np.save(tmp_path / "t.npy", values)
    tokens = FileTokens(tmp_path / "t.npy")
    assert len(tokens) == len(values) and tokens.dtype == np.int16
    for a, b in ((0, 3), (7, 7), (290, 305), (100, 400)):
        assert tokens[a:b].tolist() == values[a:b].tolist()
    with pytest.raises(IndexError, match="contiguous"):
        tokens[0:10:2]
    np.save(tmp_path / "m.npy", np.zeros((2, 3), np.int16))
    with pytest.raises(DataError, match="1-D array"):
        FileTokens(tmp_path / "m.npy")
