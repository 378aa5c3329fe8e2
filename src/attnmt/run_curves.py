"""Validation curves of several runs in one figure: BLEU against update and against minutes.

Drawn by ``scripts/compare_runs.py`` (runs read from their run records) and by the results
tables (``experiments/results_table.py``, runs read from their run folders).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


@dataclass
class Curve:
    """One run's validation points: (step, training minutes, BLEU, chrF)."""

    label: str
    valid: Sequence[tuple[float, float, float, float]] = field(default_factory=list)


def best_by(
    points: Iterable[tuple[float, float]], mark: float, budget_stop: float | None = None
) -> float | None:
    """The best validation BLEU a run had reached ``mark`` training minutes in; ``points``:
    its validations' (training minutes, BLEU) in order. None when its last validation came
    before 95% of ``mark`` (the run was shorter: validations are spaced, so a run stopped
    at the mark validated a little before it) or none came by the mark.

    ``budget_stop``: the time budget (minutes) that stopped the run, if one did. The trainer
    checks the budget between updates, so the run's final validation comes just past it
    (45.04-45.16 minutes of a 45-minute run), yet it is the budget's own: at marks from the
    budget on, every validation counts."""
    points = list(points)
    if budget_stop is not None and points and mark >= budget_stop:
        return max(bleu for _, bleu in points)
    if not points or points[-1][0] < 0.95 * mark:
        return None
    return max((bleu for minutes, bleu in points if minutes <= mark), default=None)


def budget_stop(reason: str | None, budget: float | None) -> float | None:
    """The time budget that stopped a run (its summary's stop ``reason`` and its configured
    ``budget`` in minutes), or None when something else ended it."""
    return budget if reason == "time_budget" and budget else None


def validation_figure(curves: Sequence[Curve], marks: Sequence[float] = ()) -> Figure:
    """Validation BLEU against step (left) and against minutes (right), one line per curve;
    ``marks`` draw dotted verticals on the minutes panel."""
    fig = Figure(figsize=(11, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    for col, (x, xlabel) in enumerate(((0, "update (step)"), (1, "wall-clock minutes"))):
        ax = fig.add_subplot(1, 2, 1 + col)
        for curve in curves:
            if curve.valid:
                label = curve.label
                name = label if len(label) <= 60 else f"…{label[-59:]}"
                ax.plot([v[x] for v in curve.valid], [v[2] for v in curve.valid], "o-", label=name)
        if x == 1:
            for mark in marks:
                ax.axvline(mark, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("validation BLEU")
        ax.grid(alpha=0.3)
    handles, labels = fig.axes[0].get_legend_handles_labels()
    rows = max(len(labels), 1)
    fig.set_size_inches(11, 4.5 + 0.2 * rows)
    fig.legend(handles, labels, loc="lower center", fontsize=8, ncol=1, frameon=False)
    fig.tight_layout(rect=(0, 0.2 * rows / (4.5 + 0.2 * rows) + 0.02, 1, 1))
    return fig
