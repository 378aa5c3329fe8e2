"""One-off (issue 64, items 3-4): the results ledger's three records that docs/ding_loose.md
sets beside the loose corpus (table main, ding_de_en transformer, 1,500 updates: stale for
the main table, which trains 1,800 now) -> results/ding_loose_shipped/seed-<n>/, the run
folders of configs/study/ding_loose_shipped.yaml, written as scripts/migrate_ledger_records.py
writes the current ones (each record's settings checked against what the study composes).
Run once, then deleted (git history keeps it).
"""

from __future__ import annotations

import sys
from pathlib import Path

from attnmt.train.run_config import setting_defaults
from experiments.ledger import read_records, same_run
from experiments.results_plan import compose_settings
from experiments.study import load_study
from scripts.migrate_ledger_records import LEDGER, migrate

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    records, _ = read_records(LEDGER)
    shipped = [r for r in records if r.table == "main" and r.updates == 1500
               and r.cell == {"data": "ding_de_en", "model": "transformer"}]  # fmt: skip
    study = load_study(ROOT / "configs" / "study" / "ding_loose_shipped.yaml")
    runs = {r.name: r for r in study.runs}
    if sorted(r.seed for r in shipped) != [1, 2, 3]:
        raise SystemExit(f"expected seeds 1, 2, 3; found {[r.stem for r in shipped]}")
    wanted = [[*study.overrides, *runs[f"seed-{r.seed}"].grid] for r in shipped]
    for rec, overrides, settings in zip(shipped, wanted, compose_settings(wanted)):
        if not same_run(rec.settings, settings, setting_defaults(rec.settings["model"]["name"])):
            raise SystemExit(f"{rec.stem}: its settings are not the study's")
        folder = ROOT / "results" / study.name / f"seed-{rec.seed}"
        migrate(rec, folder, overrides)
        print(f"{rec.stem} -> {folder.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
