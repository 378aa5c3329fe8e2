"""How long the main table trains: each model preset on each corpus, trained long, and the
update at which its validation NLL has flattened (issue 36: the attention table's rule).

    python -m experiments.main_protocol             # where each recorded probe flattens

Each probe is a main-table row (``experiment=results_main``: the preset at its own size, the
table's trainer settings) at seed 1, trained :data:`PROBE_UPDATES` updates and validated
every :data:`PROBE_EVERY`: the studies configs/study/main_protocol.yaml (and _long.yaml, a
probe that had not flattened, trained longer), run by experiments/sweep.py; their run
folders (results/<study>/) keep the validation curve, the minutes and the machine
(:func:`probes`). The rule and the length it gives
are experiments/attention_protocol.py's (:func:`~experiments.attention_protocol.flattening`,
:func:`~experiments.attention_protocol.table_updates`), applied to each corpus on its own:
the latest flattening step of a corpus's probes, rounded up to one of the table's
validations, is the table's ``trainer.max_steps`` on that corpus
(configs/table_length/results_main-<corpus>.yaml, which train.yaml applies after the
experiment). One length for both corpora cannot follow the rule on both: a small corpus
flattens and then overfits long before a large one has flattened.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from experiments import attention_protocol
from experiments.attention_protocol import (
    pace_ms,
    plan_hours,
    probe_name,
    protocol_lines,
    rule_line,
    show,
    table_updates,
    threads,
)
from experiments.runs import Run

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ("main_protocol", "main_protocol_long")
PROBE_UPDATES = 6000
PROBE_EVERY = 250
CORPORA = ("ding_de_en", "bible_en_fr")
PRESETS = ("transformer", "rnn_bahdanau", "rnn_luong")
PROBES = tuple((corpus, f"{corpus} {preset}") for corpus in CORPORA for preset in PRESETS)
"""Every row of the main table (configs/experiment/results_main.yaml's grid), seed 1:
(corpus, probe name)."""
COMMAND = "python -m experiments.sweep configs/study/main_protocol.yaml --jobs 8 --record"


def probes(results: Path = attention_protocol.RESULTS) -> list[Run]:
    """The main table's probes (run folders of :data:`STUDIES`), by name."""
    return attention_protocol.probes(results, STUDIES)


def length_config(corpus: str) -> str:
    """The file that sets the main table's length on ``corpus``."""
    return f"configs/table_length/results_main-{corpus}.yaml"


def cost_line(own: list[Run], corpus: str, every: int, seeds: int) -> str:
    """What the table's runs on ``corpus`` would take at the length its probes ``own`` give
    (or, while one is still falling, at least their longest): ``seeds`` runs of each probed
    preset at that probe's ms per update, two at a time on one thread each
    (:func:`~experiments.attention_protocol.plan_hours`)."""
    if not own:
        return f"No probe on {corpus} times a run yet."
    length = table_updates(own, every)
    floor = length is None
    length = length or max(r.summary.step or 0 for r in own)
    minutes = [pace_ms(r) * length / 60_000 for r in own for _ in range(seeds)]
    probed = ", ".join(probe_name(r).removeprefix(f"{corpus} ") for r in own)
    return (
        f"Time: at {'no fewer than ' if floor else ''}{length} updates, the {len(minutes)} runs "
        f"({seeds} seeds of {probed}) take {'at least ' if floor else ''}"
        f"{plan_hours(minutes, 2):.1f} hours on 2 cores, two at a time on one thread each, at "
        "their probes' ms per update (their machines)"
        + ("; the presets without a probe are not counted" if len(own) < len(PRESETS) else "")
        + "".join(
            f"; {probe_name(r)} was timed at {threads(r)} threads: beside another run it is "
            "slower, so for it this is a floor"
            for r in own
            if threads(r) > 1
        )
        + "."
    )


def section(
    records: list[Run], lengths: Mapping[str, int], every: int, seeds: int = 3
) -> list[str]:
    """docs/results.md's statement of the main table's length on each corpus of ``lengths``
    (corpus -> the table's ``trainer.max_steps`` there): that corpus's probes, where each
    flattens, the length the rule gives, what the table's ``seeds`` runs a row take there,
    and which probes are still to run."""
    lines = [rule_line(), ""]
    for corpus, updates in lengths.items():
        own = [r for r in records if r.overrides.get("data", "?") == corpus]
        done = {probe_name(r) for r in own}
        missing = [name for c, name in PROBES if c == corpus and name not in done]
        lines += [f"On {corpus} (the table trains {updates} updates there):", ""]
        lines += protocol_lines(
            own, updates, every, COMMAND, length_config(corpus), not missing, rule=False
        )
        lines += ["", cost_line(own, corpus, every, seeds)]
        if missing:
            lines += [
                "",
                f"Probes not yet run on {corpus} ({len(missing)}, {PROBE_UPDATES} updates each, "
                f"validated every {PROBE_EVERY}): {', '.join(missing)} (`{COMMAND}`). Until "
                f"every row's probe on {corpus} has flattened, the length there is not the "
                "rule's.",
            ]
        lines.append("")
    return lines[:-1]


if __name__ == "__main__":
    sys.exit(show(probes()))
