"""scripts/snapshot_best.py on a hand-made run directory with a fake clock."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from attnmt.train.run_lock import owner_record
from scripts import snapshot_best as snap

START = "2026-11-25 01:27:33"
T0 = datetime.strptime(START, "%Y-%m-%d %H:%M:%S").timestamp()


def _record(run: Path, started: bool = True) -> None:
    """The run record as the trainer leaves it: its first update's event at T0 + 30 s, when
    the training clock said half a minute (setup before it is not counted)."""
    lines = [{"event": "start", "step": 0, "time": T0 - 5.0}]
    if started:
        lines.append({"event": "train", "step": 1, "time": T0 + 30, "epoch": 0, "minutes": 0.5})
    (run / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    summary = {"format": "attnmt-run-summary", "version": 1, "status": "running"}
    (run / "summary.json").write_text(json.dumps(summary))


def _run(tmp_path: Path, locked: bool = True) -> Path:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    _record(run)
    if locked:
        (run / ".lock").write_text(json.dumps(owner_record()))  # this live process's
    return run


def _best(run: Path, step: int, bleu: float) -> None:
    """The trainer's state after a validation: a new best checkpoint on top of best.json."""
    (run / "checkpoints" / f"best-{step}.pt").write_bytes(f"weights {step}".encode())
    listing = run / "checkpoints" / "best.json"
    old = json.loads(listing.read_text()) if listing.is_file() else []
    new = [{"file": f"best-{step}.pt", "step": step, "val_bleu": bleu}, *old]
    listing.write_text(json.dumps(new))


class Clock:
    """Fake wall clock; each sleep lets the 'trainer' act at the time it wakes up in."""

    def __init__(self, events: dict[float, Callable[[], object]]) -> None:
        self.t, self.events = T0, dict(events)

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        for at in sorted(self.events):
            if at <= self.t:
                self.events.pop(at)()


def test_the_clock_starts_where_the_run_record_says(tmp_path: Path) -> None:
    run = _run(tmp_path)
    assert snap.first_update(run) == T0
    _record(run, started=False)
    assert snap.first_update(run) is None
    (run / "metrics.jsonl").unlink()
    (run / "summary.json").unlink()
    assert snap.first_update(run) is None  # no record yet


def test_a_run_whose_summary_says_it_ended_has_ended(tmp_path: Path) -> None:
    run = _run(tmp_path)
    assert not snap.run_ended(run)
    stale = {**owner_record(), "pid": 2**22 + 7}  # a process that is gone
    (run / ".lock").write_text(json.dumps(stale))
    assert snap.run_ended(run)  # a killed run's stale lock does not keep it running
    (run / ".lock").write_text(json.dumps(owner_record()))
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "status": "finished"}))
    assert snap.run_ended(run)


def test_keeps_the_best_as_it_stood_at_each_mark(tmp_path: Path) -> None:
    run = _run(tmp_path)
    _best(run, 500, 1.0)  # before minute 1
    clock = Clock(
        {
            T0 + 90: lambda: _best(run, 1500, 2.0),  # between minutes 1 and 2
            T0 + 150: lambda: _best(run, 2500, 3.0),  # after minute 2 only
        }
    )
    kept = snap.snapshot(run, [2, 1], run / "snapshots", clock.now, clock.sleep, poll_s=5)
    assert [(s.minutes, s.step, s.val_bleu) for s in kept] == [(1, 500, 1.0), (2, 1500, 2.0)]
    out = run / "snapshots"
    assert (out / "best-at-1min.pt").read_bytes() == b"weights 500"
    assert (out / "best-at-2min.pt").read_bytes() == b"weights 1500"
    assert sorted(p.name for p in out.iterdir()) == [
        "best-at-1min.pt",
        "best-at-2min.pt",
        "snapshots.json",
    ]  # no temporary file left
    listed = json.loads((out / "snapshots.json").read_text())
    assert [e["file"] for e in listed] == ["best-at-1min.pt", "best-at-2min.pt"]


def test_stops_when_the_run_ends_and_names_the_missed_marks(tmp_path: Path, capsys) -> None:
    run = _run(tmp_path)
    _best(run, 500, 1.0)
    clock = Clock({T0 + 100: lambda: (run / ".lock").unlink()})
    kept = snap.snapshot(run, [1, 5, 10], run / "snapshots", clock.now, clock.sleep)
    assert [s.minutes for s in kept] == [1]
    assert "missed [5, 10]" in capsys.readouterr().out


def test_a_pruned_checkpoint_is_looked_up_again(tmp_path: Path) -> None:
    run = _run(tmp_path)
    (run / "checkpoints" / "best.json").write_text(
        json.dumps([{"file": "best-9.pt", "step": 9, "val_bleu": 0.5}])
    )
    with pytest.raises(SystemExit, match="naming checkpoints that were gone"):
        snap.copy_best(run, tmp_path, 1, tries=1)  # best-9.pt is gone
    _best(run, 700, 1.5)
    assert snap.copy_best(run, tmp_path, 1).step == 700


def test_no_validation_yet_keeps_nothing(tmp_path: Path, capsys) -> None:
    run = _run(tmp_path)
    clock = Clock({})
    assert snap.snapshot(run, [1], run / "snapshots", clock.now, clock.sleep) == []
    assert "no validated checkpoint yet" in capsys.readouterr().out


def test_a_run_that_never_started_is_an_error(tmp_path: Path) -> None:
    run = _run(tmp_path, locked=False)
    _record(run, started=False)
    with pytest.raises(SystemExit, match="ended before its first update"):
        snap.snapshot(run, [1], run / "snapshots", sleep=lambda s: None)
    with pytest.raises(SystemExit, match="no such run directory"):
        snap.main([str(tmp_path / "nope"), "--minutes", "1"])
