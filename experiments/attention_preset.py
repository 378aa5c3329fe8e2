"""docs/results.md's "At the preset's size": the check (configs/study/results_attention_preset.
yaml) of two attention-table cells at rnn_luong's preset size beside the same cells at the
table's, and whether their modes keep their order in mean test BLEU. The difference is the
mode effect of comparison_stats.main_effects over the cells' runs: with one scorer, the
pooled two-sample t interval d ± t_{0.975, n−2} · s · sqrt(1/n_a + 1/n_b) (none with one run
a mode); resolved when it excludes 0."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from experiments import page_blocks
from experiments.attention_table import CellMeasures, columns
from experiments.comparison_stats import main_effects
from experiments.protocol import size_of
from experiments.runs import config

STUDY = "results_attention_preset"
COMMAND = f"python -m experiments.sweep configs/study/{STUDY}.yaml --jobs 2 --record"
"""What runs the check."""
SHOWN = ("seeds", "test BLEU", "valid NLL", "AER silver", "entropy", "collapsed", "machines")
"""The attention table's columns the check shows."""


@dataclass(frozen=True)
class Difference:
    """Mode ``first`` − mode ``second`` in mean test BLEU: ``text`` '+1.10 (95% interval +0.32
    to +1.88, 4 runs)', ``ahead`` 'local_m ahead' or 'tied', ``resolved`` (interval excludes 0)."""

    first: str
    second: str
    text: str
    ahead: str
    resolved: bool


def difference(cells: Sequence[CellMeasures]) -> Difference | None:
    """The first mode of ``cells`` minus the second in mean test BLEU (the mode effect of
    ``main_effects`` over every seed's run); None unless both of exactly two modes have runs."""
    modes = list(dict.fromkeys(m.labels[2] for m in cells))
    rows = [(m.labels[1], m.labels[2], v) for m in cells for v in m.values("test BLEU")]
    if len(modes) != 2 or set(modes) - {mode for _, mode, _ in rows}:
        return None
    fit = main_effects(rows, True, ("scorer", "mode")).b
    other = next(e for e in fit.levels if e.level != fit.best)  # other − best
    sign = -1.0 if fit.best == modes[0] else 1.0  # first − second
    value, (low, high) = sign * other.diff, sorted((sign * other.diff_low, sign * other.diff_high))
    text = f"{value:+.2f} ({len(rows)} runs: one per mode gives no interval)"
    if not math.isnan(low):
        text = f"{value:+.2f} (95% interval {low:+.2f} to {high:+.2f}, {len(rows)} runs)"
    ahead = "tied" if value == 0.0 else f"{modes[0] if value > 0.0 else modes[1]} ahead"
    return Difference(modes[0], modes[1], text, ahead, low > 0.0 or high < 0.0)


def size(cells: Sequence[CellMeasures]) -> str:
    """The RNN sizes of the cells' study overrides (:func:`protocol.size_of`)."""
    return ", ".join(dict.fromkeys(size_of(m.cell.overrides) for m in cells))


def table(
    check: Sequence[CellMeasures], beside: Sequence[CellMeasures], labels: dict[str, str]
) -> list[str]:
    """Each check cell's row (the preset's size) above the same cell's at the table's."""
    by_label = {m.labels: m for m in beside}
    rows = []
    for m in check:
        for cell, whose in ((m, "preset"), (by_label.get(m.labels), "table")):
            if cell is not None:
                entries = columns(cell, labels)
                rows.append([*cell.labels[1:], f"{size([cell])}: the {whose}'s"])
                rows[-1] += [entries[c] for c in SHOWN]
    return page_blocks.table(["score", "mode", "size (units)", *SHOWN], "llllrrrrll", rows)


def verdict(check: Sequence[CellMeasures], beside: Sequence[CellMeasures]) -> str:
    """Not yet comparable (and how to run the rest), or whether the two modes keep their order
    in test BLEU across the sizes and whether the difference at the preset's is resolved."""
    wanted, runs = sum(len(m.cell.seeds) for m in check), sum(len(m.runs) for m in check)
    so_far = f" ({runs} of {wanted} runs recorded so far; `{COMMAND}` runs the rest)"
    so_far = so_far if runs < wanted else ""
    big, small = difference(check), difference(beside)
    if big is None:
        missing = [m.labels[2] for m in check if not m.runs]
        return (
            f"Not comparable yet: {' and '.join(missing) or 'a mode'} "
            f"{'has' if len(missing) == 1 else 'have'} no run at the preset's size{so_far}."
        )
    preset, table_size = size(check), size(beside)
    if small is None:
        return (
            f"Not comparable yet: at the preset's size ({preset} units) {big.first} − "
            f"{big.second} = {big.text} in test BLEU, but the same two cells at the table's "
            f"size have no runs of both modes yet{so_far}."
        )
    same = big.ahead == small.ahead
    where = f"{big.ahead} at {preset} units, {small.ahead} at {table_size}"
    return (
        f"In test BLEU the order of the two modes is {'the same' if same else 'not the same'} "
        f"at both sizes ({f'{big.ahead} at both sizes' if same else where}), and at the "
        f"preset's size the difference is {'resolved' if big.resolved else 'not resolved'}: "
        f"{big.first} − {big.second} = {big.text} at {preset} units, {small.text} at "
        f"{table_size} units{so_far}."
    )


def section(
    check: Sequence[CellMeasures], cells: Sequence[CellMeasures], labels: dict[str, str]
) -> list[str]:
    """The check's settings, its table, the verdict; [] without a check. ``check``: its cells;
    ``cells``: the attention table's (tests/test_attention_table.py checks that the two
    studies' settings differ only in the model's size)."""
    if not check:
        return []
    by_label = {m.labels: m for m in cells}
    beside = [by_label[m.labels] for m in check if m.labels in by_label]
    steps = next((config(r)["trainer"]["max_steps"] for m in check for r in m.runs), "?")
    model, scores, modes = (
        " and ".join(dict.fromkeys(m.labels[i] for m in check)) for i in range(3)
    )
    seeds = sorted({s for m in check for s in m.cell.seeds})
    return [
        f"`experiment=results_attention_preset`: {model} at its preset's size ({size(check)} "
        f"units) where the table's RNNs have {size(beside)}, the rest the table's ({steps} "
        f"updates), seeds {', '.join(map(str, seeds))}. Its cells: {scores} in the modes {modes}.",
        "",
        *table(check, beside, labels),
        "",
        verdict(check, beside),
    ]
