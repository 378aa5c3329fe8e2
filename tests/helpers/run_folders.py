"""Planted study run folders (results/<study>/<run>/, as experiments/sweep.py ``--record`` keeps
them) for the page tests: no training."""

from __future__ import annotations

import json
import lzma
from pathlib import Path
from typing import Any

import yaml

MACHINE = {
    "cpu": {"name": "Toy CPU", "family": 25, "model": 1, "flags": ["avx2"]},
    "torch_version": "2.13.0",
    "threads": 1,
    "cuda": None,
    "cores": 2,
}


def plant_run(
    results: Path,
    study: str,
    name: str,
    overrides: list[str],
    bleu: float = 5.0,
    config: dict[str, Any] | None = None,
    hypotheses: list[str] | None = None,
    **summary: Any,
) -> Path:
    """results/<study>/<name>/ of a finished run with train.py ``overrides`` (``seed=N``
    among them), test BLEU ``bleu`` (chrF 20 + BLEU), two validations (steps 200 and 400,
    BLEU bleu/2 and bleu), ``config`` as .hydra/config.yaml, ``hypotheses`` as its kept
    test outputs; ``summary`` replaces summary.json's fields."""
    folder = results / study / name
    (folder / ".hydra").mkdir(parents=True)
    given = dict(o.split("=", 1) for o in overrides)
    seed = int(given.get("seed", 1))
    signatures = {"bleu_signature": "BLEU|nrefs:1|toy", "chrf_signature": "chrF2|nrefs:1|toy"}
    test = {"bleu": bleu, "chrf": 20.0 + bleu, "beam": 1, **signatures}
    data: dict[str, Any] = {
        "format": "attnmt-run-summary",
        "version": 1,
        "status": "finished",
        "model": given.get("model", "rnn_luong"),
        "data": given.get("data", "ding_de_en"),
        "seed": seed,
        "params": 3_660_800,
        "machine": MACHINE,
        "commit": "abc1234",
        "updated": 1_795_600_000.0 + 86_400 * seed,
        "step": 400,
        "minutes": 10.0 + seed,
        "test": test,
        **summary,
    }
    (folder / "summary.json").write_text(json.dumps(data), encoding="utf-8")
    events = [
        {"event": "valid", "step": 200, "minutes": 1.5, "nll": 4.0, "bleu": bleu / 2, "chrf": 20.0},
        {"event": "valid", "step": 400, "minutes": 3.0, "nll": 3.5, "bleu": bleu, "chrf": 25.0},
    ]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (folder / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config or {}))
    if hypotheses is not None:
        (folder / "hyps").mkdir()
        text = "\n".join(hypotheses) + "\n"
        (folder / "hyps" / "test.txt.xz").write_bytes(lzma.compress(text.encode("utf-8")))
    return folder
