"""benchmarks/gpu_runs.py: the GPU check's table read back from run records."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from benchmarks.gpu_runs import main, read_rows


def _run(folder: Path, speeds: list[tuple[int, float]], valid: list[float], test: bool) -> None:
    folder.mkdir(parents=True)
    summary = {
        "format": "attnmt-run-summary",
        "version": 1,
        "status": "finished" if test else "interrupted",
        "model": "transformer",
        "precision": "bf16",
        "device": "cuda",
        "step": speeds[-1][0],
        "minutes": 1.5,
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    events = [{"event": "start", "step": 0, "time": 0.0}]
    events += [
        {"event": "train", "step": s, "time": 1.0, "epoch": 0, "minutes": 0.1, "tokens_per_sec": v}
        for s, v in speeds
    ]
    events += [
        {
            "event": "valid",
            "step": 100 * (i + 1),
            "time": 2.0,
            "epoch": 0,
            "minutes": 0.2,
            "bleu": b,
        }
        for i, b in enumerate(valid)
    ]
    if test:
        events.append({"event": "test", "step": 200, "time": 3.0, "bleu": 4.5, "beam": 5})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def test_rows_take_the_median_after_step_1_and_the_last_validation(tmp_path: Path) -> None:
    _run(tmp_path / "b-run", [(1, 10.0), (50, 300.0), (100, 100.0), (150, 200.0)], [], False)
    _run(tmp_path / "a-run", [(1, 5.0), (50, 40.0), (100, 60.0)], [1.0, 2.5], True)
    (tmp_path / "not-a-run").mkdir()
    a, b = read_rows(tmp_path)
    assert (a.name, b.name) == ("a-run", "b-run")  # by name; a folder without a record left out
    assert a.tokens_per_sec == 50.0 and b.tokens_per_sec == 200.0  # step 1's 5 and 10 ignored
    assert (a.valid_bleu, a.test_bleu, a.test_beam, a.status) == (2.5, 4.5, 5, "finished")
    assert (b.valid_bleu, b.test_bleu, b.steps, b.status) == (None, None, 150, "interrupted")


def test_the_table_reads_the_archive_the_check_returns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    _run(runs / "transformer-auto", [(1, 5.0), (50, 26115.0)], [5.15], True)
    archive = tmp_path / "runs.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(runs, arcname=".")
    main([str(archive)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| run | precision | device | updates | status |")
    assert lines[2] == (
        "| transformer-auto | bf16 | cuda | 50 | finished | 1.50 | 26115 | 5.15 | 4.50 (beam 5) |"
    )
