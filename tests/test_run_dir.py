"""A run directory belongs to one run: a new run refuses another run's checkpoints, a
second process on a locked directory fails at once, a dead owner's lock is taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.toy_train import toy_train_config

from attnmt.checkpoint import load_checkpoint
from attnmt.errors import ConfigError
from attnmt.train import run_lock
from attnmt.train.loop import train


def _cfg(data: Path, *overrides: str):
    return toy_train_config(data, "trainer.max_steps=2", "trainer.val_every_steps=2", *overrides)


def test_a_new_run_refuses_a_directory_holding_another_runs_checkpoints(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    train(_cfg(tmp_path / "data"), run)
    before = {p.name: p.stat().st_mtime_ns for p in (run / "checkpoints").iterdir()}
    with pytest.raises(ConfigError, match=rf"run folder {run} already holds .*resume={run}"):
        train(_cfg(tmp_path / "data", "seed=2"), run)
    after = {p.name: p.stat().st_mtime_ns for p in (run / "checkpoints").iterdir()}
    assert after == before  # nothing touched
    assert not (run / run_lock.LOCK_NAME).exists()  # released on the way out
    # resuming the same run is what the directory is for
    result = train(_cfg(tmp_path / "data", f"resume={run}", "trainer.max_steps=4"), run)
    assert result["step"] == 4


def test_a_locked_directory_fails_at_once_naming_the_owner(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = {"pid": owner.pid, "host": socket.gethostname(), "since": 0}
        (run / run_lock.LOCK_NAME).write_text(json.dumps(lock))
        with pytest.raises(ConfigError, match=rf"another training \(pid {owner.pid} on"):
            train(_cfg(tmp_path / "data"), run)
        assert not (run / "checkpoints").exists()
        assert json.loads((run / run_lock.LOCK_NAME).read_text())["pid"] == owner.pid
    finally:
        owner.kill()
        owner.wait()


def test_a_dead_owners_lock_is_taken_over_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (run / run_lock.LOCK_NAME).write_text(
        json.dumps({"pid": dead.pid, "host": socket.gethostname(), "since": 0})
    )
    result = train(_cfg(tmp_path / "data"), run)
    assert result["step"] == 2
    assert "has ended; taking it over" in caplog.text
    assert not (run / run_lock.LOCK_NAME).exists()


def test_lock_is_exclusive_and_released_only_by_its_owner(tmp_path: Path) -> None:
    held = run_lock.acquire(tmp_path)
    assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
    with pytest.raises(ConfigError, match="another training"):
        run_lock.acquire(tmp_path)
    held.release()
    assert not (tmp_path / ".lock").exists()
    again = run_lock.acquire(tmp_path)
    (tmp_path / ".lock").write_text(json.dumps({"pid": 1, "host": "elsewhere", "since": 0}))
    again.release()  # not ours any more: left alone
    assert (tmp_path / ".lock").exists()
    with pytest.raises(ConfigError, match="a training on host elsewhere"):
        run_lock.acquire(tmp_path)


def test_two_trainings_started_at_once_on_one_directory(tmp_path: Path) -> None:
    """Seed 1 and seed 2 into one hydra.run.dir: exactly one trains, the other fails at
    once with the lock's message; the checkpoints hold the winner's seed."""
    data = tmp_path / "data"
    train(_cfg(data), tmp_path / "warm")  # prepare the corpus once
    run = tmp_path / "shared"
    code = (
        "import sys; sys.path.insert(0, 'tests');"
        "from helpers.toy_train import toy_train_config; from attnmt.train.loop import train;"
        "from attnmt.errors import AttnmtError\n"
        "try:\n"
        f"    train(toy_train_config({str(data)!r}, 'trainer.max_steps=30',"
        "'trainer.val_every_steps=30', f'seed={sys.argv[1]}'), " + repr(str(run)) + ")\n"
        "except AttnmtError as e:\n    print(e); sys.exit(2)\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, s], stdout=subprocess.PIPE, text=True)
        for s in ("1", "2")
    ]
    outs = [(p.communicate()[0], p.returncode) for p in procs]
    codes = sorted(rc for _, rc in outs)
    assert codes == [0, 2], outs
    loser = next(out for out, rc in outs if rc == 2)
    assert "another training" in loser or "already holds a run's checkpoints" in loser
    winner_seed = 1 if outs[0][1] == 0 else 2
    assert load_checkpoint(run / "checkpoints" / "last.pt").config["seed"] == winner_seed


def test_train_py_refuses_another_runs_directory_before_hydra_touches_it(
    tmp_path: Path,
) -> None:
    """Hydra creates hydra.run.dir and opens its train.log before the task runs: train.py's
    Hydra callback refuses an owned directory first, so the old run's files stay as they
    were (tests/test_run_folder.py: interpolated folders, live owners, sweeps)."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.pt").write_bytes(b"old")
    (run / ".hydra").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text("- model=transformer\n")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, str(root / "train.py"), f"hydra.run.dir={run}", "seed=2"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 2 and "already holds a run's checkpoints" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (run / ".hydra" / "overrides.yaml").read_text() == "- model=transformer\n"
    assert sorted(p.name for p in run.iterdir()) == [".hydra", "checkpoints"]
