"""``make results``: run what the ledger lacks, in priority order, while time is left.

    python -m experiments.results_run --hours 1.5           # results/runs/, docs/*.md
    python -m experiments.results_run --dry-run             # the plan only
    python -m experiments.results_run --quick               # toy-sized smoke run in outputs/

Each run is ``python train.py <cell> seed=N hydra.run.dir=outputs/results/<table>/<stem>``,
a subprocess in its own session. It gets a record in the ledger (experiments/ledger.py) only
when train.py exits 0 with a test result; its test hypotheses go beside it for the tables'
paired bootstraps (an attention-table run's entropy and silver AER into it, also for the
table's check at the preset's size), and for runs on the fixed sentence's corpus the attention
maps of that sentence (experiments/attention_map.py).
A run is started only if its estimate (experiments/results_plan.py) fits in the hours left:
when the next in order does not, the first after it that does starts instead;
SIGINT or SIGTERM is passed to the running train.py (which saves last.pt and exits non-zero:
no record, the run is redone next time) and no further run starts. At the end, stopped or
not, the tables and the attention guide are regenerated from the ledger. Nothing is
committed: records are plain files under results/runs/, to ``git add`` as they come.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from omegaconf import OmegaConf

from attnmt.machine import this_machine
from attnmt.run_dir import RunDir
from attnmt.run_record import RecordError, read_record, source_commit
from attnmt.train.run_lock import live_owner
from experiments import die_with_parent
from experiments.ledger import (
    Record,
    defining_settings,
    read_records,
    record_stem,
    settings_key,
    write_record,
)
from experiments.results_plan import ATTENTION_TABLES, TABLES, Plan, PlannedRun, make_plan

log = logging.getLogger("results")

ROOT = Path(__file__).resolve().parents[1]
QUICK = (
    "trainer.max_steps=5",
    "trainer.val_every_steps=5",
    "trainer.val_subset=20",
    "trainer.num_heatmaps=0",
    "decode.max_len_a=0.5",
    "decode.max_len_b=5",
)
"""RESULTS_QUICK=1's toy sizes (over every cell's settings: other keys, other ledger)."""

Launch = Callable[[PlannedRun, Path], int]
Extras = Callable[[Record, Path, Path], dict[str, Any]]
"""(record, run folder, ledger folder) -> fields for the record's ``extra``."""


def machine_dict() -> dict[str, Any]:
    """:func:`attnmt.machine.this_machine` as plain data, with the core count."""
    return {**this_machine().to_dict(), "cores": os.cpu_count()}


# ---- one finished run -> its record ------------------------------------------------------


def collect(
    run: PlannedRun, run_dir: Path, wall_minutes: float, commit: str, machine: dict[str, Any]
) -> Record | None:
    """The record of a run that finished in ``run_dir`` (from its run record), or None when
    it has no finished run record with a test result."""
    try:
        record = read_record(run_dir)
    except RecordError as err:
        log.warning("results: %s", err)
        return None
    summary = record.summary
    test = summary.test if summary is not None else None
    if summary is None or summary.status != "finished" or test is None:
        return None
    if test.bleu is None or test.chrf is None:  # a test without its scores
        return None
    if summary.step is None or summary.minutes is None or summary.params is None:
        log.warning(
            "results: %s: a finished run's summary without steps, minutes or params", run_dir
        )
        return None
    config_file = RunDir(run_dir).config_yaml
    settings = run.settings
    if config_file.is_file():
        composed = OmegaConf.to_container(OmegaConf.load(config_file))
        ran = defining_settings(
            {str(k): v for k, v in composed.items()} if isinstance(composed, dict) else {}
        )
        if settings_key(ran) != run.key:
            log.warning("%s: the run's .hydra/config.yaml keys differently; kept", run_dir)
    curve = [[e["step"], e["minutes"], e["nll"], e["bleu"], e["chrf"]] for e in record.valid]
    return Record(
        table=run.cell.table,
        cell=run.cell.label,
        key=run.key,
        seed=run.seed,
        settings=settings,
        commit=commit,
        machine=machine,
        updates=summary.step,
        train_minutes=round(summary.minutes, 2),
        wall_minutes=round(wall_minutes, 2),
        curve=[[round(float(x), 4) for x in row] for row in curve],
        test={
            "bleu": test.bleu,
            "chrf": test.chrf,
            "bleu_signature": test.bleu_signature,
            "chrf_signature": test.chrf_signature,
            "beam": test.beam,
        },
        params_m=round(summary.params / 1e6, 2),
        stop_reason=summary.reason or "",
        recorded=datetime.now().isoformat(timespec="seconds"),
        run_dir=str(run_dir),
        extra={
            k: v for k, v in (("device", summary.device), ("precision", summary.precision)) if v
        },
    )


# ---- the loop ------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one invocation did."""

    recorded: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)  # another runner was training them
    interrupted: str = ""
    stopped_for_time: str = ""


@dataclass
class Runner:
    """Runs the plan's runs one at a time (see the module docstring).

    ``launch(run, run_dir) -> exit status`` starts and waits for train.py (a fake in
    tests); ``planner()`` re-plans from the ledger after every run (the attention table's
    later seeds depend on its first); ``clock`` gives seconds.
    """

    ledger: Path
    runs_dir: Path
    planner: Callable[[], Plan]
    hours: float = 0.0  # 0: no limit
    launch: Launch | None = None
    clock: Callable[[], float] = time.monotonic
    keep_map: Callable[[Record, Path, Path], None] | None = None
    extras: Extras | None = None
    max_runs: int = 0  # 0: no limit
    jobs: int = 1  # runs at once; with more than one, each train.py gets one thread
    stop_signal: int | None = None
    children: set[subprocess.Popen[bytes]] = field(default_factory=set)
    machine: dict[str, Any] = field(default_factory=dict)
    commit: str = ""

    def request_stop(self, signum: int, frame: FrameType | None = None) -> None:
        """A signal handler: pass it to train.py and start nothing after it."""
        self.stop_signal = signum
        for child in list(self.children):
            if child.poll() is None:
                os.killpg(child.pid, signum)
        log.warning(
            "results: %s: the current runs stop; no run starts after them",
            signal.Signals(signum).name,
        )

    def train_subprocess(self, run: PlannedRun, run_dir: Path) -> int:
        """``python train.py ...`` in its own session (SIGTERM when this runner dies:
        experiments/die_with_parent.py); its exit status."""
        cmd = [sys.executable, "train.py", *run.overrides, f"hydra.run.dir={run_dir}"]
        log.info("results: %s", " ".join(cmd[1:]))
        env = {**os.environ, "OMP_NUM_THREADS": "1"} if self.jobs > 1 else None
        child = subprocess.Popen(  # stops with this runner, also if it is killed outright
            die_with_parent.command(cmd), cwd=ROOT, env=env, start_new_session=True
        )
        self.children.add(child)
        try:
            return child.wait()
        finally:
            self.children.discard(child)

    def run_one(self, run: PlannedRun) -> str:
        """'recorded', 'failed', 'busy' (another runner trains it now) or 'interrupted'."""
        stem = record_stem(run.cell.table, run.cell.label, run.seed, run.key)
        run_dir = self.runs_dir / run.cell.table / stem
        owner = live_owner(run_dir)
        if owner is not None:  # another runner trains this cell now: never touch its folder
            log.warning("results: %s is being trained by %s; skipped", run_dir, owner)
            return "busy"
        if run_dir.exists():  # a run an earlier invocation lost: start it afresh
            shutil.rmtree(run_dir)
        start = self.clock()
        status = (self.launch or self.train_subprocess)(run, run_dir)
        minutes = (self.clock() - start) / 60.0
        if status != 0:
            return (
                "interrupted" if self.stop_signal is not None or status in (130, 143) else "failed"
            )
        record = collect(run, run_dir, minutes, self.commit, self.machine)
        if record is None:
            return "failed"
        if self.extras is not None:
            try:
                record.extra.update(self.extras(record, run_dir, self.ledger))
            except Exception as err:  # a missing measure must not lose the record
                log.warning("results: no extra measures for %s: %s", record.stem, err)
        path = write_record(self.ledger, record)
        log.info("results: recorded %s (test BLEU %.2f)", path, record.test["bleu"])
        if self.keep_map is not None:
            try:
                self.keep_map(record, run_dir, self.ledger / f"{record.stem}.attn.json")
            except Exception as err:  # a missing map must not lose the record
                log.warning("results: no attention map for %s: %s", path.name, err)
        return "recorded"

    def run(self) -> Outcome:
        """Until the plan is done, time is out, a signal came or ``max_runs`` ran."""
        self.machine = self.machine or machine_dict()
        self.commit = self.commit or source_commit(ROOT)
        deadline = self.clock() + self.hours * 3600.0 if self.hours > 0 else None
        outcome = Outcome()
        skip: set[tuple[str, int]] = set()  # failed or busy: not retried by this invocation
        claimed: set[tuple[str, int]] = set()  # started by one of this invocation's jobs
        lock = threading.Lock()

        def next_run() -> PlannedRun | None:
            with lock:
                if self.stop_signal is not None or outcome.interrupted:
                    return None
                started = len(outcome.recorded) + len(outcome.failed) + len(claimed)
                if self.max_runs and started >= self.max_runs:
                    return None
                todo = [r for r in self.planner().todo if (r.key, r.seed) not in skip | claimed]
                if not todo:
                    return None
                run = todo[0]
                if deadline is not None:  # the first in order that fits in the time left
                    left = (deadline - self.clock()) / 60.0
                    fits = next((r for r in todo if r.estimate_min <= left), None)
                    if fits is None:
                        outcome.stopped_for_time = (
                            f"next run ({run.describe()}) is estimated at "
                            f"{run.estimate_min:.0f} min; {max(left, 0):.0f} min of "
                            "RESULTS_HOURS left, and no run left fits in it"
                        )
                        return None
                    run = fits
                claimed.add((run.key, run.seed))
                return run

        def work() -> None:
            while (run := next_run()) is not None:
                log.info("results: starting %s (~%.0f min)", run.describe(), run.estimate_min)
                result = self.run_one(run)
                with lock:
                    claimed.discard((run.key, run.seed))
                    if result == "recorded":
                        outcome.recorded.append(run.describe())
                    elif result == "interrupted":
                        outcome.interrupted = run.describe()
                    else:
                        (outcome.busy if result == "busy" else outcome.failed).append(
                            run.describe()
                        )
                        skip.add((run.key, run.seed))

        if self.jobs <= 1:
            work()
        else:
            threads = [threading.Thread(target=work) for _ in range(self.jobs)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        return outcome


def keep_attention_map(record: Record, run_dir: Path, target: Path) -> None:
    """The fixed sentence's maps at ``target``, for runs on the fixed sentence's corpus."""
    from experiments.attention_map import FIXED_CORPUS, keep

    if record.settings.get("data", {}).get("name") == FIXED_CORPUS:
        keep(run_dir, target)


def record_extras(record: Record, run_dir: Path, ledger: Path) -> dict[str, Any]:
    """What the runner adds to a record's ``extra``: every run's test hypotheses, kept beside
    it for the tables' paired bootstraps (experiments/kept_outputs.py), and a run of an
    attention table's (:data:`~experiments.results_plan.ATTENTION_TABLES`, the preset-size
    check included) :func:`attention_extras`."""
    from experiments.kept_outputs import keep_hypotheses

    extra: dict[str, Any] = {}
    if keep_hypotheses(run_dir, ledger / f"{record.stem}.test.txt.xz") is not None:
        extra["hypotheses"] = f"{record.stem}.test.txt.xz"
    if record.table in ATTENTION_TABLES:
        try:
            extra.update(attention_extras(record, run_dir))
        except Exception as err:  # the kept outputs stay named in the record
            log.warning("results: no attention measures for %s: %s", record.stem, err)
    return extra


def attention_extras(record: Record, run_dir: Path) -> dict[str, Any]:
    """An attention-table run's entropy and silver AER (experiments/attention_measures.py)."""
    from experiments import attention_measures as measures

    corpus = str(record.settings.get("data", {}).get("name", ""))
    extra: dict[str, Any] = {"attention_entropy": measures.last_entropy(run_dir)}
    silver = measures.silver_scores(run_dir, corpus, threads=torch_threads())
    if silver is not None:
        extra["silver"] = silver
    return extra


def torch_threads() -> int:
    """The threads this runner's train.py runs use (OMP_NUM_THREADS, else the cores)."""
    return int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)


def regenerate(ledger: Path, docs: Path | None, guide: Path | None, extra: Sequence[str]) -> bool:
    """The tables (``docs``) and the attention guide (``guide``) from the ledger; False, with
    the reason on stderr and neither page written, when a corpus the tables score does not
    prepare here (the records stay: ``make results-docs`` writes the pages once it does)."""
    from experiments import attention_guide, results_table
    from experiments.kept_outputs import CorpusUnavailable

    if docs is not None:
        try:
            results_table.write_docs(ledger, docs, extra=extra)
        except CorpusUnavailable as e:
            print(f"results: the records are kept; the pages are not regenerated: {e}",
                  file=sys.stderr)  # fmt: skip
            return False
    if guide is not None:
        attention_guide.write_guide(ledger, guide, extra=extra)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hours", type=float, default=0.0, help="time to spend; 0: no limit")
    parser.add_argument("--ledger", type=Path, default=Path("results/runs"))
    parser.add_argument("--runs-dir", type=Path, default=Path("outputs/results"))
    parser.add_argument("--docs", type=Path, default=Path("docs/results.md"))
    parser.add_argument("--guide", type=Path, default=Path("docs/attention.md"))
    parser.add_argument("--seeds", type=int, nargs="+", help="only these seeds")
    parser.add_argument("--tables", nargs="+", choices=list(TABLES), default=list(TABLES))
    parser.add_argument(
        "--only", nargs="+", default=[], help="only cells labelled with all of these (ding_de_en)"
    )
    parser.add_argument("--max-runs", type=int, default=0, help="stop after N runs; 0: no limit")
    parser.add_argument(
        "--jobs", type=int, default=1, help="runs at once (each train.py then gets one thread)"
    )
    parser.add_argument("--quick", action="store_true", help="toy sizes, all under outputs/")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    parser.add_argument("extra", nargs="*", help="overrides after every cell's (key=value)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.jobs > 1:  # one thread a run: train.py, evaluate.py and the maps made here
        os.environ["OMP_NUM_THREADS"] = "1"
        import torch

        torch.set_num_threads(1)
    extra = list(args.extra)
    if args.quick:
        quick = Path("outputs/results-quick")
        args.ledger, args.runs_dir = quick / "runs", quick
        args.docs, args.guide = quick / "results.md", quick / "attention.md"
        extra = [*QUICK, *extra]
        args.seeds = args.seeds or [1]

    def planner() -> Plan:
        records = read_records(args.ledger)[0]
        return make_plan(records, extra, args.tables, args.seeds, args.only)

    plan = planner()
    print(plan.summary(), flush=True)
    if args.dry_run:
        for run in plan.todo:
            print(f"  {run.describe()}  ~{run.estimate_min:.0f} min")
        return 0
    runner = Runner(
        ledger=args.ledger,
        runs_dir=args.runs_dir,
        planner=planner,
        hours=args.hours,
        keep_map=keep_attention_map,
        extras=record_extras,
        max_runs=args.max_runs,
        jobs=args.jobs,
    )
    previous = {s: signal.signal(s, runner.request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        outcome = runner.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print(report(outcome), flush=True)
    if not regenerate(args.ledger, args.docs, args.guide, extra):
        return 2
    return 0 if not outcome.failed and not outcome.interrupted else 1


def report(outcome: Outcome) -> str:
    """What this invocation did, a few lines."""
    lines = [f"results: {len(outcome.recorded)} run(s) recorded"]
    lines += [f"  failed (no record, retried next time): {f}" for f in outcome.failed]
    lines += [f"  left to the runner training it now: {b}" for b in outcome.busy]
    if outcome.interrupted:
        lines.append(f"  interrupted (no record, redone next time): {outcome.interrupted}")
    if outcome.stopped_for_time:
        lines.append(f"  stopped: {outcome.stopped_for_time}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
