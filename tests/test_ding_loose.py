"""The loose Ding filter (phrases too) and the larger corpus it builds, which keeps the
shipped corpus' valid and test splits exactly: hand-written dictionary lines and a
synthetic dictionary, no apt (``ding.fetch_package`` is replaced)."""

from __future__ import annotations

import logging
import runpy
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.shipped_ding import ship_ding

from attnmt.data import pairfile
from attnmt.data.config import DataConfig, SplitConfig
from attnmt.data.corpora import PreparedCorpus, prepare_corpus
from attnmt.data.recipes import ding
from attnmt.data.recipes.common import hash_fraction
from attnmt.errors import DataError

ROOT = Path(__file__).resolve().parent.parent
FEW = "sub-entries fewer than 3 words"
CAPITAL = "sub-entries not starting with a capital letter"
ENDING = "sub-entries not ending in . ? or !"
BANNED = "sub-entries containing sb./sth./jdn./etw./ '/' or '...'"

# one dictionary line: what the loose filter makes of it (a pair, or the removal reason),
# and the strict filter's reason when it drops a line the loose one keeps
CASES = [
    (
        "ein gutes Geschäft machen {v} :: to make a good deal",
        ("ein gutes Geschäft machen", "to make a good deal"),
        CAPITAL,
    ),
    (
        "Das ist gut so [ugs.] :: That is fine with me [coll.]",
        ("Das ist gut so", "That is fine with me"),
        ENDING,
    ),
    (
        "den Nagel auf den Kopf treffen; es genau treffen :: to hit the nail on the head; to be "
        "spot on",
        ("den Nagel auf den Kopf treffen", "to hit the nail on the head"),
        CAPITAL,
    ),
    ("Das ist gut. :: That is good.", ("Das ist gut.", "That is good."), None),
    ("Er lacht :: He is laughing", FEW, None),  # two German words
    ("zu Hause bleiben :: stay home", FEW, None),  # two English words
    ("Haus {n} [arch.] <Häuser> :: the house itself", FEW, None),  # annotations do not count
    ("etw. in Ordnung bringen :: to put sth. in order", BANNED, None),
    ("jdn. zum Lachen bringen :: to make someone laugh", BANNED, None),
    ("eine Rückfahrt/einen Rückflug buchen :: to book a return trip", BANNED, None),
    ("und so weiter ... :: and so on and on", BANNED, None),
    ("und so weiter … :: and so forth, and so on", BANNED, None),
]


@pytest.mark.parametrize(("line", "loose", "strict"), CASES, ids=[c[0][:24] for c in CASES])
def test_loose_filter_keeps_phrases_and_drops_the_rest(
    line: str, loose: tuple[str, str] | str, strict: str | None
) -> None:
    removed: Counter[str] = Counter()
    pairs = ding.parse_ding([line], removed, "loose")
    if isinstance(loose, tuple):
        assert pairs == [loose] and not removed
        strict_removed: Counter[str] = Counter()
        strict_pairs = ding.parse_ding([line], strict_removed)
        assert strict_pairs == ([] if strict else [loose])
        assert strict_removed == (Counter({strict: 1}) if strict else Counter())
    else:
        assert pairs == [] and removed == {loose: 1}


def test_loose_filter_splits_sub_entries_and_deduplicates() -> None:
    lines = [
        "# Version :: test",
        "Er kommt morgen früh | er kommt später | Haus :: He comes tomorrow | "
        "he comes later on | house",
        "A | B :: one | two | three",
        "er kommt später :: he comes later on",
        "no separator here",
    ]
    removed: Counter[str] = Counter()
    pairs = ding.parse_ding(lines, removed, "loose")
    assert pairs == [
        ("Er kommt morgen früh", "He comes tomorrow"),
        ("er kommt später", "he comes later on"),
    ]
    assert removed == {
        FEW: 1,
        "entries with unequal | sub-entry counts": 1,
        "duplicate pairs": 1,
        "lines without ' :: '": 1,
    }


def test_an_unknown_filter_is_refused() -> None:
    with pytest.raises(ValueError, match="sentence_filter='lax'"):
        ding.parse_ding(["Das ist gut. :: That is good."], Counter(), "lax")


def _dictionary(n: int = 600) -> str:
    """Sentences (both filters keep them), phrases (only the loose one), and phrases whose
    German side is a sentence's up to case and the final full stop."""
    lines = ["# Version :: synthetic"]
    for i in range(n):
        lines.append(f"Ich sehe {i} Häuser. :: I see {i} houses.")
        lines.append(f"{i} kleine Häuser sehen :: to see {i} small houses")
        lines.append(f"ich sehe {i} häuser :: we spot {i} houses")
    return "\n".join(lines) + "\n"


def _fake_package(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ding.fetch_package`` gives a dictionary file holding ``text`` (no apt)."""
    dict_file = tmp_path / "raw" / "de-en"
    dict_file.parent.mkdir(parents=True, exist_ok=True)
    dict_file.write_text(text, encoding="utf-8")

    def fetch(package: str, raw: Path, log: logging.Logger) -> tuple[Path, str]:
        return dict_file, "1.0-1"

    monkeypatch.setattr(ding, "fetch_package", fetch)


def _key(text: str) -> str:
    return text.casefold().rstrip(" .?!")


def _pairs(corpus: PreparedCorpus, split: str) -> list[tuple[str, str]]:
    return list(zip(*corpus.read(split)))


def test_loose_corpus_keeps_the_shipped_valid_and_test_splits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _dictionary()
    ship_ding(tmp_path / "shipped.tsv.xz", text, monkeypatch)  # the strict filter's file
    _fake_package(text, tmp_path, monkeypatch)
    data = ding.rebuild("trans-de-en", tmp_path / "raw", logging.getLogger("test"), "loose")
    loose_file = tmp_path / "loose.tsv.xz"
    loose_file.write_bytes(data)

    old = prepare_corpus({"root": str(tmp_path / "data")})
    new = prepare_corpus({"root": str(tmp_path / "data"), "path": str(loose_file)})
    assert new.directory != old.directory
    assert old.counts["valid"] > 20 and old.counts["test"] > 20  # 60 each expected
    for split in ("valid", "test"):
        for a, b in zip(old.files(split), new.files(split)):
            assert a.read_bytes() == b.read_bytes(), b.name

    held = _pairs(new, "valid") + _pairs(new, "test")
    train = _pairs(new, "train")
    assert set(_pairs(old, "train")) < set(train)  # every old training pair, and more
    sides = [{_key(pair[side]) for pair in held} for side in range(2)]
    assert not [p for p in train if _key(p[0]) in sides[0] or _key(p[1]) in sides[1]]
    # the phrase form of a held-out German sentence is gone, the others are trained on
    held_de = {de for de, _ in held}
    for i in range(600):
        phrase = (f"ich sehe {i} häuser", f"we spot {i} houses")
        assert (phrase in train) == (
            f"Ich sehe {i} Häuser." not in held_de and (hash_fraction(phrase[1]) >= 0.1)
        ), phrase

    loose = pairfile.loads(data)
    assert "rebuild: python scripts/rebuild_ding.py --filter loose --out FILE" in loose.comments
    assert loose.removed[ding.OVERLAP] > 20 and loose.removed[ding.HELD_OUT] > 50
    assert len(loose.pairs) + loose.removed[ding.OVERLAP] + loose.removed[ding.HELD_OUT] == 1800
    assert new.removed == dict(loose.removed)  # what make train prints


def test_a_held_out_pair_missing_from_the_loose_pairs_is_refused() -> None:
    en = next(
        f"We see {i} houses." for i in range(1000) if hash_fraction(f"We see {i} houses.") < 0.1
    )
    reference = [("Wir sehen Häuser.", en)]
    assert ding.keep_held_out(reference, reference, SplitConfig(), Counter()) == reference
    with pytest.raises(DataError, match="1 valid/test pairs of the shipped file are not among"):
        ding.keep_held_out(
            [("wir sehen Häuser", "we see houses")], reference, SplitConfig(), Counter()
        )


def test_data_path_names_a_missing_file_and_the_command_that_builds_it(tmp_path: Path) -> None:
    assert ding.fingerprint(DataConfig()) == {"shipped_sha256": ding.SHIPPED_SHA256}
    missing = tmp_path / "ding_loose" / "ding_de_en.tsv.xz"
    with pytest.raises(DataError) as err:
        prepare_corpus({"root": str(tmp_path / "data"), "path": str(missing)})
    assert str(err.value).startswith(f"{missing}: file not found")
    assert f"python scripts/rebuild_ding.py --filter loose --out {missing}" in str(err.value)
    assert not (tmp_path / "data").exists()


def _script() -> dict[str, Callable[..., Any]]:
    return runpy.run_path(str(ROOT / "scripts" / "rebuild_ding.py"))


def test_rebuild_script_writes_the_loose_file_beside_the_shipped_one_and_checks_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _dictionary(200)
    shipped = ship_ding(tmp_path / "shipped.tsv.xz", text, monkeypatch)
    before = shipped.read_bytes()
    _fake_package(text, tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    script = _script()
    assert script["main"](["--filter", "loose"]) == 0
    out = capsys.readouterr().out
    written = tmp_path / "data" / "ding_loose" / "ding_de_en.tsv.xz"
    assert shipped.read_bytes() == before and written.is_file()
    assert out.count(": identical") == 2 and "DIFFERENT" not in out
    assert "train on it: python train.py data.path=data/ding_loose/ding_de_en.tsv.xz" in out
    # the check fails for a file whose held-out splits are not the shipped ones
    other = tmp_path / "other.tsv.xz"
    other.write_bytes(
        pairfile.dumps([(f"Satz {i} hier.", f"Sentence {i} here.") for i in range(99)])
    )
    assert script["same_held_out_splits"](other) is False
    assert "valid.de, valid.en: DIFFERENT" in capsys.readouterr().out
