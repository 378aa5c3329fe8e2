"""Small comparisons of train.py variants at fixed settings: run each (variant, seed) once,
keep one JSON record per run in a results folder as it finishes, summarise mean ± std.

Used by experiments.luong_bahdanau and experiments.ding_loose; a record that exists is not
run again, and a run folder cut off earlier is resumed from its last checkpoint.
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

from attnmt.atomic import write_json
from attnmt.errors import DataError
from attnmt.machine import Machine, this_machine
from attnmt.run_record import read_record, source_commit
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


def at_step(rec: dict[str, Any], step: int, col: int) -> float | None:
    """Column ``col`` (1: NLL, 2: BLEU) of the record's validation at ``step``."""
    for point in rec["curve"]:
        if point[0] == step:
            return float(point[col])
    return None


def cross_entropies(recs: list[dict[str, Any]]) -> list[float]:
    """The cross-attention's mean normalised entropy of each record that kept one."""
    return [
        float(x)
        for r in recs
        if (x := (r.get("attention_entropy_norm") or {}).get("cross")) is not None
    ]


def provenance(recs: list[dict[str, Any]]) -> str:
    """``Machines: ... Commits: ...`` of the records."""
    machines = sorted(
        {
            f"{Machine.from_dict(r['machine']).describe('plain')}, {r['threads']} thread(s)"
            for r in recs
        }
    )
    commits = sorted({r["commit"] for r in recs})
    return f"Machines: {'; '.join(machines) or '–'}. Commits: {', '.join(commits) or '–'}."
