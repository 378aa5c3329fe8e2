"""The results ledger: one small JSON record per *finished* run of a results sweep.

    results/runs/<table>-<cell>-seed<N>-<key>.json

A record holds the settings that define the run (the composed config less what does not
change the result: paths, logging, the seed) and ``key``, a hash of them; the seed, the
git commit, the machine (:func:`attnmt.machine.this_machine`), updates, minutes, the
validation curve, test BLEU/chrF with their sacrebleu signatures and the parameter count.
Records are written atomically (:func:`attnmt.atomic.write_json`) by the sweep driver
(experiments/results_run.py) once ``train.py`` has exited 0 with a test result, so a run
that was interrupted or lost leaves nothing. A record whose key is not a key the current
plan asks for is *stale* (the configs changed since): reported, never tabulated.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from attnmt.atomic import write_json
from attnmt.machine import Machine
from attnmt.settings_history import upgrade_model_settings
from attnmt.train.continuation import flatten

log = logging.getLogger(__name__)

SCHEMA = 1
NOT_DEFINING = (
    "seed",
    "device",
    "resume",
    "finetune",
    "data.root",
    "trainer.progress_bar",
    "trainer.num_heatmaps",
    "trainer.heatmaps_every",
    "trainer.num_samples",
    "trainer.log_every_steps",
    "trainer.precision_probe",
)
"""Dotted keys that do not change what a run learns or scores (left out of the key)."""


def defining_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The composed config (plain data, unresolved) less ``hydra`` and :data:`NOT_DEFINING`."""
    settings = json.loads(json.dumps({k: v for k, v in config.items() if k != "hydra"}))
    for dotted in NOT_DEFINING:
        *parents, leaf = dotted.split(".")
        node = settings
        for part in parents:
            node = node.get(part, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(leaf, None)
    return settings


def settings_key(settings: dict[str, Any]) -> str:
    """12 hex digits of the SHA-256 of ``settings`` as canonical JSON."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def tested_row(curve: Sequence[Sequence[float]]) -> Sequence[float] | None:
    """The validation row ([step, minutes, nll, bleu, chrf]) of best BLEU, whose checkpoint the
    test decoded: the first of equal BLEUs, as the trainer keeps a new best only when BLEU
    rises. None for an empty curve."""
    return max(curve, key=lambda row: (row[3], -row[0]), default=None)


@dataclass
class Record:
    """One finished run (see the module docstring)."""

    table: str  # "main" | "attention"
    cell: dict[str, str]  # the row/cell it belongs to, e.g. {"data": ..., "model": ...}
    key: str
    seed: int
    settings: dict[str, Any]
    commit: str
    machine: dict[str, Any]
    updates: int
    train_minutes: float  # first update to the end of training (the trainer's wall clock)
    wall_minutes: float  # train.py start to exit: preparation, training, test decoding
    curve: list[list[float]]  # validation rows [step, minutes, nll, bleu, chrf]
    test: dict[str, Any]  # bleu, chrf, bleu_signature, chrf_signature, beam
    params_m: float
    stop_reason: str = ""
    recorded: str = ""  # ISO date and time
    run_dir: str = ""
    schema: int = SCHEMA
    extra: dict[str, Any] = field(default_factory=dict)
    filed_key: str = field(default="", compare=False)  # the key in its file name, if not key

    @property
    def stem(self) -> str:
        """Its file name without ``.json`` (also of its ``.attn.json`` maps)."""
        return record_stem(self.table, self.cell, self.seed, self.filed_key or self.key)

    @property
    def final_valid_nll(self) -> float:
        """Validation NLL per target token at the last validation (NaN without a curve)."""
        return float(self.curve[-1][2]) if self.curve else float("nan")

    @property
    def tested_valid_nll(self) -> float:
        """Validation NLL per target token of the checkpoint the test decoded
        (:func:`tested_row`); NaN without a curve."""
        row = tested_row(self.curve)
        return float("nan") if row is None else float(row[2])

    @property
    def machine_line(self) -> str:
        """CPU name, family/model, SIMD flags, torch and threads (and the GPU), one line."""
        m = Machine.from_dict(self.machine)
        gpu = f", GPU {m.cuda}" if m.cuda else ""
        cores = f", {m.cores} cores" if m.cores else ""
        threads = "?" if m.threads is None else m.threads
        return (
            f"{m.describe('flags')}{cores}, torch {m.torch_version or '?'}, {threads} threads{gpu}"
        )


def record_stem(table: str, cell: dict[str, str], seed: int, key: str) -> str:
    """``<table>-<cell values>-seed<N>-<key>``, each character of a value that is not a
    letter, digit, ``.``, ``_`` or ``-`` made ``_``: safe as a file name and as a Hydra
    override's value (``hydra.run.dir=...``: a comma would make it a sweep list, so the
    Transformer row's label "scaled_dot, 4 heads" gives ``scaled_dot__4_heads``)."""
    parts = [table, *(re.sub(r"[^A-Za-z0-9._-]", "_", str(v)) for v in cell.values())]
    return f"{'-'.join(parts)}-seed{seed}-{key}"


def write_record(directory: Path, record: Record) -> Path:
    """``directory/<stem>.json``, atomically."""
    data = asdict(record)
    del data["filed_key"]  # known from the file name
    return write_json(Path(directory) / f"{record.stem}.json", data)


def read_records(directory: Path) -> tuple[list[Record], list[str]]:
    """Every record under ``directory`` (sorted by file name) and the files that are not
    records (bad JSON, another schema), as lines saying why."""
    records: list[Record] = []
    bad: list[str] = []
    if not Path(directory).is_dir():
        return records, bad
    names = {f.name for f in Record.__dataclass_fields__.values()}
    for path in sorted(Path(directory).glob("*.json")):
        if path.name.endswith(".attn.json"):  # a record's attention maps, not a record
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("schema") != SCHEMA:
                raise ValueError(f"schema {data.get('schema')!r}, expected {SCHEMA}")
            records.append(Record(**{k: v for k, v in data.items() if k in names}))
        except (OSError, ValueError, TypeError, AttributeError) as err:
            bad.append(f"{path}: not a ledger record ({err})")
    return records, bad


def in_todays_keys(settings: dict[str, Any]) -> dict[str, Any]:
    """A record's settings with its model section read as it was meant when written
    (:func:`attnmt.settings_history.upgrade_model_settings`, as checkpoints are read)."""
    model = settings.get("model")
    if not isinstance(model, dict):
        return settings
    return {**settings, "model": upgrade_model_settings(model)}


def same_run(recorded: dict[str, Any], current: dict[str, Any], defaults: dict[str, Any]) -> bool:
    """Whether a record's settings define the run ``current`` asks for: every recorded
    setting (in today's keys, :func:`in_todays_keys`) has today's value, and every setting
    added since the record sits at its schema default (an addition that keeps the old
    behaviour, the rule resume follows too)."""
    then, now = flatten(in_todays_keys(recorded)), flatten(current)
    if any(key not in now or now[key] != value for key, value in then.items()):
        return False
    return all(key in then or value == defaults.get(key, object()) for key, value in now.items())


def stale_reason(record: Record) -> str:
    """Why a stale record is left out, for docs/results.md."""
    model = record.settings.get("model")
    upgraded = in_todays_keys(record.settings).get("model")
    if isinstance(model, dict) and isinstance(upgraded, dict) and upgraded != model:
        keys = ", ".join(f"model.{k}" for k in sorted(set(upgraded) - set(model)))
        return (
            f"written before {keys}, when its model settings built another model "
            "(attnmt.settings_history); the configs no longer build it"
        )
    return "its settings are no longer what the configs give"


def split_current(
    records: Iterable[Record],
    wanted: dict[str, dict[str, Any]],
    defaults: Callable[[str], dict[str, Any]] | None = None,
) -> tuple[list[Record], list[Record]]:
    """(records of the runs the plan asks for, stale records). ``wanted``: each planned
    cell's key and defining settings. A record whose key is not wanted but whose settings
    still define a wanted run (:func:`same_run`, with ``defaults(model_name)``) counts for
    that run's key."""
    current, stale = [], []
    for record in records:
        if record.key in wanted:
            current.append(record)
            continue
        match = None
        if defaults is not None:
            model = str(record.settings.get("model", {}).get("name", ""))
            match = next(
                (k for k, s in wanted.items() if same_run(record.settings, s, defaults(model))),
                None,
            )
        if match is None:
            stale.append(record)
        else:
            current.append(dataclasses.replace(record, key=match, filed_key=record.key))
    return current, stale


def done(records: Iterable[Record]) -> set[tuple[str, int]]:
    """The (key, seed) pairs the ledger holds."""
    return {(r.key, int(r.seed)) for r in records}
