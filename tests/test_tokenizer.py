"""SentencePiece tokenizer: specials, round trip, joint/separate, cache, serialization."""

from __future__ import annotations

import io
import random
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import sentencepiece as spm
import torch

from attnmt import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from attnmt.data import tokenizer as tok_mod
from attnmt.data.tokenizer import Tokenizer, load_or_train_tokenizer
from attnmt.errors import CheckpointError, ConfigError, DataError

EN = ["the", "a", "house", "cat", "dog", "small", "big", "green", "runs", "sleeps", "sees"]
EN += ["under", "over", "near", "garden", "river"]
DE = ["der", "die", "das", "haus", "katze", "hund", "klein", "groß", "grün", "läuft", "schläft"]
DE += ["sieht", "über", "unter", "fluss", "gärten"]


def sentences(words: list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        body = " ".join(rng.choice(words) for _ in range(rng.randint(2, 7)))
        out.append(body[0].upper() + body[1:] + rng.choice([".", "?", "!"]))
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str], list[str]]:
    root = tmp_path_factory.mktemp("corpus")
    de, en = sentences(DE, 300, 1), sentences(EN, 300, 2)
    (root / "train.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    (root / "train.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    return root / "train.de", root / "train.en", de, en


def cfg(**kw: object) -> SimpleNamespace:
    base = {"model_type": "unigram", "vocab_size": 60, "joint": False, "character_coverage": 1.0}
    return SimpleNamespace(**{**base, **kw})


@pytest.fixture(scope="module")
def separate(corpus, tmp_path_factory) -> Tokenizer:
    src, tgt, _, _ = corpus
    return load_or_train_tokenizer(src, tgt, cfg(), tmp_path_factory.mktemp("cache"))


def test_special_ids(separate: Tokenizer) -> None:
    for pieces in (separate.src_pieces, separate.tgt_pieces):
        assert pieces([PAD_ID, UNK_ID, BOS_ID, EOS_ID]) == ["<pad>", "<unk>", "<s>", "</s>"]
    ids = separate.encode_src(["Der hund läuft."])[0]
    assert ids and min(ids) > EOS_ID  # no specials in encoded text


def test_round_trip(corpus, separate: Tokenizer) -> None:
    _, _, de, en = corpus
    assert separate.decode_src(separate.encode_src(de)) == de
    assert separate.decode_tgt(separate.encode_tgt(en)) == en
    unseen = ["Near the river a green dog sleeps!"]  # new sentence, known characters
    assert separate.decode_tgt(separate.encode_tgt(unseen)) == unseen
    assert separate.encode_src([]) == []


def test_decode_stops_at_eos_and_drops_specials(separate: Tokenizer) -> None:
    ids = separate.encode_tgt(["The cat sees a dog."])[0]
    row = [BOS_ID, *ids, EOS_ID, *ids, PAD_ID]
    padded = torch.tensor([row, [BOS_ID, *ids, PAD_ID, PAD_ID, *[PAD_ID] * len(ids)]])
    assert separate.decode_tgt(padded) == ["The cat sees a dog."] * 2
    assert separate.decode_tgt([[EOS_ID, *ids]]) == [""]
    pieces = separate.tgt_pieces([BOS_ID, *ids, EOS_ID])
    assert pieces[0] == "<s>" and pieces[-1] == "</s>" and pieces[1].startswith("▁")


def test_joint_vs_separate_vocab(corpus, separate: Tokenizer, tmp_path: Path) -> None:
    src, tgt, _, _ = corpus
    assert not separate.joint and set(separate.to_files_dict()) == {"src.model", "tgt.model"}
    assert separate.src_vocab_size == separate.tgt_vocab_size == 60
    # "ä" occurs only in German: the English target model maps it to <unk>
    assert UNK_ID in separate.encode_tgt(["ä"])[0] and UNK_ID not in separate.encode_src(["ä"])[0]

    joint = load_or_train_tokenizer(src, tgt, cfg(joint=True, vocab_size=90), tmp_path)
    assert joint.joint and set(joint.to_files_dict()) == {"spm.model"}
    assert joint.src_vocab_size == joint.tgt_vocab_size == 90
    assert joint.vocab_info() == {"src_size": 90, "tgt_size": 90, "joint": True}
    text = ["Der Hund sees the Katze."]
    assert joint.encode_src(text) == joint.encode_tgt(text)
    assert UNK_ID not in joint.encode_tgt(["ä"])[0]


def test_bpe_and_mapping_config(corpus, tmp_path: Path) -> None:
    src, tgt, de, _ = corpus
    settings = {"model_type": "bpe", "vocab_size": 70, "joint": False, "character_coverage": 1.0}
    bpe = load_or_train_tokenizer(src, tgt, settings, tmp_path)
    assert bpe.src_vocab_size == 70
    assert bpe.decode_src(bpe.encode_src(de[:20])) == de[:20]


def test_training_is_deterministic(corpus, tmp_path: Path) -> None:
    src, tgt, _, _ = corpus
    a = load_or_train_tokenizer(src, tgt, cfg(), tmp_path / "a")
    b = load_or_train_tokenizer(src, tgt, cfg(), tmp_path / "b")
    assert a.to_files_dict() == b.to_files_dict()


def test_sentence_sampling_leaves_small_corpora_alone(
    corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """input_sentence_size caps what big corpora feed SentencePiece's training; below the
    cap the model is the one trained on every sentence: the same pieces, scores and ids
    (the serialized bytes differ only in the settings they record)."""
    src, tgt, de, en = corpus
    settings = tok_mod._settings(cfg(joint=True))
    capped = tok_mod.train_model([src, tgt], settings, print)
    real = tok_mod.spm.SentencePieceTrainer.train
    seen: dict[str, object] = {}

    def uncapped(**kwargs: object) -> None:
        seen.update(kwargs)
        kwargs.pop("input_sentence_size"), kwargs.pop("shuffle_input_sentence")
        real(**kwargs)

    monkeypatch.setattr(tok_mod.spm.SentencePieceTrainer, "train", uncapped)
    a, b = Tokenizer(capped), Tokenizer(tok_mod.train_model([src, tgt], settings, print))
    n = a.src_vocab_size
    assert a.src_pieces(range(n)) == b.src_pieces(range(n))
    assert [a._src.get_score(i) for i in range(n)] == [b._src.get_score(i) for i in range(n)]
    assert a.encode_src(de + en) == b.encode_src(de + en)
    assert seen["input_sentence_size"] == 2_000_000 and seen["shuffle_input_sentence"] is True


def test_too_large_vocab_shrinks_and_logs(corpus, tmp_path: Path) -> None:
    src, tgt, _, _ = corpus
    messages: list[str] = []
    tok = load_or_train_tokenizer(src, tgt, cfg(vocab_size=5000), tmp_path, log=messages.append)
    assert 30 < tok.src_vocab_size < 5000
    assert any("not vocab_size=5000" in m and str(tok.src_vocab_size) in m for m in messages)


def test_too_small_vocab_is_config_error(corpus, tmp_path: Path) -> None:
    src, tgt, _, _ = corpus
    with pytest.raises(ConfigError, match=r"vocab_size=10 is smaller than the \d+ characters"):
        load_or_train_tokenizer(src, tgt, cfg(vocab_size=10), tmp_path)


def test_bad_config_and_missing_file(corpus, tmp_path: Path) -> None:
    src, tgt, _, _ = corpus
    with pytest.raises(ConfigError, match="model_type='wordpiece'"):
        load_or_train_tokenizer(src, tgt, cfg(model_type="wordpiece"), tmp_path)
    with pytest.raises(ConfigError, match="lacks key 'joint'"):
        load_or_train_tokenizer(src, tgt, {"model_type": "bpe", "vocab_size": 50}, tmp_path)
    missing = tmp_path / "nope.en"
    with pytest.raises(DataError, match=re.escape(f"not found: {missing}")):
        load_or_train_tokenizer(src, missing, cfg(), tmp_path)


def test_cache_hit_does_not_train(corpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src, tgt, _, _ = corpus
    first = load_or_train_tokenizer(src, tgt, cfg(), tmp_path)
    entries = [p.name for p in tmp_path.iterdir()]
    assert len(entries) == 1 and entries[0].startswith("spm-")

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("trained although the cache holds this tokenizer")

    monkeypatch.setattr(tok_mod.spm.SentencePieceTrainer, "train", refuse)
    again = load_or_train_tokenizer(src, tgt, cfg(), tmp_path)
    assert again.to_files_dict() == first.to_files_dict()
    # a different setting, or edited training data, is a different cache entry
    with pytest.raises(AssertionError, match="trained although"):
        load_or_train_tokenizer(src, tgt, cfg(vocab_size=61), tmp_path)
    edited = tmp_path / "edited.en"
    edited.write_text(tgt.read_text() + "One more line.\n")
    with pytest.raises(AssertionError, match="trained although"):
        load_or_train_tokenizer(src, edited, cfg(), tmp_path)


def test_files_dict_round_trip_through_torch(corpus, separate: Tokenizer, tmp_path: Path) -> None:
    _, _, de, en = corpus
    files = separate.to_files_dict()
    assert all(type(v) is bytes for v in files.values())
    torch.save({"tokenizer": files}, tmp_path / "ckpt.pt")
    loaded = torch.load(tmp_path / "ckpt.pt", weights_only=True)["tokenizer"]
    again = Tokenizer.from_files_dict(loaded)
    assert again.encode_src(de) == separate.encode_src(de)
    assert again.encode_tgt(en) == separate.encode_tgt(en)
    separate.save(tmp_path / "dir")
    assert Tokenizer.load(tmp_path / "dir").encode_tgt(en) == separate.encode_tgt(en)


def test_bad_serialized_models(corpus, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"has files \['x.model'\]"):
        Tokenizer.from_files_dict({"x.model": b"1"})
    with pytest.raises(CheckpointError, match=r"cannot read SentencePiece model spm\.model"):
        Tokenizer.from_files_dict({"spm.model": b"not a model"})
    with pytest.raises(DataError, match=re.escape(f"no tokenizer in {tmp_path}")):
        Tokenizer.load(tmp_path)
    writer = io.BytesIO()  # SentencePiece's default ids: unk=0 bos=1 eos=2, no pad
    spm.SentencePieceTrainer.train(
        input=str(corpus[1]), model_writer=writer, vocab_size=40, minloglevel=2
    )
    with pytest.raises(DataError, match=r"special ids pad/unk/bos/eos=.*retrain"):
        Tokenizer(writer.getvalue())
