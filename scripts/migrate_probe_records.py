"""One-off (issue 64, item 3): results/attention_protocol/*.json and
results/main_protocol/*.json (the probes' old records) -> results/<study>/<run>/.

Each record becomes the run folder its study config (configs/study/attention_protocol*.yaml,
configs/study/main_protocol*.yaml) makes: ``summary.json`` (status finished, step, seed,
params, minutes = the record's ``train_minutes``, machine with the record's ``threads``,
the OMP_NUM_THREADS train.py ran with, commit, the final test's bleu, chrf and
bleu_signature, and keys Summary leaves out: ``wall_minutes``, the old runner's minutes,
and the hand-added ``note``, ``pace_ms_per_update`` and ``pace_note`` of the attention
probes), ``metrics.jsonl`` (a ``valid`` event per point of the curve: step, nll, bleu; the
last with the attention entropy where the record kept one) and ``.hydra/overrides.yaml``
(the record's overrides and ``seed=S``) with ``.hydra/config.yaml`` (those settings nested,
a group's choice as its ``name``). ``other_size`` is not kept: the overrides give it.
Fields a record never had stay absent. Run once, then deleted (git history keeps it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def place(rec: dict[str, Any], old: str) -> tuple[str, str]:
    """(study, run) of a record, as the study configs name them."""
    ov = dict(o.split("=", 1) for o in rec["overrides"])
    seed = rec["seed"]
    if old == "attention_protocol":
        if ov["model.hidden_size"] != "128":
            return "attention_protocol_64", f"seed-{seed}"
        return "attention_protocol", f"model-{ov['model']}_seed-{seed}"
    if ov["trainer.max_steps"] != "6000":
        return "main_protocol_long", f"seed-{seed}"
    return "main_protocol", f"data-{ov['data']}_model-{ov['model']}_seed-{seed}"


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
    study, run = place(rec, path.parent.name)
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
        "test": rec["test"],
        "wall_minutes": rec["minutes"],
        **{k: rec[k] for k in ("note", "pace_ms_per_update", "pace_note") if k in rec},
    }
    (folder / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    events = [{"event": "valid", "step": s, "nll": n, "bleu": b} for s, n, b in rec["curve"]]
    if "attention_entropy_norm" in rec:
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
    olds = sorted((ROOT / "results" / "attention_protocol").glob("*.json"))
    olds += sorted((ROOT / "results" / "main_protocol").glob("*.json"))
    for path in olds:
        print(f"{path.relative_to(ROOT)} -> {migrate(path).relative_to(ROOT)}")
    print(f"{len(olds)} records migrated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
