"""k-best bookkeeping, RNG state round trip, resume targets, weights_only loading."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmt.checkpoint import (
    FORMAT,
    CheckpointManager,
    latest_checkpoint,
    load_checkpoint,
    resolve_checkpoint,
    resume_target,
    run_dir_of,
)
from attnmt.errors import CheckpointError
from attnmt.train.state import rng_state, set_rng_state


def _payload(step: int) -> dict:
    return {
        "format": FORMAT,
        "model_name": "transformer",
        "model_config": {"name": "transformer"},
        "vocab": {"src_size": 8, "tgt_size": 8, "joint": True},
        "model": {"w": torch.full((2,), float(step))},
        "tokenizer": {"spm.model": b"\x00\x01"},
        "config": {"seed": 1},
        "step": step,
        "rng": rng_state(),
    }


def test_k_best_keeps_top_k_sorted_and_deletes_the_rest(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path, keep_best=2)
    assert mgr.save_if_best(_payload(10), 10, 5.0)
    assert mgr.save_if_best(_payload(20), 20, 7.0)
    assert not mgr.save_if_best(_payload(30), 30, 4.0)  # worse than both: not written
    assert not (tmp_path / "best-30.pt").exists()
    assert mgr.save_if_best(_payload(40), 40, 6.0)  # evicts best-10 (5.0)
    assert not (tmp_path / "best-10.pt").exists()
    entries = json.loads((tmp_path / "best.json").read_text())
    assert [(e["file"], e["step"], e["val_bleu"]) for e in entries] == [
        ("best-20.pt", 20, 7.0),
        ("best-40.pt", 40, 6.0),
    ]
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["best-20.pt", "best-40.pt"]
    assert mgr.best_path() == tmp_path / "best-20.pt"
    # a tie does not displace the earlier checkpoint
    assert not mgr.save_if_best(_payload(50), 50, 6.0)
    # a new manager over the same directory picks the list up (resume)
    again = CheckpointManager(tmp_path, keep_best=2)
    assert [e["step"] for e in again.best] == [20, 40]


def test_keep_best_zero_writes_no_best(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path, keep_best=0)
    assert not mgr.save_if_best(_payload(1), 1, 99.0)
    mgr.save_last(_payload(1))
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


def test_checkpoints_load_with_weights_only(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path, keep_best=1)
    mgr.save_last(_payload(3))
    mgr.save_if_best(_payload(3), 3, 1.0)
    for name in ("last.pt", "best-3.pt"):
        raw = torch.load(tmp_path / name, weights_only=True)
        assert raw["step"] == 3 and torch.equal(raw["model"]["w"], torch.full((2,), 3.0))
        assert load_checkpoint(tmp_path / name)["tokenizer"] == {"spm.model": b"\x00\x01"}


def test_rng_state_round_trip_through_a_weights_only_file(tmp_path: Path) -> None:
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    torch.save({"rng": rng_state()}, tmp_path / "rng.pt")
    expected = (random.random(), float(np.random.rand()), torch.rand(3))
    random.seed(9)
    np.random.seed(9)
    torch.manual_seed(9)
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True)["rng"])
    got = (random.random(), float(np.random.rand()), torch.rand(3))
    assert got[0] == expected[0] and got[1] == expected[1]
    assert torch.equal(got[2], expected[2])


def test_resume_targets(tmp_path: Path) -> None:
    old = tmp_path / "outputs" / "2026-01-01" / "10-00-00"
    new = tmp_path / "outputs" / "2026-01-02" / "09-00-00"
    for run in (old, new):
        CheckpointManager(run / "checkpoints").save_last(_payload(1))
    current = tmp_path / "outputs" / "2026-01-03" / "08-00-00"
    assert resume_target(None, tmp_path / "outputs", current) is None
    latest = latest_checkpoint(tmp_path / "outputs")
    assert latest is not None and latest.parent.parent in (old, new)
    assert resume_target("auto", tmp_path / "outputs", current) == latest
    assert resume_target(str(old), tmp_path, current) == old / "checkpoints" / "last.pt"
    assert run_dir_of(old / "checkpoints" / "last.pt") == old
    with pytest.raises(CheckpointError, match="resume="):
        resume_target(str(tmp_path / "nowhere"), tmp_path, current)


@pytest.mark.parametrize(
    "text",
    ["{not json", '{"file": "best-5.pt"}', '[{"bleu": 3.0}]', "[1, 2]", '[{"file": 7}]'],
)
def test_malformed_best_json_falls_back_to_last(tmp_path: Path, text: str, caplog) -> None:  # type: ignore[no-untyped-def]
    manager = CheckpointManager(tmp_path / "checkpoints")
    manager.save_last(_payload(1))
    (tmp_path / "checkpoints" / "best.json").write_text(text)
    assert resolve_checkpoint(tmp_path) == tmp_path / "checkpoints" / "last.pt"
    assert "best.json" in caplog.text


def test_run_dir_resolves_to_the_best_listed_checkpoint_that_exists(tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoints"
    CheckpointManager(ckpt).save_last(_payload(1))
    (ckpt / "best-9.pt").write_bytes((ckpt / "last.pt").read_bytes())
    (ckpt / "best.json").write_text('[{"file": "best-12.pt"}, {"file": "best-9.pt"}]')
    assert resolve_checkpoint(tmp_path) == ckpt / "best-9.pt"
    assert resolve_checkpoint(ckpt) == ckpt / "best-9.pt"


def test_resuming_a_checkpoint_without_training_state_says_what_to_do() -> None:
    from attnmt.train.state import restore

    averaged = {"model": {}, "step": 3, "averaged_from": ["a.pt", "b.pt"]}
    with pytest.raises(CheckpointError, match=r"averaged checkpoint\): evaluate it"):
        restore(None, averaged, {})  # type: ignore[arg-type]  # refused before touching parts


@pytest.mark.parametrize("text", ["{not json", '[{"bleu": 3.0}]', '{"file": "a.pt"}'])
def test_manager_starts_a_fresh_k_best_list_over_a_malformed_best_json(
    tmp_path: Path, text: str, caplog
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "best.json").write_text(text)
    manager = CheckpointManager(tmp_path, keep_best=2)
    assert manager.best == [] and "not a valid best.json list" in caplog.text
    assert manager.save_if_best(_payload(4), 4, 10.0)
    assert [e["file"] for e in json.loads((tmp_path / "best.json").read_text())] == ["best-4.pt"]


def test_read_best_json_names_the_file_and_the_expected_shape(tmp_path: Path) -> None:
    from attnmt.checkpoint import read_best_json

    best = tmp_path / "best.json"
    assert read_best_json(best) == []  # absent: no best checkpoints yet
    best.write_text('[{"file": 3}]')
    with pytest.raises(
        CheckpointError, match=r'best.json is not a valid best.json list: expected \[\{"file"'
    ):
        read_best_json(best)
    best.write_text('[{"file": "best-3.pt", "step": 3}]')
    assert read_best_json(best) == [{"file": "best-3.pt", "step": 3}]
