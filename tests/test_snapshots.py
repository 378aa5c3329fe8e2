"""attnmt.train.snapshots and scripts/snapshot_best.py on hand-made run folders.

A fake trainer writes the run record as the trainer does (each validation's best checkpoint
and ``best.json`` first, then its event; events in the order of their minutes) and a fake
``sleep`` lets it train on between the watcher's looks. The marks are training minutes of
the record: a resumed run (wall time jumps, minutes do not), a watcher started late or
restarted must all take the best as it stood at each mark.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from attnmt.train.run_lock import owner_record
from attnmt.train.snapshots import Snapshot, keep_snapshots, run_ended, watch
from scripts import snapshot_best

T0 = 1.7e9  # the run's first update, in the past: the wall clock has long passed every mark


class Run:
    """A hand-made run folder, its record written as the trainer writes it."""

    def __init__(self, folder: Path, live: bool = True) -> None:
        self.folder, self.offset = folder, 0.0  # wall seconds not counted in the minutes
        (folder / "checkpoints").mkdir(parents=True)
        self.summary({"status": "running"})
        self.events: list[dict[str, Any]] = []
        self.event({"event": "start", "step": 0, "time": T0 - 5.0})
        if live:
            (folder / ".lock").write_text(json.dumps(owner_record()))  # this live process's

    def summary(self, fields: dict[str, Any]) -> None:
        head = {"format": "attnmt-run-summary", "version": 1}
        (self.folder / "summary.json").write_text(json.dumps({**head, **fields}))

    def event(self, event: dict[str, Any]) -> None:
        with (self.folder / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(event) + "\n")

    def at(self, kind: str, step: int, minutes: float, **fields: Any) -> None:
        wall = T0 + self.offset + 60.0 * minutes
        self.event({"event": kind, "step": step, "time": wall, "epoch": 0, "minutes": minutes,
                    **fields})  # fmt: skip

    def train(self, step: int, minutes: float) -> None:
        self.at("train", step, minutes, nll=3.0)

    def valid(self, step: int, minutes: float, bleu: float) -> None:
        """A validation: its best checkpoint and best.json (best first), then its event."""
        ckpts = self.folder / "checkpoints"
        (ckpts / f"best-{step}.pt").write_bytes(f"weights {step}".encode())
        listing = ckpts / "best.json"
        best = json.loads(listing.read_text()) if listing.is_file() else []
        best.append({"file": f"best-{step}.pt", "step": step, "val_bleu": bleu})
        listing.write_text(json.dumps(sorted(best, key=lambda e: (-e["val_bleu"], e["step"]))))
        self.train(step, minutes - 0.1)
        self.at("valid", step, minutes, nll=3.0, bleu=bleu, chrf=20.0)

    def resume(self, stopped_s: float, minutes: float, step: int) -> None:
        """A new process goes on from the checkpoint at ``minutes`` after ``stopped_s``
        seconds stopped: its minutes go on from the checkpoint's, the wall time jumps."""
        self.offset += stopped_s
        self.event({"event": "start", "step": step, "time": T0 + self.offset + 60 * minutes,
                    "resumed": True})  # fmt: skip
        self.summary({"status": "running"})
        (self.folder / ".lock").write_text(json.dumps(owner_record()))

    def end(self, minutes: float, step: int) -> None:
        self.at("end", step, minutes, status="finished", reason="time_budget")
        self.summary({"status": "finished", "minutes": minutes})
        (self.folder / ".lock").unlink()

    def snapshot(self, name: str) -> bytes:
        return (self.folder / "snapshots" / name).read_bytes()

    def listing(self) -> list[dict[str, Any]]:
        return json.loads((self.folder / "snapshots" / "snapshots.json").read_text())


class Trainer:
    """The fake ``sleep``: each look later, the trainer has trained ``seconds`` more and
    written the events due by then (``script``: training minute -> what it writes)."""

    def __init__(self, minutes: float, script: dict[float, Callable[[], object]]) -> None:
        self.minutes, self.script, self.sleeps = minutes, dict(script), 0

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.minutes += seconds / 60.0
        for at in sorted(self.script):
            if at <= self.minutes:
                self.script.pop(at)()


def _no_sleep(seconds: float) -> None:
    pytest.fail("the watcher waited where it had nothing more to wait for")


# --- one look -------------------------------------------------------------------------------


def test_one_look_keeps_the_best_validated_by_each_training_minute(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = Run(tmp_path / "run")
    run.valid(500, 10.0, 1.0)
    run.valid(1000, 20.0, 3.0)
    run.train(1200, 25.0)
    assert keep_snapshots(run.folder, (30, 60)) == {}  # the clock has not reached 30
    assert not (run.folder / "snapshots").exists()
    run.valid(1500, 29.0, 2.0)
    run.train(1600, 30.5)
    kept = keep_snapshots(run.folder, (30, 60))
    assert kept == {30: Snapshot(30, "best-at-30min.pt", 1000, 3.0)}
    assert run.snapshot("best-at-30min.pt") == b"weights 1000"
    (run.folder / "checkpoints" / "best-1000.pt").write_bytes(b"changed")
    run.valid(2000, 31.0, 5.0)
    run.valid(2500, 50.0, 4.0)
    run.train(2600, 61.0)
    (run.folder / "checkpoints" / "best-2000.pt").unlink()  # pruned before the look
    missed: set[float] = set()
    kept = keep_snapshots(run.folder, (30, 60), missed)
    assert list(kept) == [30] and missed == {60}  # 30 not copied again; 60's checkpoint is gone
    assert run.snapshot("best-at-30min.pt") == b"weights 1000"
    assert "best-2000.pt (best by minute 60) is gone" in caplog.text
    caplog.clear()
    assert keep_snapshots(run.folder, (30, 60), missed) == kept
    assert caplog.text == ""  # said once
    assert run.listing() == [{"minutes": 30, "file": "best-at-30min.pt", "step": 1000,
                              "val_bleu": 3.0}]  # fmt: skip
    assert sorted(p.name for p in (run.folder / "snapshots").iterdir()) == [
        "best-at-30min.pt",
        "snapshots.json",
    ]  # no temporary file left


def test_a_late_look_takes_the_best_by_the_mark_not_the_best_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Started at minute 45 of a run that has ended, the script keeps for minute 30 the
    validation of minute 20, not best.json's top (minute 31's, better)."""
    run = Run(tmp_path / "run", live=False)
    run.valid(1000, 20.0, 3.0)
    run.valid(2000, 31.0, 5.0)
    run.train(2900, 45.0)
    assert json.loads((run.folder / "checkpoints" / "best.json").read_text())[0]["step"] == 2000
    snapshot_best.main([str(run.folder), "--minutes", "30"])
    assert run.snapshot("best-at-30min.pt") == b"weights 1000"
    assert run.listing() == [{"minutes": 30, "file": "best-at-30min.pt", "step": 1000,
                              "val_bleu": 3.0}]  # fmt: skip
    assert capsys.readouterr().out == "minute 30: best-at-30min.pt (step 1000, valid BLEU 3.00)\n"


# --- watching a running run -----------------------------------------------------------------


def test_a_resumed_run_is_marked_by_its_training_minutes(tmp_path: Path) -> None:
    """Stopped at training minute 20 and resumed three hours later: by the wall clock
    from its first update every mark has long passed (the old script copied best.json's
    top at once); by the record's minutes, minute 30 comes ten minutes into the resume."""
    run = Run(tmp_path / "run")
    run.valid(1000, 10.0, 1.0)
    run.valid(2000, 20.0, 2.0)
    (run.folder / ".lock").unlink()  # the first process stops
    run.summary({"status": "interrupted"})
    run.resume(stopped_s=3 * 3600.0, minutes=20.0, step=2000)
    trainer = Trainer(
        20.0,
        {
            25.0: lambda: run.valid(2500, 25.0, 2.5),
            29.0: lambda: run.valid(3000, 29.0, 3.0),
            30.2: lambda: run.train(3100, 30.2),
            32.0: lambda: run.valid(3500, 32.0, 4.0),  # better, but after minute 30
            35.0: lambda: run.end(35.0, 3800),
        },
    )
    watched = watch(run.folder, [30, 10, 60], poll_s=60.0, sleep=trainer.sleep)
    assert {m: s.step for m, s in watched.kept.items()} == {10: 1000, 30: 3000}
    assert run.snapshot("best-at-30min.pt") == b"weights 3000"
    assert watched.missed == [60] and watched.minutes == 35.0  # the run ended at 35
    assert [e["minutes"] for e in run.listing()] == [10, 30]


def test_a_restarted_watcher_keeps_what_was_kept(tmp_path: Path) -> None:
    """A second watcher (other marks, after a resume) merges with snapshots.json: the first
    one's copies stay listed and are not taken again, though the run has moved on."""
    run = Run(tmp_path / "run")
    run.valid(1000, 10.0, 1.0)
    run.train(1200, 12.0)
    assert watch(run.folder, [10], sleep=_no_sleep).kept == {
        10: Snapshot(10, "best-at-10min.pt", 1000, 1.0)
    }  # kept at once, nothing left to wait for
    run.valid(2000, 25.0, 2.0)
    (run.folder / "checkpoints" / "best-1000.pt").unlink()  # pruned by the trainer since
    run.train(3100, 31.0)
    snapshot_best.main([str(run.folder), "--minutes", "30"])  # the run is still running
    assert run.listing() == [
        {"minutes": 10, "file": "best-at-10min.pt", "step": 1000, "val_bleu": 1.0},
        {"minutes": 30, "file": "best-at-30min.pt", "step": 2000, "val_bleu": 2.0},
    ]
    assert run.snapshot("best-at-10min.pt") == b"weights 1000"
    watched = watch(run.folder, [10, 30], sleep=_no_sleep)
    assert list(watched.kept) == [10, 30] and watched.missed == []


def test_the_look_after_the_end_sees_the_final_events(tmp_path: Path) -> None:
    """The trainer writes its last validation and ends between two looks: the watcher,
    told the run has ended, still looks once more, then stops and names the missed marks."""
    run = Run(tmp_path / "run")
    run.valid(1000, 20.0, 1.0)
    run.train(1900, 28.0)

    def finish() -> None:
        run.valid(2000, 29.5, 2.0)
        run.train(2100, 30.4)
        run.end(30.5, 2100)

    trainer = Trainer(28.0, {29.0: finish})
    watched = watch(run.folder, [30, 60], poll_s=60.0, sleep=trainer.sleep)
    assert watched.kept[30].step == 2000 and watched.missed == [60]
    assert trainer.sleeps == 1  # no waiting for minute 60 once the run has ended


def test_a_mark_that_cannot_be_kept_is_missed_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No validation by minute 10 (the first came at 12) while the run goes on: missed,
    said once, and the watcher does not wait for the run to end."""
    run = Run(tmp_path / "run")
    run.valid(1000, 12.0, 1.0)
    run.train(1500, 15.0)
    watched = watch(run.folder, [10], sleep=_no_sleep)
    assert watched.kept == {} and watched.missed == [10]
    assert "no validation by minute 10" in caplog.text
    assert not run_ended(run.folder)


def test_a_run_whose_summary_says_it_ended_has_ended(tmp_path: Path) -> None:
    run = Run(tmp_path / "run")
    assert not run_ended(run.folder)
    stale = {**owner_record(), "pid": 2**22 + 7}  # a process that is gone
    (run.folder / ".lock").write_text(json.dumps(stale))
    assert run_ended(run.folder)  # a killed run's stale lock does not keep it running
    (run.folder / ".lock").write_text(json.dumps(owner_record()))
    run.summary({"status": "finished"})
    assert run_ended(run.folder)


# --- the script -----------------------------------------------------------------------------


def test_the_script_keeps_its_copies_where_asked_and_names_the_missed_marks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Run(tmp_path / "run")
    run.valid(500, 1.0, 1.0)
    run.valid(1500, 1.9, 2.0)
    run.valid(2500, 2.5, 3.0)
    run.end(2.6, 2600)
    out = tmp_path / "kept"
    snapshot_best.main([str(run.folder), "--minutes", "2", "1", "5", "--out", str(out)])
    assert (out / "best-at-1min.pt").read_bytes() == b"weights 500"
    assert (out / "best-at-2min.pt").read_bytes() == b"weights 1500"
    listed = json.loads((out / "snapshots.json").read_text())
    assert listed == [
        {"minutes": 1, "file": "best-at-1min.pt", "step": 500, "val_bleu": 1.0},
        {"minutes": 2, "file": "best-at-2min.pt", "step": 1500, "val_bleu": 2.0},
    ]
    assert not (run.folder / "snapshots").exists()
    said = capsys.readouterr().out
    assert "minute 1: best-at-1min.pt (step 500, valid BLEU 1.00)" in said
    assert f"{run.folder}: missed [5] (its clock stood at minute 2.6)" in said
    assert logging.getLogger("attnmt.train.snapshots").handlers == []  # its handler is gone


def test_a_run_that_never_started_is_an_error(tmp_path: Path) -> None:
    run = Run(tmp_path / "run", live=False)  # only its start event
    with pytest.raises(SystemExit, match="ended before its first update"):
        snapshot_best.main([str(run.folder), "--minutes", "1"])
    with pytest.raises(SystemExit, match="no such run directory"):
        snapshot_best.main([str(tmp_path / "nope"), "--minutes", "1"])
