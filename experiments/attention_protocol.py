"""How long the attention table trains: the reference cells at the table's size, trained
long, and the update at which their validation NLL has flattened.

    python -m experiments.attention_protocol run [--jobs 2]   # the probes -> records
    python -m experiments.attention_protocol show             # where each flattens

Each probe is an attention-table cell (configs/experiment/results_attention.yaml's size,
rnn_luong's preset scorer and rnn_bahdanau's, global attention) trained :data:`PROBE_UPDATES`
updates, validated every :data:`PROBE_EVERY`, by experiments/variant_runs.py: its record
(results/attention_protocol/) keeps the validation curve (step, NLL, BLEU), the minutes and
the machine. The rule (:func:`experiments.comparison_stats.flattened_at`, ``stays``): the
first validation from which on the best NLL so far is less than 1% better than the best NLL
at four fifths of that step, there and at every later validation. The table's
``trainer.max_steps`` is the latest flattening step of the probes, rounded up to a
validation of the table (its ``val_every_steps``).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from attnmt.machine import Machine
from experiments.alignment_aer import GRID, AlignmentRun
from experiments.comparison_stats import flattened_at
from experiments.results_plan import PRESET_CHECK, Cell, Plan, estimate
from experiments.variant_runs import Variant, read_all, run_variant

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "results" / "attention_protocol"
RUNS = ROOT / "outputs" / "attention_protocol"
PROBE_UPDATES = 6000
PROBE_EVERY = 250
TOL, TAIL = 0.01, 0.2
"""The flattening rule: less than TOL relative gain over the last TAIL of the updates."""
BUDGET_HOURS = 8.0
"""What the whole table should take on 2 cores (issue 36)."""
SIZE = ("model.emb_dim=128", "model.hidden_size=128")
COMMON = (
    "data=ding_de_en",
    f"trainer.max_steps={PROBE_UPDATES}",
    f"trainer.val_every_steps={PROBE_EVERY}",
    "trainer.time_budget_min=0",
    "trainer.early_stopping_patience=0",
    "trainer.test=true",
    "trainer.num_heatmaps=0",
    "trainer.progress_bar=false",
    "trainer.precision=fp32",
    "trainer.keep_best=1",
)
PROBES = (
    Variant("rnn_luong general global", ("model=rnn_luong", *SIZE)),
    Variant("rnn_bahdanau additive global", ("model=rnn_bahdanau", *SIZE)),
)
"""The reference cells at the table's size; each probe's record is a variant_runs record."""


def flattening(record: dict[str, Any]) -> int | None:
    """The probe's flattening step (None: still improving at its last validation)."""
    return flattened_at([(int(p[0]), float(p[1])) for p in record["curve"]], TOL, TAIL, stays=True)


def table_updates(records: list[dict[str, Any]], every: int) -> int | None:
    """The table's length: the latest flattening step of the probes at the table's size
    (records without ``other_size``), rounded up to a multiple of ``every`` (None while one
    has not flattened or there is none)."""
    steps = [flattening(r) for r in records if not r.get("other_size")]
    if not steps or any(s is None for s in steps):
        return None
    return int(math.ceil(max(s for s in steps if s is not None) / every) * every)


def main(argv: list[str] | None = None) -> int:
    return probes_main(argv, __doc__, PROBES, COMMON, RUNS, RECORDS)


def probes_main(
    argv: list[str] | None,
    doc: str | None,
    probes: Sequence[Variant],
    common: tuple[str, ...],
    runs: Path,
    records: Path,
) -> int:
    """A probe module's command line (``doc``: its docstring). ``run [--jobs N] [--threads T]
    [--only NAME ...] [--updates U] [--every E]`` trains the ``probes`` (or those named, in
    that order) that lack a record of at least U updates (``common``'s ``trainer.max_steps``
    unless given): seed 1, T torch threads each (1), N at a time, validated every E updates
    (``common``'s unless given); a longer probe's record replaces a shorter one's (its curve
    extends the shorter's: the schedule does not depend on the length). ``run`` and ``show``
    then print where each recorded probe flattens."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("what", choices=("run", "show"))
    parser.add_argument("--jobs", type=int, default=2, help="probes at once")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each probe")
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help="these probes, in this order (names as `show` prints them, quoted)",
    )
    parser.add_argument("--updates", type=int, help="updates a probe trains (the module's)")
    parser.add_argument("--every", type=int, help="updates between validations (the module's)")
    args = parser.parse_args(argv)
    for flag in ("updates", "every"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            parser.error(f"--{flag}: must be at least 1, got {getattr(args, flag)}")
    common = with_length(common, args.updates, args.every)
    updates = int(setting(common, "trainer.max_steps"))
    if args.only:
        by_name = {p.name: p for p in probes}
        unknown = [n for n in args.only if n not in by_name]
        if unknown:
            parser.error(f"--only: no probe named {unknown}; the probes: {sorted(by_name)}")
        probes = [by_name[n] for n in args.only]
    if args.what == "run":

        def probe(v: Variant) -> Path | None:
            return run_variant(
                v, 1, args.threads, common, runs / f"{updates}-updates", records, updates
            )

        with ThreadPoolExecutor(args.jobs) as pool:
            for v, path in zip(probes, pool.map(probe, probes)):
                print(f"{v.name}: {path or 'FAILED'}", flush=True)
    for rec in read_all(records):
        size = f" ({rec['other_size']})" if rec.get("other_size") else ""
        print(f"{rec['variant']}{size}: flattens at {flattening(rec)} of {rec['updates']} updates")
    return 0


def setting(overrides: Sequence[str], key: str) -> str:
    """The value ``key=VALUE`` in ``overrides`` gives (KeyError when none does)."""
    for item in overrides:
        name, _, value = item.partition("=")
        if name == key:
            return value
    raise KeyError(f"no {key}=... among {list(overrides)}")


def with_length(common: tuple[str, ...], updates: int | None, every: int | None) -> tuple[str, ...]:
    """``common`` with ``trainer.max_steps`` set to ``updates`` and ``trainer.val_every_steps``
    to ``every`` (each where not None; it must be among ``common`` then: KeyError)."""
    out = list(common)
    for key, value in (("trainer.max_steps", updates), ("trainer.val_every_steps", every)):
        if value is not None:
            setting(common, key)
            out = [f"{key}={value}" if o.partition("=")[0] == key else o for o in out]
    return tuple(out)


def plan_hours(run_minutes: list[float], jobs: int = 2) -> float:
    """Wall-clock hours of runs taking ``run_minutes`` each, ``jobs`` at a time (one thread
    each), packed longest first onto the job that frees first."""
    free = [0.0] * max(jobs, 1)
    for minutes in sorted(run_minutes, reverse=True):
        free[free.index(min(free))] += minutes
    return max(free) / 60.0


def protocol_lines(
    records: list[dict[str, Any]],
    updates: int,
    every: int,
    command: str = "python -m experiments.attention_protocol run",
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
        nll = next((p[1] for p in rec["curve"] if p[0] == step), None)
        cpu = Machine.from_dict(rec["machine"]).describe("plain")
        pace = pace_ms(rec)
        name = rec["variant"] + (
            f" ({rec['other_size']}: not the table's)" if rec.get("other_size") else ""
        )
        lines.append(
            f"| {name} | {rec['updates']} | {step if step else 'not yet'} "
            f"| {f'{nll:.3f}' if nll is not None else '–'} "
            f"| {rec['curve'][-1][1]:.3f}, {rec.get('test', {}).get('bleu', float('nan')):.2f} "
            f"| {pace:.0f} ({rec.get('threads', 1)}) "
            f"| {cpu} |"
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
    notes = [f"{r['variant']}, {r['pace_note']}." for r in records if r.get("pace_note")]
    return [*lines, "", verdict, *(["", *notes] if notes else [])]


def pace_ms(record: dict[str, Any]) -> float:
    """A probe's milliseconds per update: its ``pace_ms_per_update`` where it has one, else
    its own wall clock (training minutes over updates, validations included)."""
    pace = record.get("pace_ms_per_update")
    if pace is None:
        pace = 60_000 * float(record["train_minutes"]) / max(int(record["updates"]), 1)
    return float(pace)


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


def section(plan: Plan, records: list[dict[str, Any]], toy: list[AlignmentRun]) -> list[str]:
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
    sys.exit(main())
