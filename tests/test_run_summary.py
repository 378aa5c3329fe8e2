"""attnmt.run_summary: summary.json read as a typed Summary, from the files committed under
results/ (format version 1, the only one written so far) and from planted ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from attnmt.machine import Cpu, Machine
from attnmt.run_dir import RunDir
from attnmt.run_record import RecordError, read_record
from attnmt.run_summary import VERSION, Best, BestAt, FinalTest, Summary

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted((ROOT / "results").rglob("summary.json"))


def _committed(run: str) -> Summary:
    """The summary of ``results/gpu_check/<run>``."""
    return Summary.from_dict(
        json.loads((ROOT / "results/gpu_check" / run / "summary.json").read_text())
    )


def test_the_committed_summaries_are_all_of_version_1() -> None:
    assert len(COMMITTED) >= 20
    assert {json.loads(p.read_text())["version"] for p in COMMITTED} == {VERSION} == {1}


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT / "results")))
def test_a_committed_summary_reads_whole(path: Path) -> None:
    """Every field the file has comes back as written; every field it lacks is None (at any
    depth: a migrated record's ``test`` has no ``ensemble``, the trainer writes it null).
    The only top-level fields Summary leaves out are the measurements the retired runners
    kept, which migrated records carry for the pages (:data:`MIGRATED_EXTRAS`)."""
    data = json.loads(path.read_text())
    summary = Summary.from_dict(data)
    out = summary.to_dict()
    assert data.keys() - out.keys() <= MIGRATED_EXTRAS
    known = {k: v for k, v in data.items() if k in out}
    assert _without_nulls({k: v for k, v in out.items() if k in data}) == _without_nulls(known)
    assert all(out[k] is None for k in out.keys() - data.keys())
    assert Summary.from_dict(out) == summary


MIGRATED_EXTRAS = {"wall_minutes", "note", "pace_ms_per_update", "pace_note"}
"""Fields of migrated records (results/alignment_*, attention_protocol) that no Summary
field holds: the old runners' wall minutes and the probes' hand-measured pace."""


def _without_nulls(value: Any) -> Any:
    """``value`` with every null-valued key dropped, at every depth."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def test_the_null_dropper_keeps_what_is_set() -> None:
    assert _without_nulls({"a": None, "b": {"c": None, "d": 1}, "e": [{"f": None}]}) == {
        "b": {"d": 1},
        "e": [{}],
    }


def test_a_finished_gpu_run_in_fields() -> None:
    """runs-default/transformer-bf16: the values as read from the file by eye."""
    s = _committed("2026-11-27c_h100/runs-default/transformer-bf16")
    assert (s.version, s.status, s.reason, s.error) == (1, "finished", "max_steps", None)
    assert (s.model, s.data, s.seed, s.precision, s.device, s.world_size) == (
        "transformer",
        "ding_de_en",
        1234,
        "bf16",
        "cuda",
        1,
    )
    assert (s.step, s.epoch, s.minutes, s.params) == (1300, 10, 0.7031, 3660800)
    assert (s.commit, s.resumed_from, s.started) == ("764890f-dirty", None, 1795786777.293311)
    assert s.best == Best("best-1300.pt", 1300, 4.406295264814664, 22.304700865045756)
    assert s.test == FinalTest(
        "best-1300.pt",
        None,
        1,
        3.711946305357903,
        22.115141930872216,
        "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0",
        "chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0",
    )
    assert s.machine is not None and s.machine.describe("tag") == "cpu6.207"
    assert s.machine.cuda == "NVIDIA H100 80GB HBM3" and s.best_at is None  # before best_at


def test_a_run_interrupted_before_its_first_validation_has_no_best_nor_test() -> None:
    s = _committed("2026-11-26_h100/transformer-auto")
    assert (s.status, s.reason, s.step, s.minutes) == ("interrupted", "interrupted", 633, 1.0232)
    assert (s.best, s.test, s.best_at) == (None, None, None)


HEAD = {"format": "attnmt-run-summary", "version": 1}


def test_fields_a_summary_never_had_are_none() -> None:
    """A summary written at a run's start (before any validation) and one without a
    version (none was written so, but it reads as the reader always let it)."""
    s = Summary.from_dict({**HEAD, "status": "running", "step": 0, "minutes": 0})
    assert s == Summary(version=1, status="running", step=0, minutes=0.0)
    assert (s.best, s.test, s.machine, s.params, s.best_at) == (None,) * 5
    assert Summary.from_dict({"format": "attnmt-run-summary"}) == Summary()
    assert Summary().to_dict()["format"] == "attnmt-run-summary"


def test_a_field_this_attnmt_does_not_know_is_left_out() -> None:
    s = Summary.from_dict({**HEAD, "step": 3, "a_later_field": {"x": 1}})
    assert s == Summary(version=1, step=3) and "a_later_field" not in s.to_dict()


def test_a_summary_round_trips_with_every_part() -> None:
    full = Summary(
        version=1,
        status="finished",
        reason="time_budget",
        step=120,
        epoch=2,
        minutes=30.5,
        best=Best("best-100.pt", 100, 5.5, 30.25),
        best_at=(BestAt(15.0, "best-at-15min.pt", 50, 3.0), BestAt(30.0, None, None, None)),
        test=FinalTest("averaged.pt", ("best-100.pt", "best-80.pt"), 5, 6.0, 31.0, "B", "C"),
        machine=Machine(Cpu("AMD EPYC", "AuthenticAMD", 23, 49, 0, ("avx2",)), "2.13.0", 2),
        started=1.5e9,
    )
    data = json.loads(json.dumps(full.to_dict()))  # through JSON, as the file holds it
    assert data["test"]["ensemble"] == ["best-100.pt", "best-80.pt"]
    assert data["best_at"][1] == {"minutes": 30.0, "file": None, "step": None, "val_bleu": None}
    assert Summary.from_dict(data) == full


def _read(tmp_path: Path, data: Any) -> Summary | None:
    RunDir(tmp_path).summary.write_text(json.dumps(data))
    return read_record(tmp_path).summary


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"format": "other"}, "not an attnmt run summary"),
        ([1, 2], "not an attnmt run summary"),
        ({**HEAD, "version": 2}, "format version 2 is newer than this attnmt reads"),
        ({**HEAD, "step": "8"}, "field step: int expected, got '8'"),
        ({**HEAD, "step": True}, "field step: int expected, got True"),
        ({**HEAD, "minutes": "4"}, "field minutes: a number expected"),
        ({**HEAD, "best": [1]}, "field best: an object expected"),
        ({**HEAD, "test": {"bleu": "x"}}, "field test.bleu: a number expected"),
        ({**HEAD, "test": {"ensemble": "a.pt"}}, "field test.ensemble: a list of file names"),
        ({**HEAD, "best_at": [1]}, "field best_at: a list of objects expected"),
        ({**HEAD, "machine": {"cpu": {"name": "x", "model": "1"}}}, "field machine.cpu.model"),
    ],
)
def test_a_bad_summary_names_its_file_and_field(tmp_path: Path, data: Any, message: str) -> None:
    with pytest.raises(RecordError, match=f"^{tmp_path / 'summary.json'}: .*") as err:
        _read(tmp_path, data)
    assert message in str(err.value)


def test_the_record_carries_the_typed_summary(tmp_path: Path) -> None:
    assert _read(tmp_path, {**HEAD, "status": "failed", "error": "oom"}) == Summary(
        version=1, status="failed", error="oom"
    )
    assert read_record(tmp_path).status == "failed"
