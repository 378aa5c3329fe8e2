"""A study is a config (experiments/study.py), run by one driver (experiments/sweep.py).

Most tests inject a fake train.py (:class:`FakeTrain`) that writes a run record through the
trainer's own writer, so they check launches, skips, resumes, stops and the record without
training; one slow test runs the toy study for real.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import lzma
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnmt.errors import ConfigError
from attnmt.run_dir import RunDir
from attnmt.run_record import RecordWriter
from experiments import sweep as sweep_module
from experiments.study import load_study
from experiments.sweep import Sweep, main

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "configs" / "study" / "toy.yaml"
GUIDED = ROOT / "configs" / "study" / "guided_alignment.yaml"
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep_module, "POLL_S", 0.0)


def unquoted(arg: str) -> Path:
    """The folder of a ``hydra.run.dir='...'`` or ``resume='...'`` argument."""
    return Path(arg.partition("=")[2].strip("'"))


class FakeProc:
    """train.py in a folder: ``polls`` polls of training, then a finished record (exit 0), or
    exit ``code`` without one; SIGTERM saves last.pt and exits 143 two polls later, as
    train.py does (a second SIGTERM while it saves would abort the save)."""

    def __init__(self, fake: FakeTrain, folder: Path, env: dict[str, str]) -> None:
        self.fake, self.folder, self.env = fake, folder, env
        self.left, self.code, self.terms = fake.polls, None, 0
        self.run = RunDir(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.writer = RecordWriter(self.run, 0 if self.run.metrics.is_file() else None, {})

    def poll(self) -> int | None:
        if self.code is None and self.fake.on_poll is not None:
            self.fake.on_poll(self)
        if self.code is None and self.left is not None:
            self.left -= 1
            if self.left <= 0:
                self.code = self.fake.code if not self.terms else 143
                if self.code == 0:
                    self.finish()
        if self.code is not None and self in self.fake.alive:
            self.fake.alive.remove(self)
        return self.code

    def finish(self) -> None:
        self.run.hydra.mkdir(exist_ok=True)
        self.run.config_yaml.write_text(f"seed: {self.folder.name}\n")
        self.run.overrides_yaml.write_text(f"- {self.folder.name}\n")
        self.run.hyps.mkdir(exist_ok=True)
        (self.run.hyps / "test.txt").write_text("a b c\nd e\n")
        self.writer.event("test", 4, epoch=1, minutes=1.5, bleu=12.5, chrf=30.0)
        test = {"beam": 1, "bleu": 12.5, "chrf": 30.0}
        self.writer.update(status="finished", reason="max_steps", minutes=1.5, test=test)

    def send_signal(self, sig: int) -> None:
        assert sig == signal.SIGTERM
        self.terms += 1
        if self.code is None and self.terms == 1:
            self.run.checkpoints.mkdir(exist_ok=True)
            self.run.last.write_bytes(b"saved")
            self.writer.update(status="interrupted", reason="SIGTERM")
            self.left = 2


class FakeTrain:
    """A launcher that records each train.py command and how many ran at once."""

    def __init__(self, polls: int | None = 2, code: int = 0) -> None:
        self.polls, self.code = polls, code
        self.launches: list[list[str]] = []
        self.procs: list[FakeProc] = []
        self.alive: list[FakeProc] = []
        self.peak = 0
        self.on_poll = None

    def __call__(self, args: list[str], log: Path, env: dict[str, str]) -> FakeProc:
        self.launches.append(args)
        folder = unquoted(args[-1] if args[-1].startswith("hydra.run.dir=") else args[0])
        assert log == folder.with_name(f"{folder.name}.log")
        proc = FakeProc(self, folder, env)
        self.procs.append(proc)
        self.alive.append(proc)
        self.peak = max(self.peak, len(self.alive))
        return proc


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += 10.0


def study_file(tmp_path: Path, text: str, name: str = "mine") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


SEEDS = """study: {runs: 4, minutes_per_run: 3, hours: 0.2}
overrides: [data=toy_reverse]
hydra: {sweeper: {params: {seed: "1,2,3,4"}}}
"""


def test_the_guided_alignment_study_makes_its_eight_runs() -> None:
    study = load_study(GUIDED)
    assert study.name == "guided_alignment"
    assert (study.header.runs, study.header.hours, study.header.runs_on) == (8, 4.0, "gpu")
    assert "trainer.max_steps=1800" in study.overrides
    names = [r.name for r in study.runs]
    assert len(names) == len(set(names)) == 8
    assert names[0] == "model-transformer_seed-1_weight-0"
    assert names[-1] == "model-rnn_bahdanau_seed-2_weight-0.05"
    assert study.runs[1].grid == (
        "model=transformer",
        "seed=1",
        "trainer.guided_alignment.weight=0.05",
    )


def test_run_names_sort_the_grid_keys_and_take_hydra_sweep_syntax(tmp_path: Path) -> None:
    path = study_file(
        tmp_path,
        """study: {runs: 4, minutes_per_run: 1, hours: 0.07}
hydra:
  sweeper:
    params: {seed: "range(1,3)", model.d_model: "16,32", decode.beam: 1}
""",
    )
    runs = load_study(path).runs
    assert [r.name for r in runs] == [
        "beam-1_d_model-16_seed-1",
        "beam-1_d_model-16_seed-2",
        "beam-1_d_model-32_seed-1",
        "beam-1_d_model-32_seed-2",
    ]
    assert runs[3].grid == ("decode.beam=1", "model.d_model=32", "seed=2")


def test_a_run_is_new_resumed_or_finished_by_its_folder_and_record(tmp_path: Path) -> None:
    study = load_study(TOY)
    s = Sweep(study, tmp_path / "out", tmp_path / "res", extra=("data.root=/d",))
    one, two = study.runs
    folder = tmp_path / "out" / "toy" / "seed-1"
    assert s.folder(one) == folder.resolve()
    assert s.state(one) == "new"
    new = s.args(one, "new")
    assert new[: len(study.overrides)] == list(study.overrides)
    assert new[len(study.overrides) :] == ["seed=1", "data.root=/d", f"hydra.run.dir={folder}"]
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "last.pt.tmp-1").write_bytes(b"")  # a killed write: no checkpoint
    assert s.state(one) == "new"
    (folder / "checkpoints" / "best-2.pt").write_bytes(b"")
    assert s.state(one) == "resume"
    assert s.args(one, "resume") == [f"resume={folder}", "data.root=/d"]
    assert sweep_module.quoted(Path("/o k/it's=1")) == "'/o k/it\\'s=1'"  # Hydra's quoting
    RecordWriter(RunDir(folder), None, {}).update(status="finished")
    assert s.state(one) == "finished"
    kept = tmp_path / "res" / "toy" / "seed-2"
    kept.mkdir(parents=True)
    RecordWriter(RunDir(kept), None, {}).update(status="finished")
    assert s.state(two) == "finished"  # its record counts, though its folder is gone


def test_finished_runs_are_not_trained_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeTrain()
    argv = [str(TOY), "--outputs", str(tmp_path / "out"), "--results", str(tmp_path / "res")]
    assert main([*argv, "--jobs", "2"], launch=fake) == 0
    assert len(fake.launches) == 2
    out = capsys.readouterr().out
    assert f"started seed-1 ({max(1, sweep_module.usable_cores() // 2)} thread(s))" in out
    assert "finished seed-1: test BLEU 12.50, 1.5 training minutes" in out
    assert main(argv, launch=fake) == 0
    assert len(fake.launches) == 2  # the second call launched nothing
    out = capsys.readouterr().out
    assert "  finished  seed-1" in out and "0 run(s) finished in this call" in out


def test_jobs_run_at_once_with_cores_over_jobs_threads(tmp_path: Path) -> None:
    study = load_study(study_file(tmp_path, SEEDS))
    for jobs, threads in ((2, "2"), (1, "4")):
        fake = FakeTrain(polls=3)
        s = Sweep(study, tmp_path / f"out{jobs}", jobs=jobs, launch=fake, cores=4,
                  sleep=lambda _: None, say=lambda _: None)  # fmt: skip
        out = s.run([(r, s.state(r)) for r in study.runs])
        assert out.finished == [r.name for r in study.runs]
        assert fake.peak == jobs
        assert {p.env["OMP_NUM_THREADS"] for p in fake.procs} == {threads}


def test_spent_hours_stop_the_runs_and_the_next_call_resumes_them(tmp_path: Path) -> None:
    study = load_study(TOY)
    clock, lines = Clock(), []
    fake = FakeTrain(polls=None)  # trains until stopped
    s = Sweep(study, tmp_path / "out", hours=0.01, launch=fake, clock=clock,
              sleep=clock.sleep, say=lines.append)  # fmt: skip
    out = s.run([(r, s.state(r)) for r in study.runs])
    assert len(fake.launches) == 1  # the second run never started
    assert fake.procs[0].terms == 1  # one SIGTERM, though the driver polled on
    assert 36.0 <= clock.now <= 50.0
    assert lines[-1] == "interrupted seed-1 (--hours 0.01 spent): the same command resumes it"
    assert (out.finished, out.stopped) == ([], ["seed-1", "seed-2"])

    again = FakeTrain(polls=1)
    s = Sweep(study, tmp_path / "out", launch=again, sleep=lambda _: None, say=lines.append)
    plan = [(r, s.state(r)) for r in study.runs]
    assert [state for _, state in plan] == ["resume", "new"]
    assert s.run(plan).finished == ["seed-1", "seed-2"]
    assert again.launches[0] == [f"resume={s.folder(study.runs[0])}"]
    assert again.launches[1][-1].startswith("hydra.run.dir=")


def test_a_resumed_run_counts_the_minutes_its_summary_kept(tmp_path: Path) -> None:
    """What resume= goes on from: the summary's minutes (written with each last.pt), not a
    later event's of a run killed before it saved again."""
    study = load_study(study_file(tmp_path, SEEDS))
    lines: list[str] = []
    s = Sweep(study, tmp_path / "out", launch=FakeTrain(polls=1), sleep=lambda _: None,
              say=lines.append)  # fmt: skip
    run = RunDir(s.folder(study.runs[0]))
    run.path.mkdir(parents=True)
    writer = RecordWriter(run, None, {})
    writer.update(status="interrupted", minutes=1.25)
    writer.event("train", 40, epoch=1, minutes=2.5)  # after the save, then killed
    run.checkpoints.mkdir()
    run.last.write_bytes(b"saved")
    plan = [(r, s.state(r)) for r in study.runs]
    assert s.hours_left(plan) == pytest.approx((3 - 1.25 + 3 * 3) / 60)
    s.run(plan)
    assert "resumed seed-1 (1.2 min trained)" in lines


def test_a_signal_to_the_driver_stops_its_runs(tmp_path: Path) -> None:
    fake = FakeTrain(polls=None)
    fake.on_poll = lambda proc: os.kill(os.getpid(), signal.SIGINT)
    previous = signal.getsignal(signal.SIGINT)
    code = main([str(TOY), "--jobs", "2", "--outputs", str(tmp_path)], launch=fake)
    assert code == 130
    assert [p.terms for p in fake.procs] == [1, 1]
    assert all(p.run.last.is_file() for p in fake.procs)
    assert signal.getsignal(signal.SIGINT) is previous


def test_failed_runs_are_named_and_the_driver_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(TOY), "--outputs", str(tmp_path)], launch=FakeTrain(code=1)) == 1
    out = capsys.readouterr().out
    assert f"failed seed-1 (exit 1): see {tmp_path.resolve()}/toy/seed-1.log" in out
    assert out.strip().endswith("FAILED (see their .log): seed-1, seed-2")


def test_record_copies_each_finished_runs_own_files(tmp_path: Path) -> None:
    out, res = tmp_path / "out", tmp_path / "res"
    argv = [str(TOY), "--record", "--outputs", str(out), "--results", str(res)]
    assert main(argv, launch=FakeTrain()) == 0
    run, kept = out / "toy" / "seed-1", res / "toy" / "seed-1"
    files = sorted(str(p.relative_to(kept)) for p in kept.rglob("*") if p.is_file())
    assert files == [".hydra/config.yaml", ".hydra/overrides.yaml", "hyps/test.txt.xz",
                     "metrics.jsonl", "summary.json"]  # fmt: skip
    for name in ("summary.json", "metrics.jsonl", ".hydra/config.yaml", ".hydra/overrides.yaml"):
        assert (kept / name).read_bytes() == (run / name).read_bytes()
    assert lzma.decompress((kept / "hyps/test.txt.xz").read_bytes()) == b"a b c\nd e\n"
    assert json.loads((kept / "summary.json").read_text())["status"] == "finished"
    shutil.rmtree(out)  # a fresh machine: only the record is left
    fake = FakeTrain()
    assert main(argv, launch=fake) == 0
    assert fake.launches == []


def test_a_second_sweep_of_one_study_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = tmp_path / "toy" / ".sweep.lock"
    lock.parent.mkdir()
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        fake = FakeTrain()
        assert main([str(TOY), "--outputs", str(tmp_path)], launch=fake) == 2
    assert fake.launches == []
    assert f"error: {lock}: another sweep of this study runs now" in capsys.readouterr().err


def test_train_py_runs_in_its_own_session_and_dies_with_the_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, object] = {}

    def popen(cmd: list[str], **kwargs: object) -> str:
        seen.update(kwargs, cmd=cmd)
        return "started"

    monkeypatch.setattr(subprocess, "Popen", popen)
    log = tmp_path / "run.log"
    assert sweep_module.popen(["seed=1"], log, {"OMP_NUM_THREADS": "1"}) == "started"
    assert seen["cmd"] == [sys.executable, "train.py", "seed=1"]
    assert seen["start_new_session"] is True and seen["cwd"] == ROOT
    assert seen["env"] == {"OMP_NUM_THREADS": "1"} and log.is_file()
    assert callable(seen["preexec_fn"]) or not sys.platform.startswith("linux")


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
"""


def _wait_for(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return False


@linux_only
@pytest.mark.parametrize("wrapped", [True, False], ids=["die_with_driver", "bare"])
def test_a_child_gets_sigterm_when_its_driver_is_killed(tmp_path: Path, wrapped: bool) -> None:
    (tmp_path / "child.py").write_text(CHILD)
    ask = "die_with_driver()" if wrapped else "None"
    driver = f"""
import subprocess, sys
from experiments.sweep import die_with_driver
cmd = [sys.executable, {str(tmp_path / "child.py")!r}, {str(tmp_path)!r}]
child = subprocess.Popen(cmd, start_new_session=True, preexec_fn={ask})
print(child.pid, flush=True)
child.wait()
"""
    runner = subprocess.Popen([sys.executable, "-c", driver], cwd=ROOT, stdout=subprocess.PIPE)
    assert runner.stdout is not None
    child_pid = int(runner.stdout.readline())
    try:
        assert _wait_for(tmp_path / "started", 20), "the child did not start"
        runner.send_signal(signal.SIGKILL)  # no handler runs: only the kernel can tell it
        runner.wait(timeout=10)
        stopped = _wait_for(tmp_path / "stopped", 10 if wrapped else 2)  # wrapped: ~0.1 s
        if wrapped:
            assert stopped and (tmp_path / "stopped").read_text() == "SIGTERM"
        else:  # without it the child trains on, orphaned
            assert not stopped
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child_pid, signal.SIGKILL)


@linux_only
def test_a_child_whose_driver_is_already_gone_is_not_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "getpid", lambda: 1)  # the child's parent (this test) is not it:
    ask = sweep_module.die_with_driver()  # as if the driver had died before the child asked
    monkeypatch.undo()
    assert ask is not None
    marker = tmp_path / "ran"
    done = subprocess.run([sys.executable, "-c", f"open({str(marker)!r}, 'w')"], preexec_fn=ask)
    assert done.returncode == 143 and not marker.exists()


GOOD = {
    "study": "study: {runs: 2, minutes_per_run: 3, hours: 0.1}",
    "overrides": "overrides: [data=toy_reverse]",
    "hydra": 'hydra: {sweeper: {params: {seed: "1,2"}}}',
}


@pytest.mark.parametrize(
    ("part", "text", "message"),
    [
        ("study", "study: {runz: 2, minutes_per_run: 3, hours: 0.1}",
         "study.runz: unknown key; did you mean study.runs?"),
        ("overrides", "overide: [data=toy_reverse]", "overide: unknown key"),
        ("study", "study: {runs: two, minutes_per_run: 3, hours: 0.1}",
         "study.runs: expected int, got 'two'"),
        ("study", "study: {runs: 3, minutes_per_run: 3, hours: 0.15}",
         "study.runs: 3, but the grid makes 2"),
        ("study", "study: {runs: 2, minutes_per_run: 3, hours: 1}",
         "study.hours: 1.0, but runs × minutes_per_run / 60 = 0.10"),
        ("study", "study: {runs: 2, minutes_per_run: 90, hours: 3}",
         "study.hours: 3.0 on 2 cores is more than a session's 2.5"),
        ("study", "study: {runs: 2, minutes_per_run: 3, hours: 0.1, runs_on: tpu}",
         "study.runs_on: 'tpu' is not one of: cpu, gpu"),
        ("study", "study: {minutes_per_run: 3, hours: 0}", "study.runs: missing"),
        ("study", "study: {runs: 2, minutes_per_run: 0, hours: 0}",
         "study.minutes_per_run: 0.0 is out of range"),
        ("overrides", "overrides:\n  - seed=1,2", "overrides: seed: a sweep"),
        ("overrides", "overrides: [seed=3]", "hydra.sweeper.params: seed is given twice"),
        ("overrides", "overrides: [hydra.run.dir=x]", "overrides: hydra.run.dir: the driver sets"),
        ("overrides", "overrides: [a=b, '2']", "overrides: '2' is not a Hydra override"),
        ("hydra", 'hydra: {sweeper: {params: {seed: "interval(0,1)"}}}',
         "hydra.sweeper.params.seed: only lists of values"),
        ("hydra", 'hydra: {sweeper: {params: {seed: "1,1"}}}',
         "hydra.sweeper.params.seed: 1, 1: a value twice"),
        ("hydra", 'hydra: {sweeper: {params: {data.root: "a/b,c"}}}',
         "data.root: a/b, c: a value twice, or one that cannot name a folder"),
        ("hydra", "hydra: {sweeper: {params: {seed: [1, 2]}}}",
         "hydra.sweeper.params.seed: expected values like 1,2"),
        ("hydra", "hydra: {sweeper: {parms: {}}}", "hydra.sweeper.parms: unknown key"),
        ("study", "study: [", "not YAML"),
    ],
)  # fmt: skip
def test_a_bad_study_fails_naming_the_file_and_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], part: str, text: str, message: str
) -> None:
    path = study_file(tmp_path, "\n".join({**GOOD, part: text}.values()) + "\n")
    with pytest.raises(ConfigError) as err:
        load_study(path)
    assert str(err.value).startswith(f"{path}: ")
    assert message in str(err.value)
    assert main([str(path), "--outputs", str(tmp_path)], launch=FakeTrain()) == 2
    assert capsys.readouterr().err == f"error: {err.value}\n"


def test_a_good_study_file_loads(tmp_path: Path) -> None:
    study = load_study(study_file(tmp_path, "\n".join(GOOD.values())))
    assert [r.name for r in study.runs] == ["seed-1", "seed-2"]
    with pytest.raises(ConfigError, match="no such file"):
        load_study(tmp_path / "missing.yaml")


@pytest.mark.slow
def test_the_toy_study_trains_skips_resumes_and_records_for_real(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, res = tmp_path / "out", tmp_path / "res"
    launches: list[list[str]] = []

    def launch(args: list[str], log: Path, env: dict[str, str]) -> sweep_module.Proc:
        launches.append(args)
        return sweep_module.popen(args, log, env)

    argv = [str(TOY), "--jobs", "2", "--record", "--outputs", str(out), "--results", str(res),
            f"data.root={tmp_path / 'data'}"]  # fmt: skip
    assert main(argv, launch=launch) == 0, (out / "toy" / "seed-1.log").read_text()
    text = capsys.readouterr().out
    assert "finished seed-1: test BLEU" in text and "finished seed-2: test BLEU" in text
    assert (res / "toy" / "seed-2" / "hyps" / "test.txt.xz").is_file()
    last = RunDir(out / "toy" / "seed-1").last
    mtime = last.stat().st_mtime_ns

    assert main(argv, launch=launch) == 0
    assert len(launches) == 2 and last.stat().st_mtime_ns == mtime

    summary = RunDir(out / "toy" / "seed-1").summary  # as if it had been cut off
    summary.write_text(summary.read_text().replace('"finished"', '"interrupted"'))
    shutil.rmtree(res / "toy" / "seed-1")
    assert main(argv, launch=launch) == 0, (out / "toy" / "seed-1.log").read_text()
    assert launches[2][0] == f"resume={out.resolve() / 'toy' / 'seed-1'}"
    text = capsys.readouterr().out
    assert "resumed seed-1" in text and "finished seed-1: test BLEU" in text
    assert (res / "toy" / "seed-1" / "summary.json").is_file()
