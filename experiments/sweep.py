"""The sweep driver: run a study (experiments/study.py) as train.py runs.

    python -m experiments.sweep configs/study/NAME.yaml --jobs 2 --hours 2.5 [--dry-run]
    python -m experiments.sweep configs/study/NAME.yaml --record [data.root=/tmp/d ...]

A run trains in outputs/<study>/<run>/ (<run>: its grid values, ``model-transformer_seed-1``),
its train.py output appended to outputs/<study>/<run>.log. A run whose summary.json says
``finished`` (in its folder, or in its record under results/<study>/<run>/) is skipped; one
holding a checkpoint is resumed with ``resume=FOLDER`` (the run's own settings); any other
starts afresh. Up to ``--jobs`` runs at once, cores // jobs threads each. When ``--hours``
are spent, or on SIGINT/SIGTERM, no run starts and each running one gets SIGTERM once
(train.py saves last.pt and exits 143; the same command resumes it); a driver killed outright
takes its runs along (experiments/die_with_parent.py). Overrides after the study go to every
run, new or resumed: where things are (``data.root=``, ``device=``), not what a run is.

First it prints the runs and the hours left on 2 cores, and refuses (exit 2, unless
``--force``) when these exceed :data:`MARGIN` × what ``--hours`` buy here, hours × min(cores,
2 × jobs) / 2 (a run gains from up to 2 threads). ``--record`` copies each finished run's own
files as they are into results/<study>/<run>/: summary.json, metrics.jsonl, .hydra/config.yaml
and overrides.yaml, hyps/test.txt.xz. Exit status: 0 when no run failed (runs may be left:
the same command goes on), 1 naming the failed, 2 for a bad study, 128 + N after signal N.
"""

from __future__ import annotations

import argparse
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
from attnmt.run_dir import BEST_FILE, LAST, RunDir
from attnmt.run_record import RecordError, RunRecord, read_record, read_summary
from attnmt.run_summary import Summary
from experiments import die_with_parent
from experiments.study import Run, Study, load_study

ROOT = Path(__file__).resolve().parents[1]
MARGIN = 2.0
POLL_S = 1.0  # seconds between looks at the running runs


def record_of(folder: Path) -> RunRecord | None:
    try:
        return read_record(folder)
    except RecordError:
        return None


def summary_of(folder: Path) -> Summary | None:
    try:
        return read_summary(folder)
    except RecordError:
        return None


def finished(folder: Path) -> bool:
    return (s := summary_of(folder)) is not None and s.status == "finished"


def trained_minutes(rec: RunRecord | None) -> float:
    """The training minutes a run's record has reached (0 without one)."""
    return max((float(e.get("minutes") or 0) for e in rec.events), default=0.0) if rec else 0.0


def usable_cores() -> int:
    """The cores this process may run on (its affinity; the CPU count where unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class Proc(Protocol):
    def poll(self) -> int | None: ...
    def send_signal(self, sig: int) -> None: ...


Launch = Callable[[list[str], Path, dict[str, str]], Proc]
"""(train.py's arguments, its log file, its environment) -> the started process."""


def popen(args: list[str], log: Path, env: dict[str, str]) -> Proc:
    """``python train.py ARGS`` in its own session, output appended to ``log``, SIGTERM
    when the driver dies."""
    with log.open("ab") as out:
        cmd = die_with_parent.command([sys.executable, "train.py", *args])
        return subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def quoted(path: Path) -> str:
    """``path`` as a Hydra value: as it is, or quoted where it holds other characters than
    the run names' (``=``, ``,``, a space...)."""
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
    """One invocation over a study's runs (see the module docstring)."""

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
        if state == "resume":
            return [f"resume={quoted(self.folder(run))}", *self.extra]
        new = [*self.study.overrides, *run.grid, *self.extra]
        return [*new, f"hydra.run.dir={quoted(self.folder(run))}"]

    def hours_left(self, plan: Sequence[tuple[Run, str]]) -> float:
        """Expected hours on 2 cores of the unfinished runs, less what they trained."""
        per = self.study.header.minutes_per_run
        left = [
            per - trained_minutes(record_of(self.folder(r))) for r, s in plan if s != "finished"
        ]
        return sum(max(m, 0.0) for m in left) / 60

    def capacity(self) -> float:
        """The 2-core run hours that ``hours`` buy here."""
        return self.hours * min(self.cores, 2 * self.jobs) / 2

    def stop(self, why: str) -> None:
        """Start no more runs; SIGTERM each running one, once (a second would abort its save)."""
        self.stopped = self.stopped or why
        for run in list(self.running):
            if run not in self.termed:
                self.termed.add(run)
                self.running[run][0].send_signal(signal.SIGTERM)

    def keep(self, run: Run) -> str:
        """The finished run's own record files, as they are, into results/<study>/<run>/."""
        src, target = RunDir(self.folder(run)), self.kept(run)
        if finished(target):
            return f"; recorded in {target}"
        try:
            with atomic_dir(target) as staging:
                for file in (src.summary, src.metrics, src.config_yaml, src.overrides_yaml):
                    if file.is_file():
                        (staging / file.relative_to(src.path)).parent.mkdir(exist_ok=True)
                        shutil.copy2(file, staging / file.relative_to(src.path))
                if (hyps := src.hyps / "test.txt").is_file():
                    (staging / "hyps").mkdir()
                    (staging / "hyps/test.txt.xz").write_bytes(lzma.compress(hyps.read_bytes()))
        except (AttnmtError, OSError) as err:
            return f"; NOT recorded ({err})"
        return f"; recorded in {target}"

    def ended(self, run: Run, code: int, started: float, out: Outcome) -> str:
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
            return (
                f"interrupted {run.name} ({self.stopped or 'SIGTERM'}): the same command resumes it"
            )
        out.failed.append(run.name)
        return f"failed {run.name} (exit {code}): see {self.log(run)}"

    def run(self, plan: Sequence[tuple[Run, str]]) -> Outcome:
        """The plan's unfinished runs, until they end, a stop or ``hours`` are spent."""
        out, todo = Outcome(), deque(r for r, s in plan if s != "finished")
        if self.record:
            for run in (r for r, s in plan if s == "finished" and finished(self.folder(r))):
                self.keep(run)
        threads = str(max(1, self.cores // self.jobs))
        env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        deadline = self.clock() + self.hours * 3600 if self.hours > 0 else None
        while (todo and not self.stopped) or self.running:
            if deadline is not None and self.clock() >= deadline:
                self.stop(f"--hours {self.hours:g} spent")
            while todo and len(self.running) < self.jobs and not self.stopped:
                run = todo.popleft()
                state, done = self.state(run), trained_minutes(record_of(self.folder(run)))
                self.folder(run).parent.mkdir(parents=True, exist_ok=True)
                self.running[run] = (
                    self.launch(self.args(run, state), self.log(run), env),
                    self.clock(),
                )
                if self.stopped:  # a signal came while it started
                    self.stop(self.stopped)
                self.say(
                    f"resumed {run.name} ({done:.1f} min trained)"
                    if state == "resume"
                    else f"started {run.name} ({threads} thread(s))"
                )
            for run, (proc, started) in list(self.running.items()):
                if (code := proc.poll()) is not None:
                    del self.running[run]
                    self.say(self.ended(run, code, started, out))
            if self.running:
                self.sleep(POLL_S)
        out.stopped += [r.name for r in todo]
        return out


def execute(args: argparse.Namespace, launch: Launch = popen) -> int:
    study = load_study(args.study)
    h = study.header
    sweep = Sweep(
        study,
        args.outputs,
        args.results,
        args.jobs,
        args.hours,
        args.record,
        tuple(args.extra),
        launch,
    )
    plan = [(r, sweep.state(r)) for r in study.runs]
    left = sweep.hours_left(plan)
    print(
        f"study {study.name} ({study.path}): {len(plan)} runs, ~{h.minutes_per_run:g} min each "
        f"and {h.hours:g} h in all on 2 cores; runs on {h.runs_on}"
        + (f"; capped: {h.capped}" if h.capped else "")
    )
    for run, state in plan:
        print(f"  {state:9} {run.name}")
    print(
        f"left: {sum(s != 'finished' for _, s in plan)} run(s), ~{left:.1f} h on 2 cores; "
        f"--jobs {args.jobs} on {sweep.cores} cores"
        + (f": --hours {args.hours:g} buy ~{sweep.capacity():.1f} h" if args.hours else ""),
        flush=True,
    )
    if args.dry_run:
        for run, state in (p for p in plan if p[1] != "finished"):
            print(f"  python train.py {shlex.join(sweep.args(run, state))}")
        return 0
    if args.hours and left > MARGIN * sweep.capacity() and not args.force:
        raise AttnmtError(
            f"study {study.name}: ~{left:.1f} h left on 2 cores is more than {MARGIN:g} × the "
            f"~{sweep.capacity():.1f} h that --hours {args.hours:g} buy here; give more --hours "
            "or --jobs (on more cores), shrink the study, or run anyway with --force"
        )
    lock = args.outputs / study.name / ".sweep.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AttnmtError(f"{lock}: another sweep of this study runs now") from None
        stop = {
            s: signal.signal(s, lambda n, _: sweep.stop(signal.Signals(n).name))
            for s in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            out = sweep.run(plan)
        finally:
            for s, handler in stop.items():
                signal.signal(s, handler)
    print(
        f"study {study.name}: {len(out.finished)} run(s) finished in this call"
        + (f"; left, the same command goes on: {', '.join(out.stopped)}" if out.stopped else "")
        + (f"; FAILED (see their .log): {', '.join(out.failed)}" if out.failed else "")
    )
    if out.failed:
        return 1
    return 128 + signal.Signals[sweep.stopped] if sweep.stopped.startswith("SIG") else 0


def main(argv: Sequence[str] | None = None, launch: Launch = popen) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("study", type=Path, help="configs/study/NAME.yaml")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once")
    parser.add_argument("--hours", type=float, default=0.0, help="then stop them; 0: no limit")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    parser.add_argument("--force", action="store_true", help="run though --hours buy too little")
    parser.add_argument("--record", action="store_true", help="keep finished runs in results/")
    parser.add_argument("--outputs", type=Path, default=Path("outputs"))
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("extra", nargs="*", help="overrides for every run (data.root=...)")
    args = parser.parse_intermixed_args(argv)
    if args.jobs < 1 or args.hours < 0:
        parser.error("--jobs must be at least 1 and --hours not negative")
    try:
        return execute(args, launch)
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
