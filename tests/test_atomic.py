"""attnmt.atomic: the one atomic write; old file kept and no temporary left on failure."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from attnmt import atomic
from attnmt.errors import WriteError


def test_write_text_bytes_json_replace(tmp_path: Path) -> None:
    p = tmp_path / "sub" / "f.txt"
    atomic.write_text(p, "a\nb\n")
    assert p.read_text() == "a\nb\n"
    atomic.write_bytes(p, b"xyz")
    assert p.read_bytes() == b"xyz"
    atomic.write_json(p, {"k": [1, 2]})
    assert json.loads(p.read_text()) == {"k": [1, 2]}
    assert [q.name for q in p.parent.iterdir()] == ["f.txt"]


def test_failure_keeps_old_file_and_removes_tmp(tmp_path: Path) -> None:
    p = tmp_path / "f.txt"
    p.write_text("old")
    with pytest.raises(RuntimeError), atomic.atomic_path(p) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer died")
    assert p.read_text() == "old"
    assert [q.name for q in tmp_path.iterdir()] == ["f.txt"]


def test_enospc_is_one_line_naming_the_path(tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "f.txt"
    p.write_text("old")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(WriteError, match=r"cannot write .*f\.txt: no space left on device"):
        atomic.write_text(p, "new")
    assert p.read_text() == "old"
    assert [q.name for q in tmp_path.iterdir()] == ["f.txt"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_directory(tmp_path: Path) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        with pytest.raises(WriteError, match="permission denied"):
            atomic.write_text(d / "f.txt", "x")
    finally:
        d.chmod(0o700)


def test_the_write_check_removes_the_folders_it_created_unless_kept(
    tmp_path: Path, monkeypatch
) -> None:
    atomic.check_writable_dir(tmp_path / "a" / "b")
    assert list(tmp_path.iterdir()) == []
    atomic.check_writable_dir(tmp_path / "a" / "b", keep=True)
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob("*")] == [Path("a"), Path("a/b")]

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.tempfile, "mkstemp", full)
    with pytest.raises(WriteError, match="no space left"):
        atomic.check_writable_dir(tmp_path / "c" / "d", keep=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]  # a failed check keeps none


def test_the_write_check_creates_again_a_folder_another_check_removed(
    tmp_path: Path, monkeypatch
) -> None:
    """Two first preparations into one new data.root: the other's check removes the folder
    it created (and this one had just created too) before this one's probe file is made.
    That is a race, not an unwritable folder: the check creates it again and passes."""
    folder = tmp_path / "data"
    mkstemp = atomic.tempfile.mkstemp
    probes: list[bool] = []

    def the_other_check_removes_it_first(*args, **kwargs):  # type: ignore[no-untyped-def]
        if not probes:
            folder.rmdir()
        probes.append(folder.is_dir())
        return mkstemp(*args, **kwargs)

    monkeypatch.setattr(atomic.tempfile, "mkstemp", the_other_check_removes_it_first)
    assert atomic.check_writable_dir(folder, "data.root=data") == folder
    assert probes == [False, True]  # the first probe found no folder, the second one did
    assert list(tmp_path.iterdir()) == []  # and what it created is removed as before

    def always_gone(*args, **kwargs):  # type: ignore[no-untyped-def]
        if folder.is_dir():
            folder.rmdir()
        return mkstemp(*args, **kwargs)

    monkeypatch.setattr(atomic.tempfile, "mkstemp", always_gone)
    with pytest.raises(WriteError, match=r"data.*\(data\.root=data\)"):
        atomic.check_writable_dir(folder, "data.root=data")  # bounded: it gives up
    assert list(tmp_path.iterdir()) == []


def test_atomic_dir_replaces_an_old_directory(tmp_path: Path) -> None:
    target = tmp_path / "cache"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with atomic.atomic_dir(target) as staging:
        assert staging.parent == tmp_path and staging.name.endswith(".tmpdir")
        plain = tmp_path / "plain"
        plain.mkdir()  # the umask's mode, not mkdtemp's private 0700
        assert staging.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777
        plain.rmdir()
        (staging / "new.txt").write_text("new")
        assert not (target / "new.txt").exists()  # nothing visible before the exit
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]


def test_atomic_dir_keeps_a_directory_another_process_completed(tmp_path: Path) -> None:
    target = tmp_path / "cache"
    with atomic.atomic_dir(target, complete=lambda p: (p / "done").is_file()) as staging:
        (staging / "done").write_text("mine")
        target.mkdir()  # a concurrent writer finishes first
        (target / "done").write_text("theirs")
    assert (target / "done").read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]


def test_atomic_dir_failure_leaves_the_target_and_no_staging(tmp_path: Path) -> None:
    target = tmp_path / "cache"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(RuntimeError), atomic.atomic_dir(target) as staging:
        (staging / "half").write_text("x")
        raise RuntimeError("writer died")
    assert [p.name for p in target.iterdir()] == ["old.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]


def test_atomic_dir_clears_stale_staging_of_its_target_only(tmp_path: Path) -> None:
    stale = tmp_path / ".cache.k2j4h1ab.tmpdir"  # left by a killed process
    legacy = tmp_path / ".cache.x9y8z7w6"  # mkdtemp's name before attnmt.atomic
    fresh = tmp_path / ".cache.q1w2e3r4.tmpdir"  # an old directory, but a new file in it
    other = tmp_path / ".other.a1b2c3d4.tmpdir"  # another target's
    for d in (stale, legacy, fresh, other):
        (d / "sub").mkdir(parents=True)
        (d / "sub" / "f").write_text("x")
        for p in (d / "sub" / "f", d / "sub", d):
            os.utime(p, (0, 0))
    os.utime(fresh / "sub" / "f")  # now: still being written
    with atomic.atomic_dir(tmp_path / "cache") as staging:
        (staging / "f").write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["cache", fresh.name, other.name])


def test_remove_stale_tmp_only_old_temporaries(tmp_path: Path) -> None:
    old = tmp_path / ".f.txt.abc.tmp"
    young = tmp_path / ".g.txt.def.tmp"
    keep = tmp_path / "f.txt"
    for q in (old, young, keep):
        q.write_text("x")
    os.utime(old, (0, 0))
    assert atomic.remove_stale_tmp(tmp_path) == [old]
    assert sorted(q.name for q in tmp_path.iterdir()) == [".g.txt.def.tmp", "f.txt"]


def test_new_files_get_the_umask_mode_and_old_files_keep_theirs(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        new = atomic.write_text(tmp_path / "new.txt", "x")
        assert new.stat().st_mode & 0o777 == 0o644
        old = tmp_path / "old.txt"
        old.write_text("x")
        old.chmod(0o600)
        atomic.write_text(old, "y")
        assert old.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(umask)


def test_a_killed_writers_staging_dir_is_removed_at_the_next_start(tmp_path: Path) -> None:
    """A preparation killed mid-write (SIGKILL: no cleanup runs) leaves its staging
    directory; the next atomic_dir of the same target removes it at once (its owner, named
    in the directory's name, is gone), while a live process's staging directory stays."""
    import subprocess
    import sys

    target = tmp_path / "corpus-abc"
    code = (
        "import os, signal, sys; from attnmt.atomic import atomic_dir\n"
        "with atomic_dir(sys.argv[1]) as d:\n"
        "    (d / 'train.de').write_text('x' * 1000)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", code, str(target)], check=False)
    assert killed.returncode == -9
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".corpus-abc.")]
    assert len(left) == 1 and (left[0] / "train.de").is_file()
    live = tmp_path / f".corpus-abc.{atomic.host_tag()}-{os.getpid()}-beef.tmpdir"
    live.mkdir()  # this (live) process's: kept
    with atomic.atomic_dir(target) as d:
        (d / "train.de").write_text("ok")
    assert (target / "train.de").read_text() == "ok"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, "corpus-abc"])
