"""Issue 22, "Nothing lost, nothing silently wrong": evaluate.py's output folders, a missing
best checkpoint, unwritable or unreadable locations found before decoding."""

from __future__ import annotations

import errno
import io
import json
import logging
import runpy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.tiny_checkpoint import ROOT, private_run, run_entry_point

from attnmt import atomic
from attnmt.checkpoint_format import Checkpoint, VocabInfo
from attnmt.cli import translate
from attnmt.cli.evaluate import run
from attnmt.decode.translator import Translator, load_translator
from attnmt.errors import ConfigError, DataError, WriteError


@pytest.fixture
def run_dir(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return private_run(tmp_path_factory, tmp_path)


def _no_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any decoding fail the test: the error must come before it."""

    def boom(*args: Any, **kw: Any) -> Any:
        raise AssertionError("decoding started before the problem was reported")

    monkeypatch.setattr(Translator, "n_best", boom)


def _pair(folder: Path, name: str, lines: list[str]) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    src, ref = folder / name, folder / f"{name}.ref"
    src.write_text("\n".join(lines) + "\n")
    ref.write_text("\n".join(lines) + "\n")
    return src, ref


def test_an_evaluation_never_replaces_another(run_dir: Path, tmp_path: Path) -> None:
    ckpt = run_dir / "checkpoints" / "best-60.pt"
    a = _pair(tmp_path / "a", "in.txt", ["a b c", "b c"])
    b = _pair(tmp_path / "b", "in.txt", ["c c a b", "a"])  # same file name, other text
    base = {"ckpt": str(ckpt), "beam": 2}
    runs: list[dict[str, Any]] = [
        {"src_file": str(a[0]), "ref_file": str(a[1])},
        {"src_file": str(b[0]), "ref_file": str(b[1])},
        {"src_file": str(a[0]), "ref_file": str(a[1]), "alpha": 1.0},
        {"src_file": str(a[0]), "ref_file": str(a[1]), "max_len_b": 3},
    ]
    for extra in runs:
        run({**base, **extra}, io.StringIO())
    folders = sorted((run_dir / "eval").iterdir())
    assert len(folders) == 4 and all(f.name.startswith("best-60-in.txt-beam2-") for f in folders)
    hyps = {f.name: (f / "hyps.txt").read_text() for f in folders}
    # the same evaluation again refreshes its own folder, nothing else
    run({**base, **runs[1]}, io.StringIO())
    assert sorted((run_dir / "eval").iterdir()) == folders
    assert {f.name: (f / "hyps.txt").read_text() for f in folders} == hyps
    settings = [json.loads((f / "evaluation.json").read_text()) for f in folders]
    assert {s["decode"]["alpha"] for s in settings} == {0.6, 1.0}


def test_out_dir_holding_another_evaluation_is_refused(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "mine"
    cfg = {"ckpt": str(run_dir), "split": "test", "beam": 1, "out_dir": str(out)}
    run(cfg, io.StringIO())
    before = (out / "hyps.txt").read_text()
    _no_decoding(monkeypatch)
    with pytest.raises(ConfigError, match=f"out_dir={out} holds another evaluation"):
        run({**cfg, "alpha": 0.9, "beam": 2}, io.StringIO())
    assert (out / "hyps.txt").read_text() == before


def test_out_dir_that_is_a_file_and_unknown_metrics_fail_up_front(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    _no_decoding(monkeypatch)
    afile = tmp_path / "a-file"
    afile.write_text("keep me")
    code, _, err = run_entry_point(
        "evaluate", [f"ckpt={run_dir}", f"out_dir={afile}"], monkeypatch, capsys
    )
    assert code == 2 and f"out_dir={afile} is an existing file" in err
    assert "Traceback" not in err and afile.read_text() == "keep me"
    code, _, err = run_entry_point(
        "evaluate", [f"ckpt={run_dir}", "metrics=[bleu,meteor]"], monkeypatch, capsys
    )
    assert code == 2 and "unknown metric 'meteor'" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("code", "what"),
    [(errno.EROFS, "read-only filesystem"), (errno.ENOSPC, "no space left on device")],
)
def test_an_unwritable_evaluation_folder_fails_before_decoding(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, code: int, what: str
) -> None:
    _no_decoding(monkeypatch)

    def refuse(*args: Any, **kw: Any) -> Any:
        raise OSError(code, "injected")

    monkeypatch.setattr(atomic.tempfile, "mkstemp", refuse)
    with pytest.raises(WriteError, match=what) as info:
        run({"ckpt": str(run_dir), "split": "test"}, io.StringIO())
    assert str(run_dir / "eval") in str(info.value) and "out_dir=" in str(info.value)


def test_an_unreadable_src_file_is_one_line(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, ref = _pair(tmp_path, "in.txt", ["a b"])
    real_open = Path.open

    def denied(self: Path, *args: Any, **kw: Any) -> Any:
        if self == src:  # root reads anything, so the denial is injected
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_open(self, *args, **kw)

    monkeypatch.setattr(Path, "open", denied)
    with pytest.raises(DataError, match=f"{src}: cannot read it \\(Permission denied\\)"):
        run({"ckpt": str(run_dir), "src_file": str(src), "ref_file": str(ref)}, io.StringIO())


def test_a_missing_best_checkpoint_is_named_and_the_newer_last_is_used(
    run_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = run_dir / "checkpoints"  # best.json: best-60.pt, best-61.pt
    shutil.copy(ckpt / "best-61.pt", ckpt / "last.pt")
    (ckpt / "best-60.pt").unlink()
    shutil.copy(ckpt / "best-61.pt", ckpt / "best-59.pt")
    entries = json.loads((ckpt / "best.json").read_text())
    entries[1] = {"file": "best-59.pt", "step": 59, "val_bleu": 9.0}
    (ckpt / "best.json").write_text(json.dumps(entries))
    with caplog.at_level(logging.WARNING):
        assert load_translator(run_dir, "cpu").checkpoint_path == ckpt / "last.pt"
        out = io.BytesIO()
        translate.run({"ckpt": str(run_dir), "beam": 1}, io.BytesIO(b"a b\n"), out)
    assert f"lists {ckpt / 'best-60.pt'} but it is missing" in caplog.text


def _export(args: list[str], monkeypatch: pytest.MonkeyPatch, capsys) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sys, "argv", ["export_ctranslate2.py", *args])
    code = 0
    try:
        runpy.run_path(str(ROOT / "scripts" / "export_ctranslate2.py"), run_name="__main__")
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def test_an_export_never_writes_over_a_run(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    (run_dir / "train.log").write_text("log\n")
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    best = run_dir / "checkpoints" / "best-60.pt"
    for out, what in [
        (run_dir, "is or is inside the run directory"),
        (run_dir / "eval", "is or is inside the run directory"),
        (run_dir.parent, f"holds {run_dir}"),
        (best, "is a checkpoint file"),
    ]:
        code, err = _export([f"ckpt={run_dir}", f"out={out}", "force=true"], monkeypatch, capsys)
        assert code == 2 and what in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before


def test_export_force_replaces_only_a_previous_export(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    corpus = tmp_path / "corpus"  # a folder of the user's own: nothing an export wrote
    for name in ("train.de", "train.en", "notes/readme.txt"):
        (corpus / name).parent.mkdir(parents=True, exist_ok=True)
        (corpus / name).write_text("mine\n")
    old_export = tmp_path / "ct2-old"  # an export, and a file the user put beside it
    old_export.mkdir()
    for name in ("model.bin", "config.json", "shared_vocabulary.json", "spm.model"):
        (old_export / name).write_bytes(b"x")
    (old_export / "attnmt_export.json").write_text('{"format": "attnmt-ctranslate2-v1"}')
    (old_export / "results.txt").write_text("mine\n")
    before = {p: p.read_bytes() for d in (corpus, old_export) for p in d.rglob("*") if p.is_file()}
    for out, listed in [
        (corpus, "notes/, train.de, train.en"),
        (old_export, "results.txt"),
    ]:
        code, err = _export([f"ckpt={run_dir}", f"out={out}", "force=true"], monkeypatch, capsys)
        assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert f"out={out} is not a previous export" in err and listed in err, err
        assert "nothing was deleted" in err
    after = {p: p.read_bytes() for d in (corpus, old_export) for p in d.rglob("*") if p.is_file()}
    assert after == before


def _weights(n: int, fill: float = 0.0) -> Checkpoint:
    """A checkpoint whose weights are ``n`` float32s of ``fill`` (4n bytes)."""
    return Checkpoint("m", {}, VocabInfo(1, 1, True), {"x": torch.full((n,), fill)}, {}, {})


def _enospc(*args: Any, **kw: Any) -> Any:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_while_writing_a_checkpoint_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from attnmt import checkpoint
    from attnmt.checkpoint import CheckpointManager, save_checkpoint

    old = save_checkpoint(_weights(2), tmp_path / "last.pt")
    before = old.read_bytes()

    def torch_full(*args: Any, **kw: Any) -> None:  # what torch 2.13 raises on a full disk
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")

    monkeypatch.setattr(torch, "save", torch_full)
    monkeypatch.setattr(checkpoint, "free_bytes", lambda directory: 0)
    with pytest.raises(WriteError, match=f"cannot write {old}: no space left on device"):
        save_checkpoint(_weights(2, 1.0), old)
    monkeypatch.setattr(checkpoint, "free_bytes", lambda directory: 10**12)  # room: no ENOSPC
    with pytest.raises(WriteError, match=r"the write failed \(\[enforce.*unexpected pos 576"):
        save_checkpoint(_weights(2, 1.0), old)
    monkeypatch.setattr(
        torch, "save", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("cannot pickle x"))
    )
    with pytest.raises(RuntimeError, match="cannot pickle"):  # no write failure: a bug
        save_checkpoint(_weights(2, 1.0), old)
    monkeypatch.undo()
    monkeypatch.setattr(atomic.os, "replace", _enospc)
    with pytest.raises(WriteError, match="no space left on device"):
        CheckpointManager(tmp_path).save_last(_weights(2, 1.0))
    assert old.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary file left


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A real 1 MiB filesystem (tmpfs) at ``tmp_path/disk``; skipped where mount is refused."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        done = subprocess.run(["umount", str(disk)], capture_output=True)
        if done.returncode != 0:  # a file left open there: detach it anyway, then fail
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)
        assert done.returncode == 0, done.stderr.decode()


def test_a_real_full_disk_while_writing_a_checkpoint_is_one_line(small_disk: Path) -> None:
    from attnmt import checkpoint
    from attnmt.checkpoint import CheckpointManager

    manager = CheckpointManager(small_disk / "checkpoints")
    manager.save_last(_weights(4))
    before = manager.last_path.read_bytes()
    with pytest.raises(WriteError) as info:
        manager.save_last(_weights(1_000_000))  # 4 MB on a 1 MiB disk
    assert str(info.value) == (
        f"cannot write {manager.last_path}: no space left on device; free some space or "
        "write elsewhere (nothing there was changed)"
    )
    assert manager.last_path.read_bytes() == before
    assert [p.name for p in manager.directory.iterdir()] == ["last.pt"]  # no temporary file
    assert (checkpoint.free_bytes(small_disk) or 0) > 900_000  # nor one held open, unlinked


def test_a_full_disk_or_read_only_data_root_fails_before_preparation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.tiny_checkpoint import data_config

    from attnmt.data.corpora import prepare_corpus

    monkeypatch.setattr(atomic.tempfile, "mkstemp", lambda *a, **k: _enospc())
    with pytest.raises(WriteError, match=r"no space left on device.*data\.root="):
        prepare_corpus(data_config(tmp_path / "data"))
    monkeypatch.undo()
    monkeypatch.setattr(atomic.os, "replace", _enospc)  # the disk fills during preparation
    with pytest.raises(WriteError, match="no space left on device"):
        prepare_corpus(data_config(tmp_path / "data"))


def test_translate_output_and_closed_stdin(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    class FullDisk(io.BytesIO):
        name = "out.txt"

        def write(self, data: bytes) -> int:  # type: ignore[override]
            raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(WriteError, match=r"cannot write out\.txt: no space left on device"):
        translate.run({"ckpt": str(run_dir)}, io.BytesIO(b"a b\n"), FullDisk())
    monkeypatch.setattr(sys, "stdin", None)
    code, _, err = run_entry_point("translate", [f"ckpt={run_dir}"], monkeypatch, capsys)
    assert code == 2 and "stdin is closed" in err and "Traceback" not in err


def test_a_full_disk_mid_translation_says_how_much_was_written(run_dir: Path) -> None:
    class FillsUp(io.BytesIO):
        name = "out.txt"

        def write(self, data: bytes) -> int:  # type: ignore[override]
            if self.tell() > 0:  # room for the first chunk only
                raise OSError(errno.ENOSPC, "No space left on device")
            return super().write(data)

    out = FillsUp()
    stdin = io.BytesIO(b"a b\nb c\nc a\n")
    with pytest.raises(WriteError) as info:
        translate.run({"ckpt": str(run_dir), "chunk_lines": 2, "beam": 1}, stdin, out)
    message = str(info.value)
    assert message.startswith("cannot write out.txt: no space left on device")
    assert "the translations of the first 2 lines were written" in message
    assert "nothing there was changed" not in message
    assert out.getvalue().decode().count("\n") == 2


def _ctrl_c(*args: Any, **kw: Any) -> Any:
    raise KeyboardInterrupt


def _run_pressing_ctrl_c(name: str, args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    """:func:`run_entry_point`; a KeyboardInterrupt that escapes fails the test (it would
    end the test session)."""
    try:
        return run_entry_point(name, args, monkeypatch, capsys)
    except KeyboardInterrupt:
        pytest.fail(f"{name}.py: Ctrl-C escaped as a KeyboardInterrupt traceback")


def test_ctrl_c_in_translate_or_evaluate_is_one_line_and_exit_130(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    real = Translator.translate
    calls = {"n": 0}

    def ctrl_c_at_the_second_chunk(self: Translator, *args: Any, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(self, *args, **kw)

    monkeypatch.setattr(Translator, "translate", ctrl_c_at_the_second_chunk)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a b\nb c\nc a\n")))
    args = [f"ckpt={run_dir}", "chunk_lines=2", "beam=1", "interactive=false"]
    code, out, err = _run_pressing_ctrl_c("translate", args, monkeypatch, capsys)
    assert code == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == (
        "interrupted (Ctrl-C): the translations of the first 2 lines were written"
    )
    assert out.count("\n") == 2
    monkeypatch.setattr(Translator, "hypotheses", _ctrl_c)
    code, out, err = _run_pressing_ctrl_c("evaluate", [f"ckpt={run_dir}"], monkeypatch, capsys)
    (folder,) = (run_dir / "eval").iterdir()
    assert code == 130 and "Traceback" not in err and out == "", err
    assert err.strip().splitlines()[-1] == (
        f"interrupted (Ctrl-C) while decoding: {folder} holds no scores yet; the same "
        "command again evaluates into it"
    )


def test_evaluate_with_stdout_closed_fails_before_decoding(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    _no_decoding(monkeypatch)
    monkeypatch.setattr(Translator, "hypotheses", Translator.n_best)
    monkeypatch.setattr(sys, "stdout", None)  # python evaluate.py ... >&-
    code, _, err = run_entry_point("evaluate", [f"ckpt={run_dir}"], monkeypatch, capsys)
    assert code == 2 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("error: stdout is closed;")
    assert not (run_dir / "eval").exists()


def test_a_negative_seed_fails_before_any_data_work(tmp_path: Path) -> None:
    from helpers.toy_train import toy_train_config

    from attnmt.train.run_config import validate_config

    with pytest.raises(ConfigError, match="seed=-1 must be between 0"):
        validate_config(toy_train_config(tmp_path / "data", "seed=-1"))
    assert not (tmp_path / "data").exists()


def test_resume_with_weights_of_another_shape_names_file_and_tensor(tmp_path: Path) -> None:
    from attnmt.checkpoint import load_weights
    from attnmt.errors import CheckpointError

    model = torch.nn.Sequential(torch.nn.Linear(3, 4))
    other = torch.nn.Sequential(torch.nn.Linear(3, 5)).state_dict()
    with pytest.raises(CheckpointError, match=r"x.pt: tensor 0.weight has shape \(5, 3\)"):
        load_weights(model, other, "x.pt")
    with pytest.raises(CheckpointError, match=r"x\.pt: lacks tensor 0\.bias"):
        load_weights(model, {"0.weight": torch.zeros(4, 3)}, "x.pt")
