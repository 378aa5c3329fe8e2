"""The one reader of study run folders, results/<study>/<run>/ (experiments/sweep.py
``--record``): :func:`read_runs` gives them as :class:`Run`, :func:`provenance` says where
they ran, :func:`evaluate_test` runs evaluate.py on a run's test split."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from attnmt.errors import DataError
from attnmt.run_record import RecordError, read_record
from attnmt.run_summary import Summary

ROOT = Path(__file__).resolve().parents[1]


def evaluate_test(
    run: Path, threads: int, overrides: tuple[str, ...] = (), out: Any = None
) -> dict[str, Any] | None:
    """``python evaluate.py ckpt=RUN split=test <overrides>`` on ``threads`` threads (output to
    the open file ``out``, else captured): the entry of the newest ``eval/*-test-beam1-*``
    scores.json it wrote, None when it failed."""
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


@dataclass(frozen=True)
class Run:
    """A run folder: its train.py overrides (.hydra/overrides.yaml, ``{"model": ...}``),
    summary.json, its validations as (step, NLL, BLEU) and the last one's cross-attention
    entropy; summary.json's ``wall_minutes`` (an old runner's start-to-record minutes) and a
    hand-kept ``pace_ms_per_update`` with its ``pace_note``, where it has them."""

    folder: Path
    overrides: dict[str, str]
    summary: Summary
    curve: tuple[tuple[int, float, float], ...]
    entropy: float | None
    wall_minutes: float | None = None
    pace_ms_per_update: float | None = None
    pace_note: str | None = None

    @property
    def seed(self) -> int:
        return self.summary.seed or 0

    def at_step(self, step: int, col: int) -> float | None:
        """Column ``col`` (1: NLL, 2: BLEU) of the validation at ``step``."""
        return next((float(p[col]) for p in self.curve if p[0] == step), None)


def read_run(folder: Path) -> Run:
    """The run in ``folder``; DataError naming it when a part is missing or not a record."""
    try:
        rec = read_record(folder)
        overrides = yaml.safe_load((folder / ".hydra" / "overrides.yaml").read_text())
        if rec.summary is None or not rec.valid:
            raise ValueError("no summary.json or no validation")
        kept = json.loads(rec.run.summary.read_text(encoding="utf-8"))
        return Run(
            folder,
            dict(o.split("=", 1) for o in overrides),
            rec.summary,
            tuple((int(e["step"]), float(e["nll"]), float(e["bleu"])) for e in rec.valid),
            (rec.valid[-1].get("attention_entropy_norm") or {}).get("cross"),
            kept.get("wall_minutes"),
            kept.get("pace_ms_per_update"),
            kept.get("pace_note"),
        )
    except (OSError, KeyError, TypeError, ValueError, RecordError) as err:
        raise DataError(
            f"{folder}: not a run record ({type(err).__name__}: {err}); it needs "
            "summary.json, metrics.jsonl with validations and .hydra/overrides.yaml"
        ) from None


def read_runs(results: Path, studies: tuple[str, ...]) -> list[Run]:
    """The run folders of ``studies`` under ``results`` (those with a summary.json)."""
    found = [f for st in studies for f in sorted((results / st).glob("*/summary.json"))]
    return [read_run(f.parent) for f in found]


def provenance(runs: list[Run]) -> str:
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
