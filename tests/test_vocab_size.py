"""data.tokenizer.vocab_size=auto (attnmt.data.vocab_size): the rule on hand-computed
corpora, the log line, and the tokenizer cache key."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnmt.data.config import to_data_config
from attnmt.data.tokenizer import cache_key, load_or_train_tokenizer
from attnmt.data.vocab_size import auto_vocab_size, count_word_types
from attnmt.errors import ConfigError


@pytest.mark.parametrize(
    ("types", "size"),
    [
        (0, 1000),  # floor
        (4_999, 1000),
        (15_000, 2000),  # 1.5 → 2 (halves round up)
        (42_966, 4000),  # ding_de_en's train split: its measured size
        (45_000, 5000),
        (123_456, 12000),
        (314_999, 31000),
        (315_000, 32000),
        (2_000_000, 32000),  # cap
    ],
)
def test_the_rule(types: int, size: int) -> None:
    assert auto_vocab_size(types) == size


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def test_word_types_of_a_synthetic_corpus(tmp_path: Path) -> None:
    # 3,000 src words w0..w2999, 20,000 tgt words v0..v19999 sharing "x": 23,001 types
    src = _write(tmp_path / "a.src", [f"w{i} w{i + 1} x" for i in range(0, 3000, 2)])
    tgt = _write(tmp_path / "a.tgt", [f"v{i}  v{i + 1}\tx" for i in range(0, 20000, 2)])
    assert count_word_types([src]) == 3001
    assert count_word_types([tgt]) == 20001
    assert count_word_types([src, tgt]) == 23001
    assert auto_vocab_size(count_word_types([src, tgt])) == 2000


def test_auto_trains_the_sized_model_logs_it_and_keys_the_cache_as_auto(tmp_path: Path) -> None:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = [a + b + c for a in letters for b in letters[:8] for c in letters[:6]]  # 1,248
    src = _write(tmp_path / "t.src", [" ".join(words[i : i + 8]) for i in range(0, 1248, 8)])
    tgt = _write(tmp_path / "t.tgt", [" ".join(words[i : i + 8][::-1]) for i in range(0, 1248, 8)])
    auto = {"model_type": "unigram", "vocab_size": "auto", "joint": True}
    messages: list[str] = []
    tok = load_or_train_tokenizer(src, tgt, auto, tmp_path / "cache", log=messages.append)
    line = next(m for m in messages if "vocab_size=auto" in m)
    assert "1248 word types in t.src + t.tgt -> 1000 pieces" in line
    assert tok.src_vocab_size <= 1000  # 1000, or the most this small corpus supports (logged)
    fixed = {**auto, "vocab_size": 1000}
    assert cache_key(src, tgt, auto) != cache_key(src, tgt, fixed)  # "auto" and its rule
    messages.clear()  # warm: loaded, no word counted
    again = load_or_train_tokenizer(src, tgt, auto, tmp_path / "cache", log=messages.append)
    assert messages == [f"tokenizer: loaded {tmp_path / 'cache'}/spm-{cache_key(src, tgt, auto)}"]
    assert again.model_digest("src") == tok.model_digest("src")
    separate = {**auto, "joint": False}
    messages.clear()
    load_or_train_tokenizer(src, tgt, separate, tmp_path / "cache", log=messages.append)
    assert sum("vocab_size=auto" in m for m in messages) == 2  # one size per side


def test_config_accepts_auto_and_rejects_other_words() -> None:
    assert to_data_config({"tokenizer": {"vocab_size": "auto"}}).tokenizer.vocab_size == "auto"
    with pytest.raises(ConfigError, match=r"data\.tokenizer\.vocab_size"):
        to_data_config({"tokenizer": {"vocab_size": "big"}})
    with pytest.raises(ConfigError, match=r"data\.tokenizer\.vocab_size"):
        to_data_config({"tokenizer": {"vocab_size": 3}})
