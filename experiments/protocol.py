"""How long a table trains: its reference cells trained long (the probes) and the update at
which their validation NLL flattens (docs/results.md's two "Protocol" sections).

    python -m experiments.protocol            # where each recorded probe flattens

Two configurations: :data:`ATTENTION` (the attention table's reference cells at its size)
and :data:`MAIN` (every main-table row, ``experiment=results_main``). The rule
(:func:`~experiments.comparison_stats.flattened_at`, ``stays``): the first validation L from
which on the best NLL so far is less than :data:`TOL` better than the best at (1 − :data:`TAIL`)
· L, at L and at every later one. A table's length is its probes' latest flattening step
rounded up to one of its validations; the main table has one per corpus
(configs/table_length/): a small corpus flattens, then overfits, long before a large one.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from experiments import page_blocks
from experiments.alignment_aer import GRID, AlignmentRun
from experiments.comparison_stats import flattened_at
from experiments.runs import Cell, Run, read_runs
from experiments.study import load_study

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
TOL, TAIL = 0.01, 0.2
PROBE_UPDATES, PROBE_EVERY = 6000, 250
"""The probe studies' ``trainer.max_steps`` and ``val_every_steps``."""
BUDGET_HOURS = 8.0
"""What the whole attention table should take on 2 cores (issue 36)."""
SIZE = "128"
"""The attention table's RNN size (embeddings and states)."""
PRESETS = ("transformer", "rnn_bahdanau", "rnn_luong")


@dataclass(frozen=True)
class Protocol:
    """A table's probes: the studies of their run folders, the command that runs them."""

    studies: tuple[str, ...]
    command: str


ATTENTION = Protocol(
    ("attention_protocol", "attention_protocol_64"),
    "python -m experiments.sweep configs/study/attention_protocol.yaml --jobs 2 --record",
)
MAIN = Protocol(
    ("main_protocol", "main_protocol_long"),
    "python -m experiments.sweep configs/study/main_protocol.yaml --jobs 8 --record",
)


def probe_name(run: Run) -> str:
    """``rnn_luong general global`` (an attention probe) or ``ding_de_en transformer`` (a
    main-table probe: ``experiment=results_main``)."""
    model = run.overrides.get("model", "?")
    if "experiment" in run.overrides:
        return f"{run.overrides.get('data', '?')} {model}"
    return f"{model} {'additive' if model == 'rnn_bahdanau' else 'general'} global"


def other_size(run: Run) -> str | None:
    """'64 units' for a probe of another RNN size than the attention table's, else None."""
    hidden = run.overrides.get("model.hidden_size")
    return None if hidden in (None, SIZE) else f"{hidden} units"


def probes(protocol: Protocol, results: Path = RESULTS) -> list[Run]:
    """The protocol's probes by name (another size first), then seed."""
    runs = read_runs(results, protocol.studies)
    return sorted(runs, key=lambda r: (probe_name(r), other_size(r) is None, r.seed))


def flattening(run: Run) -> int | None:
    """The probe's flattening step (None: still improving at its last validation)."""
    return flattened_at([(p[0], p[1]) for p in run.curve], TOL, TAIL, stays=True)


def table_updates(runs: list[Run], every: int) -> int | None:
    """The latest flattening step of the probes at the table's size, rounded up to a
    multiple of ``every`` (None while one has not flattened, or without one)."""
    steps = [flattening(r) for r in runs if not other_size(r)]
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
    """Milliseconds per update: the probe's kept ``pace_ms_per_update``, else its training
    minutes over its updates (validations included)."""
    if run.pace_ms_per_update is not None:
        return run.pace_ms_per_update
    return 60_000 * (run.summary.minutes or 0.0) / max(run.summary.step or 0, 1)


def threads(run: Run) -> int:
    machine = run.summary.machine
    return machine.threads if machine and machine.threads else 1


def rule_line() -> str:
    return (
        f"The rule: the first validation L of a probe from which on the best validation NLL so "
        f"far is less than {TOL:.0%} better than the best at {1 - TAIL:.0%} of L, at L and at "
        "every later validation of the probe (a pause in a falling curve does not count)."
    )


def protocol_lines(
    runs: list[Run], updates: int, every: int, command: str, config: str, complete: bool = True
) -> list[str]:
    """The probes ``runs`` (run by ``command``) and the length they give against the
    ``updates`` the table trains (``config`` sets them; ``complete``: every probe the table
    needs is among ``runs``, else their length is only a floor)."""
    if not runs:
        return [f"No probe recorded yet (`{command}`)."]
    rows = []
    for run in runs:
        step = flattening(run)
        nll = run.at_step(step, 1) if step else None
        machine = run.summary.machine
        size = other_size(run)
        rows.append([
            probe_name(run) + (f" ({size}: not the table's)" if size else ""),
            str(run.summary.step),
            str(step or "not yet"),
            f"{nll:.3f}" if nll is not None else "–",
            f"{run.curve[-1][1]:.3f}, {run.test_score('bleu'):.2f}",
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
    notes = [f"{probe_name(r)}, {r.pace_note}." for r in runs if r.pace_note]
    probed = page_blocks.table(head, "lrrrrrl", rows)
    return [*probed, "", verdict, *(["", *notes] if notes else [])]


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
    lines = [rule_line(), ""]
    for corpus, updates in lengths.items():
        own = [r for r in runs if r.overrides.get("data") == corpus]
        done = {probe_name(r) for r in own}
        missing = [f"{corpus} {p}" for p in PRESETS if f"{corpus} {p}" not in done]
        lines += [f"On {corpus} (the table trains {updates} updates there):", ""]
        lines += protocol_lines(
            own, updates, every, MAIN.command, length_config(corpus), not missing
        )
        lines += ["", cost_line(own, corpus, every, seeds), ""]
        if missing:
            lines += [
                f"Probes not yet run on {corpus} ({len(missing)}, {PROBE_UPDATES} updates each, "
                f"validated every {PROBE_EVERY}): {', '.join(missing)} (`{MAIN.command}`). "
                f"Until every row's probe on {corpus} has flattened, the length there is not "
                "the rule's.",
                "",
            ]
    return lines[:-1]


def size_of(overrides: Mapping[str, str]) -> str:
    """An RNN's size from its overrides: '256' (embeddings = states), 'emb 128, states 256',
    or '?' (none given)."""
    emb, hidden = overrides.get("model.emb_dim"), overrides.get("model.hidden_size")
    if hidden is None:
        return "?"
    return hidden if emb == hidden else f"emb {emb}, states {hidden}"


def size_line(table: list[Cell], check: list[Cell]) -> list[str]:
    """The table's RNN size against the preset's, at which ``check`` repeats some cells."""
    sizes = {size_of(c.overrides) for c in table} - {"?"}
    preset = {size_of(c.overrides) for c in check} - {"?"}
    if not sizes:
        return []
    text = (
        f"Size: the table's RNNs have {', '.join(sorted(sizes))} units (embeddings and states, "
        "the grid of results_attention.yaml), the size that keeps the whole table near a night "
        "on 2 cores"
    )
    if not preset:
        return ["", text + "; it is not checked at the presets' size."]
    models = " and ".join(sorted({c.overrides.get("model", "?") for c in check}))
    units = ", ".join(sorted(preset))
    return [
        "",
        f"{text}; {models}'s preset has {units} (configs/model/{models}.yaml). Whether the "
        f"ranking holds at the preset's size is checked on {len(check)} of the table's cells, "
        f"{sum(len(c.seeds) for c in check)} runs at {units} units with the table's updates "
        "and trainer settings (below: *At the preset's size*).",
    ]


def time_line(table: list[Cell], toy: list[AlignmentRun]) -> list[str]:
    """The table's time on 2 cores, two runs at once on one thread each: its runs' recorded
    wall minutes (train.py's start to the record; its training minutes where a run has no
    such figure; one not recorded yet: its study's ``minutes_per_run``) with the synthetic
    task's runs of every mechanism at the table's seeds."""
    done = [r for c in table for r in c.runs if r.wall_minutes or r.summary.minutes]
    walls = [r.wall_minutes or r.summary.minutes or 0.0 for r in done]
    todo = [load_study(ROOT / "configs" / "study" / f"{c.study}.yaml").header.minutes_per_run
            for c in table for _ in c.missing]  # fmt: skip
    if not walls:
        return []
    seeds = {s for c in table for s in c.seeds}
    toys = [r.wall_minutes for r in toy
            if r.wall_minutes is not None and r.mechanism in GRID and r.seed in seeds]  # fmt: skip
    hours = plan_hours([*walls, *todo, *toys])
    where = "; ".join(f"{n} on {m}" for m, n in Counter(r.machine_line for r in done).most_common())
    line = (
        f"Time: the {len(walls)} ding_de_en runs recorded took {sum(walls) / 60:.1f} job-hours, "
        f"median {statistics.median(walls):.1f} minutes a run ({where})"
        + (f"; {len(todo)} not recorded yet, at their studies' minutes per run" if todo else "")
        + f". With the synthetic task's {len(toys)} runs (docs/alignment.md), the whole table "
        f"is about **{hours:.1f} hours** two at a time on 2 cores, one thread each"
    )
    if hours > BUDGET_HOURS:
        line += (
            f": more than the {BUDGET_HOURS:g} hours (one night on 2 cores) the table aims at, "
            "so at the rule's length this size does not fit"
        )
    return ["", line + "."]


def attention_section(
    table: list[Cell], check: list[Cell], updates: int, every: int, toy: list[AlignmentRun],
    results: Path = RESULTS,
) -> list[str]:  # fmt: skip
    """The attention table's probes and the rule's length, its RNN size against the
    preset's (``check``: its cells at the preset's size) and its time."""
    lines = [rule_line(), ""]
    lines += protocol_lines(probes(ATTENTION, results), updates, every, ATTENTION.command,
                            "results_attention.yaml")  # fmt: skip
    return lines + size_line(table, check) + time_line(table, toy)


def show() -> int:
    """Print where each recorded probe flattens."""
    for run in [*probes(ATTENTION), *probes(MAIN)]:
        size = f" ({other_size(run)})" if other_size(run) else ""
        print(f"{probe_name(run)}{size}: flattens at {flattening(run)} of {run.summary.step}")
    return 0


if __name__ == "__main__":
    sys.exit(show())
