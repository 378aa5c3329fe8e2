"""``trainer.precision=auto``, decided by timing: fp32 or autocast, whichever trains faster.

Whether autocast pays is not told by a device's flags, on a CPU or a GPU (measured figures:
docs/performance.md, a CPU's and a GPU's sections). The run's own model is timed on a batch
of its own training pairs, forward+backward, in fp32 and in the lower precision of
:func:`candidates`: bf16, or fp16 on a GPU without native bf16 (timed with its GradScaler's
loss scaling; the unscaling at the optimizer step, which the probe does not take, is left
out). On a CPU without native bf16 kernels (oneDNN) it is fp32, no probe needed (emulated
bf16 is an order of magnitude slower).

On a GPU (CUDA) the steps run asynchronously: each timed step lies between two
``torch.cuda.synchronize()`` calls (:func:`device_sensors`), and the CPU's load, its
process clock and its cores say nothing about the GPU's speed, so rules (1) and (2) below
are not applied there (nor read); rule (3) and the noise rule are.

The rule, made so that a busy machine cannot fool it:

* **Interleaved, repeated, bounded.** After one untimed warm-up of each, fp32 and bf16 (or
  fp16) steps alternate (fp32, bf16, fp32, bf16, ...) so that a load that comes and goes
  hits both alike: at least :data:`MIN_ROUNDS` rounds, more while either precision's spread
  exceeds :data:`NOISY`, at most :data:`MAX_ROUNDS` and no new round once the timed steps
  have taken :data:`BUDGET_S` seconds.
* **Decided on medians with a margin.** bf16 (or fp16) only if its median step is at least
  :data:`MARGIN` shorter than fp32's (:func:`decide`).
* **Cached only if clean.** The verdict is used for this run either way, but written to
  ``<data.root>/precision_probe.json`` (keyed by the device: CPU, torch version and thread
  count, or the GPU's name, torch version and host CPU (:func:`device_key`); and by model
  and batch shape) only when the machine was not *busy* and the timings not *noisy*;
  otherwise the one log line says why it was not. *Busy* is any of: (1) the 1-minute load
  average read before timing, less 1 for this process's own main thread, exceeds the
  cores the probe leaves free (usable cores minus torch's threads) by more than
  :data:`LOAD_SLACK` (others want cores the probe needs); (2) the process's CPU time over
  the timed steps is under :data:`STARVED` of wall time x the threads it runs (it waited
  for cores: ``time.process_time`` against ``time.perf_counter``); (3) when an earlier
  clean verdict is cached, both precisions' steps are over :data:`SLOW` times its medians
  (the machine is slower than when idle). (1) sees a steady competitor before any time is
  spent, (2) one that arrives during the timing, (3) the case where spinning threads keep
  the CPU time up while the steps crawl (the 4.1 s vs 0.36 s incident). *Noisy*: fewer
  than :data:`MIN_ROUNDS` rounds within the budget, or a spread (interquartile range over
  median of one precision's rounds; robust to a single outlier) above :data:`NOISY`.
* **Re-checked cheaply, refreshable.** ``trainer.precision_probe=cache`` (default) takes a
  cached verdict after one timed pair (after warm-ups): if the machine is busy the
  re-check is skipped or ignored; if it clearly contradicts the cache (the other precision
  at least ``2 x MARGIN`` faster) the full probe runs again and its verdict replaces the
  cache when clean. ``trainer.precision_probe=refresh`` always re-times (and overwrites
  the cache when clean).

The probe saves and restores every random generator and zeroes the gradients it made: the
run trains exactly as if the probe had been a cache hit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnmt.atomic import write_json
from attnmt.batch import Batch
from attnmt.data.batching import make_batch, pack_token_batches
from attnmt.errors import ConfigError, WriteError
from attnmt.machine import this_machine, usable_cores
from attnmt.train import distributed as ddp
from attnmt.train.config import PRECISION_PROBE_MODES
from attnmt.train.loss import label_smoothed_nll
from attnmt.train.precision import Precision, cpu_has_fast_bf16, resolve_precision
from attnmt.train.rng import rng_state, set_rng_state

log = logging.getLogger(__name__)

MARGIN = 0.05
"""bf16 (or fp16) is chosen only when its median step is at least 5% shorter than fp32's."""
MIN_ROUNDS = 5
"""Timed (fp32, bf16) pairs at least, after one untimed warm-up each (5: a quartile needs 4+)."""
MAX_ROUNDS = 15
"""Pairs at most, taken while the spread stays above :data:`NOISY`."""
BUDGET_S = 30.0
"""No new round once the timed steps have taken this long (a busy 2-core EPYC: 4 s a step)."""
NOISY = 0.10
"""Timings are noisy when a precision's interquartile range exceeds 10% of its median: the
median would then be uncertain by about the :data:`MARGIN` it is judged by."""
LOAD_SLACK = 0.5
"""Busy when other processes' 1-minute load exceeds the cores the probe leaves free by this."""
STARVED = 0.5
"""Busy when the process got under half the CPU time its threads asked for while timed."""
SLOW = 2.0
"""Busy when both precisions' steps take over twice the cached (clean) medians."""
RECHECK_ROUNDS = 1
"""Timed pairs of the cheap re-check of a cached verdict."""
CACHE_FILE = "precision_probe.json"
CPU = torch.device("cpu")


def load_average() -> float | None:
    """The 1-minute load average; None where the OS does not tell."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _no_load() -> float | None:
    return None


def _no_sync() -> None:
    return None


@dataclass(frozen=True)
class Sensors:
    """What the probe reads: clocks, the load and the cores (tests pass simulated ones).
    ``sync`` waits for the device's queued work and is called before each clock reading
    around a timed step; ``cpu`` None means the process clock says nothing about the steps'
    speed (a GPU's) and is not read."""

    wall: Callable[[], float] = time.perf_counter
    cpu: Callable[[], float] | None = time.process_time  # every thread of this process
    load: Callable[[], float | None] = load_average
    cores: int = field(default_factory=usable_cores)
    threads: int = field(default_factory=torch.get_num_threads)
    sync: Callable[[], None] = _no_sync


def device_sensors(device: torch.device) -> Sensors:
    """The real sensors for steps on ``device``. On CUDA the wall clock is read after
    ``torch.cuda.synchronize`` (kernels run asynchronously), and the CPU's load, process
    clock, cores and threads are neither read nor judged: they do not tell a GPU's speed."""
    if device.type != "cuda":
        return Sensors()
    return Sensors(
        cpu=None,
        load=_no_load,
        cores=0,
        threads=0,
        sync=lambda: torch.cuda.synchronize(device),
    )


def _cuda_has_bf16() -> bool:
    """The current GPU has native bf16 (not counting torch's emulation where it can tell)."""
    try:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # torch < 2.4 has no including_emulation (and counts none)
        return bool(torch.cuda.is_bf16_supported())


def candidates(device: torch.device) -> tuple[str, str]:
    """fp32 and the precision timed against it on ``device``: bf16, but fp16 on a GPU
    without native bf16."""
    if device.type == "cuda" and not _cuda_has_bf16():
        return ("fp32", "fp16")
    return ("fp32", "bf16")


@dataclass
class Timing:
    """Seconds per step of each precision (one entry a round), the wall and process CPU
    seconds of the timed steps together, and the 1-minute load read before them."""

    times: dict[str, list[float]]
    wall: float = 0.0
    cpu: float = 0.0
    load: float | None = None

    @property
    def rounds(self) -> int:
        return min((len(v) for v in self.times.values()), default=0)


def device_key(device: torch.device) -> str:
    """The device part of a cache key. A CPU: the machine's key (CPU kind and flags, torch,
    threads; :meth:`attnmt.machine.Machine.key`). A GPU: ``cuda: <its name>``, torch and the
    host CPU (which launches its kernels); never equal to a CPU's key."""
    if device.type != "cuda":
        return this_machine().key()
    host = this_machine().describe()
    return f"cuda: {torch.cuda.get_device_name(device)} | torch {torch.__version__} | host {host}"


def cache_key(
    model_name: str,
    model_cfg: dict[str, Any],
    vocab: int,
    batch: Batch,
    device: torch.device = CPU,
) -> str:
    """What the verdict depends on: the device (:func:`device_key`), model and batch shape."""
    shape = (tuple(batch.src.shape), tuple(batch.target()[0].shape))
    what = json.dumps([model_name, model_cfg, vocab, shape], sort_keys=True, default=str)
    digest = hashlib.sha1(what.encode()).hexdigest()[:12]
    return f"{device_key(device)} | {digest}"


def read_cache(path: Path) -> dict[str, Any]:
    """The cache's entries; a missing or unreadable file is an empty cache."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_cache(path: Path, key: str, entry: dict[str, Any]) -> bool:
    """Add ``entry`` under ``key`` (atomically); False (and a warning) if it cannot be written."""
    data = read_cache(path)
    data[key] = entry
    try:
        write_json(path, data, indent=1)
    except WriteError as err:
        log.warning("precision probe: %s; the verdict is not cached", err)
        return False
    return True


def model_steps(
    model: nn.Module, batch: Batch, names: Sequence[str] = ("fp32", "bf16")
) -> dict[str, Callable[[], None]]:
    """One forward+backward of ``model`` on ``batch`` (on its device) in each precision of
    ``names`` as the trainer runs it (:func:`resolve_precision`: autocast, fp16's loss
    scaling)."""

    def step_fn(precision: Precision) -> Callable[[], None]:
        def step() -> None:
            with precision.autocast():
                logits = model(batch)
            loss = label_smoothed_nll(logits, batch.target()[1], 0.1).loss
            precision.scaler.scale(loss).backward()

        return step

    return {name: step_fn(resolve_precision(name, batch.src.device)) for name in names}


@contextlib.contextmanager
def untouched(model: nn.Module) -> Iterator[None]:
    """Train mode inside; afterwards every RNG, the mode and the (cleared) gradients as if
    nothing had run."""
    saved, was_training = rng_state(), model.training
    model.train()
    try:
        yield
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
        set_rng_state(saved)


def spread(xs: Sequence[float]) -> float:
    """Interquartile range over median (inf for fewer than 2 values or a zero median)."""
    if len(xs) < 2:
        return float("inf")
    q1, median, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return (q3 - q1) / median if median > 0 else float("inf")


def measure(
    steps: Mapping[str, Callable[[], None]],
    sensors: Sensors,
    min_rounds: int = MIN_ROUNDS,
    max_rounds: int = MAX_ROUNDS,
    budget_s: float = BUDGET_S,
) -> Timing:
    """Warm each step up once, then time them interleaved (fp32, bf16, fp32, bf16, ...),
    each between two ``sensors.sync()``: ``min_rounds`` rounds, more while a spread exceeds
    :data:`NOISY`, at most ``max_rounds``, and none begun after ``budget_s`` seconds of
    timed steps."""
    timing = Timing({name: [] for name in steps}, load=sensors.load())
    cpu_clock = sensors.cpu or (lambda: 0.0)
    for step in steps.values():
        step()
    for done in range(1, max_rounds + 1):
        for name, step in steps.items():
            sensors.sync()
            wall, cpu = sensors.wall(), cpu_clock()
            step()
            sensors.sync()
            took = sensors.wall() - wall
            timing.cpu += cpu_clock() - cpu
            timing.wall += took
            timing.times[name].append(took)
        if done >= min_rounds and max(map(spread, timing.times.values())) <= NOISY:
            break
        if timing.wall >= budget_s:
            break
    return timing


def _medians(times: Mapping[str, Sequence[float]]) -> tuple[str, float, float]:
    """(the precision timed against fp32, fp32's median step, its median step)."""
    low = next(name for name in times if name != "fp32")
    return low, statistics.median(times["fp32"]), statistics.median(times[low])


def decide(times: Mapping[str, Sequence[float]]) -> tuple[str, str]:
    """(choice, reason) from the timed steps: bf16 (or fp16) only if MARGIN faster."""
    low, fp32, other = _medians(times)
    choice = low if other < (1.0 - MARGIN) * fp32 else "fp32"
    return choice, f"timed step: {low} {other:.4g} s vs fp32 {fp32:.4g} s ({fp32 / other:.2f}x)"


def load_busy(load: float | None, sensors: Sensors) -> str | None:
    """Why the machine is busy by its load average (rule (1) of the module docstring)."""
    if load is None:
        return None
    free = sensors.cores - min(sensors.threads, sensors.cores)
    others = max(0.0, load - 1.0)  # this process's own main thread is in the average
    if others > free + LOAD_SLACK:
        return (
            f"machine busy: 1-minute load {load:.2f} (others {others:.2f}) on "
            f"{sensors.cores} cores, {sensors.threads} torch threads"
        )
    return None


def busy(
    timing: Timing, sensors: Sensors, expected: Mapping[str, Sequence[float]] | None
) -> str | None:
    """Why the machine was busy while ``timing`` was taken, or None (module docstring)."""
    why = load_busy(timing.load, sensors)
    if why:
        return why
    asked = min(sensors.threads, sensors.cores)
    if sensors.cpu is not None and timing.wall > 0 and timing.cpu < STARVED * asked * timing.wall:
        return (
            f"machine busy: the process got {timing.cpu / timing.wall:.2f} CPU-seconds per "
            f"second while timed, under {STARVED:g} of its {asked} threads"
        )
    if expected and all(expected.get(name) for name in timing.times):
        slower = {
            name: statistics.median(v) / statistics.median(expected[name])
            for name, v in timing.times.items()
        }
        if all(s > SLOW for s in slower.values()):
            return (
                "machine busy: steps "
                + ", ".join(f"{name} {s:.1f}x" for name, s in slower.items())
                + f" slower than the cached timing (over {SLOW:g}x)"
            )
    return None


def noisy(timing: Timing, min_rounds: int = MIN_ROUNDS) -> str | None:
    """Why the timings are too noisy to keep, or None (module docstring)."""
    if timing.rounds < min_rounds:
        return f"timings noisy: only {timing.rounds} rounds within {BUDGET_S:g} s"
    spreads = {name: spread(v) for name, v in timing.times.items()}
    if max(spreads.values()) > NOISY:
        return (
            "timings noisy: "
            + ", ".join(f"{name} IQR/median {s:.2f}" for name, s in spreads.items())
            + f" after {timing.rounds} rounds (over {NOISY:g})"
        )
    return None


def contradicts(cached: str, times: Mapping[str, Sequence[float]]) -> bool:
    """The re-check's other precision is at least ``2 x MARGIN`` faster than ``cached``."""
    low, fp32, other = _medians(times)
    if cached == low:
        return fp32 < (1.0 - 2 * MARGIN) * other
    return other < (1.0 - 2 * MARGIN) * fp32


def _cached_times(entry: Mapping[str, Any], names: Sequence[str]) -> dict[str, list[float]] | None:
    times = entry.get("times")
    if not isinstance(times, dict):
        return None
    try:
        return {name: [float(t) for t in times[name]] for name in names}
    except (KeyError, TypeError, ValueError):
        return None


def _full(
    steps: Mapping[str, Callable[[], None]],
    sensors: Sensors,
    path: Path,
    key: str,
    expected: Mapping[str, Sequence[float]] | None,
) -> tuple[str, str]:
    """Time in full; cache the verdict only if the machine was idle and the timings steady."""
    timing = measure(steps, sensors)
    choice, reason = decide(timing.times)
    reason += f" over {timing.rounds} interleaved rounds"
    why_not = busy(timing, sensors, expected) or noisy(timing)
    if why_not:
        return choice, f"{reason}; not cached: {why_not}"
    entry = {"choice": choice, "reason": reason, "times": timing.times}
    if write_cache(path, key, entry):
        return choice, f"{reason}; cached in {path}"
    return choice, f"{reason}; not cached: {path} could not be written"


def probe(
    model: nn.Module,
    batch: Batch,
    cache_dir: Path,
    key: str,
    mode: str = "cache",
    steps: Mapping[str, Callable[[], None]] | None = None,
    sensors: Sensors | None = None,
    names: Sequence[str] = ("fp32", "bf16"),
) -> tuple[str, str]:
    """(one of ``names``, why) for ``key``: by ``mode`` (``trainer.precision_probe``), the
    re-checked cached verdict or a new timing, cached when clean (module docstring).
    ``steps`` and ``sensors`` default to the model's own steps in ``names`` (fp32 and the
    precision timed against it, :func:`candidates`) and a CPU's real clocks."""
    if mode not in PRECISION_PROBE_MODES:
        raise ConfigError(
            f"trainer.precision_probe must be one of {' | '.join(PRECISION_PROBE_MODES)}, "
            f"got {mode!r}"
        )
    sensors = sensors or Sensors()
    names = tuple(steps) if steps else tuple(names)
    path = Path(cache_dir) / CACHE_FILE
    entry = read_cache(path).get(key)
    if not (isinstance(entry, dict) and entry.get("choice") in names):
        entry = None
    expected = _cached_times(entry, names) if entry else None
    with untouched(model):
        steps = steps or model_steps(model, batch, names)
        if entry is None or mode == "refresh":
            choice, why = _full(steps, sensors, path, key, expected)
            return choice, ("refresh: " if mode == "refresh" else "") + why
        cached = f"cached {entry['choice']} ({entry.get('reason', '')}) in {path}"
        why_busy = load_busy(sensors.load(), sensors)
        if why_busy:
            return entry["choice"], f"{cached}; re-check skipped: {why_busy}"
        check = measure(steps, sensors, RECHECK_ROUNDS, RECHECK_ROUNDS)
        seen = decide(check.times)[1].replace("timed step", "re-check")
        why_busy = busy(check, sensors, expected)
        if why_busy:
            return entry["choice"], f"{cached}; {seen} ignored: {why_busy}"
        if not contradicts(entry["choice"], check.times):
            return entry["choice"], f"{cached}; {seen} agrees"
        choice, why = _full(steps, sensors, path, key, expected)
        return choice, f"{cached} contradicted by a clean {seen}: re-probed: {why}"


def probe_batch(dataset: Any, max_tokens: int) -> Batch:
    """The first training pairs of ``dataset`` (``dataset[i] -> (src, tgt, i)``), in corpus
    order, that fill one batch of ``max_tokens`` by the loader's rule
    (:func:`~attnmt.data.batching.pack_token_batches`, a pair costing
    ``max(|src|, |tgt|) + 1``)."""
    # every pair costs at least 1, so the first batch holds at most max_tokens of them
    head = [dataset[i] for i in range(min(len(dataset), max_tokens))]
    cost = [max(len(s), len(t)) + 1 for s, t, _ in head]
    batches = pack_token_batches(range(len(head)), cost, max_tokens)
    rows = [head[i] for i in batches[0].tolist()] if batches else []
    return make_batch([list(s) for s, _, _ in rows], [list(t) for _, t, _ in rows])


def lacks(precision: str, device: torch.device) -> str:
    """Why ``device`` cannot train in ``precision`` natively ('' when it can): fp16 needs
    CUDA; bf16 a GPU with native bf16 or a CPU with native bf16 kernels (emulated bf16 is
    an order of magnitude slower)."""
    if precision == "fp16" and device.type != "cuda":
        return f"fp16 needs a CUDA device and this run is on {device.type}"
    if precision != "bf16":
        return ""
    if device.type == "cpu":
        return "" if cpu_has_fast_bf16() else "this CPU has no native bf16 kernels (oneDNN)"
    if device.type == "cuda":
        return "" if _cuda_has_bf16() else "this GPU has no native bf16"
    return f"auto does not use bf16 on {device.type}"


def choose_precision(
    name: str,
    device: torch.device,
    model: nn.Module,
    batch: Callable[[], Batch],
    cache_dir: Path,
    dist: ddp.DistInfo,
    model_cfg: dict[str, Any],
    vocab: int,
    mode: str = "cache",
    resumed: str | None = None,
) -> Precision:
    """:func:`resolve_precision`, except ``auto`` on CUDA or on a CPU with native bf16
    kernels: timed by :func:`probe` (fp32 against :func:`candidates`, on
    :func:`device_sensors`) with ``mode`` = ``trainer.precision_probe`` (rank 0 times,
    every rank takes its verdict). ``resumed``: the precision a resumed run's checkpoint
    trained in; ``auto`` keeps it where this device runs it natively (so the run continues
    exactly), else decides afresh and warns. Logs the choice and why, on one line."""
    if name == "auto" and resumed is not None:
        missing = lacks(resumed, device)
        if not missing:
            log.info(
                "precision auto -> %s: the checkpoint's run trained in %s (kept, so the "
                "resumed run continues as it would have)",
                resumed,
                resumed,
            )
            return resolve_precision(resumed, device)
        log.warning(
            "the checkpoint's run trained in %s, but %s: precision auto is decided afresh, "
            "so this continuation's numerics differ from the uninterrupted run's",
            resumed,
            missing,
        )
    if name != "auto" or device.type not in ("cpu", "cuda"):
        precision = resolve_precision(name, device)
        if name == "auto":
            log.info("precision auto -> %s (%s)", precision.name, device)
        return precision
    if device.type == "cpu" and not cpu_has_fast_bf16():
        log.info(
            "precision auto -> fp32: this CPU has no native bf16 kernels (oneDNN), so bf16 "
            "would be emulated (~20x slower where measured)"
        )
        return resolve_precision("fp32", device)
    choice, why = "fp32", ""
    if dist.is_main:
        b = batch()
        key = cache_key(str(model_cfg.get("name", "")), model_cfg, vocab, b, device)
        sensors, names = device_sensors(device), candidates(device)
        choice, why = probe(model, b.to(device), cache_dir, key, mode, sensors=sensors, names=names)
    choice, why = ddp.broadcast_object((choice, why)) if dist.enabled else (choice, why)
    gpu = f" (cuda: {torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""
    log.info("precision auto -> %s%s: %s", choice, gpu, why)
    return resolve_precision(choice, device)
