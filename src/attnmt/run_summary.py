"""A run's ``summary.json`` as read: :class:`Summary`, typed (docs/outputs.md lists the fields).

    s = read_record(run).summary       # Summary, or None before the run wrote one
    s.status, s.reason, s.step, s.minutes, s.params
    s.best.val_bleu, s.best.val_aer, s.test.bleu, s.test.bleu_signature, s.machine.describe("plain")

:meth:`Summary.from_dict` reads every format version there is (:data:`VERSION` 1, and a
file without one). A field the file never had is None, never a stand-in value; a field this
attnmt does not know (a later one's, added within the version) is left out. The trainer
writes the file (:class:`attnmt.run_record.RecordWriter`, a dict merged as the run goes);
:meth:`Summary.to_dict` writes a Summary in the same form.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from attnmt.machine import Machine

SUMMARY_FORMAT = "attnmt-run-summary"
VERSION = 1
"""The newest ``summary.json`` (and ``metrics.jsonl``) format version this attnmt reads."""

T = TypeVar("T")


def _get(data: dict[str, Any], key: str, kind: type[T], where: str = "") -> T | None:
    """``data[key]`` when it is a ``kind`` (an int is no bool), None when absent or null;
    ValueError naming the field otherwise."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"field {where}{key}: {kind.__name__} expected, got {value!r}")
    return value


def _num(data: dict[str, Any], key: str, where: str = "") -> float | None:
    """A float field (an int is taken as its float: a hand-written 2 for 2.0)."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ValueError(f"field {where}{key}: a number expected, got {value!r}")
    return float(value)


def _object(data: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = data.get(key)
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"field {key}: an object expected, got {value!r}")
    return value


@dataclass(frozen=True)
class Best:
    """The best checkpoint so far (best.json's first) and its validation scores."""

    file: str | None = None
    """Its file in checkpoints/ (None: none kept, e.g. before the first checkpoint)."""
    step: int | None = None
    val_bleu: float | None = None
    val_chrf: float | None = None
    val_aer: float | None = None
    """Its attention's AER against the valid split's word links (None: the run had none)."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Best:
        w = "best."
        return cls(
            file=_get(data, "file", str, w),
            step=_get(data, "step", int, w),
            val_bleu=_num(data, "val_bleu", w),
            val_chrf=_num(data, "val_chrf", w),
            val_aer=_num(data, "val_aer", w),
        )


@dataclass(frozen=True)
class BestAt:
    """The best checkpoint as of training minute ``minutes`` (``trainer.keep_best_at_minutes``):
    kept as ``file`` in checkpoints/, or missed (``file`` None)."""

    minutes: float | None = None
    file: str | None = None
    step: int | None = None
    val_bleu: float | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BestAt:
        w = "best_at."
        return cls(
            minutes=_num(data, "minutes", w),
            file=_get(data, "file", str, w),
            step=_get(data, "step", int, w),
            val_bleu=_num(data, "val_bleu", w),
        )


@dataclass(frozen=True)
class FinalTest:
    """The final test (the last ``test`` event's fields): what was decoded and its scores."""

    checkpoint: str | None = None
    ensemble: tuple[str, ...] | None = None
    """The checkpoints ensembled (``trainer.test_ensemble`` > 1), None: one checkpoint."""
    beam: int | None = None
    bleu: float | None = None
    chrf: float | None = None
    bleu_signature: str | None = None
    chrf_signature: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FinalTest:
        w = "test."
        ensemble = data.get("ensemble")
        if ensemble is not None and not (
            isinstance(ensemble, list) and all(isinstance(e, str) for e in ensemble)
        ):
            raise ValueError(
                f"field test.ensemble: a list of file names expected, got {ensemble!r}"
            )
        return cls(
            checkpoint=_get(data, "checkpoint", str, w),
            ensemble=None if ensemble is None else tuple(ensemble),
            beam=_get(data, "beam", int, w),
            bleu=_num(data, "bleu", w),
            chrf=_num(data, "chrf", w),
            bleu_signature=_get(data, "bleu_signature", str, w),
            chrf_signature=_get(data, "chrf_signature", str, w),
        )


@dataclass(frozen=True)
class Summary:
    """A run's ``summary.json``: its state (rewritten at the start, at every validation and
    at the end), with the provenance its start wrote. ``Summary()``: one that says nothing."""

    version: int | None = None
    status: str | None = None
    """running, finished, interrupted or failed."""
    reason: str | None = None
    """Why it stopped: the stop rule (max_steps, time_budget, early_stopping, ...),
    interrupted, final_test, non_finite or the error's type."""
    error: str | None = None
    """A failed run's message."""
    step: int | None = None
    epoch: int | None = None
    minutes: float | None = None
    """Training minutes (the run's clock, across resumes)."""
    best: Best | None = None
    best_at: tuple[BestAt, ...] | None = None
    test: FinalTest | None = None
    run_dir: str | None = None
    model: str | None = None
    data: str | None = None
    seed: int | None = None
    params: int | None = None
    precision: str | None = None
    device: str | None = None
    world_size: int | None = None
    machine: Machine | None = None
    commit: str | None = None
    """The attnmt source's short commit, ``-dirty`` with local changes."""
    started: float | None = None
    """Unix seconds the process that wrote the start began."""
    resumed_from: str | None = None
    updated: float | None = None
    """Unix seconds of the last rewrite."""

    @classmethod
    def from_dict(cls, data: Any) -> Summary:
        """The summary of a ``summary.json`` object; ValueError naming the field when it is
        not one, is of a newer format version, or a field has the wrong type."""
        if not isinstance(data, dict) or data.get("format") != SUMMARY_FORMAT:
            raise ValueError("not an attnmt run summary")
        version = _get(data, "version", int)
        if version is not None and version > VERSION:
            raise ValueError(
                f"format version {version} is newer than this attnmt reads ({VERSION}); "
                "update attnmt"
            )
        best, test, best_at = _object(data, "best"), _object(data, "test"), data.get("best_at")
        if best_at is not None and not (
            isinstance(best_at, list) and all(isinstance(b, dict) for b in best_at)
        ):
            raise ValueError(f"field best_at: a list of objects expected, got {best_at!r}")
        try:
            machine = None if data.get("machine") is None else Machine.from_dict(data["machine"])
        except ValueError as err:
            raise ValueError(f"field {err}") from None
        return cls(
            version=version,
            status=_get(data, "status", str),
            reason=_get(data, "reason", str),
            error=_get(data, "error", str),
            step=_get(data, "step", int),
            epoch=_get(data, "epoch", int),
            minutes=_num(data, "minutes"),
            best=None if best is None else Best.from_dict(best),
            best_at=None if best_at is None else tuple(BestAt.from_dict(b) for b in best_at),
            test=None if test is None else FinalTest.from_dict(test),
            run_dir=_get(data, "run_dir", str),
            model=_get(data, "model", str),
            data=_get(data, "data", str),
            seed=_get(data, "seed", int),
            params=_get(data, "params", int),
            precision=_get(data, "precision", str),
            device=_get(data, "device", str),
            world_size=_get(data, "world_size", int),
            machine=machine,
            commit=_get(data, "commit", str),
            started=_num(data, "started"),
            resumed_from=_get(data, "resumed_from", str),
            updated=_num(data, "updated"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``summary.json`` object of this summary (every field; None as null, but
        ``best.val_aer`` only when measured, as the trainer writes it): what
        :meth:`from_dict` reads back equal."""
        out = {"format": SUMMARY_FORMAT, **asdict(self)}
        out["machine"] = None if self.machine is None else self.machine.to_dict()
        if self.test is not None and self.test.ensemble is not None:
            out["test"]["ensemble"] = list(self.test.ensemble)
        if self.best_at is not None:
            out["best_at"] = list(out["best_at"])
        if self.best is not None and self.best.val_aer is None:
            del out["best"]["val_aer"]  # as the trainer writes it: only a run with valid links
        return out
