"""experiments/die_with_parent.py: a runner's child stops when the runner is killed outright."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from experiments import die_with_parent

ROOT = Path(__file__).resolve().parents[1]
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")

CHILD = """
import signal, sys, time
from pathlib import Path
out = Path(sys.argv[1])
def stop(signum, frame):
    (out / "stopped").write_text(signal.Signals(signum).name)
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
(out / "started").write_text("")
time.sleep(60)
(out / "timed_out").write_text("")
"""


def _wait_for(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return False


def _runner(tmp_path: Path, wrapped: bool) -> subprocess.Popen[bytes]:
    """A runner that starts the child (through die_with_parent or not) and waits on it."""
    (tmp_path / "child.py").write_text(CHILD)
    launch = "die_with_parent.command(cmd)" if wrapped else "cmd"
    code = textwrap.dedent(
        f"""
        import subprocess, sys
        from experiments import die_with_parent
        cmd = [sys.executable, {str(tmp_path / "child.py")!r}, {str(tmp_path)!r}]
        child = subprocess.Popen({launch}, start_new_session=True)
        print(child.pid, flush=True)
        child.wait()
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, env=os.environ.copy()
    )


@linux_only
@pytest.mark.parametrize("wrapped", [True, False], ids=["through die_with_parent", "bare"])
def test_a_child_gets_sigterm_when_its_runner_is_killed(tmp_path: Path, wrapped: bool) -> None:
    runner = _runner(tmp_path, wrapped)
    assert runner.stdout is not None
    child_pid = int(runner.stdout.readline())
    try:
        assert _wait_for(tmp_path / "started", 20), "the child did not start"
        runner.send_signal(signal.SIGKILL)  # no handler runs: only the kernel can tell it
        runner.wait(timeout=10)
        stopped = _wait_for(tmp_path / "stopped", 10 if wrapped else 2)  # wrapped: ~0.1 s
        if wrapped:
            assert stopped and (tmp_path / "stopped").read_text() == "SIGTERM"
        else:  # without it the child trains on, orphaned (what the module is for)
            assert not stopped
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child_pid, signal.SIGKILL)


@linux_only
def test_a_child_whose_runner_is_already_gone_is_not_started(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    cmd = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    # the module's parent is this test process, not pid 1: as if its runner had died and
    # the module had been adopted before it could ask for the signal
    done = subprocess.run(
        [sys.executable, "-m", "experiments.die_with_parent", "1", *cmd], cwd=ROOT
    )
    assert done.returncode == 143 and not marker.exists()


def test_the_command_names_this_process_as_the_runner() -> None:
    cmd = die_with_parent.command(["python", "train.py", "seed=1"])
    assert cmd[1:4] == ["-m", "experiments.die_with_parent", str(os.getpid())]
    assert cmd[4:] == ["python", "train.py", "seed=1"]


def test_a_bad_command_line_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert die_with_parent.main(["not-a-pid", "true"]) == 2
    assert die_with_parent.main(["123"]) == 2
    assert "usage" in capsys.readouterr().err
