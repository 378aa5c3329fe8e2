"""One-off (issue 64, items 3-4): the results ledger's current records (results/runs/,
those docs/results.md tabulates; stale ones stay in git history) -> results/<study>/<run>/.

A record of table ``main`` goes to the study configs/study/results_main.yaml, one of
``attention`` to results_attention.yaml (rnn_luong), results_attention_reference.yaml
(rnn_bahdanau) or results_attention_transformer.yaml, one of ``attention_preset`` to
results_attention_preset.yaml; ``<run>`` is the sweep's name of its grid values. Before
writing, each record's settings are checked against what the study run composes (Hydra,
as train.py would: the ledger's ``same_run``). A run folder holds:

- ``summary.json``: status finished, reason (the record's stop reason), step, minutes (its
  ``train_minutes``), seed, params (the exact count of the model its settings build, checked
  against its rounded ``params_m``), model and data (its settings' names), precision and
  device, machine, commit, run_dir, updated (its ``recorded`` time, read as UTC), test
  (bleu, chrf, their signatures, beam) and ``wall_minutes`` (train.py's start to the record);
- ``metrics.jsonl``: a ``valid`` event per point of its curve (step, minutes, nll, bleu,
  chrf), the last with ``attention_entropy_norm: {cross: x}`` where it kept the entropy;
- ``.hydra/config.yaml`` (its settings and seed) and ``.hydra/overrides.yaml`` (what the
  sweep passes: the study's overrides, the run's grid values);
- ``hyps/test.txt.xz``: its kept test hypotheses, as they are;
- ``eval/silver/scores.json``: its AER against the kept silver links of the test split
  (results/silver/), one entry in the form evaluate.py writes for ``gold_alignments``
  (``aer``, ``aer_precision``, ``aer_recall``, ``alignment``), only what the record had;
- ``attention_map.json``: its ``.attn.json``, the fixed sentence's maps, as it is.

Fields a record never had stay absent. Run once, then deleted (git history keeps it).
"""

from __future__ import annotations

import json
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from attnmt.models.registry import build_model
from attnmt.train.run_config import setting_defaults
from experiments.ledger import Record, in_todays_keys, read_records, same_run
from experiments.results_plan import compose_settings, make_plan
from experiments.study import load_study

ROOT = Path(__file__).resolve().parents[1]
LEDGER = ROOT / "results" / "runs"
SILVER = "results/silver/ding_de_en.test.de-en.silver.align"


def place(rec: Record) -> tuple[str, str]:
    """(study, run) of a current record, as the study configs name them."""
    c, seed = rec.cell, rec.seed
    if rec.table == "main":
        return "results_main", f"data-{c['data']}_model-{c['model']}_seed-{seed}"
    if rec.table == "attention_preset":
        return "results_attention_preset", f"mode-{c['mode']}_seed-{seed}"
    if c["model"] == "transformer":
        return "results_attention_transformer", f"seed-{seed}"
    if c["model"] == "rnn_bahdanau":
        return "results_attention_reference", f"mode-{c['mode']}_seed-{seed}"
    return "results_attention", f"mode-{c['mode']}_score-{c['score']}_seed-{seed}"


def params(settings: dict[str, Any]) -> int:
    """The parameter count of the model ``settings`` build (vocabulary: the tokenizer's)."""
    tok = settings["data"]["tokenizer"]
    size = int(tok["vocab_size"])
    model = build_model(in_todays_keys(settings)["model"], size, size, bool(tok["joint"]))
    return sum(p.numel() for p in model.parameters())


def summary(rec: Record) -> dict[str, Any]:
    count = params(rec.settings)
    if round(count / 1e6, 2) != rec.params_m:
        raise SystemExit(f"{rec.stem}: builds {count} parameters, recorded {rec.params_m}M")
    recorded = datetime.fromisoformat(rec.recorded).replace(tzinfo=timezone.utc)
    out: dict[str, Any] = {
        "format": "attnmt-run-summary",
        "version": 1,
        "status": "finished",
        **({"reason": rec.stop_reason} if rec.stop_reason else {}),
        "run_dir": rec.run_dir,
        "model": rec.settings["model"]["name"],
        "data": rec.settings["data"]["name"],
        "seed": rec.seed,
        "params": count,
        **{k: rec.extra[k] for k in ("precision", "device") if k in rec.extra},
        "machine": rec.machine,
        "commit": rec.commit,
        "updated": recorded.timestamp(),
        "step": rec.updates,
        "minutes": rec.train_minutes,
        "test": rec.test,
        "wall_minutes": rec.wall_minutes,
    }
    return out


def events(rec: Record) -> list[dict[str, Any]]:
    keys = ("step", "minutes", "nll", "bleu", "chrf")
    out = [{"event": "valid", **dict(zip(keys, row))} for row in rec.curve]
    for e in out:
        e["step"] = int(e["step"])
    entropy = rec.extra.get("attention_entropy")
    if isinstance(entropy, int | float):
        out[-1]["attention_entropy_norm"] = {"cross": entropy}
    return out


def silver_scores(silver: dict[str, float]) -> dict[str, Any]:
    entry = {
        "settings": {"split": "test", "beam": 1, "gold_alignments": SILVER},
        "beam": 1,
        "aer": silver["aer"],
        "aer_precision": silver["precision"],
        "aer_recall": silver["recall"],
        "alignment": {**silver, "gold_file": SILVER},
    }
    return {"test-beam1": entry}


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def migrate(rec: Record, folder: Path, overrides: list[str]) -> None:
    if folder.exists():
        raise SystemExit(f"{folder}: exists already")
    write(folder / "summary.json", json.dumps(summary(rec), indent=1) + "\n")
    write(folder / "metrics.jsonl", "".join(json.dumps(e) + "\n" for e in events(rec)))
    config = yaml.safe_dump({**rec.settings, "seed": rec.seed}, sort_keys=False)
    write(folder / ".hydra" / "config.yaml", config)
    write(folder / ".hydra" / "overrides.yaml", yaml.safe_dump(overrides))
    hyps = rec.extra.get("hypotheses")
    if isinstance(hyps, str):
        (folder / "hyps").mkdir()
        shutil.copyfile(LEDGER / hyps, folder / "hyps" / "test.txt.xz")
    if "silver" in rec.extra:
        text = json.dumps(silver_scores(rec.extra["silver"]), indent=2) + "\n"
        write(folder / "eval" / "silver" / "scores.json", text)
    maps = LEDGER / f"{rec.stem}.attn.json"
    if maps.is_file():
        shutil.copyfile(maps, folder / "attention_map.json")


def main() -> int:
    records, bad = read_records(LEDGER)
    if bad:
        raise SystemExit("\n".join(bad))
    plan = make_plan(records)
    studies = {}
    placed: dict[tuple[str, str], Record] = {}
    for rec in plan.current:
        where = place(rec)
        if where in placed:
            raise SystemExit(f"{rec.stem} and {placed[where].stem} both go to {where}")
        placed[where] = rec
    for study_name, _ in placed:
        if study_name not in studies:
            study = load_study(ROOT / "configs" / "study" / f"{study_name}.yaml")
            studies[study_name] = (study, {r.name: r for r in study.runs})
    wanted = [[*studies[s][0].overrides, *studies[s][1][r].grid] for s, r in placed]
    for (where, rec), settings in zip(placed.items(), compose_settings(wanted)):
        if not same_run(rec.settings, settings, setting_defaults(rec.settings["model"]["name"])):
            raise SystemExit(f"{rec.stem}: its settings are not those of {where}")
    for ((study_name, run), rec), overrides in zip(placed.items(), wanted):
        folder = ROOT / "results" / study_name / run
        migrate(rec, folder, overrides)
        print(f"{rec.stem} -> {folder.relative_to(ROOT)}")
    print(f"{len(placed)} records migrated; {len(plan.stale)} stale ones left out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
