"""How long the main table trains: each model preset on each corpus, trained long, and the
update at which its validation NLL has flattened (issue 36: the attention table's rule).

    python -m experiments.main_protocol run [--jobs 2]   # the probes -> records
    python -m experiments.main_protocol show             # where each flattens

Each probe is a main-table row (``experiment=results_main``: the preset at its own size, the
table's trainer settings) at seed 1, trained :data:`PROBE_UPDATES` updates and validated
every :data:`PROBE_EVERY` by experiments/variant_runs.py; its record (results/main_protocol/)
keeps the validation curve, the minutes and the machine. The rule and the length it gives
are experiments/attention_protocol.py's (:func:`~experiments.attention_protocol.flattening`,
:func:`~experiments.attention_protocol.table_updates`): the latest flattening step of the
probes, rounded up to one of the table's validations, is the table's ``trainer.max_steps``
(configs/experiment/results_main.yaml). Probes run ``--threads`` each (1), ``--jobs`` at a
time, ``--only`` those named; a probe with a record is not rerun, so the command goes on
where the last one stopped.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from experiments.attention_protocol import probes_main, protocol_lines
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


def section(records: list[dict[str, Any]], updates: int, every: int) -> list[str]:
    """docs/results.md's statement of the main table's length: the probes, where each
    flattens, the length the rule gives against ``updates`` (the table's), and which probes
    are still to run."""
    lines = protocol_lines(records, updates, every, COMMAND, "results_main.yaml")
    done = {r.get("variant") for r in records}
    missing = [p.name for p in PROBES if p.name not in done]
    if missing:
        lines += [
            "",
            f"Probes not yet run ({len(missing)} of {len(PROBES)}, {PROBE_UPDATES} updates each, "
            f"validated every {PROBE_EVERY}): {', '.join(missing)} (`{COMMAND}`). Until every "
            "row's probe has flattened, the table's length is not the rule's.",
        ]
    return lines


def main(argv: list[str] | None = None) -> int:
    return probes_main(argv, __doc__, PROBES, COMMON, RUNS, RECORDS)


if __name__ == "__main__":
    sys.exit(main())
