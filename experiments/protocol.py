"""How long the main table trains (docs/results.md's "Protocol: the main table's length"):
its rows trained long (the probes) until their validation NLL flattens by :data:`RULE`; a
corpus' length is its probes' latest flattening rounded up to a validation
(configs/table_length/): a small corpus flattens, then overfits, long before a large one.

    python -m experiments.protocol            # where each recorded probe flattens
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from pathlib import Path

from experiments import page_blocks
from experiments.comparison_stats import flattened_at
from experiments.runs import RESULTS, Run, read_runs

TOL, TAIL = 0.01, 0.2
PROBE_UPDATES, PROBE_EVERY = 6000, 250
"""The probe studies' ``trainer.max_steps`` and ``val_every_steps``."""
PRESETS = ("transformer", "rnn_bahdanau", "rnn_luong")
STUDIES = ("main_protocol", "main_protocol_long")
"""The probes' studies (configs/study/, their run folders in results/<study>/)."""
COMMAND = "python -m experiments.sweep configs/study/main_protocol.yaml --jobs 8 --record"
RULE = (
    f"The rule: the first validation L of a probe from which on the best validation NLL so "
    f"far is less than {TOL:.0%} better than the best at {1 - TAIL:.0%} of L, at L and at "
    "every later validation of the probe (a pause in a falling curve does not count)."
)
"""comparison_stats.flattened_at with ``stays``, as the page states it."""


def probe_name(run: Run) -> str:
    """``ding_de_en transformer``: the probe's corpus and preset."""
    return f"{run.overrides.get('data', '?')} {run.overrides.get('model', '?')}"


def probes(results: Path = RESULTS) -> list[Run]:
    """The probes' runs under ``results`` by name, then seed."""
    return sorted(read_runs(results, STUDIES), key=lambda r: (probe_name(r), r.seed))


def flattening(run: Run) -> int | None:
    """The probe's flattening step (None: still improving at its last validation)."""
    curve = [(v.step, v.nll) for v in run.valid if v.nll is not None]
    return flattened_at(curve, TOL, TAIL, stays=True)


def table_updates(runs: list[Run], every: int) -> int | None:
    """The latest flattening step of the probes, rounded up to a multiple of ``every`` (None
    while one has not flattened, or without one)."""
    steps = [flattening(r) for r in runs]
    if not steps or None in steps:
        return None
    return math.ceil(max(s for s in steps if s is not None) / every) * every


def plan_hours(run_minutes: list[float], jobs: int = 2) -> float:
    """Wall-clock hours of runs of ``run_minutes``, ``jobs`` at a time, packed longest first
    onto the job that frees first."""
    free = [0.0] * max(jobs, 1)
    for minutes in sorted(run_minutes, reverse=True):
        free[free.index(min(free))] += minutes
    return max(free) / 60.0


def pace_ms(run: Run) -> float:
    """Milliseconds per update: the probe's training minutes over its updates (validations
    included)."""
    return 60_000 * (run.summary.minutes or 0.0) / max(run.summary.step or 0, 1)


def threads(run: Run) -> int:
    machine = run.summary.machine
    return machine.threads if machine and machine.threads else 1


def protocol_lines(
    runs: list[Run], updates: int, every: int, config: str, complete: bool = True
) -> list[str]:
    """The probes ``runs`` and the length they give against the ``updates`` the table trains
    (``config`` sets them; ``complete``: every probe the table needs is among ``runs``, else
    their length is only a floor)."""
    if not runs:
        return [f"No probe recorded yet (`{COMMAND}`)."]
    rows = []
    for run in runs:
        step = flattening(run)
        nll = next((v.nll for v in run.valid if v.step == step), None)  # None: not flat
        machine = run.summary.machine
        rows.append([
            probe_name(run),
            str(run.summary.step),
            str(step or "not yet"),
            page_blocks.num(nll, ".3f"),
            f"{run.valid[-1].nll:.3f}, {run.test_score('bleu'):.2f}",
            f"{pace_ms(run):.0f} ({threads(run)})",
            machine.describe("plain") if machine else "?",
        ])  # fmt: skip
    head = ["probe (seed 1)", "updates", "flattens at", "valid NLL there",
            "valid NLL, test BLEU at the end", "ms per update (threads)", "machine"]  # fmt: skip
    chosen = table_updates(runs, every)
    rounded = f"updates (rounded up to the table's validation every {every})"
    if chosen is None:
        verdict = "A probe has not flattened: the table's length is not settled by the rule yet."
    elif not complete:
        verdict = (
            f"The probes recorded so far give at least {chosen} {rounded}; the table trains "
            f"{updates} until the rest have run."
        )
    else:
        verdict = f"The rule gives {chosen} {rounded}; the table trains {updates}."
        if chosen != updates:
            verdict += f" **They differ: set trainer.max_steps in {config}.**"
    return [*page_blocks.table(head, "lrrrrrl", rows), "", verdict]


def length_config(corpus: str) -> str:
    """The file that sets the main table's length on ``corpus``."""
    return f"configs/table_length/results_main-{corpus}.yaml"


def cost_line(own: list[Run], corpus: str, every: int, seeds: int) -> str:
    """What ``seeds`` runs of each probed preset on ``corpus`` take at the length its probes
    ``own`` give (while one still falls: at least their longest), at each probe's ms per
    update, two at a time on one thread each."""
    if not own:
        return f"No probe on {corpus} times a run yet."
    length = table_updates(own, every)
    floor = length is None
    length = length or max(r.summary.step or 0 for r in own)
    minutes = [pace_ms(r) * length / 60_000 for r in own for _ in range(seeds)]
    probed = ", ".join(probe_name(r).removeprefix(f"{corpus} ") for r in own)
    floors = [f"; {probe_name(r)} was timed at {threads(r)} threads: beside another run it is "
              "slower, so for it this is a floor" for r in own if threads(r) > 1]  # fmt: skip
    return (
        f"Time: at {'no fewer than ' if floor else ''}{length} updates, the {len(minutes)} runs "
        f"({seeds} seeds of {probed}) take {'at least ' if floor else ''}"
        f"{plan_hours(minutes):.1f} hours on 2 cores, two at a time on one thread each, at "
        "their probes' ms per update (their machines)"
        + ("; the presets without a probe are not counted" if len(own) < len(PRESETS) else "")
        + "".join(floors)
        + "."
    )


def main_section(
    runs: list[Run], lengths: Mapping[str, int], every: int, seeds: int = 3
) -> list[str]:
    """The main table's length on each corpus of ``lengths`` (corpus -> the table's
    ``trainer.max_steps`` there): its probes, the rule's length, what ``seeds`` runs of each
    row take, and which probes are still to run."""
    lines = [RULE, ""]
    for corpus, updates in lengths.items():
        own = [r for r in runs if r.overrides.get("data") == corpus]
        done = {probe_name(r) for r in own}
        missing = [f"{corpus} {p}" for p in PRESETS if f"{corpus} {p}" not in done]
        lines += [f"On {corpus} (the table trains {updates} updates there):", ""]
        lines += protocol_lines(own, updates, every, length_config(corpus), not missing)
        lines += ["", cost_line(own, corpus, every, seeds), ""]
        if missing:
            lines += [
                f"Probes not yet run on {corpus} ({len(missing)}, {PROBE_UPDATES} updates each, "
                f"validated every {PROBE_EVERY}): {', '.join(missing)} (`{COMMAND}`). "
                f"Until every row's probe on {corpus} has flattened, the length there is not "
                "the rule's.",
                "",
            ]
    return lines[:-1]


def show() -> int:
    """Print where each recorded probe flattens."""
    for run in probes():
        print(f"{probe_name(run)}: flattens at {flattening(run)} of {run.summary.step}")
    return 0


if __name__ == "__main__":
    sys.exit(show())
