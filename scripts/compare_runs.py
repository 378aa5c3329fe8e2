"""Compare training runs: a markdown table and a PNG of validation BLEU against step and minutes.

    python scripts/compare_runs.py outputs/2026-11-23/18-00-00_transformer_ding_de_en ...
    python scripts/compare_runs.py outputs/multirun/2026-11-23/19-00-00      # every job in it
    python scripts/compare_runs.py RUNS... --out compare           # compare.md + compare.png
    python scripts/compare_runs.py RUN --minutes 5 15 30 60        # + best valid BLEU by then

Everything is read from each run's record (``metrics.jsonl`` and ``summary.json``,
attnmt.run_record): the validation events (step, training minutes, BLEU, chrF) and the final
test (BLEU, chrF with the sacrebleu signature, beam); and, for a run its time budget stopped,
the budget (``.hydra/config.yaml``): its final validation, which comes just past the budget,
counts at the budget's mark. Runs that differ only in ``seed``
(their Hydra overrides, ``.hydra/overrides.yaml``) form one group: the table gives the
mean ± standard deviation of the test scores over its seeds.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from matplotlib.figure import Figure
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from attnmt import run_curves
from attnmt.errors import ConfigError
from attnmt.output_guard import OutputKind, check_output
from attnmt.run_curves import Curve, validation_figure
from attnmt.run_dir import RunDir
from attnmt.run_record import RecordError, read_record


@dataclass
class Run:
    """What one run's record says."""

    path: Path
    label: str
    valid: list[tuple[int, float, float, float]] = field(default_factory=list)  # step, min, B, C
    test: dict[str, float] = field(default_factory=dict)  # "bleu", "chrf"
    signature: str = ""
    beam: int = 0
    budget_stop: float | None = None  # the time budget that stopped it (minutes), if one did

    @property
    def best_valid_bleu(self) -> float:
        return max((v[2] for v in self.valid), default=math.nan)

    @property
    def minutes(self) -> float:
        return self.valid[-1][1] if self.valid else math.nan


def run_dirs(paths: list[Path]) -> list[Path]:
    """The run directories at or under ``paths`` (a run holds metrics.jsonl), sorted."""
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise SystemExit(f"error: {missing[0]}: no such run directory")
    found = RunDir.find(paths)
    if not found:
        raise SystemExit(
            "error: no run directory (no metrics.jsonl) under " + " ".join(map(str, paths))
        )
    return [run.path for run in found]


def overrides_label(run: Path) -> str:
    """The run's Hydra overrides without seed/resume/paths, or its directory name."""
    file = RunDir(run).overrides_yaml
    if not file.is_file():
        return run.name
    keep = []
    for line in file.read_text(encoding="utf-8").splitlines():
        item = line.removeprefix("- ").strip().strip("'\"")
        key = item.split("=", 1)[0].lstrip("+~")
        if item and key not in ("seed", "resume") and not key.startswith(("hydra", "data.root")):
            keep.append(item)
    return " ".join(keep) or "defaults"


def time_budget(config_yaml: Path) -> float | None:
    """``trainer.time_budget_min`` of a run's composed config, or None without one."""
    if not config_yaml.is_file():
        return None
    try:
        budget = OmegaConf.select(OmegaConf.load(config_yaml), "trainer.time_budget_min")
    except (yaml.YAMLError, OmegaConfBaseException, UnicodeDecodeError, OSError) as err:
        raise SystemExit(f"error: {config_yaml}: unreadable ({err})") from None
    return float(budget) if isinstance(budget, (int, float)) else None


def read_run(path: Path) -> Run:
    """Read the run record of ``path``."""
    try:
        record = read_record(path)
    except RecordError as err:
        raise SystemExit(f"error: {err}") from None
    run = Run(path, overrides_label(path))
    run.valid = [(e["step"], e["minutes"], e["bleu"], e["chrf"]) for e in record.valid]
    run.budget_stop = run_curves.budget_stop(
        record.summary.reason if record.summary else None, time_budget(RunDir(path).config_yaml)
    )
    if (test := record.test) is not None:
        run.test = {"bleu": test["bleu"], "chrf": test["chrf"]}
        run.signature, run.beam = test["bleu_signature"], test["beam"]
    return run


def _spread(values: list[float]) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def _groups(runs: list[Run]) -> dict[str, list[Run]]:
    """Runs that differ only in their seed, by label, in first-seen order."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.label, []).append(run)
    return groups


def table(runs: list[Run]) -> str:
    """Markdown: one row per group of seeds (mean ± std over its runs)."""
    rows = [
        "| runs | seeds | best valid BLEU | test BLEU | test chrF | minutes | beam |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, members in _groups(runs).items():
        tests = [r for r in members if "bleu" in r.test]
        rows.append(
            f"| {label} | {len(members)} | {_spread([r.best_valid_bleu for r in members])} "
            f"| {_spread([r.test['bleu'] for r in tests])} "
            f"| {_spread([r.test['chrf'] for r in tests if 'chrf' in r.test])} "
            f"| {_spread([r.minutes for r in members if r.valid])} "
            f"| {', '.join(sorted({str(r.beam) for r in tests})) or '–'} |"
        )
    signatures = sorted({r.signature for r in runs if r.signature})
    if signatures:
        rows += ["", "signature: " + "; ".join(f"`{s}`" for s in signatures)]
    return "\n".join(rows) + "\n"


def best_by(run: Run, minutes: float) -> float | None:
    """The best validation BLEU ``run`` had reached ``minutes`` into training (at the budget
    that stopped it: its final validation too), or None if it ran shorter
    (:func:`attnmt.run_curves.best_by`)."""
    return run_curves.best_by(((v[1], v[2]) for v in run.valid), minutes, run.budget_stop)


def minutes_table(runs: list[Run], marks: list[float]) -> str:
    """Markdown: per group of seeds, the best validation BLEU reached by each mark."""
    rows = [
        "| runs | " + " | ".join(f"by {m:g} min" for m in marks) + " |",
        "|---|" + "---|" * len(marks),
    ]
    for label, members in _groups(runs).items():
        cells = []
        for mark in marks:
            reached = [b for b in (best_by(r, mark) for r in members) if b is not None]
            cells.append(_spread(reached))
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    note = "best validation BLEU so far at each wall-clock mark (– : the run was shorter)"
    return "\n".join([note, "", *rows]) + "\n"


def figure(runs: list[Run], marks: Sequence[float] = ()) -> Figure:
    """Validation BLEU against step and against wall-clock minutes, one line per run."""
    return validation_figure([Curve(r.label, r.valid) for r in runs], marks)


def is_comparison(path: Path) -> bool:
    """Whether ``path`` (OUT.md or OUT.png) is of a comparison this script wrote: OUT.md
    starts with its table's header."""
    try:
        with path.with_suffix(".md").open(encoding="utf-8") as f:
            return f.readline() == table([]).splitlines(keepends=True)[0]
    except (OSError, UnicodeDecodeError):
        return False


COMPARISON = OutputKind("a comparison of runs", "--out", "compare", own=is_comparison)
"""What --out may name (attnmt.output_guard): no run's file, no existing file but a
previous comparison's OUT.md and OUT.png."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories or folders of runs")
    parser.add_argument("--out", type=Path, default=Path("compare"), help="writes OUT.md, OUT.png")
    parser.add_argument(
        "--minutes",
        type=float,
        nargs="+",
        default=[],
        help="also tabulate the best validation BLEU reached by these wall-clock minutes",
    )
    args = parser.parse_args(argv)
    if any(m <= 0 for m in args.minutes):
        parser.error("--minutes: every mark must be a positive number of minutes")
    try:
        for path in (args.out.with_suffix(".md"), args.out.with_suffix(".png")):
            check_output(path, COMPARISON)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    runs = [read_run(p) for p in run_dirs(args.runs)]
    text = table(runs)
    if args.minutes:
        text += "\n" + minutes_table(runs, args.minutes)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    md, png = args.out.with_suffix(".md"), args.out.with_suffix(".png")
    md.write_text(text, encoding="utf-8")
    figure(runs, args.minutes).savefig(png, format="png")
    print(text, end="")
    print(f"wrote {md} and {png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
