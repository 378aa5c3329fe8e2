"""The default corpus ships in the package: its bytes are pinned, preparing it needs no apt,
its splits equal the former apt-based preparation's, and a rebuild from Debian gives it back.

The split figures below were measured on the apt-based pipeline (commit a35e6d4, Debian
trans-de-en 1.9-6): pairs per split, and sha256 of each split as ``de<TAB>en\\n`` lines.
"""

from __future__ import annotations

import hashlib
import logging
import lzma
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from attnmt.data import download, pairfile
from attnmt.data.corpora import prepare_corpus
from attnmt.data.recipes import ding
from attnmt.errors import DataError

SHIPPED_SHA256 = "8bbff425838e59556333d539aaf7ba60c6e73bd6d7b40be4931230f66e8fc5d1"
SPLITS = {  # split: (pairs, sha256 of its "de\ten\n" lines), from the apt-based preparation
    "train": (15079, "a61c140eef849078926684f6845a39ddc08f8ab177cef39bc22f86bf7542b709"),
    "valid": (879, "a5684959f5a95c505b209311944122cf28690e9562801a7178d7171346f4e594"),
    "test": (866, "6cef1791c5292021709d39fa2cbf29ced5854771e9439e3f7fc5e626481fc725"),
}
REMOVED = {
    "sub-entries fewer than 3 words": 302572,
    "sub-entries not starting with a capital letter": 43483,
    "sub-entries not ending in . ? or !": 26236,
    "sub-entries containing sb./sth./jdn./etw./ '/' or '...'": 2639,
    "duplicate pairs": 9,
}


def split_digest(src: list[str], tgt: list[str]) -> str:
    return hashlib.sha256("".join(f"{s}\t{t}\n" for s, t in zip(src, tgt)).encode()).hexdigest()


def test_shipped_file_is_the_pinned_one() -> None:
    assert ding.SHIPPED.is_file(), f"{ding.SHIPPED} is missing"
    assert pairfile.sha256_bytes(ding.SHIPPED.read_bytes()) == SHIPPED_SHA256
    assert ding.SHIPPED_SHA256 == SHIPPED_SHA256
    notes = ding.SHIPPED.parent / "README.md"
    assert "GPL-2+" in notes.read_text(encoding="utf-8") and (notes.parent / "GPL-2.txt").is_file()


def test_prepares_the_apt_splits_without_apt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_commands(cmd: list[str], cwd: Path) -> None:
        raise AssertionError(f"ran {cmd}")

    monkeypatch.setattr(download, "_run", no_commands)
    monkeypatch.setenv("PATH", str(tmp_path))  # no apt-get, no dpkg-deb, nothing
    corpus = prepare_corpus({"root": str(tmp_path / "data")})
    assert corpus.counts == {split: n for split, (n, _) in SPLITS.items()}
    for split, (_, digest) in SPLITS.items():
        assert split_digest(*corpus.read(split)) == digest, split
    assert corpus.removed == REMOVED
    assert [p.name for p in (tmp_path / "data").iterdir()] == [corpus.directory.name]  # no raw/
    en_de = prepare_corpus({"root": str(tmp_path / "data"), "src_lang": "en", "tgt_lang": "de"})
    assert en_de.directory == corpus.directory and en_de.read("test")[0] == corpus.read("test")[1]


def test_a_damaged_or_missing_shipped_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    damaged = tmp_path / "ding_de_en.tsv.xz"
    data = bytearray(ding.SHIPPED.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    monkeypatch.setattr(ding, "SHIPPED", damaged)
    with pytest.raises(DataError) as err:
        prepare_corpus({"root": str(tmp_path / "data")})
    assert f"{damaged}: sha256 is " in str(err.value) and "rebuild_ding.py" in str(err.value)
    monkeypatch.setattr(ding, "SHIPPED", tmp_path / "gone.tsv.xz")
    with pytest.raises(DataError, match=re.escape(f"{tmp_path / 'gone.tsv.xz'}: cannot read")):
        prepare_corpus({"root": str(tmp_path / "data")})


def test_pairfile_round_trip_is_deterministic() -> None:
    pairs = [("Guten Tag.", "Good day."), ("Wie geht's?", "How are you?")]
    removed = {"b first": 2, "a second": 1}
    data = pairfile.dumps(pairs, removed, ["origin: here", "licence: none"])
    assert data == pairfile.dumps(pairs, removed, ["origin: here", "licence: none"])
    back = pairfile.loads(data)
    assert back.pairs == pairs and list(back.removed.items()) == list(removed.items())
    assert back.comments == ["origin: here", "licence: none"]


@pytest.mark.parametrize(
    "pair", [("a\tb", "c"), ("a", "b\nc"), ("# a", "b"), ("", "b"), (" a", "b")]
)
def test_pairfile_refuses_pairs_it_could_not_read_back(pair: tuple[str, str]) -> None:
    with pytest.raises(DataError, match="pair 0"):
        pairfile.dumps([pair])


def test_pairfile_errors_name_the_file_and_line() -> None:
    with pytest.raises(DataError, match=r"x\.xz: not an xz-compressed"):
        pairfile.loads(b"plain text", "x.xz")
    bad = lzma.compress(b"# note\na\tb\nno tab here\n")
    with pytest.raises(DataError, match=r"x\.xz:3: expected source<TAB>target"):
        pairfile.loads(bad, "x.xz")


def _apt_candidate(package: str) -> str | None:
    """The version apt would download, or None without apt or package lists."""
    if shutil.which("apt-cache") is None or shutil.which("dpkg-deb") is None:
        return None
    probe = subprocess.run(["apt-cache", "policy", package], capture_output=True, text=True)
    found = re.findall(r"^\s*Candidate:\s*(\S+)", probe.stdout, flags=re.MULTILINE)
    return found[0] if probe.returncode == 0 and found and found[0] != "(none)" else None


@pytest.mark.slow
@pytest.mark.network
def test_rebuild_from_debian_gives_the_shipped_file(tmp_path: Path) -> None:
    """Skips itself without apt, without package lists, when apt offers another version of
    the package than the shipped file's, or when the download fails (no mirror)."""
    shipped = pairfile.load(ding.SHIPPED, SHIPPED_SHA256, "")
    package, version = re.findall(r"Debian package (\S+) (\S+) ", " ".join(shipped.comments))[0]
    candidate = _apt_candidate(package)
    if candidate is None:
        pytest.skip(f"no apt-cache/dpkg-deb, or apt's package lists do not list {package}")
    if candidate != version:
        pytest.skip(f"apt offers {package} {candidate}; the shipped file is from {version}")
    try:
        data = ding.rebuild(package, tmp_path / "raw", logging.getLogger("test"))
    except DataError as err:
        pytest.skip(f"apt cannot fetch {package} here: {err}")
    rebuilt = pairfile.loads(data)
    assert rebuilt.pairs == shipped.pairs and rebuilt.removed == shipped.removed
    assert rebuilt.comments == shipped.comments
    assert data == ding.SHIPPED.read_bytes(), "same content, other xz bytes: another liblzma?"
