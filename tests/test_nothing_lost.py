"""Issue 22, "Nothing lost, nothing silently wrong": evaluate.py's output folders, a missing
best checkpoint, unwritable or unreadable locations found before decoding."""

from __future__ import annotations

import errno
import io
import json
import logging
import runpy
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.tiny_checkpoint import ROOT, private_run, run_entry_point

from attnmt import atomic
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
