"""data=toy_align: the grammar's sentences and gold links, worked out by hand; the prepared
corpus keeps its gold files line for line with the text; the Pharaoh gold reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnmt.data.config import ToyConfig
from attnmt.data.corpora import RECIPES, Recipe, prepare_corpus
from attnmt.data.gold import Alignment, format_links, parse_links
from attnmt.data.recipes import toy_align
from attnmt.data.recipes.common import Built
from attnmt.data.recipes.toy_align import NP, Clause, realise
from attnmt.data.textio import read_lines
from attnmt.decode.alignment_error import check_gold_ranges, read_gold
from attnmt.errors import ConfigError, DataError

Links = Alignment  # sure, and possible including sure
SMALL = {"train": 60, "valid": 15, "test": 15, "min_symbols": 3, "max_symbols": 30}

# (derivation, source, target, gold): worked out by hand from the grammar in the docstring
HAND_CHECKED = [
    pytest.param(  # adjectives after the noun, mirrored; ta has only a possible link
        Clause(NP("anja"), "vidar", NP("mabo", "ta", ("bela", "runi"))),
        "anja vidar ta bela runi mabo",
        "anja somel kelu tavo isko",
        "0-0 1-1 2?2 3-4 4-3 5-2",
        id="adjective-noun-reordering",
    ),
    pytest.param(  # one-to-many noun, many-to-one verb and noun, na -> un
        Clause(NP("sunadi", "na"), "tapa ri", NP("ruka pet", "ta", ("zuli",))),
        "na sunadi tapa ri ta zuli ruka pet",
        "un ela mira gulsen skavil ankor",
        "0-0 1-1 1-2 2-3 3-3 4?4 5-5 6-4 7-4",
        id="one-to-many-and-many-to-one",
    ),
    pytest.param(  # verb-final subordinate clause ending in the unaligned ne
        Clause(
            NP("boris"),
            "dormal",
            NP("tobe", "na"),
            ("ke", Clause(NP("garu", "ta"), "halip", NP("kemal"))),
        ),
        "boris dormal na tobe ke ta garu halip kemal",
        "boris fe lasko un famir tes hosen kemal vontra ne",
        "0-0 1-1 1-2 2-3 3-4 4-5 5?6 6-6 7-8 8-7",
        id="verb-final-and-unaligned-particle",
    ),
    pytest.param(  # a PP keeps its order; the noun before it takes its adjective after it
        Clause(NP("oskar"), "nabu", NP("lisku", "ta", ("osta",), ("kon", NP("anja")))),
        "oskar nabu ta osta lisku kon anja",
        "oskar ristel bramo lunde sal anja",
        "0-0 1-1 2?2 3-3 4-2 5-4 6-5",
        id="prepositional-phrase",
    ),
    pytest.param(  # two nested subordinate clauses: each verb-final, the inner one after ne
        Clause(
            NP("anja"),
            "sorim",
            NP("liesel"),
            (
                "poru",
                Clause(
                    NP("tamiko"),
                    "kintu",
                    NP("fomi", "ta"),
                    ("ilsa", Clause(NP("oskar"), "pesu ri", NP("boris"))),
                ),
            ),
        ),
        "anja sorim liesel poru tamiko kintu ta fomi ilsa oskar pesu ri boris",
        "anja kelpa liesel vilan tamiko quorin fe moren ne orsen oskar boris wandol ne",
        "0-0 1-1 2-2 3-3 4-4 5-6 5-7 6?5 7-5 8-9 9-10 10-12 11-12 12-11",
        id="nested-subordinate-clauses",
    ),
]


@pytest.mark.parametrize(("clause", "src", "tgt", "gold"), HAND_CHECKED)
def test_hand_checked_sentences(clause: Clause, src: str, tgt: str, gold: str) -> None:
    example = realise(clause)
    assert (example.src, example.tgt, example.gold) == (src, tgt, gold)


def test_lexicon_kinds_and_disjoint_vocabularies() -> None:
    entries = {**toy_align.NOUNS, **toy_align.ADJECTIVES, **toy_align.VERBS}
    entries |= {**toy_align.PREPOSITIONS, **toy_align.CONJUNCTIONS}
    shapes = {(len(s.split()), len(t.split())) for s, t in entries.items()}
    assert shapes == {(1, 1), (1, 2), (2, 1)}  # one-to-one, one-to-many, many-to-one
    src_words = {w for s in [*entries, *toy_align.DETERMINERS] for w in s.split()}
    tgt_words = {w for t in [*entries.values(), *toy_align.DETERMINERS.values()] for w in t.split()}
    tgt_words.add(toy_align.PARTICLE)
    assert not (src_words | tgt_words) & set(toy_align.NAMES)
    assert not src_words & tgt_words  # only names are words of both languages
    words = src_words | tgt_words | set(toy_align.NAMES)
    assert all(w.isascii() and w.isalpha() and w.islower() for w in words)


def test_same_seed_same_corpus_other_seed_another() -> None:
    a = toy_align.generate(ToyConfig(**SMALL, seed=7))
    assert a == toy_align.generate(ToyConfig(**SMALL, seed=7))
    assert a != toy_align.generate(ToyConfig(**SMALL, seed=8))


def test_more_training_pairs_leave_valid_and_test_as_they_were() -> None:
    small = toy_align.generate(ToyConfig(**SMALL))
    large = toy_align.generate(ToyConfig(**{**SMALL, "train": 120}))
    assert (large["valid"], large["test"]) == (small["valid"], small["test"])
    assert large["train"][:60] == small["train"]  # train is drawn last: it only grows


def _check_example(src: str, tgt: str, gold: Links, lo: int = 3, hi: int = 30) -> None:
    """Lengths in range, links in range, and who is (not) aligned, as the grammar says:
    ``ta`` has only possible links, every other source word only sure ones; every target
    word but the particle ``ne`` has a link. ``gold.possible`` includes ``gold.sure``."""
    s, t = src.split(), tgt.split()
    assert lo <= len(s) <= hi and lo <= len(t) <= hi
    assert gold.sure <= gold.possible
    assert all(i < len(s) and j < len(t) for i, j in gold.possible)
    for i, word in enumerate(s):
        sure = any(a == i for a, _ in gold.sure)
        possible_only = any(a == i for a, _ in gold.possible - gold.sure)
        assert (possible_only and not sure) if word == "ta" else (sure and not possible_only), (
            i,
            word,
        )
    for j, word in enumerate(t):
        linked = any(b == j for _, b in gold.possible)
        assert linked != (word == toy_align.PARTICLE), (j, word)


def test_generated_pairs_follow_the_grammar() -> None:
    splits = toy_align.generate(ToyConfig(**SMALL))
    sources = [e.src for examples in splits.values() for e in examples]
    assert len(set(sources)) == len(sources) == 90  # unique across splits
    for examples in splits.values():
        for e in examples:
            _check_example(e.src, e.tgt, parse_links(e.gold))


def test_sentence_lengths_follow_the_settings() -> None:
    splits = toy_align.generate(ToyConfig(**{**SMALL, "min_symbols": 5, "max_symbols": 8}))
    for e in (e for examples in splits.values() for e in examples):
        assert 5 <= len(e.src.split()) <= 8 and 5 <= len(e.tgt.split()) <= 8
    with pytest.raises(ConfigError, match=r"data\.toy\.max_symbols=2: .* >= 3"):
        toy_align.generate(ToyConfig(**{**SMALL, "max_symbols": 2}))


def test_prepared_corpus_has_gold_line_for_line(tmp_path: Path) -> None:
    corpus = prepare_corpus({"name": "toy_align", "root": str(tmp_path), "toy": SMALL})
    assert corpus.counts == {"train": 60, "valid": 15, "test": 15}
    for split in corpus.splits:
        path = corpus.gold_alignments(split)
        assert path == corpus.directory / f"{split}.de-en.align"
        src, tgt = corpus.read(split)
        gold = read_gold(path)  # as evaluate.py's alignment scoring reads it
        assert len(read_lines(path)) == len(src) == len(tgt) == len(gold)
        check_gold_ranges(gold, src, tgt, path)
        for s, t, g in zip(src, tgt, gold):
            _check_example(s, t, g)
    again = prepare_corpus({"name": "toy_align", "root": str(tmp_path / "b"), "toy": SMALL})
    for split in corpus.splits:
        assert again.read(split) == corpus.read(split)
        assert read_gold(again.gold_alignments(split)) == read_gold(corpus.gold_alignments(split))


def test_corpora_without_gold_return_none(tmp_path: Path) -> None:
    corpus = prepare_corpus({"name": "toy_copy", "root": str(tmp_path), "toy": {"train": 10}})
    assert corpus.gold_alignments("train") is None
    with pytest.raises(DataError, match="has no 'dev' split"):
        corpus.gold_alignments("dev")


def _fake(built: Built, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(RECIPES, "toy_align", Recipe(lambda *a: built, None, ("toy",)))


def test_dropped_pairs_take_their_gold_lines_with_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = [("a b", "x y"), ("  ", "z"), ("c  d e", "w"), ("f", "\t")]
    gold = ["0-0 1-1", "", "0-0 1?0 2-0", ""]
    _fake(Built({"train": pairs}, gold={"train": gold}), monkeypatch)
    corpus = prepare_corpus({"name": "toy_align", "root": str(tmp_path)})
    assert corpus.read("train") == (["a b", "c d e"], ["x y", "w"])
    assert read_lines(corpus.gold_alignments("train")) == ["0-0 1-1", "0-0 1?0 2-0"]


@pytest.mark.parametrize(
    ("gold", "message"),
    [
        (["0-0"], "toy_align/train: 1 gold alignment lines for 2 pairs"),
        (["0-0", "0-2"], r"toy_align/train gold line 2: link 0-2 lies outside .*1 target"),
        (["0-0", "0:0"], r"toy_align/train gold line 2: '0:0' is not a link"),
    ],
)
def test_gold_that_does_not_fit_its_pairs_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gold: list[str], message: str
) -> None:
    _fake(Built({"train": [("a b", "x y"), ("c", "z")]}, gold={"train": gold}), monkeypatch)
    with pytest.raises(DataError, match=message):
        prepare_corpus({"name": "toy_align", "root": str(tmp_path)})
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_a_changed_or_missing_gold_file_is_refused(tmp_path: Path) -> None:
    cfg = {"name": "toy_align", "root": str(tmp_path), "toy": SMALL}
    path = prepare_corpus(cfg).gold_alignments("valid")
    assert path is not None
    lines = read_lines(path)
    path.write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")  # one line deleted
    with pytest.raises(DataError, match=rf"{path} has \d+ bytes, not the \d+ .*delete"):
        prepare_corpus(cfg)
    path.unlink()
    with pytest.raises(DataError, match=rf"{path} is missing: .*delete"):
        prepare_corpus(cfg)


def test_pharaoh_lines_round_trip_and_malformed_links_name_the_line() -> None:
    line = format_links([(2, 0), (0, 1), (1, 1)], [(3, 2), (0, 1)])
    assert line == "0-1 1-1 2-0 3?2"  # sorted; a link both sure and possible is sure
    sure = frozenset({(0, 1), (1, 1), (2, 0)})
    assert parse_links(line) == Alignment(sure, sure | {(3, 2)})
    assert parse_links("0-0 0?0 1?1") == Alignment(frozenset({(0, 0)}), frozenset({(0, 0), (1, 1)}))
    assert parse_links("") == Alignment(frozenset(), frozenset())
    with pytest.raises(DataError, match=r"^f:3: '1-²' is not a link; write i-j"):
        parse_links("0-0 1-²", "f:3")
