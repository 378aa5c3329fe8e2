"""One-off (issue 64, item 3): results/luong_bahdanau/*.json and results/ding_loose/*.json
(experiments/variant_runs.py's old records) -> results/<study>/<run>/.

Each record becomes the run folder its study config (configs/study/luong_bahdanau*.yaml,
configs/study/ding_loose.yaml) makes: ``summary.json`` (status finished, step, seed,
params, minutes = the record's ``train_minutes``, machine with the record's ``threads``,
the OMP_NUM_THREADS train.py ran with, commit, the final test's bleu, chrf and
bleu_signature when the record has one, and ``wall_minutes``, the old runner's minutes, a
key Summary leaves out), ``metrics.jsonl`` (a ``valid`` event per point of the curve:
step, nll, bleu; the last with the attention entropy) and ``.hydra/overrides.yaml`` (the
record's overrides and ``seed=S``) with ``.hydra/config.yaml`` (those settings nested, a
group's choice as its ``name``). Fields a record never had stay absent. Run once, then
deleted (git history keeps it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def place(rec: dict[str, Any]) -> tuple[str, str]:
    """(study, run) of a record, as the study configs name them."""
    ov = dict(o.split("=", 1) for o in rec["overrides"])
    seed = rec["seed"]
    if "data.path" in ov:
        return "ding_loose", f"seed-{seed}"
    if "model.attention.score" in ov:
        return "luong_bahdanau_scorer", f"score-{ov['model.attention.score']}_seed-{seed}"
    if "model.input_feeding" in ov:
        return "luong_bahdanau_feeding", f"seed-{seed}"
    return "luong_bahdanau", f"model-{ov['model']}_seed-{seed}"


def nested(overrides: list[str]) -> dict[str, Any]:
    """The overrides as a nested config; ``model=X`` as ``model.name: X``."""
    out: dict[str, Any] = {}
    for item in overrides:
        key, value = item.split("=", 1)
        parts = key.split(".")
        if len(parts) == 1 and parts[0] in ("model", "data", "experiment"):
            parts = [parts[0], "name"]
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = yaml.safe_load(value)
    return out


def migrate(path: Path) -> Path:
    rec = json.loads(path.read_text(encoding="utf-8"))
    study, run = place(rec)
    folder = ROOT / "results" / study / run
    if folder.exists():
        raise SystemExit(f"{folder}: exists already")
    (folder / ".hydra").mkdir(parents=True)
    summary: dict[str, Any] = {
        "format": "attnmt-run-summary",
        "version": 1,
        "status": "finished",
        "step": rec["updates"],
        "minutes": rec["train_minutes"],
        "seed": rec["seed"],
        "params": rec["params"],
        "machine": {**rec["machine"], "threads": rec["threads"]},
        "commit": rec["commit"],
        "wall_minutes": rec["minutes"],
    }
    if rec.get("test"):
        summary["test"] = rec["test"]
    (folder / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    events = [{"event": "valid", "step": s, "nll": n, "bleu": b} for s, n, b in rec["curve"]]
    events[-1]["attention_entropy_norm"] = rec["attention_entropy_norm"]
    (folder / "metrics.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in events), encoding="utf-8"
    )
    overrides = [*rec["overrides"], f"seed={rec['seed']}"]
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides), encoding="utf-8")
    config = yaml.safe_dump(nested(overrides), sort_keys=False)
    (folder / ".hydra" / "config.yaml").write_text(config, encoding="utf-8")
    return folder


def main() -> int:
    olds = sorted((ROOT / "results" / "luong_bahdanau").glob("*.json"))
    olds += sorted((ROOT / "results" / "ding_loose").glob("*.json"))
    for path in olds:
        print(f"{path.relative_to(ROOT)} -> {migrate(path).relative_to(ROOT)}")
    print(f"{len(olds)} records migrated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
