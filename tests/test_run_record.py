"""The run record (metrics.jsonl + summary.json): written for finished, interrupted and
failed runs, readable mid-run, and a resume appends without repeating a step."""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import signal
from pathlib import Path

import pytest
from helpers.small_disk import fill, small_disk
from helpers.toy_train import toy_train_config
from omegaconf import DictConfig

from attnmt.errors import WriteError
from attnmt.machine import this_machine
from attnmt.run_dir import RunDir
from attnmt.run_record import VERSION, RecordError, RecordWriter, read_record
from attnmt.train.interrupt import TrainingInterrupted
from attnmt.train.loop import TrainingDiverged, train


def _cfg(data_root: Path, *overrides: str) -> DictConfig:
    settings = [
        "data.toy.train=120",
        "data.toy.valid=6",
        "data.toy.test=6",
        "trainer.max_tokens=256",
        "trainer.warmup_steps=2",
        "trainer.val_every_steps=4",
        "trainer.log_every_steps=2",
        "trainer.early_stopping_patience=0",
        "trainer.keep_best=2",
    ]
    return toy_train_config(data_root, *settings, *overrides)


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def finished(data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    run = tmp_path_factory.mktemp("finished")
    result = train(_cfg(data_root, "trainer.max_steps=8", "trainer.test=true"), run)
    return run, result


def test_a_finished_run_records_every_event_and_its_summary(finished: tuple[Path, dict]) -> None:
    run, result = finished
    record = read_record(run)
    kinds = [e["event"] for e in record.events]
    assert kinds[0] == "start" and kinds[-1] == "end"
    assert [e["step"] for e in record.train] == [1, 2, 4, 6, 8]  # step 1, then every 2
    assert [e["step"] for e in record.valid] == [4, 8]
    for event in record.events[1:]:
        assert {"step", "epoch", "minutes", "time"} <= set(event)
    window = record.train[-1]
    assert {"nll", "loss_smoothed", "ppl", "lr", "grad_norm", "tokens_per_sec"} <= set(window)
    assert window["ppl"] == pytest.approx(math.exp(window["nll"]))
    valid = record.valid[-1]
    assert {"nll", "ppl", "accuracy", "bleu", "chrf"} <= set(valid)
    summary = record.summary
    assert summary is not None
    assert summary.version == VERSION and summary.status == "finished"
    assert summary.reason == "max_steps" and summary.step == 8
    test = summary.test
    assert test is not None and test.bleu == pytest.approx(result["test_bleu"])
    assert test.chrf == pytest.approx(result["test_chrf"])
    assert test.bleu_signature is not None and test.bleu_signature.startswith("BLEU|nrefs:1|")
    assert test.chrf_signature and test.beam is not None and test.beam >= 1
    assert test.ensemble is None and record.test == {**record.test, "bleu": test.bleu}
    best_bleu = max(e["bleu"] for e in record.valid)
    assert summary.best is not None and summary.best.val_bleu == pytest.approx(best_bleu)
    assert summary.best.file and (run / "checkpoints" / summary.best.file).is_file()
    assert summary.params and summary.params > 0 and summary.precision == "fp32"
    assert summary.machine and summary.machine.cpu == this_machine().cpu and summary.commit
    written = json.loads(RunDir(run).summary.read_text())
    assert {k: v for k, v in summary.to_dict().items() if k in written} == written  # all of it


def test_the_record_is_standard_json(finished: tuple[Path, dict]) -> None:
    """No NaN or Infinity tokens (other tools' JSON readers refuse them)."""
    run, _ = finished
    for line in RunDir(run).metrics.read_text().splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"non-standard {c}"))
    json.loads(RunDir(run).summary.read_text(), parse_constant=lambda c: pytest.fail(c))


def test_the_record_is_readable_while_the_run_goes(data_root: Path, tmp_path: Path) -> None:
    seen: list[tuple[int, str | None, int]] = []

    def peek(step: int, fig: dict[str, float]) -> None:
        if step in (3, 6):
            record = read_record(tmp_path)
            seen.append((step, record.status, len(record.valid)))

    train(_cfg(data_root, "trainer.max_steps=6"), tmp_path, on_step=peek)
    assert seen == [(3, "running", 0), (6, "running", 1)]  # the 2nd validation comes after


def test_an_interrupted_run_and_its_resume_never_repeat_a_step(
    data_root: Path, tmp_path: Path
) -> None:
    def ctrl_c(step: int, fig: dict[str, float]) -> None:
        if step == 6:
            signal.raise_signal(signal.SIGINT)

    with pytest.raises(TrainingInterrupted):
        train(_cfg(data_root, "trainer.max_steps=10"), tmp_path, on_step=ctrl_c)
    record = read_record(tmp_path)
    assert record.status == "interrupted" and record.summary and record.summary.step == 6
    assert record.events[-1]["event"] == "end"

    train(_cfg(data_root, f"resume={tmp_path}", "trainer.max_steps=10"), tmp_path)
    record = read_record(tmp_path)
    assert record.status == "finished" and record.summary and record.summary.step == 10
    steps = [e["step"] for e in record.train]
    assert steps == sorted(set(steps)) == [1, 2, 4, 6, 8, 10]
    assert [e["step"] for e in record.valid] == [4, 8, 10]
    starts = record.of("start")
    assert [s["resumed"] for s in starts] == [False, True] and starts[1]["step"] == 6
    assert all(s["machine"]["cpu"] and "commit" in s for s in starts)  # each process's own


def test_a_resume_drops_what_was_logged_after_its_checkpoint(
    data_root: Path, tmp_path: Path
) -> None:
    """kill -9 after step 6 was logged but the last checkpoint is step 4's: the resumed run
    logs 6 again, once."""
    train(_cfg(data_root, "trainer.max_steps=4"), tmp_path)
    run = RunDir(tmp_path)
    lines = run.metrics.read_text().splitlines(keepends=True)
    extra = {"event": "train", "step": 6, "time": 0, "epoch": 0, "minutes": 0, "nll": 9.0}
    run.metrics.write_text("".join(lines[:-1]) + json.dumps(extra) + '\n{"event": "tra')
    train(_cfg(data_root, f"resume={tmp_path}", "trainer.max_steps=6"), tmp_path)
    record = read_record(tmp_path)
    assert [e["step"] for e in record.train] == [1, 2, 4, 6]
    assert record.train[-1]["nll"] != 9.0


def test_a_failed_run_says_why(data_root: Path, tmp_path: Path) -> None:
    def poison(step: int, fig: dict[str, float]) -> None:
        if step == 3:
            raise RuntimeError("a bug in a hook")

    with pytest.raises(RuntimeError):
        train(_cfg(data_root, "trainer.max_steps=8"), tmp_path, on_step=poison)
    summary = read_record(tmp_path).summary
    assert summary is not None and summary.status == "failed" and summary.reason == "RuntimeError"
    assert summary.error == "a bug in a hook" and summary.step == 3


def test_a_diverged_run_is_failed_non_finite(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every loss is NaN (trainer.lr=1e30, which once forced it, is now refused up front)."""
    from attnmt.train import loop

    nll = loop.label_smoothed_nll
    monkeypatch.setattr(loop, "label_smoothed_nll", lambda x, *a: nll(x * math.nan, *a))
    cfg = _cfg(data_root, "trainer.max_steps=8", "trainer.max_bad_updates=2")
    with pytest.raises(TrainingDiverged):
        train(cfg, tmp_path)
    summary = read_record(tmp_path).summary
    assert summary is not None and summary.status == "failed" and summary.reason == "non_finite"


def test_a_partial_last_line_is_skipped_and_a_bad_line_named_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = RecordWriter(RunDir(tmp_path), None, {"model": "m"})
    writer.event("start", 0)
    writer.event("train", 1, nll=2.5)
    with RunDir(tmp_path).metrics.open("a") as f:
        f.write('{"event": "valid", "st')  # a write in flight
    with caplog.at_level(logging.WARNING):
        assert [e["event"] for e in read_record(tmp_path).events] == ["start", "train"]
    assert not caplog.records  # a write in flight is no damage
    metrics = RunDir(tmp_path).metrics
    metrics.write_text(
        '{"event": "start", "step": 0}\nnot json\n{"event": "tra'  # garbage, then torn ...
        '{"event": "train", "step": 2, "nll": 2.0}\n'  # ... and the next event after it
        '{"event": "bogus", "step": 3}\n{"event": "valid", "step": "4"}\n'
        '{"event": "valid", "step": 4, "bleu": 1.0}\n'
    )
    with caplog.at_level(logging.WARNING):
        events = read_record(tmp_path).events
    assert [(e["event"], e["step"]) for e in events] == [("start", 0), ("train", 2), ("valid", 4)]
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 4, warned
    assert warned[0].startswith(f"{metrics}, line 2: not a run-record event ('not json')")
    assert warned[1].startswith(f"{metrics}, line 3: begins with 14 bytes of a cut-off event")
    assert f"{metrics}, line 4: not a run-record event" in warned[2]
    assert f"{metrics}, line 5: not a run-record event" in warned[3]


class _DiskFillsUp:
    """``os.write`` as on a disk that fills up mid-write: the first call after ``arm``
    writes the first half of what it is given and returns that count, the next fails
    with ENOSPC; then (``full=False``) writes go through again."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.real, self.calls, self.full = os.write, 0, False
        monkeypatch.setattr(os, "write", self)

    def __call__(self, fd: int, data: bytes) -> int:
        if not self.full:
            return self.real(fd, data)
        self.calls += 1
        if self.calls == 1:
            return self.real(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_never_leaves_half_an_event_and_loses_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On 0e30e32 the short write left half a line and no error; the next event was glued
    to it, read_record failed for the whole run and a resume emptied metrics.jsonl."""
    run = RunDir(tmp_path)
    writer = RecordWriter(run, None, {"model": "m"})
    writer.event("start", 0)
    writer.event("train", 1, nll=2.5)
    disk = _DiskFillsUp(monkeypatch)
    disk.full = True
    with pytest.raises(WriteError) as info:
        writer.event("valid", 2, bleu=3.0, chrf=4.0)
    assert str(info.value) == (
        f"cannot write {run.metrics}: no space left on device; free some space or write "
        "elsewhere (the valid event of step 2 was not recorded; the events before it are "
        "kept whole)"
    )
    assert disk.calls == 2  # the short write was followed up, not taken for the whole line
    text = run.metrics.read_text()
    assert text.endswith("\n") and [json.loads(line)["step"] for line in text.splitlines()] == [
        0,
        1,
    ]
    disk.full = False  # space is back
    writer.event("valid", 4, bleu=5.0, chrf=6.0)
    lines = run.metrics.read_text().splitlines()
    assert json.loads(lines[-1])["step"] == 4 and len(lines) == 3  # a line of its own
    assert [e["step"] for e in read_record(tmp_path).events] == [0, 1, 4]
    RecordWriter(run, 4, {"model": "m"})  # a resume from step 4 keeps every event
    assert [e["step"] for e in read_record(tmp_path).events] == [0, 1, 4]


def test_a_write_cut_short_is_finished_by_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = RunDir(tmp_path)
    writer = RecordWriter(run, None, {"model": "m"})
    disk = _DiskFillsUp(monkeypatch)
    disk.full, disk.calls = True, -1  # this time the write after the short one goes through
    real = disk.real

    def short_then_whole(fd: int, data: bytes) -> int:
        disk.calls += 1
        return real(fd, bytes(data[: len(data) // 2]) if disk.calls == 0 else data)

    monkeypatch.setattr(os, "write", short_then_whole)
    writer.event("train", 1, nll=2.5)
    assert json.loads(run.metrics.read_text())["nll"] == 2.5 and disk.calls == 1


def test_a_resume_keeps_every_whole_event_of_a_damaged_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """0e30e32 threw the whole file away (``except RecordError: events = []``)."""
    run = RunDir(tmp_path)
    run.metrics.write_text(
        '{"event": "start", "step": 0}\n{"event": "train", "step": 1, "nll": 3.0}\n'
        '{"event": "tra{"event": "valid", "step": 2, "bleu": 1.0}\n'
        '{"event": "train", "step": 3, "nll": 2.0}\n{"event": "valid", "st'
    )
    with caplog.at_level(logging.INFO):
        RecordWriter(run, 2, {"model": "m"})
    assert [(e["event"], e["step"]) for e in read_record(tmp_path).events] == [
        ("start", 0),
        ("train", 1),
        ("valid", 2),
    ]
    assert f"{run.metrics}, line 3: begins with 14 bytes of a cut-off event" in caplog.text
    assert f"{run.metrics}, line 5: cut off (no line end" in caplog.text
    assert "dropped 1 event(s) after step 2" in caplog.text


def test_a_real_full_disk_leaves_whole_events(tmp_path: Path) -> None:
    """Issue 66's repro on a real 1 MiB tmpfs: fill it, one event is refused whole, free
    the space, the next event lands on a line of its own."""
    with small_disk(tmp_path / "disk") as disk:
        run = RunDir(disk / "run")
        run.path.mkdir()
        writer = RecordWriter(run, None, {"model": "m"})
        writer.event("start", 0)
        filler = fill(disk / "filler")
        with pytest.raises(WriteError, match="no space left on device"):
            for step in range(1, 100):  # the first page of metrics.jsonl fills up, then no more
                writer.event("train", step, pad="p" * 3900)
        text = run.metrics.read_text()
        assert text.endswith("\n")
        steps = [json.loads(line)["step"] for line in text.splitlines()]
        filler.unlink()
        writer.event("valid", 200, bleu=1.0)
        assert [e["step"] for e in read_record(run.path).events] == [*steps, 200]


def test_a_folder_without_a_record_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="no run record"):
        read_record(tmp_path)
    RunDir(tmp_path).summary.write_text(json.dumps({"format": "attnmt-run-summary", "version": 99}))
    with pytest.raises(RecordError, match="newer than this attnmt reads"):
        read_record(tmp_path)
