"""Small comparisons of train.py variants at fixed settings.

:func:`read_runs` reads a variant study's run folders (results/<study>/<run>/, made by
experiments/sweep.py: experiments.luong_bahdanau and experiments.ding_loose) as
:class:`VariantRun`. The probes of experiments.attention_protocol and main_protocol still
run through :func:`run_variant`: one JSON record per (variant, seed) in a results folder as
it finishes; a record that exists is not run again, a run folder cut off earlier is
resumed from its last checkpoint.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from attnmt.atomic import write_json
from attnmt.errors import DataError
from attnmt.machine import this_machine
from attnmt.run_record import RecordError, read_record, source_commit
from attnmt.run_summary import Summary

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Variant:
    """One row: a name, the train.py overrides that select it, what it isolates."""

    name: str
    overrides: tuple[str, ...]
    isolates: str = ""

    def stem(self, seed: int) -> str:
        return f"{self.name.replace(' ', '-')}-seed{seed}"


def train_run(overrides: tuple[str, ...], seed: int, run: Path, threads: int, out: Any) -> bool:
    """``python train.py <overrides> seed=S`` into ``run`` with ``threads`` threads, output to
    the open file ``out``; a folder cut off earlier goes on from its last checkpoint
    (``resume=``), a finished one is left as it is (resuming it is refused). True when
    train.py succeeded, or had."""
    if (run / "summary.json").is_file() and read_record(run).status == "finished":
        return True
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    cmd = [sys.executable, "train.py", *overrides, f"seed={seed}", f"hydra.run.dir={run}"]
    if run.exists():
        cmd = [sys.executable, "train.py", f"resume={run}", f"hydra.run.dir={run}"]
    return subprocess.run(cmd, cwd=ROOT, env=env, stdout=out, stderr=out).returncode == 0


def evaluate_test(
    run: Path, threads: int, overrides: tuple[str, ...] = (), out: Any = None
) -> dict[str, Any] | None:
    """``python evaluate.py ckpt=RUN split=test <overrides>`` with ``threads`` threads (output
    to the open file ``out``, else captured): the one entry of the scores.json it wrote (the
    newest ``eval/*-test-beam1-*``), or None when it failed."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    cmd = [sys.executable, "evaluate.py", f"ckpt={run}", "split=test", *overrides]
    streams: dict[str, Any] = (
        {"stdout": out, "stderr": out}
        if out is not None
        else {"capture_output": True, "text": True}
    )
    if subprocess.run(cmd, cwd=ROOT, env=env, **streams).returncode != 0:
        return None
    found = sorted((run / "eval").glob("*-test-beam1-*/scores.json"), key=os.path.getmtime)
    return scores_entry(found[-1]) if found else None


def scores_entry(path: Path) -> dict[str, Any] | None:
    """The one evaluation an evaluate.py ``scores.json`` holds (None: no file, or not
    exactly one entry)."""
    if not path.is_file():
        return None
    entries = [e for e in json.loads(path.read_text(encoding="utf-8")).values()
               if isinstance(e, dict)]  # fmt: skip
    return entries[0] if len(entries) == 1 else None


def run_variant(
    v: Variant,
    seed: int,
    threads: int,
    common: tuple[str, ...],
    runs: Path,
    records: Path,
    min_updates: int = 0,
) -> Path | None:
    """Train (variant, seed) with ``common`` + its overrides into ``runs``/<stem>, then write
    its record to ``records``/<stem>.json; the record's path (None: training failed). A
    record of at least ``min_updates`` updates is kept and nothing runs; a shorter one is
    replaced by the new run's when that succeeds (git history keeps the old)."""
    record = records / f"{v.stem(seed)}.json"
    if record.is_file() and record_updates(record) >= min_updates:
        return record
    run = runs / v.stem(seed)
    started = time.time()
    log = runs / f"{v.stem(seed)}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        if not train_run((*common, *v.overrides), seed, run, threads, out):
            return None
    rec = read_record(run)
    summary = rec.summary or Summary()
    test = rec.test or {}
    write_json(
        record,
        {
            "variant": v.name,
            "overrides": [*common, *v.overrides],
            "seed": seed,
            "updates": summary.step,
            "params": summary.params,
            "curve": [[e["step"], e["nll"], e["bleu"]] for e in rec.valid],
            "attention_entropy_norm": rec.valid[-1].get("attention_entropy_norm"),
            "test": {k: test[k] for k in ("bleu", "chrf", "bleu_signature") if k in test},
            "train_minutes": summary.minutes,
            **provenance_fields(started, threads),
        },
        indent=1,
    )
    return record


def record_updates(path: Path) -> int:
    """The updates a record says its run made (0 when it does not say)."""
    return int(read_one(path).get("updates") or 0)


def provenance_fields(started: float, threads: int) -> dict[str, Any]:
    """A record's minutes since ``started`` (a time.time()), threads, commit, machine, date."""
    return {
        "minutes": round((time.time() - started) / 60, 2),
        "threads": threads,
        "commit": source_commit(ROOT),
        "machine": this_machine().to_dict(),
        "recorded": datetime.now().isoformat(timespec="seconds"),
    }


def read_all(records: Path) -> list[dict[str, Any]]:
    """Every record in ``records``, by file name (:func:`read_one` each)."""
    return [read_one(path) for path in sorted(records.glob("*.json"))]


def read_one(path: Path) -> dict[str, Any]:
    """The record at ``path``; :class:`~attnmt.errors.DataError` naming the file, line and
    column of one that is not a JSON object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(
            f"{path}: not a record (invalid JSON at line {err.lineno}, column {err.colno}: "
            f"{err.msg}); restore it (git checkout -- {path}) or move it aside"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot be read ({err}); restore it or move it aside") from None
    if not isinstance(data, dict):
        raise DataError(
            f"{path}: not a record (a JSON {type(data).__name__}, not an object); restore "
            "it or move it aside"
        )
    return data


@dataclass(frozen=True)
class VariantRun:
    """A run folder of a variant study (results/<study>/<run>/) as the pages read it: its
    train.py overrides (.hydra/overrides.yaml), summary.json, and the validations of
    metrics.jsonl as (step, NLL, BLEU) with the last one's cross-attention entropy."""

    folder: Path
    overrides: dict[str, str]
    summary: Summary
    curve: tuple[tuple[int, float, float], ...]
    entropy: float | None

    @property
    def seed(self) -> int:
        return self.summary.seed or 0

    def at_step(self, step: int, col: int) -> float | None:
        """Column ``col`` (1: NLL, 2: BLEU) of the validation at ``step``."""
        return next((float(p[col]) for p in self.curve if p[0] == step), None)


def read_run(folder: Path) -> VariantRun:
    """The run in ``folder``; DataError naming it when a part is missing or not a record."""
    try:
        rec = read_record(folder)
        overrides = yaml.safe_load((folder / ".hydra" / "overrides.yaml").read_text())
        if rec.summary is None or not rec.valid:
            raise ValueError("no summary.json or no validation")
        return VariantRun(
            folder,
            dict(o.split("=", 1) for o in overrides),
            rec.summary,
            tuple((int(e["step"]), float(e["nll"]), float(e["bleu"])) for e in rec.valid),
            (rec.valid[-1].get("attention_entropy_norm") or {}).get("cross"),
        )
    except (OSError, KeyError, TypeError, ValueError, RecordError) as err:
        raise DataError(
            f"{folder}: not a run record ({type(err).__name__}: {err}); it needs "
            "summary.json, metrics.jsonl with validations and .hydra/overrides.yaml"
        ) from None


def read_runs(results: Path, studies: tuple[str, ...]) -> list[VariantRun]:
    """The run folders of ``studies`` under ``results`` (those with a summary.json)."""
    found = [f for st in studies for f in sorted((results / st).glob("*/summary.json"))]
    return [read_run(f.parent) for f in found]


def provenance(runs: list[VariantRun]) -> str:
    """``Machines: ... Commits: ...`` of the runs (the threads: those train.py ran with)."""
    machines = sorted(
        {
            f"{m.describe('plain')}, {m.threads} thread(s)"
            for r in runs
            if (m := r.summary.machine) is not None
        }
    )
    commits = sorted({r.summary.commit or "" for r in runs})
    return f"Machines: {'; '.join(machines) or '–'}. Commits: {', '.join(commits) or '–'}."
