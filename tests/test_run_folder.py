"""train.py's run folder (issue 32): it is claimed before anything is written into it, so a
refused run never touches another run's files; a lock knows its process (pid and start
time); ``resume=`` trains in the resumed run's folder; a sweep with failed jobs exits 2."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.toy_train import TOY_OVERRIDES

from attnmt import atomic
from attnmt.cli import run_folder
from attnmt.errors import ConfigError, WriteError
from attnmt.train import run_lock

ROOT = Path(__file__).resolve().parents[1]
TRAIN_PY = str(ROOT / "train.py")


def _toy(data: Path, *overrides: str) -> list[str]:
    """A 2-update toy training on the command line."""
    return [
        *TOY_OVERRIDES,
        f"data.root={data}",
        "data.toy.train=300",
        "data.toy.valid=8",
        "data.toy.test=8",
        "trainer.max_tokens=200",
        "trainer.max_steps=2",
        "trainer.val_every_steps=2",
        "trainer.log_every_steps=1",
        *overrides,
    ]


def _train_py(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``python train.py ARGS`` in ``cwd`` (after ``prefix``: e.g. unshare)."""
    return subprocess.run(
        [*prefix, sys.executable, TRAIN_PY, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )


def _old_run(folder: Path) -> dict[str, bytes]:
    """A run folder as an earlier training left it; returns its files' contents."""
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "last.pt").write_bytes(b"old weights")
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "config.yaml").write_text("seed: 1\n")
    (folder / ".hydra" / "overrides.yaml").write_text("- seed=1\n")
    (folder / "train.log").write_text("the old run's log\n")
    return _files(folder)


def _saved(checkpoint: Path) -> dict[str, Any]:
    """A checkpoint as written on disk (its ``step``, ``config``, ...)."""
    return torch.load(checkpoint, map_location="cpu", weights_only=True)


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


def test_an_interpolated_run_dir_holding_another_run_is_refused_untouched(
    tmp_path: Path,
) -> None:
    """``hydra.run.dir`` is resolved as Hydra resolves it (``${oc.env:...}`` included) and
    checked before Hydra writes anything: the old run's .hydra/ and train.log stay."""
    old = tmp_path / "old"
    before = _old_run(old)
    proc = _train_py(
        ["hydra.run.dir=" + str(tmp_path) + "/${oc.env:RUN_NAME}", "seed=2"],
        tmp_path,
        env={"RUN_NAME": "old"},
    )
    line = _one_line_error(proc)
    assert f"run folder {old} already holds a run's checkpoints" in line
    assert f"resume={old}" in line
    assert _files(old) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]


def test_a_live_trainings_folder_is_refused_untouched_and_the_message_says_how_to_clear(
    tmp_path: Path,
) -> None:
    """A training that holds the folder (still preparing: no checkpoint yet) keeps its
    .hydra/; the refusal names the owner and the lock file to delete if it is gone."""
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- seed=1\n")
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        lock = {"pid": owner.pid, "host": socket.gethostname(), "since": time.time()}
        (run / run_lock.LOCK_NAME).write_text(json.dumps(lock))
        before = _files(run)
        proc = _train_py(
            ["hydra.run.dir=" + str(tmp_path) + "/${oc.env:RUN_NAME}", "seed=2"],
            tmp_path,
            env={"RUN_NAME": "run"},
        )
        line = _one_line_error(proc)
        assert f"another training (pid {owner.pid} on" in line
        assert f"delete {run / run_lock.LOCK_NAME}" in line
        assert "hydra.run.dir=" not in line.split(": ", 2)[2]  # no advice about a setting
        assert _files(run) == before
    finally:
        owner.kill()
        owner.wait()


def test_overrides_that_hydra_rejects_create_no_folder(tmp_path: Path) -> None:
    for value in ("./'/x/y", "~/x"):
        proc = _train_py([f"hydra.run.dir={value}"], tmp_path)
        assert proc.returncode != 0 and "hydra.run.dir" in proc.stderr
        assert list(tmp_path.iterdir()) == [], value


def test_a_quoted_run_dir_is_the_folder_hydra_reads(tmp_path: Path) -> None:
    run = tmp_path / "a b" / "run"
    proc = _train_py([f"hydra.run.dir='{run}'", "trainer.max_tokens=-1"], tmp_path)
    assert "trainer.max_tokens must be > 0" in _one_line_error(proc)
    assert (run / "train.log").is_file() and not (run / run_lock.LOCK_NAME).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a b"]  # no junk "'" folder


def test_an_unwritable_run_dir_is_one_line_and_nothing_is_created(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = _train_py(["hydra.run.dir=" + str(blocker) + "/${now:%H}/run"], tmp_path)
    line = _one_line_error(proc)
    assert line.startswith("error: hydra.run.dir=" + str(blocker) + "/${now:%H}/run: cannot")
    assert str(blocker) in line.split(": ", 2)[2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_the_run_dir_check_keeps_a_folder_another_start_is_opening_its_log_in(
    tmp_path: Path, monkeypatch
) -> None:
    """Two train.py started at once on a new folder: while one checks that the folder can
    be written, the other's Hydra creates it (exists_ok) and then opens train.log there.
    The check must not remove the folder between the two (a raw FileNotFoundError from
    logging.config, not the loser's one-line refusal, was what CI saw)."""
    run = tmp_path / "shared"
    write = os.write

    def hydra_of_the_other_start_creates_it(fd: int, data: bytes) -> int:
        run.mkdir(parents=True, exist_ok=True)
        return write(fd, data)

    monkeypatch.setattr(atomic.os, "write", hydra_of_the_other_start_creates_it)
    run_folder._writable(run, f"hydra.run.dir={run}")
    (run / "train.log").write_text("the other start's log\n")  # its FileHandler opens it
    assert [p.name for p in run.iterdir()] == ["train.log"]  # the check's file is gone


def _can_unshare(*flags: str) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", *flags, "true"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _can_unshare("--mount"), reason="needs unshare --mount (root)")
def test_a_full_disk_under_the_run_dir_is_one_line_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    """A real full filesystem (a tmpfs in a private mount namespace): one line naming the
    setting and the folder; nothing is left on the full disk (no .hydra/, no train.log)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    script = (
        f"mount -t tmpfs -o size=256k tmpfs {disk} && "
        f"(head -c 1M /dev/zero > {disk}/filler 2>/dev/null; true) && "
        f'{sys.executable} {TRAIN_PY} hydra.run.dir={disk}/run "$@"; '
        f"echo rc=$? >&2; ls -A {disk} >&2"
    )
    proc = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, "sh", "seed=2"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    *_, rc, listing = proc.stderr.splitlines()
    assert rc == "rc=2", proc.stderr[-3000:]
    assert listing == "filler"  # no run folder, no half-written .hydra/
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: hydra.run.dir={disk}/run: ")
    assert "no space left on device" in errors[0]


def test_the_hydra_files_are_written_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fills while .hydra/ is written: one line naming it, no .hydra/ and no
    temporary folder left."""
    from omegaconf import OmegaConf

    hydra_cfg = OmegaConf.create({"hydra": {"overrides": {"task": ["seed=2"]}}})
    task_cfg = OmegaConf.create({"seed": 2})

    def enospc(*args: Any, **kw: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", enospc)
    with pytest.raises(WriteError, match=r"\.hydra: no space left on device"):
        run_folder.save_hydra_files(tmp_path, task_cfg, hydra_cfg)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    run_folder.save_hydra_files(tmp_path, task_cfg, hydra_cfg)
    assert (tmp_path / ".hydra" / "overrides.yaml").read_text() == "- seed=2\n"
    assert (tmp_path / ".hydra" / "config.yaml").read_text() == "seed: 2\n"
    assert sorted(p.name for p in (tmp_path / ".hydra").iterdir()) == [
        "config.yaml",
        "hydra.yaml",
        "overrides.yaml",
    ]


def test_a_lock_naming_this_pid_but_another_start_is_stale(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """PID 1 in a container: the killed training's lock names pid 1, which is now the
    resuming process itself; its start time tells them apart."""
    me = run_lock.owner_record()
    for stale in (
        {**me, "start": me["start"] - 1},  # this pid, an earlier process
        {"pid": os.getpid(), "host": socket.gethostname(), "since": 0},  # no start time
    ):
        (tmp_path / run_lock.LOCK_NAME).write_text(json.dumps(stale))
        assert run_lock.live_owner(tmp_path) is None
        held = run_lock.acquire(tmp_path)
        assert "has ended; taking it over" in caplog.text
        held.release()
        assert not (tmp_path / run_lock.LOCK_NAME).exists()
        caplog.clear()


def test_a_lock_naming_a_reused_pid_is_stale_and_a_live_one_is_not(tmp_path: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        real = run_lock.owner_record(other.pid)
        lock = tmp_path / run_lock.LOCK_NAME
        lock.write_text(json.dumps({**real, "start": real["start"] + 5}))  # pid reused
        assert run_lock.live_owner(tmp_path) is None
        lock.write_text(json.dumps(real))
        assert run_lock.live_owner(tmp_path) == f"pid {other.pid} on {socket.gethostname()}"
        with pytest.raises(ConfigError, match=f"another training.*delete {lock}"):
            run_lock.acquire(tmp_path)
    finally:
        other.kill()
        other.wait()


def test_this_process_adopts_the_lock_it_holds(tmp_path: Path) -> None:
    """train.py claims the folder before Hydra writes; the trainer then adopts that lock
    (only its own process's: another process's never)."""
    assert run_lock.held(tmp_path) is None
    lock = run_lock.acquire(tmp_path)
    adopted = run_lock.held(tmp_path)
    assert adopted is not None and adopted.path == lock.path
    with pytest.raises(ConfigError, match="another training"):
        run_lock.acquire(tmp_path)  # a second acquire is still refused
    lock.release()
    assert run_lock.held(tmp_path) is None


@pytest.mark.slow
@pytest.mark.skipif(
    not _can_unshare("--pid", "--fork", "--mount-proc"), reason="needs unshare --pid (root)"
)
def test_a_run_trained_as_pid_1_and_killed_resumes_as_pid_1(tmp_path: Path) -> None:
    """``docker run`` twice: both trainings are PID 1 on one host name; the lock the killed
    one left (pid 1, its start time) is stale to the second."""
    pid1 = ("unshare", "--pid", "--fork", "--mount-proc")
    run = tmp_path / "run"
    first = _train_py(_toy(tmp_path / "data", f"hydra.run.dir={run}"), tmp_path, prefix=pid1)
    assert first.returncode == 0, first.stderr[-3000:]
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    killed = {"pid": 1, "host": socket.gethostname(), "since": 0, "start": 1, "boot": boot}
    (run / run_lock.LOCK_NAME).write_text(json.dumps(killed))
    again = _train_py(
        _toy(tmp_path / "data", f"resume={run}", "trainer.max_steps=4"), tmp_path, prefix=pid1
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "has ended; taking it over" in again.stderr
    assert _saved(run / "checkpoints" / "last.pt")["step"] == 4
    assert not (run / run_lock.LOCK_NAME).exists()


@pytest.mark.slow
def test_resume_trains_in_the_resumed_runs_folder_and_leaves_no_new_one(tmp_path: Path) -> None:
    """``resume=RUN`` and ``resume=auto``: the resumed run's folder gets the log; no new
    folder appears under outputs/; the run's .hydra/ stays the first start's."""
    first = _train_py(_toy(tmp_path / "data", "seed=7"), tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    (run,) = [p.parent for p in (tmp_path / "outputs").glob("*/*/.hydra")]
    hydra_files = _files(run / ".hydra")
    assert b"- seed=7\n" in hydra_files["overrides.yaml"]
    for resume, steps in ((f"resume={run}", 4), ("resume=auto", 6)):
        proc = _train_py(_toy(tmp_path / "data", resume, f"trainer.max_steps={steps}"), tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert [p.parent for p in (tmp_path / "outputs").glob("*/*/train.log")] == [run]
        assert _saved(run / "checkpoints" / "last.pt")["step"] == steps
        assert _files(run / ".hydra") == hydra_files
    log = (run / "train.log").read_text()
    assert "this process's own directory" not in log


def test_resume_of_a_live_run_says_wait_and_how_to_clear_not_to_drop_a_setting(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    _old_run(run)
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        lock = run / run_lock.LOCK_NAME
        lock.write_text(json.dumps(run_lock.owner_record(owner.pid)))
        before = _files(run)
        proc = _train_py([f"resume={run}"], tmp_path)
        line = _one_line_error(proc)
        assert f"another training (pid {owner.pid} on" in line and f"delete {lock}" in line
        assert "hydra.run.dir" not in line
        assert _files(run) == before
        assert list(tmp_path.iterdir()) == [run]  # no new run folder (outputs/)
    finally:
        owner.kill()
        owner.wait()


def test_a_sweep_whose_every_job_is_refused_exits_2_and_touches_no_config(
    tmp_path: Path,
) -> None:
    sweep = tmp_path / "sweep"
    job = sweep / "0_seed=1"
    before = _old_run(job)
    proc = _train_py(["-m", "seed=1", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "error: 1 of 1 sweep jobs failed: job 0" in proc.stderr
    after = _files(job)
    assert {k: v for k, v in after.items() if k != "train.log"} == {
        k: v for k, v in before.items() if k != "train.log"
    }
    assert after["train.log"].startswith(before["train.log"])  # the refusal is appended


@pytest.mark.slow
def test_two_trainings_started_at_once_on_one_folder_leave_the_winners_config(
    tmp_path: Path,
) -> None:
    from hydra import compose, initialize_config_dir

    from attnmt.train.loop import train

    run = tmp_path / "shared"
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        warm = compose(config_name="train", overrides=_toy(tmp_path / "data"))
    train(warm, tmp_path / "warm")  # the corpus is prepared once (in this process: no start-up)
    args = [*_toy(tmp_path / "data", f"hydra.run.dir={run}")]
    procs = [
        subprocess.Popen(
            [sys.executable, TRAIN_PY, *args, f"seed={s}"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for s in (1, 2)
    ]
    outs = [(p.communicate(timeout=300)[1], p.returncode) for p in procs]
    assert sorted(rc for _, rc in outs) == [0, 2], outs
    winner = 1 if outs[0][1] == 0 else 2
    assert f"- seed={winner}\n" in (run / ".hydra" / "overrides.yaml").read_text()
    assert f"seed: {winner}\n" in (run / ".hydra" / "config.yaml").read_text()
    assert _saved(run / "checkpoints" / "last.pt")["config"]["seed"] == winner
