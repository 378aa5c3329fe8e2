"""Plant a synthetic-task run record (results/<study>/<run>/, as experiments/sweep.py
``--record`` and evaluate.py's ``out_dir=.../eval/test`` leave it) for the alignment tests."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

LUONG = ("data=toy_align", "trainer.max_steps=1200", "model=rnn_luong")


def plant(
    results: Path,
    study: str,
    overrides: tuple[str, ...],
    seed: int,
    aer: float,
    *,
    bleu: float = 99.0,
    updates: int = 1200,
    entropy: float | None = 0.1,
) -> Path:
    """A finished run of ``overrides`` + ``seed=S`` under ``results``/``study``/; its test
    AER ``aer`` (precision and recall 1 - aer), BLEU ``bleu``, last entropy ``entropy``."""
    folder = results / study / f"run-{len(list((results / study).glob('*')))}"
    (folder / ".hydra").mkdir(parents=True)
    (folder / "eval" / "test").mkdir(parents=True)
    summary = {
        "format": "attnmt-run-summary",
        "version": 1,
        "status": "finished",
        "step": updates,
        "seed": seed,
        "machine": {"cpu": {"name": "Toy CPU"}, "torch_version": "2.0", "threads": 1},
        "commit": "abc1234",
    }
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    last = {"event": "valid", "step": updates, "nll": 0.1, "bleu": bleu}
    if entropy is not None:
        last["attention_entropy_norm"] = {"cross": entropy}
    (folder / "metrics.jsonl").write_text(json.dumps(last) + "\n", encoding="utf-8")
    (folder / ".hydra" / "overrides.yaml").write_text(
        yaml.safe_dump([*overrides, f"seed={seed}"]), encoding="utf-8"
    )
    entry = {"beam": 1, "bleu": bleu, "aer": aer, "aer_precision": 1 - aer, "aer_recall": 1 - aer}
    (folder / "eval" / "test" / "scores.json").write_text(
        json.dumps({"best-test-beam1": entry}), encoding="utf-8"
    )
    return folder
