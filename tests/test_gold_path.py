"""A path setting that names no regular file (issue 66, item 12): one line naming the
setting and what is wrong, not "file not found" with the corpus's settings as the hint."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.tiny_checkpoint import private_run, run_entry_point

from attnmt.data.textio import read_lines
from attnmt.errors import DataError


def test_read_lines_says_what_the_path_is_and_names_the_setting(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = [
        (tmp_path / "gone.align", "file not found; check the path"),
        (tmp_path, "is a directory, not a file; name the file itself"),
        (Path("/dev/zero"), "is a character device, not a regular file; give a regular file"),
        (fifo, "is a pipe, not a regular file; give a regular file"),
    ]
    for path, why in cases:
        with pytest.raises(DataError) as info:
            read_lines(path, "gold_alignments")
        message = str(info.value)
        assert message.startswith(f"gold_alignments={path}: {why}"), message
        assert "data.path" not in message
    with pytest.raises(DataError, match=r"gone\.txt: file not found; check the path \(data\.path"):
        read_lines(tmp_path / "gone.txt")  # a corpus file: the corpus's settings are the hint


@pytest.mark.parametrize("gold", ["/dev/zero", "DIR"])
def test_evaluate_with_a_gold_path_that_is_no_file_is_one_line(
    gold: str,
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = private_run(tmp_path_factory, tmp_path)
    src = tmp_path / "in.src"
    src.write_text("a b c\nb\n")
    gold = str(tmp_path) if gold == "DIR" else gold
    args = [f"ckpt={run}", f"src_file={src}", f"ref_file={src}", f"gold_alignments={gold}"]
    code, _, err = run_entry_point("evaluate", args, monkeypatch, capsys)
    kind = "a directory, not a file" if gold == str(tmp_path) else "a character device"
    assert code == 2 and err.startswith(f"error: gold_alignments={gold}: is {kind}"), err
    assert "file not found" not in err and "data.path" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (run / "eval").exists()  # refused before anything was decoded or written
