"""k-best bookkeeping, RNG state round trip, resume targets, weights_only loading, and
recovery: unreadable checkpoints skipped for the next, no unsafe advice, stale temporary
files removed, runs without checkpoints passed over."""

from __future__ import annotations

import json
import logging
import os
import pickle
import random
import shlex
import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmt.checkpoint import (
    CheckpointManager,
    auto_resume_candidates,
    evaluation_candidates,
    load_checkpoint,
    load_first_readable,
    load_resolved,
    load_resume,
    remove_stale_tmp,
    save_checkpoint,
)
from attnmt.checkpoint_format import Checkpoint, VocabInfo
from attnmt.errors import CheckpointError
from attnmt.run_dir import RunDir
from attnmt.train.rng import rng_state, set_rng_state


def _payload(step: int, **metrics: float) -> Checkpoint:
    return Checkpoint(
        model_name="transformer",
        model_config={"name": "transformer"},
        vocab=VocabInfo(8, 8, True),
        weights={"w": torch.full((2,), float(step))},
        tokenizer={"spm.model": b"\x00\x01"},
        config={"seed": 1},
        step=step,
        metrics=dict(metrics),
        extra={"rng": rng_state()},
    )


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
        assert load_checkpoint(tmp_path / name).tokenizer == {"spm.model": b"\x00\x01"}


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
    assert load_resume(None, tmp_path / "outputs", current) == (None, None)
    latest = auto_resume_candidates(tmp_path / "outputs")[0]
    assert latest.parent.parent in (old, new)
    assert load_resume("auto", tmp_path / "outputs", current)[0] == latest
    assert load_resume(str(old), tmp_path, current)[0] == old / "checkpoints" / "last.pt"
    assert RunDir.of_checkpoint(old / "checkpoints" / "last.pt") == RunDir(old)
    with pytest.raises(CheckpointError, match="resume="):
        load_resume(str(tmp_path / "nowhere"), tmp_path, current)


@pytest.mark.parametrize(
    "text",
    ["{not json", '{"file": "best-5.pt"}', '[{"bleu": 3.0}]', "[1, 2]", '[{"file": 7}]'],
)
def test_malformed_best_json_falls_back_to_last(tmp_path: Path, text: str, caplog) -> None:  # type: ignore[no-untyped-def]
    manager = CheckpointManager(tmp_path / "checkpoints")
    manager.save_last(_payload(1))
    (tmp_path / "checkpoints" / "best.json").write_text(text)
    assert evaluation_candidates(tmp_path)[0] == tmp_path / "checkpoints" / "last.pt"
    assert "best.json" in caplog.text


def test_a_missing_best_checkpoint_is_named_and_the_newest_is_used(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    ckpt = tmp_path / "checkpoints"
    CheckpointManager(ckpt).save_last(_payload(1))
    (ckpt / "best-9.pt").write_bytes((ckpt / "last.pt").read_bytes())
    (ckpt / "best.json").write_text('[{"file": "best-9.pt"}, {"file": "best-7.pt"}]')
    assert evaluation_candidates(tmp_path)[0] == ckpt / "best-9.pt"
    (ckpt / "best.json").write_text('[{"file": "best-12.pt"}, {"file": "best-9.pt"}]')
    # best-12.pt is gone: the newer last.pt, not the older, worse best-9.pt
    assert evaluation_candidates(tmp_path) == [ckpt / "last.pt", ckpt / "best-9.pt"]
    assert evaluation_candidates(ckpt)[0] == ckpt / "last.pt"
    assert f"lists {ckpt / 'best-12.pt'} but it is missing" in caplog.text


def test_resuming_a_checkpoint_without_training_state_says_what_to_do() -> None:
    from attnmt.train.checkpointing import restore
    from attnmt.train.state import TrainState

    averaged = replace(_payload(3), averaged_from=["a.pt", "b.pt"])
    with pytest.raises(CheckpointError, match=r"averaged checkpoint\): evaluate it"):
        restore(None, averaged, TrainState())  # type: ignore[arg-type]  # refused before parts


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


# ---- recovery ----------------------------------------------------------------------------


def _truncate(path: Path) -> Path:
    """Cut ``path`` to half its size, as a write killed by a full disk or a bad copy leaves it."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _run(root: Path, *steps: int, last: int | None = None) -> Path:
    """``root/checkpoints`` with best-<step>.pt for ``steps`` and last.pt at ``last``."""
    ckpt = root / "checkpoints"
    for step in steps:
        save_checkpoint(_payload(step), ckpt / f"best-{step}.pt")
    if last is not None:
        save_checkpoint(_payload(last), ckpt / "last.pt")
    return root


class _RunsCode:
    """Unpickled without weights_only, this calls ``call(*args)``: a file that would run code."""

    def __init__(self, call: object, *args: object) -> None:
        self.call, self.args = call, args

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (self.call, self.args)


# torch's advice in its own load errors, which must never reach the user
UNSAFE_ADVICE = ("weights_only", "set to `False`", "can still be loaded", "trust", "safe_globals")


def test_resume_of_a_run_skips_an_unreadable_last_pt_for_the_newest_readable_best(
    tmp_path: Path, caplog
) -> None:  # type: ignore[no-untyped-def]
    run = _run(tmp_path / "run", 10, 20, 30, last=40)
    ckpt = run / "checkpoints"
    _truncate(ckpt / "last.pt")
    _truncate(ckpt / "best-30.pt")
    path, payload = load_resume(str(run), tmp_path, tmp_path / "new")
    assert path == ckpt / "best-20.pt" and payload is not None and payload.step == 20
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2  # one per skipped file, each naming it and why
    assert str(ckpt / "last.pt") in warned[0] and "corrupt" in warned[0]
    assert str(ckpt / "best-30.pt") in warned[1] and "trying" in warned[1]
    # resume=<run>/checkpoints offers the same files
    assert load_resume(str(ckpt), tmp_path, tmp_path / "new")[0] == ckpt / "best-20.pt"
    # nothing to skip: last.pt, the newest state, not the best one
    fine = _run(tmp_path / "fine", 10, last=12)
    assert load_resume(str(fine), tmp_path, tmp_path / "new")[0] == fine / "checkpoints/last.pt"


def test_resume_auto_falls_back_to_an_older_run_and_names_every_file_when_none_reads(
    tmp_path: Path, caplog
) -> None:  # type: ignore[no-untyped-def]
    outputs = tmp_path / "outputs"
    old = _run(outputs / "2026-01-01" / "10-00-00", 5, last=6)
    new = _run(outputs / "2026-01-02" / "09-00-00", last=9)
    os.utime(old / "checkpoints" / "best-5.pt", (1e9, 1e9))
    os.utime(old / "checkpoints" / "last.pt", (1e9, 1e9))
    _truncate(new / "checkpoints" / "last.pt")
    current = outputs / "2026-01-03" / "08-00-00"
    assert auto_resume_candidates(outputs)[0] == new / "checkpoints" / "last.pt"
    path, payload = load_resume("auto", outputs, current)
    assert path == old / "checkpoints" / "last.pt" and payload and payload.step == 6
    assert str(new / "checkpoints" / "last.pt") in caplog.text
    # the current run's own directory is never resumed by resume=auto
    with pytest.raises(CheckpointError) as info:
        load_resume("auto", outputs, old)  # only the broken run is left
    assert str(new / "checkpoints" / "last.pt") in str(info.value)
    for name in ("last.pt", "best-5.pt"):
        _truncate(old / "checkpoints" / name)
    with pytest.raises(CheckpointError) as info:
        load_resume("auto", outputs, current)
    message = str(info.value)
    assert "no readable checkpoint in resume=auto" in message and "tried 3 file(s)" in message
    tried = [
        new / "checkpoints/last.pt",
        old / "checkpoints/last.pt",
        old / "checkpoints/best-5.pt",
    ]
    assert all(f"cannot read checkpoint {f}" in message for f in tried)
    assert "drop resume=auto to start afresh" in message


def test_an_explicitly_named_file_is_not_replaced_by_another(tmp_path: Path) -> None:
    run = _run(tmp_path / "run", 10, last=11)
    last = _truncate(run / "checkpoints" / "last.pt")
    with pytest.raises(CheckpointError, match=f"cannot read checkpoint {last}"):
        load_resume(str(last), tmp_path, tmp_path / "new")
    best = _truncate(run / "checkpoints" / "best-10.pt")
    with pytest.raises(CheckpointError, match=f"cannot read checkpoint {best}"):
        load_resolved(best)
    assert load_resume(None, tmp_path, tmp_path / "new") == (None, None)
    assert load_resume("auto", tmp_path / "no-outputs", tmp_path / "new") == (None, None)


def test_evaluating_a_run_takes_the_best_then_the_newest_past_unreadable_files(
    tmp_path: Path, caplog
) -> None:  # type: ignore[no-untyped-def]
    run = _run(tmp_path / "run", 10, 20, last=25)
    ckpt = run / "checkpoints"
    (ckpt / "best.json").write_text('[{"file": "best-20.pt"}, {"file": "best-10.pt"}]')
    assert load_resolved(run)[0] == ckpt / "best-20.pt"
    _truncate(ckpt / "best-20.pt")
    path, payload = load_resolved(run)  # the newest state, not the older best-10.pt
    assert path == ckpt / "last.pt" and payload.step == 25
    assert f"skipping {ckpt / 'best-20.pt'}" in caplog.text
    _truncate(ckpt / "last.pt")
    assert load_resolved(ckpt)[0] == ckpt / "best-10.pt"
    _truncate(ckpt / "best-10.pt")
    with pytest.raises(CheckpointError, match=r"tried 3 file\(s\)") as info:
        load_resolved(run)
    assert all(str(ckpt / n) in str(info.value) for n in ("best-20.pt", "best-10.pt", "last.pt"))


def test_load_first_readable_names_every_file_tried(tmp_path: Path) -> None:
    good = save_checkpoint(_payload(2), tmp_path / "good.pt")
    bad = _truncate(save_checkpoint(_payload(1), tmp_path / "bad.pt"))
    missing = tmp_path / "gone.pt"
    assert load_first_readable([bad, missing, good])[0] == good
    with pytest.raises(CheckpointError) as info:
        load_first_readable([bad, missing], where="here", advice="do this")
    text = str(info.value)
    assert text.startswith("no readable checkpoint in here: tried 2 file(s)")
    assert f"cannot read checkpoint {bad}" in text and f"checkpoint not found: {missing}" in text
    assert text.endswith("do this")


@pytest.mark.parametrize("how", ["exec", "os.system"])
def test_a_file_that_would_run_code_is_refused_without_unsafe_advice(
    tmp_path: Path, how: str
) -> None:
    marker = tmp_path / "ran.txt"
    if how == "exec":
        code = _RunsCode(exec, f"open({str(marker)!r}, 'w').write('ran')")
    else:
        code = _RunsCode(os.system, f"echo ran > {shlex.quote(str(marker))}")
    payload = {**_payload(1).to_dict(), "extra": code}
    evil = tmp_path / "evil.pt"
    torch.save(payload, evil)
    raw = tmp_path / "evil-raw.pt"  # a plain pickle, not torch's zip format
    raw.write_bytes(pickle.dumps(payload, protocol=2))
    # it really runs code when loaded unsafely
    torch.load(evil, weights_only=False)
    assert marker.read_text().strip() == "ran"
    marker.unlink()
    for path in (evil, raw):
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(path)
        message = str(info.value)
        assert f"cannot read checkpoint {path}" in message
        assert not [advice for advice in UNSAFE_ADVICE if advice in message]
        assert "more than tensors and plain data" in message
        assert not marker.exists()


def test_a_truncated_file_is_reported_without_unsafe_advice(tmp_path: Path) -> None:
    bad = _truncate(save_checkpoint(_payload(1), tmp_path / "last.pt"))
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    for path in (bad, empty):
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(path)
        message = str(info.value)
        assert f"cannot read checkpoint {path}: it is corrupt" in message
        assert not [advice for advice in UNSAFE_ADVICE if advice in message]
        assert "use another checkpoint" in message
        assert ("the file is empty" in message) == (path == empty)


@pytest.mark.parametrize(
    "text",
    [  # torch 2.3-2.5 and 2.6+ wordings: the reason is kept, torch's advice is not
        "Weights only load failed. Re-running `torch.load` with `weights_only` set to `False` "
        "will likely succeed, but it can result in arbitrary code execution. Do it only if you "
        "got the file from a trusted source. Please file an issue with the following so that "
        "we can make `weights_only=True` compatible with your use case: WeightsUnpickler error: "
        "Unsupported global: GLOBAL posix.system was not an allowed global by default. Please "
        "use `torch.serialization.add_safe_globals([system])` to allowlist this global.",
        "Weights only load failed. In PyTorch 2.6, we changed the default value of the "
        "`weights_only` argument in `torch.load` from `False` to `True`. Re-running "
        "`torch.load` with `weights_only` set to `False` will likely succeed, but it can "
        "result in arbitrary code execution.\n\nUnsupported global: GLOBAL posix.system was "
        "not an allowed global by default. Please use `torch.serialization.safe_globals([x])`.",
    ],
)
def test_torch_advice_is_dropped_from_any_torch_version_s_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    import attnmt.checkpoint as checkpoint

    def refuse(*args: object, **kwargs: object) -> None:
        raise pickle.UnpicklingError(text)

    monkeypatch.setattr(checkpoint.torch, "load", refuse)
    (tmp_path / "x.pt").write_bytes(b"x")
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path / "x.pt")
    message = str(info.value)
    assert "GLOBAL posix.system was not an allowed global by default" in message
    assert not [advice for advice in (*UNSAFE_ADVICE, "False") if advice in message]


def test_stale_temporary_files_of_killed_writes_are_removed_at_start(
    tmp_path: Path, caplog
) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.INFO, logger="attnmt")
    ckpt = tmp_path / "checkpoints"
    CheckpointManager(ckpt, keep_best=2).save_if_best(_payload(3), 3, 1.0)
    stale = [ckpt / ".last.pt.k2j4h1.tmp", ckpt / ".best-7.pt.x9.tmp", ckpt / ".best.json.a8b"]
    for path in stale:
        path.write_bytes(b"half a write")
        os.utime(path, (time.time() - 60, time.time() - 60))
    fresh = ckpt / ".last.pt.q1w2e3.tmp"  # may still be written by another process
    fresh.write_bytes(b"being written")
    keep = [ckpt / "best-3.pt", ckpt / "best.json", ckpt / ".gitignore", ckpt / "notes.tmp"]
    for path in keep[2:]:
        path.write_text("mine")
        os.utime(path, (time.time() - 60, time.time() - 60))
    manager = CheckpointManager(ckpt, keep_best=2)
    assert [e["file"] for e in manager.best] == ["best-3.pt"]
    assert not any(p.exists() for p in stale)
    assert fresh.exists() and all(p.exists() for p in keep)
    assert all(str(p) in caplog.text for p in stale) and str(fresh) not in caplog.text
    assert remove_stale_tmp(ckpt, min_age_s=0) == [fresh]
    assert remove_stale_tmp(tmp_path / "absent") == []


def test_resume_auto_passes_over_runs_without_a_checkpoint(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    done = _run(outputs / "2026-01-01" / "10-00-00", 4, last=5)
    os.utime(done / "checkpoints" / "last.pt", (1e9, 1e9))
    os.utime(done / "checkpoints" / "best-4.pt", (1e9, 1e9))
    empty = outputs / "2026-01-02" / "09-00-00"  # killed before its first checkpoint
    (empty / "checkpoints").mkdir(parents=True)
    (empty / "train.log").write_text("started")
    killed = outputs / "2026-01-03" / "08-00-00"  # killed during its first write
    (killed / "checkpoints").mkdir(parents=True)
    (killed / "checkpoints" / ".last.pt.abc123.tmp").write_bytes(b"PK\x03\x04 half")
    current = outputs / "2026-01-04" / "07-00-00"
    assert auto_resume_candidates(outputs, exclude=current)[0] == done / "checkpoints" / "last.pt"
    path, payload = load_resume("auto", outputs, current)
    assert path == done / "checkpoints" / "last.pt" and payload and payload.step == 5
    with pytest.raises(CheckpointError, match="resume="):
        load_resume(str(killed), outputs, current)


# ---- the k best stay consistent with the files ------------------------------------------


def _scored(step: int, bleu: float) -> Checkpoint:
    """A validation checkpoint: ``_payload`` with its validation BLEU in ``metrics``."""
    return _payload(step, val_bleu=bleu)


def _listed(ckpt: Path) -> list[tuple[str, float]]:
    return [(e["file"], e["val_bleu"]) for e in json.loads((ckpt / "best.json").read_text())]


def test_a_best_that_last_pt_shows_is_recovered_when_the_run_resumes(
    tmp_path: Path, caplog
) -> None:  # type: ignore[no-untyped-def]
    ckpt = tmp_path / "checkpoints"
    manager = CheckpointManager(ckpt, keep_best=3)
    for step, bleu in ((10, 60.0), (20, 50.0), (30, 40.0)):
        manager.save_if_best(_scored(step, bleu), step, bleu)
    # killed after last.pt was replaced at step 40's validation, before best-40.pt
    save_checkpoint(_scored(40, 45.0), ckpt / "last.pt")
    resumed = CheckpointManager(ckpt, keep_best=3)
    assert _listed(ckpt) == [("best-10.pt", 60.0), ("best-20.pt", 50.0), ("best-40.pt", 45.0)]
    assert [e["file"] for e in resumed.best] == ["best-10.pt", "best-20.pt", "best-40.pt"]
    assert (ckpt / "best-40.pt").read_bytes() == (ckpt / "last.pt").read_bytes()
    assert not (ckpt / "best-30.pt").exists()  # pushed out of the 3 best, as it would have been
    assert f"recovered {ckpt / 'best-40.pt'} from last.pt" in caplog.text
    # a last.pt that is no best, or was not written at a validation, adds nothing
    for payload in (_scored(50, 1.0), _payload(60)):
        save_checkpoint(payload, ckpt / "last.pt")
        CheckpointManager(ckpt, keep_best=3)
        assert [f for f, _ in _listed(ckpt)] == ["best-10.pt", "best-20.pt", "best-40.pt"]


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"file": "best-20.pt", "step": 20}, "val_bleu"),
        ({"file": "best-20.pt", "val_bleu": 7.0}, "step"),
        ({"file": "best-20.pt", "step": 20, "val_bleu": "7.0"}, "val_bleu"),
        ({"file": "best-20.pt", "step": 20.5, "val_bleu": 7.0}, "step"),
    ],
)
def test_a_best_json_entry_without_its_scores_is_rebuilt_from_the_files(
    tmp_path: Path, entry: dict, field: str, caplog
) -> None:  # type: ignore[no-untyped-def]
    manager = CheckpointManager(tmp_path, keep_best=2)
    manager.save_if_best(_scored(10, 5.0), 10, 5.0)
    manager.save_if_best(_scored(20, 7.0), 20, 7.0)
    rows = json.loads((tmp_path / "best.json").read_text())
    assert rows[0]["file"] == entry["file"]
    (tmp_path / "best.json").write_text(json.dumps([entry, rows[1]]))
    if field in entry:  # a value of the wrong type: no best.json reader takes it
        from attnmt.checkpoint import read_best_json

        with pytest.raises(CheckpointError, match=f"entry 1 .*{field}"):
            read_best_json(tmp_path / "best.json")
    resumed = CheckpointManager(tmp_path, keep_best=2)  # was a KeyError at the next validation
    assert "entry 1 " in caplog.text and field in caplog.text
    assert [(e["file"], e["step"], e["val_bleu"]) for e in resumed.best] == [
        ("best-20.pt", 20, 7.0),
        ("best-10.pt", 10, 5.0),
    ]
    assert resumed.save_if_best(_scored(30, 6.0), 30, 6.0)
    assert _listed(tmp_path) == [("best-20.pt", 7.0), ("best-30.pt", 6.0)]
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["best-20.pt", "best-30.pt"]


def test_checkpoints_deleted_during_a_run_are_named_and_no_longer_listed(
    tmp_path: Path, caplog
) -> None:  # type: ignore[no-untyped-def]
    ckpt = tmp_path / "checkpoints"
    manager = CheckpointManager(ckpt, keep_best=2)
    manager.save_if_best(_scored(10, 5.0), 10, 5.0)
    manager.save_if_best(_scored(20, 7.0), 20, 7.0)
    manager.save_last(_scored(20, 7.0))
    shutil.rmtree(ckpt)  # e.g. a user freeing disk space while the run goes on
    assert manager.save_if_best(_scored(30, 1.0), 30, 1.0)  # the list has room again
    assert _listed(ckpt) == [("best-30.pt", 1.0)]
    warning = caplog.text
    assert "deleted while the run was going" in warning
    assert all(str(ckpt / n) in warning for n in ("best-10.pt", "best-20.pt", "last.pt"))
    caplog.clear()
    (ckpt / "best-30.pt").unlink()
    manager.save_last(_scored(31, 1.0))
    assert json.loads((ckpt / "best.json").read_text()) == []
    assert str(ckpt / "best-30.pt") in caplog.text and manager.best_path() is None


class _Killed(BaseException):
    """Stands for kill -9: nothing after it runs (no handler catches a BaseException)."""


def test_a_validation_writes_its_best_checkpoint_before_last_pt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.toy_train import toy_train_config

    from attnmt.train.loop import train

    def killed(self: CheckpointManager, checkpoint: Checkpoint) -> Path:
        raise _Killed

    monkeypatch.setattr(CheckpointManager, "save_last", killed)
    cfg = toy_train_config(
        tmp_path / "data",
        "data.toy.train=64",
        "data.toy.valid=4",
        "trainer.max_steps=2",
        "trainer.val_every_steps=2",
        "trainer.num_samples=0",
    )
    with pytest.raises(_Killed):  # killed where last.pt is written at step 2's validation
        train(cfg, tmp_path / "run")
    ckpt = tmp_path / "run" / "checkpoints"
    assert [e["file"] for e in json.loads((ckpt / "best.json").read_text())] == ["best-2.pt"]
    assert load_checkpoint(ckpt / "best-2.pt").step == 2
