"""The attention table's check at the preset's size: docs/results.md, "At the preset's size".

The attention table (configs/experiment/results_attention.yaml) trains its RNNs at 128 units
so that the whole table fits a night on 2 cores; issue 36 accepts a smaller RNN if the docs
say so and one cell is also run at the preset's size to show that the ranking holds. The
check (table ``attention_preset``, configs/experiment/results_attention_preset.yaml): rnn_luong
with Luong et al.'s reference scorer general in the modes local_m and local_p at
configs/model/rnn_luong.yaml's own size, with the table's data, updates and trainer settings;
its runs get the table's measures (experiments/results_run.py).

Beside each of its cells the same cell at the table's size, then one sentence: whether the
two modes' order in mean test BLEU is the same at both sizes, and whether the difference at
the preset's size is resolved. The difference is the mode effect of
:func:`experiments.comparison_stats.main_effects` over the two cells' runs (the attention
table's additive fit, here with one scorer): with modes a, b of n_a, n_b runs,

    d = ȳ_a − ȳ_b,  95% interval d ± t_{0.975, n−2} · s · sqrt(1/n_a + 1/n_b),

s² the pooled within-mode variance (the pooled two-sample t interval; no interval with one
run per mode). Resolved: the interval excludes 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from experiments.attention_protocol import plan_hours, size_of
from experiments.attention_table import CellMeasures, collapsed_text, machines_text, seeds_text
from experiments.comparison_stats import main_effects, mean_std
from experiments.results_plan import PRESET_CHECK, Plan, estimate

COMMAND = f"python -m experiments.results_run --tables {PRESET_CHECK} --jobs 2"
"""What runs the check (two runs at once, one thread each)."""
TABLE = "attention"
"""The table whose cells the check repeats at the preset's size."""


@dataclass(frozen=True)
class Difference:
    """``first`` − ``second`` (modes) in mean test BLEU over ``runs`` runs of one size, with
    its 95% interval (NaN when the fit has no residual degrees of freedom)."""

    first: str
    second: str
    value: float
    low: float
    high: float
    runs: int

    @property
    def resolved(self) -> bool:
        """The interval excludes 0 (never without an interval)."""
        return self.low > 0.0 or self.high < 0.0

    @property
    def ahead(self) -> str | None:
        """The mode of the higher mean; None when the means are equal."""
        if self.value == 0.0:
            return None
        return self.first if self.value > 0.0 else self.second

    def text(self, digits: int = 2) -> str:
        """'+1.10 (95% interval +0.32 to +1.88, 4 runs)'."""
        value = f"{self.value:+.{digits}f}"
        if math.isnan(self.low):
            return f"{value} ({self.runs} runs: one per mode gives no interval)"
        return (
            f"{value} (95% interval {self.low:+.{digits}f} to {self.high:+.{digits}f}, "
            f"{self.runs} runs)"
        )


def difference(cells: Sequence[CellMeasures]) -> Difference | None:
    """The first mode of ``cells`` (grid order) minus the second in mean test BLEU, from
    :func:`~experiments.comparison_stats.main_effects` over every seed's run of the cells;
    None unless the cells hold exactly two modes, each with a run."""
    modes = list(dict.fromkeys(m.cell.label["mode"] for m in cells))
    rows = [
        (m.cell.label["score"], m.cell.label["mode"], v)
        for m in cells
        for v in m.bleu
        if not math.isnan(v)
    ]
    if len(modes) != 2 or set(modes) - {mode for _, mode, _ in rows}:
        return None
    fit = main_effects(rows, True, ("scorer", "mode")).b
    first, second = modes
    other = fit.level(second if fit.best == first else first)  # other − best
    if fit.best == first:  # first − second = −(second − first)
        value, low, high = -other.diff, -other.diff_high, -other.diff_low
    else:
        value, low, high = other.diff, other.diff_low, other.diff_high
    return Difference(first, second, value, low, high, len(rows))


def same_cells(check: Sequence[CellMeasures], table: Sequence[CellMeasures]) -> list[CellMeasures]:
    """The attention table's cells with the labels (model, score, mode) of ``check``'s, in its
    order (a cell the table lacks is left out)."""
    by_label = {m.cell.labels: m for m in table}
    return [by_label[m.cell.labels] for m in check if m.cell.labels in by_label]


def _size(plan: Plan, cells: Sequence[CellMeasures]) -> str:
    sizes = list(dict.fromkeys(size_of(plan.settings.get(m.cell, {})) for m in cells))
    return ", ".join(sizes) or "?"


def _row(m: CellMeasures, size: str, wanted: int, labels: dict[str, str]) -> str:
    return (
        f"| {m.cell.label['score']} | {m.cell.label['mode']} | {size} "
        f"| {seeds_text(m, wanted)} | {mean_std(m.bleu)} | {mean_std(m.nll, 3)} "
        f"| {mean_std(m.silver_aer, 3)} | {mean_std(m.entropy)} "
        f"| {collapsed_text(m.collapse)} | {machines_text(m, labels)} |"
    )


def table(
    plan: Plan,
    check: Sequence[CellMeasures],
    beside: Sequence[CellMeasures],
    labels: dict[str, str],
) -> list[str]:
    """Each check cell's row (the preset's size) above the same cell's row at the table's
    size."""
    rows = [
        "| score | mode | size (units) | seeds | test BLEU | valid NLL | AER silver | entropy "
        "| collapsed | machines |",
        "|---|---|---|---|---:|---:|---:|---:|---|---|",
    ]
    by_label = {m.cell.labels: m for m in beside}
    for m in check:
        size = size_of(plan.settings.get(m.cell, {}))
        rows.append(_row(m, f"{size}: the preset's", len(plan.seeds.get(PRESET_CHECK, [])), labels))
        same = by_label.get(m.cell.labels)
        if same is not None:
            size = size_of(plan.settings.get(same.cell, {}))
            rows.append(_row(same, f"{size}: the table's", len(plan.seeds.get(TABLE, [])), labels))
    return rows


def verdict(plan: Plan, check: Sequence[CellMeasures], beside: Sequence[CellMeasures]) -> str:
    """The sentence: not yet run (and how to run it), not yet comparable, or whether the two
    modes keep their order in test BLEU from the table's size to the preset's and whether the
    difference at the preset's size is resolved."""
    seeds = plan.seeds.get(PRESET_CHECK, [])
    wanted, runs = len(check) * len(seeds), sum(len(m.records) for m in check)
    if runs == 0:
        minutes = [estimate(plan.keys[m.cell], PRESET_CHECK, plan.current) for m in check
                   for _ in seeds]  # fmt: skip
        return (
            f"**The check is not yet run** (0 of {wanted} runs recorded): `{COMMAND}` "
            f"({wanted} runs estimated at {sum(minutes) / 60:.1f} job-hours, about "
            f"{plan_hours(minutes):.1f} hours two at a time on 2 cores)."
        )
    big, small = difference(check), difference(beside)
    so_far = f" ({runs} of {wanted} runs recorded so far; `{COMMAND}` runs the rest)"
    if big is None:
        missing = [m.cell.label["mode"] for m in check if not m.records]
        return (
            f"Not comparable yet: {' and '.join(missing) or 'a mode'} has no run at the "
            f"preset's size{so_far}."
        )
    preset, size = _size(plan, check), _size(plan, beside)
    if small is None:
        return (
            f"Not comparable yet: at the preset's size ({preset} units) {big.first} − "
            f"{big.second} = {big.text()} in test BLEU, but the same two cells at the table's "
            f"size have no runs of both modes yet" + (so_far if runs < wanted else "") + "."
        )
    same = big.ahead == small.ahead
    where = (
        f"{_ahead(big)} at both sizes"
        if same
        else f"{_ahead(big)} at {preset} units, {_ahead(small)} at {size}"
    )
    return (
        f"In test BLEU the order of the two modes is {'the same' if same else 'not the same'} "
        f"at both sizes ({where}), and at the preset's size the difference is "
        f"{'resolved' if big.resolved else 'not resolved'}: {big.first} − {big.second} = "
        f"{big.text()} at {preset} units, {small.text()} at {size} units"
        + (so_far if runs < wanted else "")
        + "."
    )


def _ahead(d: Difference) -> str:
    return f"{d.ahead} ahead" if d.ahead is not None else "tied"


def _trainer_differences(plan: Plan, check: Sequence[CellMeasures]) -> list[str]:
    """Settings outside ``model`` in which the check's cells differ from the table's."""
    table_cells = [c for c in plan.cells if c.table == TABLE]
    if not table_cells or not check:
        return []
    ours, theirs = plan.settings.get(check[0].cell, {}), plan.settings.get(table_cells[0], {})
    keys = sorted((set(ours) | set(theirs)) - {"model"})
    return [k for k in keys if ours.get(k) != theirs.get(k)]


def section(
    plan: Plan,
    check: Sequence[CellMeasures],
    cells: Sequence[CellMeasures],
    labels: dict[str, str],
) -> list[str]:
    """docs/results.md's subsection: what the check is, its table, the verdict; [] when the
    plan has no check. ``check``: the check's cells; ``cells``: the attention table's."""
    if not check:
        return []
    beside = same_cells(check, cells)
    trainer = plan.settings.get(check[0].cell, {}).get("trainer", {})
    scores = " and ".join(dict.fromkeys(m.cell.label["score"] for m in check))
    modes = " and ".join(dict.fromkeys(m.cell.label["mode"] for m in check))
    model = " and ".join(dict.fromkeys(m.cell.label["model"] for m in check))
    seeds = ", ".join(map(str, plan.seeds.get(PRESET_CHECK, [])))
    lines = [
        f"`experiment=results_attention_preset`: {model} at its preset's size "
        f"({_size(plan, check)} units, configs/model/{model}.yaml) where the table's RNNs have "
        f"{_size(plan, beside)}; the rest is the table's ({trainer.get('max_steps', '?')} "
        f"updates, the same data and trainer settings), seeds {seeds}. Its cells: Luong et "
        f"al.'s reference scorer {scores} in the modes {modes}, the table's largest resolved "
        "difference at its size (test BLEU) when the check was set up; the check asks whether "
        "their order holds at the preset's size. Below each of its cells, the same cell at the "
        "table's size; the columns as in the table above.",
        "",
        *table(plan, check, beside, labels),
        "",
        verdict(plan, check, beside),
    ]
    differ = _trainer_differences(plan, check)
    if differ:
        lines += [
            "",
            f"**Its settings differ from the table's in {', '.join(differ)}:** the check no "
            "longer compares like with like.",
        ]
    return lines
