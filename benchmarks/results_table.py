"""The README's results tables from the Hydra sweeps that ``make results`` runs.

    python -m benchmarks.results_table plan --readme README.md \\
        --sweep "experiment=results_main hydra.sweep.dir=outputs/results/main seed=1,2,3" \\
        --sweep "experiment=results_attention hydra.sweep.dir=outputs/results/attention"
    python -m benchmarks.results_table table --main outputs/results/main \\
        --attention outputs/results/attention --out outputs/results/results --readme README.md

``plan`` runs before training: it checks that README.md has the marker comments, that the
sweep directories are new, records the machine (:mod:`attnmt.machine`, cores, the git
commit) in ``<sweep dir>/machine.json`` and prints the number of runs and the expected
duration. ``table`` reads every job of the sweeps (``train.log`` as scripts/compare_runs.py
does, ``.hydra/overrides.yaml`` and ``.hydra/config.yaml``; the grid that was asked for from
``multirun.yaml``), writes OUT.md and OUT.json, and replaces what lies between

    <!-- results:main:start -->       and  <!-- results:main:end -->
    <!-- results:attention:start -->  and  <!-- results:attention:end -->

in the README (atomically). Runs without a test result are listed as failed, runs of the
grid without a directory as not run; either makes the exit status 1 (after writing).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, ListConfig, OmegaConf

from attnmt.atomic import atomic_path
from attnmt.machine import this_machine
from scripts.compare_runs import TEST, Run, read_run

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "configs" / "experiment"
MODEL = re.compile(r"\] - model (\S+): ([\d.]+)M parameters on (\S+), precision (\S+)")
PROBLEM = re.compile(r"\]\[(?:WARNING|ERROR|CRITICAL)\] - (.*)")
JOB_NUM = re.compile(r"^(\d+)_")
SECTIONS = ("main", "attention")
ALIASES = {"data": "data.name", "model": "model.name"}  # config group -> the value it sets
LEFT_OUT = ("seed", "resume")  # overrides that do not make a different configuration
OVERHEAD_MIN = 1.5  # per run: start-up, final validation, test decoding (CPU, rough)


def marker(section: str, end: str) -> str:
    return f"<!-- results:{section}:{end} -->"


# ---- the grid a sweep asks for ------------------------------------------------------------


def sweep_axes(params: dict[str, str], overrides: Iterable[str]) -> dict[str, list[str]]:
    """Key -> values of a BasicSweeper sweep: ``hydra.sweeper.params`` then the command
    line's task overrides (a later one replaces an earlier key, in place, as Hydra does)."""
    parser = OverridesParser.create()
    axes: dict[str, list[str]] = {}
    for text in [f"{k}={v}" for k, v in params.items()] + list(overrides):
        override = parser.parse_override(text)
        key = override.get_key_element()
        if key.lstrip("+~").startswith("hydra."):
            continue  # Hydra's own settings, not the job's
        if override.is_sweep_override():
            axes[key] = [str(v) for v in override.sweep_string_iterator()]
        else:
            axes[key] = [override.get_value_element_as_str()]
    return axes


def expand(axes: dict[str, list[str]]) -> list[dict[str, str]]:
    """The jobs of a sweep in Hydra's order (the last key varies fastest)."""
    keys = list(axes)
    return [dict(zip(keys, values)) for values in itertools.product(*axes.values())]


def _plain(node: Any) -> Any:
    if isinstance(node, DictConfig | ListConfig):
        return OmegaConf.to_container(node, resolve=False)
    return node


def asked_grid(sweep_dir: Path) -> list[dict[str, str]] | None:
    """The jobs ``<sweep_dir>/multirun.yaml`` asked for, or None without one."""
    file = sweep_dir / "multirun.yaml"
    if not file.is_file():
        return None
    cfg = OmegaConf.load(file)
    params = _plain(OmegaConf.select(cfg, "hydra.sweeper.params", default=None)) or {}
    task = _plain(OmegaConf.select(cfg, "hydra.overrides.task", default=None)) or []
    return expand(sweep_axes({str(k): str(v) for k, v in params.items()}, map(str, task)))


# ---- the jobs of a sweep ------------------------------------------------------------------


@dataclass
class Job:
    """One job of a sweep: found on disk (``path``) or only asked for (``path`` None)."""

    overrides: dict[str, str]
    path: Path | None = None
    config: DictConfig | None = None
    run: Run | None = None
    params_m: float = math.nan
    device: str = ""
    chrf_signature: str = ""
    problem: str = ""  # why it has no result

    @property
    def status(self) -> str:
        if self.path is None:
            return "not run"
        return "ok" if self.run is not None and {"bleu", "chrf"} <= set(self.run.test) else "failed"

    @property
    def seed(self) -> str:
        return self.overrides.get("seed") or str(self.value("seed"))

    @property
    def updates(self) -> float:
        return float(self.run.valid[-1][0]) if self.run and self.run.valid else math.nan

    def value(self, key: str) -> Any:
        """``key``'s value for this job: its override, else its composed config, else '?'."""
        for spelling in (key, f"+{key}", f"++{key}"):
            if spelling in self.overrides:
                return self.overrides[spelling]
        if self.config is not None:
            found = OmegaConf.select(
                self.config, ALIASES.get(key, key), default=None, throw_on_resolution_failure=False
            )
            if found is not None:
                return found
        return "?"

    def label(self, keys: Iterable[str]) -> str:
        """Seed and the ``keys`` this job was given, and its directory."""
        shown = [f"{k}={self.value(k)}" for k in keys]
        where = f" ({self.path})" if self.path is not None else ""
        return f"seed {self.seed}{''.join(', ' + s for s in shown)}{where}"


def _overrides(path: Path) -> dict[str, str]:
    file = path / ".hydra" / "overrides.yaml"
    if not file.is_file():
        return {}
    items = _plain(OmegaConf.load(file)) or []
    pairs = (str(item).split("=", 1) for item in items if "=" in str(item))
    return {k: v for k, v in pairs if not k.lstrip("+~").startswith("hydra.")}


def read_job(path: Path) -> Job:
    """A job directory: overrides, composed config and what its train.log says."""
    config_file = path / ".hydra" / "config.yaml"
    config = OmegaConf.load(config_file) if config_file.is_file() else None
    job = Job(_overrides(path), path, config if isinstance(config, DictConfig) else None)
    if not (path / "train.log").is_file():
        job.problem = "no train.log"
        return job
    job.run = read_run(path)
    problems = []
    for line in (path / "train.log").read_text(encoding="utf-8", errors="replace").splitlines():
        if m := MODEL.search(line):
            job.params_m, job.device = float(m.group(2)), m.group(3)
        elif (m := TEST.search(line)) and m.group(2).lower().startswith("chrf"):
            job.chrf_signature = f"{m.group(2)}|{m.group(3)}"
        elif m := PROBLEM.search(line):
            problems.append(m.group(1).strip())
    if job.status != "ok":
        last = f"; last warning: {problems[-1][:200]}" if problems else ""
        step = f" (last validation at step {int(job.updates)})" if job.run.valid else ""
        job.problem = f"no test result in train.log{step}{last}"
    return job


def _job_dirs(sweep_dir: Path) -> list[Path]:
    """Job directories of a sweep (a folder with train.log or .hydra/), in job order."""
    found = {p for p in sweep_dir.iterdir() if p.is_dir() and JOB_NUM.match(p.name)}
    found |= {log.parent for log in sweep_dir.rglob("train.log")}
    found |= {h.parent for h in sweep_dir.rglob(".hydra") if h.parent != sweep_dir}

    def order(p: Path) -> tuple[int, str]:
        m = JOB_NUM.match(p.name)
        return (int(m.group(1)) if m else 1 << 30, str(p))

    return sorted(found, key=order)


def _sibling_config(job: Job, jobs: list[Job]) -> DictConfig | None:
    """The composed config of a job that ran with the same overrides but the seed (else the
    same config groups): what a job that never started would have had, seed aside."""

    def same(other: Job, keys: Iterable[str]) -> bool:
        return all(other.overrides.get(k) == job.overrides.get(k) for k in keys)

    ran = [j for j in jobs if j.config is not None]
    keys = set(job.overrides) - {"seed"}
    for other in ran:
        if same(other, keys | set(other.overrides) - {"seed"}):
            return other.config
    groups = {k for j in [job, *ran] for k in j.overrides if "." not in k and k != "seed"}
    return next((other.config for other in ran if same(other, groups)), None)


def read_sweep(sweep_dir: Path) -> list[Job]:
    """Every job of a sweep: those on disk, then those of its grid that never started."""
    if not sweep_dir.is_dir():
        raise SystemExit(f"error: {sweep_dir}: no such sweep directory (run make results)")
    jobs = [read_job(p) for p in _job_dirs(sweep_dir)]
    for wanted in asked_grid(sweep_dir) or []:
        if not any(all(j.overrides.get(k) == v for k, v in wanted.items()) for j in jobs):
            missing = Job(wanted, problem="no job directory (the multirun stopped before it)")
            missing.config = _sibling_config(missing, jobs)
            jobs.append(missing)
    if not jobs:
        raise SystemExit(f"error: {sweep_dir}: no jobs there (no train.log, no multirun.yaml)")
    return jobs


# ---- numbers -------------------------------------------------------------------------------


def mean_std(values: list[float], digits: int = 2) -> str:
    """'m ± s' (sample standard deviation) over ≥ 2 values, the value alone for 1, '–'."""
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def span(values: Iterable[float], unit: str = "", digits: int = 2) -> str:
    """One value, or 'lo–hi' when they differ (parameters of a group's runs, ...)."""
    found = sorted({round(v, digits) for v in values if not math.isnan(v)})
    if not found:
        return "–"
    if len(found) == 1:
        return f"{found[0]:.{digits}f}{unit}"
    return f"{found[0]:.{digits}f}–{found[-1]:.{digits}f}{unit}"


def summary(jobs: list[Job]) -> dict[str, Any]:
    """The figures of one group of seeds (one table row or cell)."""
    ok = [j for j in jobs if j.status == "ok"]
    return {
        "seeds_asked": len(jobs),
        "seeds_ok": len(ok),
        "seeds": [j.seed for j in ok],
        "bleu": [j.run.test["bleu"] for j in ok if j.run],
        "chrf": [j.run.test["chrf"] for j in ok if j.run],
        "params_m": [j.params_m for j in jobs if not math.isnan(j.params_m)],
        "minutes": [j.run.minutes for j in ok if j.run and j.run.valid],
        "updates": [j.updates for j in ok if j.run and j.run.valid],
    }


def _stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "std": None}
    std = statistics.stdev(values) if len(values) > 1 else None
    return {"mean": statistics.mean(values), "std": std}


def varying(jobs: list[Job]) -> list[str]:
    """The overridden keys whose values differ between the jobs (seed and paths left out)."""
    keys = dict.fromkeys(k for j in jobs for k in j.overrides if k.lstrip("+~") not in LEFT_OUT)
    return [k for k in keys if len({j.overrides.get(k) for j in jobs}) > 1]


def group(
    jobs: list[Job], key: Callable[[Job], tuple[str, ...]]
) -> dict[tuple[str, ...], list[Job]]:
    groups: dict[tuple[str, ...], list[Job]] = {}
    for job in jobs:
        groups.setdefault(key(job), []).append(job)
    return groups


# ---- what a table says under it -------------------------------------------------------------


def machine() -> dict[str, Any]:
    """The machine this runs on (:func:`attnmt.machine.this_machine`), cores, the commit."""
    m = this_machine()
    try:
        commit = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {
        "cpu": m.cpu_line(),
        "machine": m.to_dict(),
        "cpu_capability": m.kernels,  # the kernels torch uses
        "cores": os.cpu_count(),
        "torch_threads": m.threads,
        "gpu": m.cuda,
        "torch": m.torch_version,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit,
        "recorded": datetime.now().isoformat(timespec="seconds"),
    }


def sweep_machine(sweep_dir: Path) -> dict[str, Any]:
    """``<sweep_dir>/machine.json`` (written by ``plan`` before training), else this machine."""
    file = sweep_dir / "machine.json"
    if file.is_file():
        return dict(json.loads(file.read_text(encoding="utf-8")), source="recorded before training")
    return dict(machine(), source="recorded when the table was made, not by make results")


def ran_on(info: dict[str, Any], jobs: list[Job]) -> str:
    devices = sorted({j.device for j in jobs if j.device})
    isa = f", {info['cpu_capability']}" if info.get("cpu_capability") else ""
    where = f"CPU {info['cpu']} ({info['cores']} cores{isa}, torch {info['torch']} with "
    where += f"{info['torch_threads']} threads)"
    if info.get("gpu") and any(d.startswith("cuda") for d in devices):
        where += f", GPU {info['gpu']}"
    commit = f", attnmt {info['commit']}" if info.get("commit") else ""
    return (
        f"Ran on: {where}; device {', '.join(devices) or '?'}{commit}; "
        f"{info['recorded'][:10]} ({info['source']})."
    )


def signatures(jobs: list[Job]) -> str:
    bleu = sorted({j.run.signature for j in jobs if j.run and j.run.signature})
    chrf = sorted({j.chrf_signature for j in jobs if j.chrf_signature})
    parts = [f"BLEU `{s}`" for s in bleu] + [f"`{s}`" for s in chrf]
    return "sacrebleu signatures: " + ("; ".join(parts) if parts else "none (no test results)")


def problems(jobs: list[Job]) -> list[str]:
    keys = varying(jobs)
    bad = [j for j in jobs if j.status != "ok"]
    return [f"- {j.status}: {j.label(keys)}: {j.problem}" for j in bad]


def _extra(job: Job, keys: list[str]) -> tuple[str, ...]:
    return tuple(f"{k}={job.value(k)}" for k in keys)


def _common(jobs: list[Job], key: str) -> str:
    values = sorted({str(j.value(key)) for j in jobs if j.path is not None} - {"?"})
    return ", ".join(values) or "?"


def _budget(jobs: list[Job]) -> str:
    budget = _common(jobs, "trainer.time_budget_min")
    steps = _common(jobs, "trainer.max_steps")
    text = f"{budget} min wall-clock training budget per run (trainer.time_budget_min)"
    if steps not in ("0", "?"):
        text += f", at most {steps} updates (trainer.max_steps)"
    return text


# ---- the two tables ------------------------------------------------------------------------


def _corpus(jobs: list[Job]) -> str:
    name = str(jobs[0].value("data"))
    src, tgt = (_common(jobs, f"data.{k}") for k in ("src_lang", "tgt_lang"))
    return f"{name} ({src}→{tgt})" if "?" not in (src, tgt) else name


def main_table(jobs: list[Job], info: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """One row per corpus × model preset: test BLEU / chrF mean ± std over the seeds."""
    rows = [
        "| corpus | model | seeds | test BLEU | test chrF | parameters | train min | updates |",
        "|---|---|---|---|---|---|---|---|",
    ]
    data = []
    extra = [k for k in varying(jobs) if k not in ("data", "model")]  # a sweep beyond the grid
    for (corpus, model, *more), members in group(
        jobs, lambda j: (str(j.value("data")), str(j.value("model")), *_extra(j, extra))
    ).items():
        s = summary(members)
        missing = [j.status for j in members if j.status != "ok"]
        why = ", ".join(f"{missing.count(w)} {w}" for w in ("failed", "not run") if w in missing)
        seeds = f"{s['seeds_ok']} of {s['seeds_asked']}" + (f" ({why})" if why else "")
        rows.append(
            f"| {_corpus(members)} | {' '.join([model, *more])} | {seeds} | {mean_std(s['bleu'])} "
            f"| {mean_std(s['chrf'])} | {span(s['params_m'], 'M')} | {mean_std(s['minutes'], 1)} "
            f"| {mean_std(s['updates'], 0)} |"
        )
        key = {"corpus": corpus, "model": model, **dict(m.split("=", 1) for m in more)}
        data.append(_row_json(key, s, members))
    ok = [j for j in jobs if j.status == "ok"]
    beams = sorted({str(j.run.beam) for j in ok if j.run})
    seeds = sorted({j.seed for j in jobs}, key=lambda s: (len(s), s))
    notes = [
        "",
        f"Test BLEU and chrF of each run's best-validation checkpoint (beam "
        f"{', '.join(beams) or '?'}): mean ± sample standard deviation over the seeds that "
        f"finished (asked: {', '.join(seeds)}); {_budget(jobs)}. *train min*: first update to "
        "last validation; *updates*: optimizer steps.",
    ]
    return "\n".join(rows + _notes(notes, jobs, info)) + "\n", data


def attention_table(jobs: list[Job], info: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """Scorers (rows) × alignment modes (columns): test BLEU / chrF per cell."""
    score_key, mode_key = "model.attention.score", "model.attention.mode"
    extra = [k for k in varying(jobs) if k not in (score_key, mode_key)]
    cells = group(
        jobs,
        lambda j: (" ".join([str(j.value(score_key)), *_extra(j, extra)]), str(j.value(mode_key))),
    )
    scores = list(dict.fromkeys(k[0] for k in cells))
    modes = list(dict.fromkeys(k[1] for k in cells))
    rows = [
        "| score \\ mode | " + " | ".join(modes) + " | parameters |",
        "|---|" + "---|" * (len(modes) + 1),
    ]
    data = []
    for score in scores:
        line, params = [], []
        for mode in modes:
            members = cells.get((score, mode), [])
            s = summary(members)
            params += s["params_m"]
            if not members:
                line.append("")
            elif not s["seeds_ok"]:
                line.append(members[0].status)
            else:
                line.append(f"{mean_std(s['bleu'])} / {mean_std(s['chrf'])}")
            if members:
                data.append(_row_json({"score": score, "mode": mode}, s, members))
        rows.append(f"| {score} | " + " | ".join(line) + f" | {span(params, 'M')} |")
    ran = [j for j in jobs if j.path is not None]
    seeds = sorted({j.seed for j in jobs}, key=lambda s: (len(s), s))
    minutes = [j.run.minutes for j in ran if j.status == "ok" and j.run]
    notes = [
        "",
        f"Test BLEU / chrF of {_common(ran, 'model')} on {_corpus(ran) if ran else '?'} for each "
        f"attention scorer (`model.attention.score`) and alignment mode "
        f"(`model.attention.mode`); seed {', '.join(seeds)} (mean ± std over seeds when more "
        f"than one); {_budget(ran)}, {span(minutes, ' min', 1)} from first update to last "
        "validation.",
    ]
    return "\n".join(rows + _notes(notes, jobs, info)) + "\n", data


def _notes(described: list[str], jobs: list[Job], info: dict[str, Any]) -> list[str]:
    """The lines under a table: its description, the signatures, the machine, failures."""
    notes = [*described, "", signatures(jobs), "", ran_on(info, jobs)]
    bad = problems(jobs)
    return notes + (["", "Runs without a result:", "", *bad] if bad else [])


def _row_json(key: dict[str, str], s: dict[str, Any], members: list[Job]) -> dict[str, Any]:
    return {
        **key,
        "seeds_asked": s["seeds_asked"],
        "seeds_ok": s["seeds_ok"],
        "test_bleu": _stats(s["bleu"]),
        "test_chrf": _stats(s["chrf"]),
        "params_m": s["params_m"][0] if s["params_m"] else None,
        "train_minutes": _stats(s["minutes"]),
        "updates": _stats(s["updates"]),
        "runs": [
            {
                "seed": j.seed,
                "status": j.status,
                "path": str(j.path) if j.path else None,
                "test_bleu": j.run.test.get("bleu") if j.run else None,
                "test_chrf": j.run.test.get("chrf") if j.run else None,
                "train_minutes": j.run.minutes if j.run and j.run.valid else None,
                "updates": j.updates if j.run and j.run.valid else None,
                "params_m": None if math.isnan(j.params_m) else j.params_m,
                "device": j.device or None,
                "problem": j.problem or None,
            }
            for j in members
        ],
    }


# ---- writing -------------------------------------------------------------------------------


def write_atomic(path: Path, text: str) -> None:
    """:mod:`attnmt.atomic`'s replace, keeping an existing file's permissions (README.md)."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
        if mode is not None:
            tmp.chmod(mode)


def check_markers(text: str, sections: Iterable[str], name: str) -> None:
    """Each section's start and end marker once, start first; else SystemExit saying so."""
    for section in sections:
        start, end = marker(section, "start"), marker(section, "end")
        counts = (text.count(start), text.count(end))
        if counts != (1, 1) or text.index(start) > text.index(end):
            raise SystemExit(
                f"error: {name}: the {section} results table goes between the lines\n"
                f"  {start}\n  {end}\n"
                f"which must each appear once, in this order (found {counts[0]} and "
                f"{counts[1]}); add them where the table belongs and run this again"
            )


def replace_between(text: str, section: str, body: str) -> str:
    start, end = marker(section, "start"), marker(section, "end")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    note = "<!-- written by `make results` (benchmarks/results_table.py): do not edit by hand -->"
    return f"{head}{start}\n{note}\n\n{body.rstrip()}\n\n{end}{tail}"


def update_readme(readme: Path, tables: dict[str, str]) -> None:
    if not readme.is_file():
        raise SystemExit(f"error: {readme}: no such file")
    text = readme.read_text(encoding="utf-8")
    check_markers(text, tables, str(readme))
    for section, body in tables.items():
        text = replace_between(text, section, body)
    write_atomic(readme, text)


# ---- the commands --------------------------------------------------------------------------


def _experiment(overrides: list[str]) -> tuple[str, DictConfig]:
    names = [o.split("=", 1)[1] for o in overrides if o.lstrip("+").startswith("experiment=")]
    if not names:
        raise SystemExit(f"error: --sweep {' '.join(overrides)!r}: no experiment=NAME in it")
    file = EXPERIMENTS / f"{names[-1]}.yaml"
    if not file.is_file():
        raise SystemExit(f"error: experiment={names[-1]}: no {file}")
    cfg = OmegaConf.load(file)
    assert isinstance(cfg, DictConfig)
    return names[-1], cfg


def _setting(cfg: DictConfig, overrides: list[str], key: str, default: Any) -> Any:
    for item in reversed(overrides):
        if item.lstrip("+").startswith(f"{key}="):
            return item.split("=", 1)[1]
    return OmegaConf.select(cfg, key, default=default)


def plan(sweeps: list[str], readme: Path | None, record: bool = True) -> int:
    """Before training: markers, fresh sweep directories, machine.json, the duration."""
    if readme is not None:
        if not readme.is_file():
            raise SystemExit(f"error: {readme}: no such file")
        check_markers(readme.read_text(encoding="utf-8"), SECTIONS, str(readme))
    info = machine() if record else {}
    total_runs, total_min, lines, capped, unbounded = 0, 0.0, [], False, False
    for text in sweeps:
        overrides = shlex.split(text)
        name, cfg = _experiment(overrides)
        params = _plain(OmegaConf.select(cfg, "hydra.sweeper.params", default=None)) or {}
        axes = sweep_axes({str(k): str(v) for k, v in params.items()}, overrides)
        runs = len(expand(axes))
        budget = float(_setting(cfg, overrides, "trainer.time_budget_min", 12.0))
        steps = int(_setting(cfg, overrides, "trainer.max_steps", 0))
        sweep_dir = Path(str(_setting(cfg, overrides, "hydra.sweep.dir", "?")))
        if sweep_dir.is_dir() and any(p.name != "machine.json" for p in sweep_dir.iterdir()):
            raise SystemExit(
                f"error: {sweep_dir} already holds a sweep; move it away or set RESULTS_DIR= "
                f"to a new folder (remake its tables with: python -m benchmarks.results_table "
                f"table --{'main' if 'main' in name else 'attention'} {sweep_dir})"
            )
        if record:
            write_atomic(sweep_dir / "machine.json", json.dumps(info, indent=2) + "\n")
        shape = " × ".join(f"{k} ({len(v)})" for k, v in axes.items() if len(v) > 1)
        cap = f"{budget:g} min" if budget else "no time budget"
        if steps:
            cap += f" or {steps} updates, whichever comes first"
        lines.append(f"  {name}: {runs} runs = {shape or '1'}, {cap} each -> {sweep_dir}")
        total_runs += runs
        total_min += runs * budget
        capped |= bool(steps)
        unbounded |= not budget and not steps
    overhead = total_runs * OVERHEAD_MIN
    print(f"make results: {total_runs} training runs in {len(sweeps)} Hydra multiruns")
    print("\n".join(lines))
    if info:
        gpu = f"; GPU {info['gpu']}" if info.get("gpu") else ""
        print(
            f"  on CPU {info['cpu']} ({info['cores']} cores, {info['torch_threads']} torch "
            f"threads){gpu}"
        )
    if unbounded:
        print("expected duration: unknown (a sweep has neither a time budget nor max_steps)")
        return 0
    print(
        f"expected duration{' at most' if capped else ''}: {total_min / 60:.1f} h of training "
        f"budgets ({total_min:.0f} min) + ~{overhead:.0f} min of start-up, final validation "
        f"and test decoding ≈ {(total_min + overhead) / 60:.1f} h"
        + (" (trainer.max_steps ends runs sooner)" if capped else "")
    )
    return 0


def table(main: Path | None, attention: Path | None, out: Path | None, readme: Path | None) -> int:
    """Read the sweeps, write OUT.md / OUT.json and the README's tables; 1 if runs failed."""
    if main is None and attention is None:
        raise SystemExit("error: nothing to tabulate: give --main DIR and/or --attention DIR")
    if readme is not None:  # before any work: a README without markers fails at once
        if not readme.is_file():
            raise SystemExit(f"error: {readme}: no such file")
        wanted = [s for s, d in (("main", main), ("attention", attention)) if d is not None]
        check_markers(readme.read_text(encoding="utf-8"), wanted, str(readme))
    tables: dict[str, str] = {}
    data: dict[str, Any] = {"generated": datetime.now().isoformat(timespec="seconds")}
    bad = 0
    makers = {"main": main_table, "attention": attention_table}
    for section, sweep_dir in (("main", main), ("attention", attention)):
        if sweep_dir is None:
            continue
        jobs = read_sweep(sweep_dir)
        info = sweep_machine(sweep_dir)
        tables[section], rows = makers[section](jobs, info)
        data[section] = {"sweep_dir": str(sweep_dir), "machine": info, "rows": rows}
        bad += sum(j.status != "ok" for j in jobs)
    titles = {"main": "Model presets", "attention": "Attention scorers × alignment modes"}
    md = "\n".join(f"## {titles[s]}\n\n{t}" for s, t in tables.items())
    print(md, end="")
    if out is not None:
        write_atomic(out.with_suffix(".md"), md)
        write_atomic(out.with_suffix(".json"), json.dumps(data, indent=2) + "\n")
        print(f"wrote {out.with_suffix('.md')} and {out.with_suffix('.json')}", file=sys.stderr)
    if readme is not None:
        update_readme(readme, tables)
        print(f"wrote the {' and '.join(tables)} table(s) into {readme}", file=sys.stderr)
    if bad:
        print(f"{bad} run(s) have no result: listed under the tables", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="before training: check, record the machine, print the plan")
    p.add_argument(
        "--sweep", action="append", required=True, help="the overrides of one train.py -m run"
    )
    p.add_argument("--readme", type=Path, help="check its marker comments now")
    t = sub.add_parser("table", help="the tables from the sweep directories")
    t.add_argument("--main", type=Path, help="sweep dir of experiment=results_main")
    t.add_argument("--attention", type=Path, help="sweep dir of experiment=results_attention")
    t.add_argument("--out", type=Path, help="write OUT.md and OUT.json")
    t.add_argument("--readme", type=Path, help="replace the tables between its markers")
    args = parser.parse_args(argv)
    if args.command == "plan":
        return plan(args.sweep, args.readme)
    return table(args.main, args.attention, args.out, args.readme)


if __name__ == "__main__":
    sys.exit(main())
