"""One-off (issue 64, item 3): the recipe study's records, results/recipe/<stage>/<stem>.json,
into run folders results/<study>/<run>/ named as configs/study/recipe_*.yaml name their runs.

    python scripts/migrate_recipe_records.py      # then git rm -r results/recipe

Each run folder gets what the record held, nothing more:
- summary.json: status, reason, step, epoch, minutes, best_at (a corpora run's kept
  checkpoints: minute, file, step, valid BLEU), test, run_dir, seed, params, precision,
  device, machine, commit (the trainer's); fields the record never had stay absent.
- metrics.jsonl: a start event per train.py process (its step; its time from the record's
  ISO time, read as UTC; precision, device, machine, commit), a valid event per curve point
  (step, minutes, nll, bleu, chrf), the average and the final test at the last step.
- .hydra/overrides.yaml: the record's train.py overrides; .hydra/config.yaml: the dotted
  keys among them, nested (the settings as far as the record holds them).
- eval/test-best-at-<m>min/scores.json (a corpora run's tests at its marks) and, under the
  seeds study's seed 1, eval/ensemble/scores.json (the ensemble), as evaluate.py writes
  one entry: checkpoint(s), beam, scores, signatures, decode settings.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
OLD = ROOT / "results" / "recipe"
COMPARE_NAMES = {
    "recipe": "as_measured",
    "vocab2000": "vocab2000",
    "layers4": "layers4",
    "d384": "d384",
    "dropout0.2": "dropout02",
    "tokens2048": "tokens2048",
    "dropout0.2-tokens2048": "dropout02_tokens2048",
}
CORPORA_NAMES = {
    "recipe": "recipe",
    "recipe-no-sampling": "no_sampling",
    "recipe-loose": "loose",
    "default": "default",
}
GROUPS = ("data", "model", "trainer", "decode", "experiment")
SCORES = ("bleu", "chrf", "bleu_signature", "chrf_signature")


def target(rec: dict[str, Any]) -> Path:
    """The run folder of a run record: results/<study>/<run>/."""
    stage, stem = rec["stage"], rec["stem"]
    if stage == "compare":
        study = "recipe_compare_baseline" if stem.endswith("-cpu25.1") else "recipe_compare"
        return ROOT / "results" / study / f"recipe_variant-{COMPARE_NAMES[rec['variant']]}"
    if stage == "corpora":
        name = CORPORA_NAMES[rec["variant"]]
        return ROOT / "results" / f"recipe_corpora_{rec['corpus']}" / f"recipe_variant-{name}"
    return ROOT / "results" / "recipe_seeds" / f"seed-{rec['seed']}"


def unix(iso: str) -> float:
    return datetime.fromisoformat(iso).replace(tzinfo=UTC).timestamp()


def config_of(overrides: list[str]) -> dict[str, Any]:
    """The dotted keys of ``overrides`` (group choices aside), nested."""
    out: dict[str, Any] = {}
    for item in overrides:
        key, value = item.split("=", 1)
        if key in GROUPS or key.startswith("+"):
            continue
        *parents, leaf = key.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = yaml.safe_load(value)
    return out


def summary_of(rec: dict[str, Any]) -> dict[str, Any]:
    test = rec.get("test")
    marks = [
        {
            "minutes": float(m),
            "file": Path(t["checkpoints"][0]).name,
            "step": t["step"],
            "val_bleu": t["val_bleu"],
        }
        for m, t in (rec.get("test_at") or {}).items()
        if t and t.get("source") == "snapshot"
    ]
    fields = {
        "format": "attnmt-run-summary",
        "version": 1,
        "status": rec["status"],
        "reason": rec["stop_reason"],
        "step": rec["updates"],
        "epoch": rec["epochs"],
        "minutes": rec["train_minutes"],
        "best_at": marks or None,
        "test": None
        if test is None
        else {k: test[k] for k in ("checkpoint", "beam", *SCORES) if k in test},
        "run_dir": rec["run_dir"],
        "seed": rec["seed"],
        "params": rec["params"],
        "precision": rec["precision"],
        "device": rec["device"],
        "machine": rec["machine"],
        "commit": rec["train_commit"],
    }
    return {k: v for k, v in fields.items() if v is not None}


def events_of(rec: dict[str, Any]) -> list[dict[str, Any]]:
    starts = [
        {
            "event": "start",
            "step": p["step"],
            "time": unix(p["started"]),
            **{k: p[k] for k in ("precision", "device", "machine", "commit") if p.get(k)},
        }
        for p in rec["processes"]
    ]
    valid = [
        {"event": "valid", "step": s, "minutes": m, "nll": n, "bleu": b, "chrf": c}
        for s, m, n, b, c in rec["curve"]
    ]
    events = sorted([*starts, *valid], key=lambda e: (e["step"], e["event"] != "start"))
    last = rec["updates"]
    if rec.get("average"):
        events.append({"event": "average", "step": last, **rec["average"]})
    if rec.get("test"):
        t = rec["test"]
        events.append({"event": "test", "step": last, **{k: t[k] for k in t}})
    return events


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def scores_json(tag: str, scores: dict[str, Any], settings: dict[str, Any] | None) -> str:
    entry: dict[str, Any] = {"checkpoint": scores["checkpoints"][0]}
    if len(scores["checkpoints"]) > 1:
        entry["ensemble"] = scores["checkpoints"]
    if settings:
        entry["settings"] = settings
    entry |= {"beam": scores["beam"], **{k: scores[k] for k in SCORES}}
    return json.dumps({tag: entry}, indent=2) + "\n"


def migrate_run(rec: dict[str, Any]) -> Path:
    folder = target(rec)
    if folder.exists():
        raise SystemExit(f"{folder} exists; nothing written")
    write(folder / "summary.json", json.dumps(summary_of(rec), indent=1) + "\n")
    write(folder / "metrics.jsonl", "".join(json.dumps(e) + "\n" for e in events_of(rec)))
    write(folder / ".hydra" / "overrides.yaml", yaml.safe_dump(rec["overrides"]))
    write(folder / ".hydra" / "config.yaml", yaml.safe_dump(config_of(rec["overrides"])))
    for mark, t in (rec.get("test_at") or {}).items():
        if t and t.get("source") == "snapshot":
            tag = f"best-at-{mark}min-test-beam{t['beam']}"
            where = folder / "eval" / f"test-best-at-{mark}min" / "scores.json"
            write(where, scores_json(tag, t, None))
    return folder


def main() -> None:
    records = [json.loads(p.read_text()) for p in sorted(OLD.glob("*/*.json"))]
    for rec in records:
        if rec["kind"] == "run":
            print(migrate_run(rec).relative_to(ROOT))
    for rec in records:
        if rec["kind"] == "ensemble":
            test = rec["test"]
            seeds = "-".join(str(s) for s in rec["seeds"])
            where = ROOT / "results/recipe_seeds/seed-1/eval/ensemble/scores.json"
            write(
                where,
                scores_json(
                    f"ensemble{len(rec['seeds'])}-seeds{seeds}-test-beam{test['beam']}",
                    test,
                    rec["decode"],
                ),
            )
            print(where.relative_to(ROOT))


if __name__ == "__main__":
    main()
