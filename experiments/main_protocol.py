"""How long the main table trains: each model preset on each corpus, trained long, and the
update at which its validation NLL has flattened (issue 36: the attention table's rule).

    python -m experiments.main_protocol run [--jobs 2]   # the probes -> records
    python -m experiments.main_protocol show             # where each flattens

Each probe is a main-table row (``experiment=results_main``: the preset at its own size, the
table's trainer settings) at seed 1, trained :data:`PROBE_UPDATES` updates and validated
every :data:`PROBE_EVERY` by experiments/variant_runs.py; its record (results/main_protocol/)
keeps the validation curve, the minutes and the machine. The rule and the length it gives
are experiments/attention_protocol.py's (:func:`~experiments.attention_protocol.flattening`,
:func:`~experiments.attention_protocol.table_updates`), applied to each corpus on its own:
the latest flattening step of a corpus's probes, rounded up to one of the table's
validations, is the table's ``trainer.max_steps`` on that corpus
(configs/table_length/results_main-<corpus>.yaml, which train.yaml applies after the
experiment). One length for both corpora cannot follow the rule on both: a small corpus
flattens and then overfits long before a large one has flattened. Probes run ``--threads``
each (1), ``--jobs`` at a time, ``--only`` those named, ``--updates`` long (PROBE_UPDATES);
a probe with a record that long is not rerun, so the command goes on where the last one
stopped.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.attention_protocol import (
    pace_ms,
    plan_hours,
    probes_main,
    protocol_lines,
    rule_line,
    setting,
    table_updates,
)
from experiments.variant_runs import Variant

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "results" / "main_protocol"
RUNS = ROOT / "outputs" / "main_protocol"
PROBE_UPDATES = 6000
PROBE_EVERY = 250
COMMON = (
    "experiment=results_main",
    f"trainer.max_steps={PROBE_UPDATES}",
    f"trainer.val_every_steps={PROBE_EVERY}",
    "trainer.num_heatmaps=0",
    "trainer.keep_best=1",
)
CORPORA = ("ding_de_en", "bible_en_fr")
PRESETS = ("transformer", "rnn_bahdanau", "rnn_luong")
PROBES = tuple(
    Variant(f"{corpus} {preset}", (f"data={corpus}", f"model={preset}"))
    for corpus in CORPORA
    for preset in PRESETS
)
"""Every row of the main table (configs/experiment/results_main.yaml's grid), seed 1."""
COMMAND = "python -m experiments.main_protocol run --jobs 2"


def length_config(corpus: str) -> str:
    """The file that sets the main table's length on ``corpus``."""
    return f"configs/table_length/results_main-{corpus}.yaml"


def corpus_of(record: dict[str, Any]) -> str:
    """The corpus a probe record trained on (its ``data=`` override; "?" without one)."""
    try:
        return setting(record.get("overrides", []), "data")
    except KeyError:
        return "?"


def cost_line(own: list[dict[str, Any]], corpus: str, every: int, seeds: int) -> str:
    """What the table's runs on ``corpus`` would take at the length its probes ``own`` give
    (or, while one is still falling, at least their longest): ``seeds`` runs of each probed
    preset at that probe's ms per update, two at a time on one thread each
    (:func:`~experiments.attention_protocol.plan_hours`)."""
    if not own:
        return f"No probe on {corpus} times a run yet."
    length = table_updates(own, every)
    floor = length is None
    length = length or max(int(r["updates"]) for r in own)
    minutes = [pace_ms(r) * length / 60_000 for r in own for _ in range(seeds)]
    probed = ", ".join(str(r["variant"]).removeprefix(f"{corpus} ") for r in own)
    return (
        f"Time: at {'no fewer than ' if floor else ''}{length} updates, the {len(minutes)} runs "
        f"({seeds} seeds of {probed}) take {'at least ' if floor else ''}"
        f"{plan_hours(minutes, 2):.1f} hours on 2 cores, two at a time on one thread each, at "
        "their probes' ms per update (their machines)"
        + ("; the presets without a probe are not counted" if len(own) < len(PRESETS) else "")
        + "".join(
            f"; {r['variant']} was timed at {r['threads']} threads: beside another run it is "
            "slower, so for it this is a floor"
            for r in own
            if int(r.get("threads", 1)) > 1
        )
        + "."
    )


def section(
    records: list[dict[str, Any]], lengths: Mapping[str, int], every: int, seeds: int = 3
) -> list[str]:
    """docs/results.md's statement of the main table's length on each corpus of ``lengths``
    (corpus -> the table's ``trainer.max_steps`` there): that corpus's probes, where each
    flattens, the length the rule gives, what the table's ``seeds`` runs a row take there,
    and which probes are still to run."""
    lines = [rule_line(), ""]
    for corpus, updates in lengths.items():
        own = [r for r in records if corpus_of(r) == corpus]
        done = {r.get("variant") for r in own}
        missing = [
            p.name for p in PROBES if setting(p.overrides, "data") == corpus and p.name not in done
        ]
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


def main(argv: list[str] | None = None) -> int:
    return probes_main(argv, __doc__, PROBES, COMMON, RUNS, RECORDS)


if __name__ == "__main__":
    sys.exit(main())
