"""Silver alignments: grow-diag-final-and by hand, the Pharaoh writer, the missing-eflomal
error, and eflomal itself on a tiny corpus (skipped when eflomal is not installed)."""

from __future__ import annotations

import builtins
from pathlib import Path

import pytest

from attnmt.data import silver
from attnmt.data.corpora import PreparedCorpus
from attnmt.data.silver import INSTALL, grow_diag_final_and, require_eflomal, write_pharaoh
from attnmt.decode.alignment_error import read_gold
from attnmt.errors import ConfigError

try:
    import eflomal  # noqa: F401  (only: is it importable?)

    HAVE_EFLOMAL = True
except ImportError:
    HAVE_EFLOMAL = False


def test_gdfa_grows_diagonally_and_final_and_needs_both_words_unaligned() -> None:
    # intersection {(0,0), (2,2), (5,1)}; the rest of the union decides:
    #   (1,1) bwd: only diagonal to (0,0) and (2,2), source 1 unaligned  -> grown
    #              (final-and could not add it: target 1 is (5,1)'s)
    #   (2,3) fwd: edge neighbour of (2,2), target 3 unaligned           -> grown
    #   (0,2) fwd: diagonal to (1,1) but source 0 and target 2 aligned    -> left out
    #   (4,4) fwd: no aligned neighbour; final-and, 4 and 4 unaligned     -> added
    #   (4,5) bwd: after (4,4), source 4 is aligned (final-and, not or)   -> left out
    #   (6,6) bwd: isolated, both unaligned after the forward pass        -> added
    forward = {(0, 0), (2, 2), (5, 1), (2, 3), (0, 2), (4, 4)}
    backward = {(0, 0), (2, 2), (5, 1), (1, 1), (4, 5), (6, 6)}
    expected = {(0, 0), (1, 1), (2, 2), (2, 3), (4, 4), (5, 1), (6, 6)}
    assert grow_diag_final_and(forward, backward) == expected


def test_gdfa_grows_in_chains_from_the_intersection() -> None:
    # (1,1) is grown from (0,0); (2,2) only neighbours (1,1), so it needs a second step
    forward = {(0, 0), (1, 1), (2, 2)}
    backward = {(0, 0)}
    assert grow_diag_final_and(forward, backward) == {(0, 0), (1, 1), (2, 2)}
    # with no intersection nothing grows, and final-and takes forward's links first:
    # (0,0) is added, then backward's (0,1) shares source 0 and is left out
    assert grow_diag_final_and({(0, 0)}, {(0, 1)}) == {(0, 0)}


def test_gdfa_of_agreeing_directions_is_their_links() -> None:
    links = {(0, 1), (1, 0), (2, 2)}
    assert grow_diag_final_and(links, links) == links
    assert grow_diag_final_and(set(), set()) == set()


def test_aligner_words_strip_punctuation_and_keep_word_indices() -> None:
    line = "„Wie ist der Ablauf?“ – fragte sie."
    assert silver.aligner_words(line) == "Wie ist der Ablauf – fragte sie"
    assert len(silver.aligner_words(line).split()) == len(line.split())
    assert silver.aligner_words("don’t stop ...") == "don’t stop ..."


def test_pharaoh_file_reads_back_as_sure_links(tmp_path: Path) -> None:
    path = tmp_path / "silver.align"
    pairs = [{(1, 0), (0, 1), (2, 2)}, set(), {(0, 0)}]
    assert write_pharaoh(path, pairs) == 4
    assert path.read_text(encoding="utf-8") == "0-1 1-0 2-2\n\n0-0\n"
    golds = read_gold(path)
    assert [set(g.sure) for g in golds] == pairs
    assert [set(g.possible) for g in golds] == pairs


def test_missing_eflomal_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_eflomal(name: str, *args: object, **kwargs: object) -> object:
        if name == "eflomal" or name.startswith("eflomal."):
            raise ImportError("No module named 'eflomal'")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_eflomal)
    monkeypatch.delitem(__import__("sys").modules, "eflomal", raising=False)
    with pytest.raises(ConfigError) as err:
        require_eflomal()
    assert 'pip install -e ".[silver]"' in str(err.value)
    with pytest.raises(ConfigError, match="eflomal is not installed"):
        silver.align_directions(["a"], ["b"])


def _tiny_corpus(tmp_path: Path) -> PreparedCorpus:
    """A fixed word mapping: 6 of its 8 three-word sentences, 100 copies each, as train;
    the other 2 (combinations train never shows, one reordered) as test."""
    words = {"der": "the", "ein": "a", "hund": "dog", "katze": "cat", "läuft": "runs"}
    words |= {"schläft": "sleeps"}
    pairs = [
        (f"{d} {n} {v}", " ".join(words[w] for w in (d, n, v)))
        for d in ("der", "ein")
        for n in ("hund", "katze")
        for v in ("läuft", "schläft")
    ]
    train = [p for p in pairs if p not in (pairs[0], pairs[7])] * 100
    # der hund läuft, and ein katze schläft with its verb first: links follow the words
    test = [pairs[0], ("schläft ein katze", "a cat sleeps")]
    for split, rows in (("train", train), ("test", test)):
        for k, lang in enumerate(("de", "en")):
            text = "".join(row[k] + "\n" for row in rows)
            (tmp_path / f"{split}.{lang}").write_text(text, encoding="utf-8")
    counts = {"train": len(train), "test": len(test)}
    return PreparedCorpus("tiny", "de", "en", tmp_path, counts)


@pytest.mark.skipif(not HAVE_EFLOMAL, reason=f"eflomal is not installed ({INSTALL})")
def test_eflomal_finds_the_word_mapping(tmp_path: Path) -> None:
    links = silver.silver_links(_tiny_corpus(tmp_path), "test")
    assert len(links) == 2
    assert links[0] == {(0, 0), (1, 1), (2, 2)}
    # ein-a, katze-cat; eflomal's jump model may leave the moved verb unaligned
    assert {(1, 0), (2, 1)} <= links[1] <= {(1, 0), (2, 1), (0, 2)}
    out = tmp_path / "test.silver.align"
    assert write_pharaoh(out, links) == 3 + len(links[1])
    assert [set(g.sure) for g in read_gold(out)] == links


def _custom_dir(tmp_path: Path) -> Path:
    """The tiny corpus as data=custom files (train, valid, test)."""
    (tmp_path / "tiny").mkdir()
    corpus = _tiny_corpus(tmp_path / "tiny")
    raw = tmp_path / "raw"
    raw.mkdir()
    for split in ("train", "test"):
        src, tgt = corpus.read(split)
        (raw / f"{split}.de").write_text("\n".join(src) + "\n", encoding="utf-8")
        (raw / f"{split}.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
        if split == "test":
            (raw / "valid.de").write_text("\n".join(src) + "\n", encoding="utf-8")
            (raw / "valid.en").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    return raw


def _cli_args(tmp_path: Path, raw: Path) -> list[str]:
    return [
        "data=custom",
        f"data.path={raw}",
        "data.src_lang=de",
        "data.tgt_lang=en",
        f"data.root={tmp_path / 'data'}",
    ]


@pytest.mark.skipif(not HAVE_EFLOMAL, reason=f"eflomal is not installed ({INSTALL})")
def test_cli_writes_the_test_links_and_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scripts.silver_alignments import main

    out = tmp_path / "silver.align"
    assert main([*_cli_args(tmp_path, _custom_dir(tmp_path)), "--out", str(out)]) == 0
    golds = read_gold(out)
    assert len(golds) == 2 and set(golds[0].sure) == {(0, 0), (1, 1), (2, 2)}
    total = sum(len(g.sure) for g in golds)
    assert f"wrote {out}: {total} links over 2 test pairs" in capsys.readouterr().out


def test_cli_without_eflomal_exits_2_naming_the_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from scripts import silver_alignments

    def missing(*_: object) -> None:
        raise ConfigError(f"eflomal is not installed; {INSTALL}")

    monkeypatch.setattr(silver, "require_eflomal", missing)
    out = tmp_path / "silver.align"
    assert (
        silver_alignments.main([*_cli_args(tmp_path, _custom_dir(tmp_path)), f"--out={out}"]) == 2
    )
    assert INSTALL in capsys.readouterr().err and not out.exists()
