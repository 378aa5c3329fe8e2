"""``make tensorboard`` serves a short run's ``val/bleu`` through TensorBoard's HTTP data API.

A few training steps on toy_reverse (one validation) write ``outputs/<date>/<time>/``
under a temporary directory; the command of the Makefile's ``tensorboard`` target then
serves that ``outputs/`` on a free port of 127.0.0.1 and the test reads the scalar back:

* ``GET /data/plugin/scalars/tags``  -> ``{run: {tag: {...}}}``
* ``GET /data/plugin/scalars/scalars?run=RUN&tag=val/bleu`` -> ``[[wall_time, step, value]]``

(routes of tensorboard/plugins/scalar/scalars_plugin.py, prefixed with ``/data/plugin/scalars``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
VENV = ROOT / ".venv"
STEPS = 12


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read().decode())


def make_tensorboard_command() -> str:
    """The shell line ``make tensorboard`` runs (dry run), with this checkout's venv."""
    proc = subprocess.run(
        ["make", "-n", "-s", "tensorboard", f"VENV={VENV}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    lines = [ln for ln in proc.stdout.splitlines() if "tensorboard --logdir" in ln]
    assert len(lines) == 1, proc.stdout
    return lines[0]


def short_run(outputs: Path, data_root: Path) -> dict[str, Any]:
    from attnmt.train.loop import train

    overrides = [
        "data=toy_reverse",
        f"data.root={data_root}",
        "data.toy.train=300",
        "data.toy.valid=12",
        "data.toy.test=4",
        "model=transformer_tiny",
        "device=cpu",
        f"trainer.max_steps={STEPS}",
        "trainer.max_tokens=400",
        "trainer.warmup_steps=4",
        f"trainer.val_every_steps={STEPS}",
        "trainer.val_every_epoch=false",
        "trainer.num_heatmaps=1",
        "trainer.num_samples=1",
        "trainer.time_budget_min=0",
        "trainer.test=false",
        "trainer.progress_bar=false",
    ]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    run_dir = outputs / "2026-01-01" / "00-00-00"  # the layout of hydra.run.dir
    return train(cfg, run_dir)


def tail(log: Path, chars: int = 2000) -> str:
    """The end of the server's log, for a failure message."""
    return log.read_text(encoding="utf-8", errors="replace")[-chars:]


def wait_for_scalar(
    base: str, tag: str, deadline: float, proc: subprocess.Popen[bytes], log: Path
) -> tuple[str, list[list[float]]]:
    """Poll the tags route until some run has ``tag``; then that run's scalars. A server that
    exits fails the test at once, with the end of its ``log``."""
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"tensorboard exited with {proc.returncode}:\n{tail(log)}")
        try:
            tags = get_json(f"{base}/data/plugin/scalars/tags")
            runs = [run for run, run_tags in tags.items() if tag in run_tags]
            if runs:
                query = urllib.parse.urlencode({"run": runs[0], "tag": tag})
                return runs[0], get_json(f"{base}/data/plugin/scalars/scalars?{query}")
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError) as e:
            last_error = e
        time.sleep(0.5)
    raise AssertionError(f"tensorboard never served {tag} (last error: {last_error}):\n{tail(log)}")


@pytest.mark.slow
def test_make_tensorboard_serves_val_bleu(tmp_path: Path) -> None:
    if not (VENV / "bin" / "tensorboard").is_file():  # e.g. a GPU host's image, no make setup
        pytest.skip(f"make tensorboard runs {VENV}/bin/tensorboard, absent here (make setup)")
    command = make_tensorboard_command()
    assert "--host 127.0.0.1" in command and "--logdir outputs" in command

    result = short_run(tmp_path / "outputs", tmp_path / "data")
    assert result["step"] == STEPS
    expected = float(result["best_val_bleu"])
    assert 0.0 <= expected <= 100.0

    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    log_path = tmp_path / "tensorboard.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        cwd=tmp_path,  # so that `--logdir outputs` is the temporary outputs/
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        run, values = wait_for_scalar(
            f"http://127.0.0.1:{port}", "val/bleu", time.monotonic() + 120, proc, log_path
        )
        assert run == "2026-01-01/00-00-00"  # the run directory itself, no /tensorboard
        assert len(values) == 1
        _wall_time, step, value = values[0]
        assert step == STEPS
        assert value == pytest.approx(expected, abs=1e-4)
        tags = get_json(f"http://127.0.0.1:{port}/data/plugin/scalars/tags")[run]
        assert {"train/nll", "train/loss_smoothed", "train/lr", "val/nll", "val/chrf"} <= set(tags)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)
        log.close()
    assert proc.returncode is not None
