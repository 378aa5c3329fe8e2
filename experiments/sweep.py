"""The one sweep driver: a study's runs (experiments/study.py) as train.py processes.

    python -m experiments.sweep configs/study/NAME.yaml --jobs 2 --hours 2.5 [--dry-run]
    python -m experiments.sweep configs/study/NAME.yaml --record [data.root=/tmp/d ...]

Run <run> trains in outputs/<study>/<run>/ (its log beside it, <run>.log): skipped where its
summary.json, there or in results/<study>/<run>/, says finished; resumed where it holds a
checkpoint; up to --jobs at once, cores // jobs threads each. Spent --hours or a signal:
each running run gets one SIGTERM (it saves last.pt; the same command resumes it).
Overrides after the study go to every run. --record copies a finished run's own files into
results/<study>/<run>/. Exit status: 0, 1 when a run failed, 2 for a bad study, 128 + N
after signal N.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import lzma
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from attnmt.atomic import atomic_dir
from attnmt.errors import AttnmtError
from attnmt.machine import usable_cores
from attnmt.run_dir import BEST_FILE, LAST, RunDir
from attnmt.run_record import RecordError, read_summary
from attnmt.run_summary import Summary
from experiments.study import Run, Study, load_study

ROOT = Path(__file__).resolve().parents[1]
POLL_S = 1.0  # seconds between looks at the running runs
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def summary_of(folder: Path) -> Summary | None:
    try:
        return read_summary(folder)
    except RecordError:
        return None


def finished(folder: Path) -> bool:
    return (s := summary_of(folder)) is not None and s.status == "finished"


def trained(folder: Path) -> float:
    """The training minutes a run's summary.json has reached (0 without one)."""
    return (s.minutes or 0.0) if (s := summary_of(folder)) is not None else 0.0


def die_with_driver() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGTERM the child when this process dies, even killed
    outright (``PR_SET_PDEATHSIG``, kept across exec); a child whose driver died before it
    asked exits 143 unstarted. None where there is no ``prctl``."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    driver = os.getpid()

    def ask() -> None:
        if prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0 and os.getppid() != driver:
            os._exit(128 + signal.SIGTERM)

    return ask


class Proc(Protocol):
    def poll(self) -> int | None: ...
    def send_signal(self, sig: int) -> None: ...


Launch = Callable[[list[str], Path, dict[str, str]], Proc]
"""(train.py's arguments, its log file, its environment) -> the started process."""


def popen(args: list[str], log: Path, env: dict[str, str]) -> Proc:
    """``python train.py ARGS`` in its own session, output appended to ``log``, SIGTERM
    when the driver dies (:func:`die_with_driver`)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "train.py", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_driver(),
        )


def quoted(path: Path) -> str:
    """``path`` as a Hydra value, quoted where it holds characters run names do not."""
    text = str(path)
    if re.fullmatch(r"[A-Za-z0-9_/.+-]+", text):
        return text
    return "'" + text.replace("'", "\\'") + "'"


@dataclass
class Outcome:
    finished: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)  # interrupted or not started
    failed: list[str] = field(default_factory=list)


@dataclass
class Sweep:
    """One call over a study's runs (see the module docstring)."""

    study: Study
    outputs: Path = Path("outputs")
    results: Path = Path("results")
    jobs: int = 1
    hours: float = 0.0  # 0: no limit
    record: bool = False
    extra: tuple[str, ...] = ()
    launch: Launch = popen
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    cores: int = field(default_factory=usable_cores)
    say: Callable[[str], None] = field(default=lambda line: print(line, flush=True))
    stopped: str = ""  # why no run starts any more
    running: dict[Run, tuple[Proc, float]] = field(default_factory=dict)
    termed: set[Run] = field(default_factory=set)

    def folder(self, run: Run) -> Path:
        return self.outputs.resolve() / self.study.name / run.name

    def kept(self, run: Run) -> Path:
        return self.results / self.study.name / run.name

    def log(self, run: Run) -> Path:
        return self.folder(run).with_name(f"{run.name}.log")

    def state(self, run: Run) -> str:
        """finished (in its folder or its record), resume (it holds a checkpoint) or new."""
        if finished(self.kept(run)) or finished(self.folder(run)):
            return "finished"
        ckpts = RunDir(self.folder(run)).checkpoints  # resume= goes on from last.pt or a best
        names = [p.name for p in ckpts.iterdir()] if ckpts.is_dir() else []
        return "resume" if any(n == LAST or BEST_FILE.fullmatch(n) for n in names) else "new"

    def args(self, run: Run, state: str) -> list[str]:
        folder = quoted(self.folder(run))
        if state == "resume":
            return [f"resume={folder}", *self.extra]
        return [*self.study.overrides, *run.grid, *self.extra, f"hydra.run.dir={folder}"]

    def hours_left(self, plan: Sequence[tuple[Run, str]]) -> float:
        """Expected hours on 2 cores of the unfinished runs, less what they trained."""
        per = self.study.header.minutes_per_run
        return sum(max(per - trained(self.folder(r)), 0.0) for r, s in plan if s != "finished") / 60

    def stop(self, why: str) -> None:
        """Start no more runs; SIGTERM each running one, once (a second would abort its save)."""
        self.stopped = self.stopped or why
        for run, (proc, _) in list(self.running.items()):
            if run not in self.termed:
                self.termed.add(run)
                proc.send_signal(signal.SIGTERM)

    def keep(self, run: Run) -> str:
        """The finished run's own record files, as they are, into results/<study>/<run>/."""
        src, target = RunDir(self.folder(run)), self.kept(run)
        if finished(target):
            return f"; recorded in {target}"
        try:
            with atomic_dir(target) as staging:
                for file in (src.summary, src.metrics, src.config_yaml, src.overrides_yaml):
                    if file.is_file():
                        (to := staging / file.relative_to(src.path)).parent.mkdir(exist_ok=True)
                        shutil.copy2(file, to)
                if (hyps := src.hyps / "test.txt").is_file():
                    (staging / "hyps").mkdir()
                    (staging / "hyps/test.txt.xz").write_bytes(lzma.compress(hyps.read_bytes()))
        except (AttnmtError, OSError) as err:
            return f"; NOT recorded ({err})"
        return f"; recorded in {target}"

    def ended(self, run: Run, code: int, started: float, out: Outcome) -> str:
        """The line for a run whose train.py exited with ``code``, noted in ``out``."""
        s = summary_of(self.folder(run))
        if code == 0 and s is not None and s.status == "finished":
            out.finished.append(run.name)
            bleu = s.test.bleu if s.test is not None else None
            return (
                f"finished {run.name}: test BLEU {'–' if bleu is None else f'{bleu:.2f}'}, "
                f"{s.minutes or 0:.1f} training minutes, "
                f"{(self.clock() - started) / 60:.1f} min in this call"
                + (self.keep(run) if self.record else "")
            )
        if code in (130, 143):
            out.stopped.append(run.name)
            why = self.stopped or "SIGTERM"
            return f"interrupted {run.name} ({why}): the same command resumes it"
        out.failed.append(run.name)
        return f"failed {run.name} (exit {code}): see {self.log(run)}"

    def run(self, plan: Sequence[tuple[Run, str]]) -> Outcome:
        """The plan's unfinished runs, until they end, a stop or ``hours`` are spent."""
        out, todo = Outcome(), deque((r, s) for r, s in plan if s != "finished")
        for run, state in plan:
            if self.record and state == "finished" and finished(self.folder(run)):
                self.keep(run)
        threads = str(max(1, self.cores // self.jobs))
        env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        deadline = self.clock() + self.hours * 3600 if self.hours > 0 else float("inf")
        while (todo and not self.stopped) or self.running:
            if self.clock() >= deadline:
                self.stop(f"--hours {self.hours:g} spent")
            while todo and len(self.running) < self.jobs and not self.stopped:
                run, state = todo.popleft()
                done = trained(self.folder(run))
                self.folder(run).parent.mkdir(parents=True, exist_ok=True)
                proc = self.launch(self.args(run, state), self.log(run), env)
                self.running[run] = (proc, self.clock())
                if self.stopped:  # a signal came while it started
                    self.stop(self.stopped)
                resumed = f"resumed {run.name} ({done:.1f} min trained)"
                self.say(
                    resumed if state == "resume" else f"started {run.name} ({threads} thread(s))"
                )
            for run, (proc, started) in list(self.running.items()):
                if (code := proc.poll()) is not None:
                    del self.running[run]
                    self.say(self.ended(run, code, started, out))
            if self.running:
                self.sleep(POLL_S)
        out.stopped += [r.name for r, _ in todo]
        return out

    def call(self, dry_run: bool) -> int:
        """Print the plan; then (unless ``dry_run``) run it, holding the study's lock."""
        name, h = self.study.name, self.study.header
        plan = [(r, self.state(r)) for r in self.study.runs]
        todo = [(r, s) for r, s in plan if s != "finished"]
        left, buy = self.hours_left(plan), self.hours * min(self.cores, 2 * self.jobs) / 2
        print(
            f"study {name} ({self.study.path}): {len(plan)} runs, ~{h.minutes_per_run:g} min "
            f"each and {h.hours:g} h in all on 2 cores; runs on {h.runs_on}"
            + (f"; capped: {h.capped}" if h.capped else "")
        )
        for run, state in plan:
            print(f"  {state:9} {run.name}")
        print(
            f"left: {len(todo)} run(s), ~{left:.1f} h on 2 cores; --jobs {self.jobs} on "
            f"{self.cores} cores"
            + (f": --hours {self.hours:g} buy ~{buy:.1f} h" if self.hours else ""),
            flush=True,
        )
        if dry_run:
            for run, state in todo:
                print(f"  python train.py {shlex.join(self.args(run, state))}")
            return 0
        lock = self.outputs / name / ".sweep.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        with lock.open("w") as held:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise AttnmtError(f"{lock}: another sweep of this study runs now") from None
            stop = {
                s: signal.signal(s, lambda n, _: self.stop(signal.Signals(n).name))
                for s in (signal.SIGINT, signal.SIGTERM)
            }
            try:
                out = self.run(plan)
            finally:
                for s, handler in stop.items():
                    signal.signal(s, handler)
        print(
            f"study {name}: {len(out.finished)} run(s) finished in this call"
            + (f"; left, the same command goes on: {', '.join(out.stopped)}" if out.stopped else "")
            + (f"; FAILED (see their .log): {', '.join(out.failed)}" if out.failed else "")
        )
        if out.failed:
            return 1
        return 128 + signal.Signals[self.stopped] if self.stopped.startswith("SIG") else 0


def main(argv: Sequence[str] | None = None, launch: Launch = popen) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("study", type=Path, help="configs/study/NAME.yaml")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once")
    parser.add_argument("--hours", type=float, default=0.0, help="then stop them; 0: no limit")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    parser.add_argument("--record", action="store_true", help="keep finished runs in results/")
    parser.add_argument("--outputs", type=Path, default=Path("outputs"))
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("extra", nargs="*", help="overrides for every run (data.root=...)")
    a = parser.parse_intermixed_args(argv)
    if a.jobs < 1 or a.hours < 0:
        parser.error("--jobs must be at least 1 and --hours not negative")
    try:
        study = load_study(a.study)
        sweep = Sweep(
            study, a.outputs, a.results, a.jobs, a.hours, a.record, tuple(a.extra), launch
        )
        return sweep.call(a.dry_run)
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
