"""Toy ledger records and plans for the results tests (no training, no Hydra compose)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.kept_outputs import keep_hypotheses
from experiments.ledger import Record
from experiments.results_plan import Plan, make_plan

MACHINE = {
    "cpu": {"name": "Toy CPU", "family": 25, "model": 1, "flags": ["avx2"]},
    "torch_version": "2.13.0",
    "threads": 2,
    "cuda": None,
    "cores": 2,
}


def fake_settings(overrides_list: list[list[str]]) -> list[dict[str, Any]]:
    """Distinct settings per overrides list, without composing configs."""
    return [{"overrides": sorted(o)} for o in overrides_list]


def toy_plan(records: list[Record], **kwargs: Any) -> Plan:
    return make_plan(records, settings_of=fake_settings, **kwargs)


def record_for(
    plan: Plan, text: str, seed: int = 1, bleu: float = 5.0, table: str = "", **more: Any
) -> Record:
    """A finished-run record of the cell whose text is ``text`` ('ding_de_en transformer'),
    of ``table`` if given (the first table with such a cell if not)."""
    cell = next(c for c in plan.cells if c.text() == text and table in ("", c.table))
    fields: dict[str, Any] = {
        "table": cell.table,
        "cell": cell.label,
        "key": plan.keys[cell],
        "seed": seed,
        "settings": plan.settings[cell],
        "commit": "abc1234",
        "machine": MACHINE,
        "updates": 1500,
        "train_minutes": 10.0 + seed,
        "wall_minutes": 12.0 + seed,
        "curve": [[200, 1.5, 4.0, bleu / 2, 20.0], [400, 3.0, 3.5, bleu, 25.0]],
        "test": {
            "bleu": bleu,
            "chrf": 20.0 + bleu,
            "bleu_signature": "BLEU|nrefs:1|toy",
            "chrf_signature": "chrF2|nrefs:1|toy",
            "beam": 1,
        },
        "params_m": 3.66,
        "recorded": f"2026-11-2{seed}T10:00:00",
    }
    fields.update(more)
    return Record(**fields)


def keep_outputs(record: Record, lines: list[str], tmp_path: Path, ledger: Path) -> None:
    """Give ``record`` kept test outputs ``lines`` in ``ledger``, as the runner keeps a run's
    hyps/test.txt (experiments/kept_outputs.py ``keep_hypotheses``)."""
    run = tmp_path / "run" / record.stem
    (run / "hyps").mkdir(parents=True)
    (run / "hyps" / "test.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    name = f"{record.stem}.test.txt.xz"
    assert keep_hypotheses(run, ledger / name) is not None
    record.extra["hypotheses"] = name
