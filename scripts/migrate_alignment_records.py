"""One-off (issue 64, item 3): results/alignment/*-seed*.json -> results/<study>/<run>/.

Each record of experiments/alignment_aer.py's old runner becomes the run folder the study
config (configs/study/alignment_*.yaml) makes, with the run's own files: ``summary.json``
(status finished, step, params, seed, machine, commit: what the record holds;
``wall_minutes``, the old runner's minutes from training's start to the record, train.py
and evaluate.py together, a key Summary leaves out and experiments.alignment_aer reads; the
machine's ``threads`` is the record's ``threads``, the OMP_NUM_THREADS train.py ran with,
not the runner's own), ``metrics.jsonl`` (one ``valid`` event a point of the record's
curve: step, nll, bleu; the last with the attention entropy), ``.hydra/overrides.yaml``
(the record's overrides and ``seed=S``), ``.hydra/config.yaml`` (those settings nested, a
config group's choice as its ``name``) and ``eval/test/scores.json`` (evaluate.py's entry:
beam, bleu, chrf, bleu_signature, aer, aer_precision, aer_recall, align_layer, align_head,
alignment.map). Fields a record never had (minutes of training, epochs, the checkpoint,
the evaluation key) stay absent. Run once, then deleted (git history keeps it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
OLD = ROOT / "results" / "alignment"


def place(rec: dict[str, Any]) -> tuple[str, str]:
    """(study, run) of a record, as the study configs name them."""
    ov = dict(o.split("=", 1) for o in rec["overrides"])
    seed, long = rec["seed"], ov["trainer.max_steps"] != "1200"
    model = ov["model"]
    if model == "transformer_tiny":
        return ("alignment_transformer_long" if long else "alignment_transformer", f"seed-{seed}")
    mode = ov.get("model.attention.mode", "global")
    if model == "rnn_bahdanau":
        if long:
            return "alignment_bahdanau_long", f"seed-{seed}"
        return "alignment_bahdanau", f"mode-{mode}_seed-{seed}"
    if "model.attention.window" in ov:
        return "alignment_window10", f"seed-{seed}"
    return "alignment_luong", f"mode-{mode}_score-{ov['model.attention.score']}_seed-{seed}"


def nested(overrides: list[str]) -> dict[str, Any]:
    """The overrides as a nested config; ``model=X`` as ``model.name: X``."""
    out: dict[str, Any] = {}
    for item in overrides:
        key, value = item.split("=", 1)
        parts = key.split(".")
        if len(parts) == 1 and parts[0] in ("model", "data"):
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
    machine = {**rec["machine"], "threads": rec["threads"]}
    summary = {
        "format": "attnmt-run-summary",
        "version": 1,
        "status": "finished",
        "step": rec["updates"],
        "seed": rec["seed"],
        "params": rec["params"],
        "machine": machine,
        "commit": rec["commit"],
        "wall_minutes": rec["minutes"],
    }
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
    layer, heads = rec["alignment_map"].split(", ")
    assert heads == "mean of heads", heads
    entry = {
        "beam": 1,
        **{k: rec["test"][k] for k in ("bleu", "chrf", "bleu_signature", "aer")},
        "aer_precision": rec["aer_precision"],
        "aer_recall": rec["aer_recall"],
        "align_layer": int(layer.removeprefix("layer ")),
        "align_head": None,
        "alignment": {"map": rec["alignment_map"]},
    }
    (folder / "eval" / "test").mkdir(parents=True)
    scores = json.dumps({"best-test-beam1": entry}, indent=2)
    (folder / "eval" / "test" / "scores.json").write_text(scores + "\n", encoding="utf-8")
    return folder


def main() -> int:
    olds = sorted(OLD.glob("*-seed*.json"))
    for path in olds:
        print(f"{path.relative_to(ROOT)} -> {migrate(path).relative_to(ROOT)}")
    print(f"{len(olds)} records migrated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
