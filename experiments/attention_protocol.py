"""How long the attention table trains: the reference cells at the table's size, trained
long, and the update at which their validation NLL has flattened.

    python -m experiments.attention_protocol            # where each recorded probe flattens

Each probe is an attention-table cell (configs/experiment/results_attention.yaml's size,
rnn_luong's preset scorer and rnn_bahdanau's, global attention) trained :data:`PROBE_UPDATES`
updates, validated every :data:`PROBE_EVERY`: the studies configs/study/attention_protocol.yaml
(and _64.yaml, a smaller rnn_luong), run by experiments/sweep.py, their run folders in
results/<study>/ (:func:`probes`). The rule (:func:`experiments.comparison_stats.flattened_at`,
``stays``): the first validation from which on the best NLL so far is less than 1% better
than the best NLL at four fifths of that step, there and at every later validation. The
table's ``trainer.max_steps`` is the latest flattening step of the probes, rounded up to a
validation of the table (its ``val_every_steps``).
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from experiments.alignment_aer import GRID, AlignmentRun
from experiments.comparison_stats import flattened_at
from experiments.results_plan import PRESET_CHECK, Cell, Plan, estimate
from experiments.runs import Run, read_runs

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
STUDIES = ("attention_protocol", "attention_protocol_64")
PROBE_UPDATES = 6000
PROBE_EVERY = 250
TOL, TAIL = 0.01, 0.2
"""The flattening rule: less than TOL relative gain over the last TAIL of the updates."""
BUDGET_HOURS = 8.0
"""What the whole table should take on 2 cores (issue 36)."""
SIZE = "128"
"""The table's RNN size (embeddings and states), that of configs/study/attention_protocol.yaml."""
COMMAND = "python -m experiments.sweep configs/study/attention_protocol.yaml --jobs 2 --record"


def probe_name(run: Run) -> str:
    """``rnn_luong general global`` (an attention probe), ``ding_de_en transformer`` (a main
    table probe: it names its corpus)."""
    model = run.overrides.get("model", "?")
    if "experiment" in run.overrides:
        return f"{run.overrides.get('data', '?')} {model}"
    return f"{model} {'additive' if model == 'rnn_bahdanau' else 'general'} global"


def other_size(run: Run) -> str | None:
    """'64 units' for a probe of another RNN size than the table's, else None."""
    hidden = run.overrides.get("model.hidden_size")
    return None if hidden in (None, SIZE) else f"{hidden} units"


def probes(results: Path = RESULTS, studies: tuple[str, ...] = STUDIES) -> list[Run]:
    """The probes' run folders, by name (another size first)."""
    runs = read_runs(results, studies)
    return sorted(runs, key=lambda r: (probe_name(r), other_size(r) is None, r.seed))


def flattening(run: Run) -> int | None:
    """The probe's flattening step (None: still improving at its last validation)."""
    return flattened_at([(p[0], p[1]) for p in run.curve], TOL, TAIL, stays=True)


def table_updates(runs: list[Run], every: int) -> int | None:
    """The table's length: the latest flattening step of the probes at the table's size,
    rounded up to a multiple of ``every`` (None while one has not flattened or there is
    none)."""
    steps = [flattening(r) for r in runs if not other_size(r)]
    if not steps or any(s is None for s in steps):
        return None
    return int(math.ceil(max(s for s in steps if s is not None) / every) * every)


def show(runs: list[Run]) -> int:
    """Print where each probe flattens."""
    for run in runs:
        size = f" ({other_size(run)})" if other_size(run) else ""
        print(
            f"{probe_name(run)}{size}: flattens at {flattening(run)} of {run.summary.step} updates"
        )
    return 0


def plan_hours(run_minutes: list[float], jobs: int = 2) -> float:
    """Wall-clock hours of runs taking ``run_minutes`` each, ``jobs`` at a time (one thread
    each), packed longest first onto the job that frees first."""
    free = [0.0] * max(jobs, 1)
    for minutes in sorted(run_minutes, reverse=True):
        free[free.index(min(free))] += minutes
    return max(free) / 60.0


def protocol_lines(
    records: list[Run],
    updates: int,
    every: int,
    command: str = COMMAND,
    config: str = "results_attention.yaml",
    complete: bool = True,
    rule: bool = True,
) -> list[str]:
    """docs/results.md's statement of a table's length: each probe's flattening step
    (``command`` runs the probes; ``config`` sets the table's ``trainer.max_steps``;
    ``complete``: every probe the table needs is among ``records``, else the length they
    give is only a floor; ``rule``: state the rule first)."""
    if not records:
        return [f"No probe recorded yet (`{command}`)."]
    lines = [
        *([rule_line(), ""] if rule else []),
        "| probe (seed 1) | updates | flattens at | valid NLL there | valid NLL, test BLEU at "
        "the end | ms per update (threads) | machine |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for rec in records:
        step = flattening(rec)
        nll = rec.at_step(step, 1) if step else None
        machine = rec.summary.machine
        test = rec.summary.test.bleu if rec.summary.test else None
        size = other_size(rec)
        name = probe_name(rec) + (f" ({size}: not the table's)" if size else "")
        lines.append(
            f"| {name} | {rec.summary.step} | {step if step else 'not yet'} "
            f"| {f'{nll:.3f}' if nll is not None else '–'} "
            f"| {rec.curve[-1][1]:.3f}, {test if test is not None else float('nan'):.2f} "
            f"| {pace_ms(rec):.0f} ({threads(rec)}) "
            f"| {machine.describe('plain') if machine else '?'} |"
        )
    chosen = table_updates(records, every)
    if chosen is None:
        verdict = "A probe has not flattened: the table's length is not settled by the rule yet."
    elif not complete:
        verdict = (
            f"The probes recorded so far give at least {chosen} updates (rounded up to the "
            f"table's validation every {every}); the table trains {updates} until the rest "
            "have run."
        )
    else:
        verdict = (
            f"The rule gives {chosen} updates (rounded up to the table's validation every "
            f"{every}); the table trains {updates}."
        )
        if chosen != updates:
            verdict += f" **They differ: set trainer.max_steps in {config}.**"
    notes = [f"{probe_name(r)}, {r.pace_note}." for r in records if r.pace_note]
    return [*lines, "", verdict, *(["", *notes] if notes else [])]


def pace_ms(run: Run) -> float:
    """A probe's milliseconds per update: its ``pace_ms_per_update`` where it has one, else
    its own wall clock (training minutes over updates, validations included)."""
    if run.pace_ms_per_update is not None:
        return run.pace_ms_per_update
    return 60_000 * (run.summary.minutes or 0.0) / max(run.summary.step or 0, 1)


def threads(run: Run) -> int:
    """The torch threads the probe trained with (1 when its machine does not say)."""
    machine = run.summary.machine
    return machine.threads if machine and machine.threads else 1


def rule_line() -> str:
    """The flattening rule in words."""
    return (
        f"The rule: the first validation L of a probe from which on the best validation NLL so "
        f"far is less than {TOL:.0%} better than the best at {1 - TAIL:.0%} of L, at L and at "
        "every later validation of the probe (a pause in a falling curve does not count)."
    )


def size_of(settings: dict[str, Any]) -> str:
    """An RNN cell's size from its settings: '256' (embeddings = states), 'emb 128, states
    256', or '?' (not an RNN's settings)."""
    model = settings.get("model")
    if not isinstance(model, dict) or "hidden_size" not in model:
        return "?"
    emb, hidden = model.get("emb_dim"), model["hidden_size"]
    return str(hidden) if emb == hidden else f"emb {emb}, states {hidden}"


def size_lines(plan: Plan) -> list[str]:
    """The table's RNN size against the preset's (the check's cells, table
    :data:`~experiments.results_plan.PRESET_CHECK`); [] when the settings name no RNN size."""
    table = {size_of(plan.settings[c]) for c in plan.cells if c.table == "attention"} - {"?"}
    check = [c for c in plan.cells if c.table == PRESET_CHECK]
    preset = {size_of(plan.settings[c]) for c in check} - {"?"}
    if not table:
        return []
    text = (
        f"Size: the table's RNNs have {', '.join(sorted(table))} units (embeddings and states, "
        "the grid of results_attention.yaml), the size that keeps the whole table near a night "
        "on 2 cores"
    )
    if not preset:
        return [text + "; it is not checked at the presets' size."]
    models = " and ".join(sorted({c.label["model"] for c in check}))
    runs = len(check) * len(plan.seeds.get(PRESET_CHECK, []))
    return [
        f"{text}; {models}'s preset has {', '.join(sorted(preset))} (configs/model/{models}.yaml). "
        f"Whether the ranking holds at the preset's size is checked on {len(check)} of the "
        f"table's cells, {runs} runs at {', '.join(sorted(preset))} units with the table's "
        "updates and trainer settings (below: *At the preset's size*)."
    ]


def section(plan: Plan, records: list[Run], toy: list[AlignmentRun]) -> list[str]:
    """docs/results.md's protocol: the probes and the rule's length, the table's size against
    the preset's (:func:`size_lines`), then the plan's time on 2 cores (two runs at once, one
    thread each): every attention cell at every seed (the
    runner's estimate: the ledger's slowest recorded run of the settings × 1.25, else its
    first guess) and the synthetic task's runs of every cell (their recorded minutes, the
    median for those not run yet); and the same as recorded (:func:`measured_line`)."""
    cells = [c for c in plan.cells if c.table == "attention"]
    if not cells:
        return []
    settings = plan.settings[cells[0]].get("trainer", {})
    updates, every = int(settings.get("max_steps", 0)), int(settings.get("val_every_steps", 1))
    lines = protocol_lines(records, updates, every)
    size = size_lines(plan)
    lines += ["", *size] if size else []
    seeds = plan.seeds.get("attention", [])
    ding = [estimate(plan.keys[c], "attention", plan.current) for c in cells for _ in seeds]
    toy_minutes = [r.wall_minutes for r in toy if r.wall_minutes is not None]
    typical = statistics.median(toy_minutes) if toy_minutes else 0.0
    names = {r.mechanism for r in toy}
    toy_todo = [typical for m in GRID for _ in seeds if m not in names]
    hours = plan_hours([*ding, *toy_todo])
    toy_text = (
        f"{len(toy_todo)} synthetic-task runs not yet recorded at {sum(toy_todo) / 60:.1f}"
        if toy_todo
        else "the synthetic task's runs, all recorded"
    )
    lines += [
        "",
        f"Time: {len(ding)} ding_de_en runs estimated at {sum(ding) / 60:.1f} job-hours (one "
        f"thread each) and {toy_text}; two "
        f"at a time on 2 cores that is about **{hours:.1f} hours** of wall clock "
        "(`python -m experiments.results_run --tables attention --jobs 2`, then "
        "the studies configs/study/alignment_luong.yaml, alignment_bahdanau.yaml and "
        "alignment_transformer.yaml: docs/alignment.md).",
    ]
    if hours > BUDGET_HOURS:
        lines[-1] += (
            f" That is more than the {BUDGET_HOURS:g} hours (one night on 2 cores) the table "
            "aims at: at the rule's length this size does not fit."
        )
    planned = {(m, seed) for m in GRID for seed in seeds}
    toy_done = [r.wall_minutes for r in toy
                if r.wall_minutes is not None and (r.mechanism, r.seed) in planned]  # fmt: skip
    measured = measured_line(plan, cells, seeds, [*toy_done, *toy_todo])
    return lines + (["", measured] if measured else [])


def measured_line(plan: Plan, cells: list[Cell], seeds: list[int], toy_minutes: list[float]) -> str:
    """The table's time as recorded, beside the runner's padded estimate: the ding_de_en runs'
    wall minutes (train.py start to exit) summed, their median and machines, and the wall
    clock two at a time of every planned run at its recorded minutes (a run not yet recorded:
    the median of its settings' recorded runs, else the runner's estimate) plus the synthetic
    task's ``toy_minutes``. '' before any run is recorded."""
    keys = {plan.keys[c] for c in cells}
    done = [r for r in plan.current if r.key in keys and r.wall_minutes > 0]
    if not done:
        return ""
    by_run = {(r.key, r.seed): r.wall_minutes for r in done}
    minutes = []
    estimated = 0
    for cell in cells:
        key = plan.keys[cell]
        same = [r.wall_minutes for r in done if r.key == key]
        for seed in seeds:
            if (key, seed) in by_run:
                minutes.append(by_run[(key, seed)])
            elif same:
                minutes.append(statistics.median(same))
            else:
                minutes.append(estimate(key, "attention", plan.current))
                estimated += 1
    walls = [r.wall_minutes for r in done]
    machines = Counter(r.machine_line for r in done).most_common()
    where = "; ".join(f"{n} on {line}" for line, n in machines)
    rest = len(cells) * len(seeds) - len(done)
    unknown = f" ({estimated} at the runner's estimate: no run of their settings recorded)"
    left = (
        f" (a run not yet recorded, {rest} of them: its settings' recorded median"
        + (unknown if estimated else "")
        + ")"
        if rest
        else ""
    )
    return (
        f"Measured: the {len(done)} ding_de_en runs recorded took {sum(walls) / 60:.1f} "
        f"job-hours, median {statistics.median(walls):.1f} minutes a run ({where}). At those "
        f"minutes{left} and the synthetic task's recorded minutes, the whole table is about "
        f"**{plan_hours([*minutes, *toy_minutes]):.1f} hours** two at a time."
    )


if __name__ == "__main__":
    sys.exit(show(probes()))
