"""SIGTERM (what SLURM, docker stop and systemd send) takes Ctrl-C's path: a real signal to a
real ``train.py`` process finishes the update, writes last.pt, prints the resume command and
exits 143; resuming continues from there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
from helpers.toy_train import TOY_OVERRIDES

from attnmt.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
TOY = [
    *TOY_OVERRIDES,
    "trainer.log_every_steps=1",
    "trainer.val_every_steps=1000",
    "trainer.max_tokens=256",
]


def _train(tmp_path: Path, run: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = [*TOY, f"data.root={tmp_path / 'data'}", f"hydra.run.dir={run}", *extra]
    return subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_step(log: Path, step: int, proc: subprocess.Popen[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.is_file() and f"step {step} |" in log.read_text(encoding="utf-8"):
            return
        if proc.poll() is not None:
            raise AssertionError(f"train.py ended early: {proc.communicate()[1][-2000:]}")
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"no step {step} within {timeout} s")


def test_sigterm_saves_last_prints_resume_and_exits_143(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = _train(tmp_path, run, "trainer.max_steps=100000")
    _wait_for_step(run / "train.log", 3, proc, timeout=240)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    assert "Traceback" not in err
    assert f"continue with resume={run}" in err
    last = load_checkpoint(run / "checkpoints" / "last.pt")
    stopped = last.step
    assert stopped >= 3
    log = (run / "train.log").read_text(encoding="utf-8")
    assert "SIGTERM: stopping after this update" in log
    assert f"step {stopped + 1} |" not in log  # no update after the one in flight

    # resume from the saved state: it goes on from the step it stopped at
    proc = _train(tmp_path, tmp_path / "run2", f"resume={run}", f"trainer.max_steps={stopped + 2}")
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-2000:]
    resumed = load_checkpoint(run / "checkpoints" / "last.pt")
    assert resumed.step == stopped + 2
    assert not torch.equal(resumed.weights["out_proj.weight"], last.weights["out_proj.weight"])
