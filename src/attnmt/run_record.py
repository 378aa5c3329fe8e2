"""The run record: what a run did, for tools (``train.log`` is for people).

Two files in the run folder (:class:`~attnmt.run_dir.RunDir`), format version
:data:`VERSION` (docs/outputs.md describes every field):

``metrics.jsonl``
    one JSON object a line, appended as the run goes: ``{"event": "start" | "train" |
    "valid" | "average" | "test" | "end", "step": int, "time": unix seconds, ...}``; every
    event but ``start`` also has ``epoch`` and ``minutes`` (training wall-clock minutes, a
    resumed run goes on counting). A line is written whole (:mod:`attnmt.whole_lines`: a
    write the disk cuts short is cut back to the last whole line, and the error names the
    file); a reader keeps every whole event, skips a last line without its newline (a
    write in flight) and skips a damaged line with a warning naming file and line. A
    resumed run first drops the events after the step it resumes from, so the file never
    holds a step twice.
``summary.json``
    the run's state, rewritten atomically at the start, at every validation and at the end:
    ``status`` (running / finished / interrupted / failed), ``reason``, steps, minutes, the
    best checkpoint with its validation scores, the test scores with their sacrebleu
    signatures, parameters, precision, device, machine and commit.

:class:`RecordWriter` writes them (the trainer's rank 0); :func:`read_record` reads them, the
summary typed (:class:`attnmt.run_summary.Summary`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnmt.atomic import write_error, write_json, write_text
from attnmt.errors import AttnmtError
from attnmt.run_dir import RunDir
from attnmt.run_summary import SUMMARY_FORMAT, VERSION, Summary
from attnmt.whole_lines import PartialWrite, write_lines

log = logging.getLogger(__name__)

EVENTS = ("start", "train", "valid", "average", "test", "end")
STATUSES = ("running", "finished", "interrupted", "failed")


class RecordError(AttnmtError):
    """A run record that cannot be read."""


def source_commit(root: str | Path | None = None) -> str:
    """The short git commit of the attnmt source (``-dirty`` when tracked files differ),
    '' outside a git checkout."""
    where = Path(root) if root is not None else Path(__file__).resolve().parent

    def git(*args: str) -> str:
        out = subprocess.run(
            ["git", *args], cwd=where, capture_output=True, text=True, timeout=30, check=False
        )
        return out.stdout.strip() if out.returncode == 0 else ""

    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no") if commit else ""
    except (OSError, subprocess.SubprocessError):
        return ""
    return commit + ("-dirty" if dirty else "")


def finite(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN, ±inf) as None, so the JSON is standard."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


EVENT_START = '{"event": '
"""How every line :class:`RecordWriter` writes begins (json.dumps, ``event`` first)."""


def _event(line: str) -> dict[str, Any] | None:
    """The run-record event of one line, or None when it is not one."""
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(event, dict) or event.get("event") not in EVENTS:
        return None
    step = event.get("step")
    return event if isinstance(step, int) and not isinstance(step, bool) else None


def _events(text: str, source: Path, in_flight: bool = True) -> Iterator[dict[str, Any]]:
    """The events of a metrics.jsonl text, every whole line that holds one.

    A line that does not hold one is skipped with a warning naming ``source`` and the
    line; a line that begins with the torn start of an event (half a line an older attnmt
    left on a full disk, then the next event) keeps the event after it. A last line
    without its newline is skipped: silently when it may be a write ``in_flight`` (a
    reader beside the run), with a warning when not (the writer itself, on resume).
    """
    lines = text.split("\n")
    for number, line in enumerate(lines[:-1], start=1):  # lines[-1]: "" or a partial line
        if not line.strip():
            continue
        event = _event(line)
        if event is None and (at := line.rfind(EVENT_START)) > 0:
            event = _event(line[at:])
            if event is not None:
                log.warning(
                    "%s, line %d: begins with %d bytes of a cut-off event; skipped them, "
                    "kept the %s event after them",
                    source,
                    number,
                    at,
                    event["event"],
                )
        if event is None:
            log.warning(
                "%s, line %d: not a run-record event (%s); skipped, the other lines are kept",
                source,
                number,
                _clip(line),
            )
            continue
        yield event
    if lines[-1] and not in_flight:
        log.warning(
            "%s, line %d: cut off (no line end: %s); skipped", source, len(lines), _clip(lines[-1])
        )


def _clip(line: str, width: int = 40) -> str:
    """The start of ``line`` for a message."""
    return repr(line[:width] + ("..." if len(line) > width else ""))


class RecordWriter:
    """Appends events to a run's ``metrics.jsonl`` and rewrites its ``summary.json``.

    ``resume_step``: the step the run resumes from; events after it (written before a
    crash, and about to be written again) are dropped. None: a new run, a new file.
    """

    def __init__(self, run: RunDir, resume_step: int | None, summary: dict[str, Any]) -> None:
        self.run = run
        kept = ""
        if resume_step is not None and run.metrics.is_file():
            text = run.metrics.read_text(encoding="utf-8", errors="replace")
            events = list(_events(text, run.metrics, in_flight=False))
            kept_events = [e for e in events if e["step"] <= resume_step]
            if len(kept_events) < len(events):
                log.info(
                    "%s: dropped %d event(s) after step %d, logged after the checkpoint this "
                    "run resumes from; they are written again as the run goes on",
                    run.metrics,
                    len(events) - len(kept_events),
                    resume_step,
                )
            kept = "".join(json.dumps(e) + "\n" for e in kept_events)
        write_text(run.metrics, kept)
        self.summary: dict[str, Any] = {
            "format": SUMMARY_FORMAT,
            "version": VERSION,
            "status": "running",
            "reason": None,
            **summary,
        }
        self.write_summary()

    def event(self, kind: str, step: int, **fields: Any) -> dict[str, Any]:
        """Append ``{"event": kind, "step": step, "time": now, **fields}`` as one line.

        The line is written whole or not at all: a full disk cuts it back off and raises
        :class:`~attnmt.errors.WriteError` naming the file (the events before it stay)."""
        if kind not in EVENTS:
            raise ValueError(f"unknown run-record event {kind!r}")
        event = {"event": kind, "step": int(step), "time": round(time.time(), 3), **fields}
        line = (json.dumps(finite(event), allow_nan=False) + "\n").encode("utf-8")
        try:
            fd = os.open(self.run.metrics, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as err:
            raise write_error(self.run.metrics, err, f"the {kind} event was not recorded") from None
        try:
            write_lines(fd, line)
        except PartialWrite as err:
            outcome = f"the {kind} event of step {step} was not recorded" + (
                "; part of it is left at the end, which readers skip"
                if err.torn
                else "; the events before it are kept whole"
            )
            raise write_error(self.run.metrics, err.error, outcome) from None
        finally:
            os.close(fd)
        return event

    def update(self, **fields: Any) -> None:
        """Merge ``fields`` into the summary and rewrite it."""
        self.summary.update(fields)
        self.write_summary()

    def write_summary(self) -> None:
        self.summary["updated"] = round(time.time(), 3)
        write_json(self.run.summary, finite(self.summary), indent=1)


def _number(event: dict[str, Any], key: str, where: str) -> float | None:
    """A number field of an event (None when absent or null); RecordError otherwise."""
    value = event.get(key)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise RecordError(f"{where}: field {key}: a number expected, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Validation:
    """One ``valid`` event, typed: the scores of one validation. ``aer`` (the attention's
    alignment error rate against the valid split's word links, lower is better) is None
    when the run's valid split had no links (``trainer.valid_alignments``)."""

    step: int
    minutes: float | None
    nll: float | None
    bleu: float | None
    chrf: float | None
    aer: float | None

    @classmethod
    def from_event(cls, event: dict[str, Any], where: str = "valid event") -> Validation:
        """RecordError naming ``where`` and the field when a figure is not a number."""
        return cls(
            step=int(event["step"]),
            **{k: _number(event, k, where) for k in ("minutes", "nll", "bleu", "chrf", "aer")},
        )


@dataclass
class RunRecord:
    """A run's record as read: the summary (None before the run wrote one; typed:
    :class:`~attnmt.run_summary.Summary`) and its events."""

    run: RunDir
    summary: Summary | None
    events: list[dict[str, Any]] = field(default_factory=list)

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The events of one kind, in the order written."""
        return [e for e in self.events if e["event"] == kind]

    @property
    def valid(self) -> list[dict[str, Any]]:
        return self.of("valid")

    def validations(self) -> list[Validation]:
        """The valid events, typed (:class:`Validation`); RecordError naming the file and
        step when one holds a figure that is not a number."""
        return [
            Validation.from_event(e, f"{self.run.metrics}, valid event of step {e['step']}")
            for e in self.valid
        ]

    @property
    def train(self) -> list[dict[str, Any]]:
        return self.of("train")

    @property
    def test(self) -> dict[str, Any] | None:
        """The last test event (a resumed, re-tested run has its newest)."""
        tests = self.of("test")
        return tests[-1] if tests else None

    @property
    def status(self) -> str | None:
        return None if self.summary is None else self.summary.status

    @property
    def best_valid_bleu(self) -> float | None:
        return max((e["bleu"] for e in self.valid), default=None)


def read_summary(path: str | Path) -> Summary | None:
    """The summary.json of the run folder ``path`` (None before the run wrote one);
    RecordError naming the file when it is unreadable, of a newer format or has a field of
    the wrong type."""
    run = RunDir(Path(path))
    if not run.summary.is_file():
        return None
    try:
        data = json.loads(run.summary.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RecordError(f"{run.summary}: unreadable ({err})") from None
    try:
        return Summary.from_dict(data)
    except ValueError as err:
        raise RecordError(f"{run.summary}: {err}") from None


def read_record(path: str | Path) -> RunRecord:
    """The run record of the run folder ``path``; RecordError when it has none or its
    summary is unreadable. Every whole event of metrics.jsonl is kept: a damaged line is
    skipped with a warning naming it (:func:`_events`). Safe while the run is writing it."""
    run = RunDir(Path(path))
    if not run.metrics.is_file() and not run.summary.is_file():
        raise RecordError(
            f"{run.path}: no run record (metrics.jsonl, summary.json); it is not a run "
            "folder, or the run was written by an attnmt older than the run record"
        )
    summary = read_summary(run.path)
    try:
        text = run.metrics.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        text = ""
    except OSError as err:
        raise RecordError(f"{run.metrics}: unreadable ({err})") from None
    return RunRecord(run, summary, list(_events(text, run.metrics)))
