"""The one reader of study run folders, results/<study>/<run>/ (experiments/sweep.py
``--record``): each as a :class:`Run`, a study's rows as :class:`Cell`, where they ran, a
run's kept outputs and evaluate.py scores, and the corpus whose test split a page scores."""

from __future__ import annotations

import json
import lzma
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from attnmt.data.corpora import PreparedCorpus, prepare_corpus
from attnmt.errors import AttnmtError, DataError
from attnmt.run_record import RecordError, Validation, read_record
from attnmt.run_summary import Summary
from experiments.study import Study

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"


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
    summary.json, its validations (each with NLL and BLEU) and the last one's cross-attention
    entropy."""

    folder: Path
    overrides: dict[str, str]
    summary: Summary
    valid: tuple[Validation, ...]
    entropy: float | None

    @property
    def seed(self) -> int:
        return self.summary.seed or 0

    def test_score(self, metric: str) -> float:
        """The final test ``bleu`` or ``chrf``; NaN without one."""
        value = getattr(self.summary.test, metric, None)
        return math.nan if value is None else float(value)

    @property
    def tested_nll(self) -> float:
        """Validation NLL of the checkpoint the test decoded: the first validation of best BLEU
        (the trainer keeps a new best only when BLEU rises); NaN without validations."""
        best = max(self.valid, key=lambda v: (v.bleu or 0.0, -v.step), default=None)
        return math.nan if best is None or best.nll is None else best.nll

    @property
    def machine_line(self) -> str:
        """CPU (family, model, flags), cores where known, torch, threads and GPU: one line."""
        m = self.summary.machine
        if m is None:
            return "?"
        cores = f", {m.cores} cores" if m.cores else ""
        threads = "?" if m.threads is None else m.threads
        gpu = f", GPU {m.cuda}" if m.cuda else ""
        return (
            f"{m.describe('flags')}{cores}, torch {m.torch_version or '?'}, {threads} threads{gpu}"
        )


def read_run(folder: Path) -> Run:
    """The run in ``folder``; DataError naming it when a part is missing or not a record."""
    try:
        rec = read_record(folder)
        hydra = folder / ".hydra" / "overrides.yaml"
        try:
            overrides = yaml.safe_load(hydra.read_text(encoding="utf-8"))
        except yaml.YAMLError as err:
            raise ValueError(f"{hydra}: not YAML ({str(err).partition(chr(10))[0]})") from None
        valid = tuple(rec.validations())
        if rec.summary is None or not valid:
            raise ValueError("no summary.json or no validation")
        if any(v.nll is None or v.bleu is None for v in valid):
            raise ValueError("a validation without nll or bleu")
        return Run(
            folder,
            dict(o.split("=", 1) for o in overrides),
            rec.summary,
            valid,
            (rec.valid[-1].get("attention_entropy_norm") or {}).get("cross"),
        )
    except (OSError, KeyError, TypeError, ValueError, RecordError) as err:
        raise DataError(
            f"{folder}: not a run record ({type(err).__name__}: {err}); it needs "
            "summary.json, metrics.jsonl with validations and .hydra/overrides.yaml"
        ) from None


def config(run: Run) -> dict[str, Any]:
    """The run's composed settings (.hydra/config.yaml)."""
    return yaml.safe_load((run.folder / ".hydra" / "config.yaml").read_text(encoding="utf-8"))


def read_runs(results: Path, studies: tuple[str, ...]) -> list[Run]:
    """The run folders of ``studies`` under ``results`` (those with a summary.json)."""
    found = [f for st in studies for f in sorted((results / st).glob("*/summary.json"))]
    return [read_run(f.parent) for f in found]


@dataclass(frozen=True)
class Cell:
    """The runs of a study that differ only in their seed: a table's row."""

    study: str
    overrides: dict[str, str]  # the study's overrides and the row's grid values, seed aside
    seeds: tuple[int, ...]  # the seeds the grid gives the row
    runs: tuple[Run, ...]  # those with a folder under results/<study>/, by seed
    missing: tuple[str, ...]  # the names of its runs without one

    @property
    def seeds_text(self) -> str:
        """'1 of 2 (1)': how many of the seeds it asks for have a run, and which."""
        ran = ", ".join(str(r.seed) for r in self.runs)
        return f"{len(self.runs)} of {len(self.seeds)}" + (f" ({ran})" if ran else "")


def study_cells(results: Path, study: Study) -> list[Cell]:
    """The rows of ``study`` in its grid's order, with their runs under ``results``."""
    rows: dict[tuple[str, ...], list[tuple[str, int]]] = {}
    for run in study.runs:
        seed = next((int(g[5:]) for g in run.grid if g.startswith("seed=")), 0)
        rows.setdefault(tuple(g for g in run.grid if not g.startswith("seed=")), []).append(
            (run.name, seed)
        )
    cells = []
    for grid, members in rows.items():
        have = [n for n, _ in members if (results / study.name / n / "summary.json").is_file()]
        runs = sorted((read_run(results / study.name / n) for n in have), key=lambda r: r.seed)
        cells.append(
            Cell(
                study.name,
                dict(o.split("=", 1) for o in (*study.overrides, *grid)),
                tuple(s for _, s in members),
                tuple(runs),
                tuple(n for n, _ in members if n not in have),
            )
        )
    return cells


def kept_hypotheses(run: Run, sentences: int) -> list[str] | None:
    """The run's kept test outputs (hyps/test.txt.xz, a line a sentence); None without them
    or when they are not ``sentences`` lines."""
    path = run.folder / "hyps" / "test.txt.xz"
    if not path.is_file():
        return None
    lines = lzma.decompress(path.read_bytes()).decode("utf-8").splitlines()
    return lines if len(lines) == sentences else None


class CorpusUnavailable(AttnmtError):
    """A corpus whose test split a page scores does not prepare on this machine."""


def prepared(data: Mapping[str, Any]) -> PreparedCorpus:
    """The corpus that the ``data`` settings name, prepared under their ``root`` (from the
    cache when it is there); :class:`CorpusUnavailable` when it does not prepare (a page
    without it would silently drop what needs it)."""
    try:
        return prepare_corpus(data)
    except (AttnmtError, OSError) as e:
        name = data["name"]
        raise CorpusUnavailable(
            f"the corpus {name!r} does not prepare under {data.get('root')}: {e}\n"
            f"Prepare it (`python scripts/prepare_data.py data={name}`; `make setup` installs "
            "the packages the corpora need), then generate the page again. Nothing was written."
        ) from e


def corpus_split(
    data: Mapping[str, Any] | None, root: Path = ROOT, split: str = "test"
) -> tuple[list[str], list[str]]:
    """(sources, references) of ``split`` of the corpus that the ``data`` settings name,
    :func:`prepared` under ``root``/data; ([], []) when they name none."""
    if not isinstance(data, Mapping) or "name" not in data:
        return [], []
    return prepared({**data, "root": str(root / "data")}).read(split)


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
