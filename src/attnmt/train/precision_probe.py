"""``trainer.precision=auto`` on a CPU, decided by timing: fp32 or bf16, whichever trains faster.

Whether bf16 autocast pays on a CPU is not told by its flags. Measured on the CPU kinds
this project has met (one training step of the Transformer, interleaved runs):

==========================================  ===========================
CPU                                         bf16 step time / fp32
==========================================  ===========================
AMD EPYC, AVX2 only (bf16 emulated)         ~20x (36.6 s vs 1.65 s)
Intel Xeon, AVX512-BF16, no AMX             1.71x slower
AMD EPYC, AVX512-BF16                       0.4x (2.5x faster)
==========================================  ===========================

So: without native bf16 kernels (oneDNN) fp32, no probe needed (emulated bf16 is an
order of magnitude slower). With them, :func:`probe` times a few forward+backward passes
of the run's own model on a batch of its own training pairs in each precision,
interleaved, and picks the one with the lower median (bf16 only if at least
:data:`MARGIN` faster). The verdict is cached per CPU, torch version, thread count, model
and batch size in ``<data.root>/precision_probe.json``, so later runs start at once. The
probe saves and restores every random generator and zeroes the gradients it made: the
run trains exactly as if the probe had been a cache hit.
"""

from __future__ import annotations

import hashlib
import json
import logging
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnmt.atomic import write_json
from attnmt.data.batching import Batch, make_batch, pack_token_batches
from attnmt.errors import WriteError
from attnmt.machine import this_machine
from attnmt.train import distributed as ddp
from attnmt.train.loss import label_smoothed_nll
from attnmt.train.precision import Precision, cpu_has_fast_bf16, resolve_precision
from attnmt.train.rng import rng_state, set_rng_state

log = logging.getLogger(__name__)

MARGIN = 0.05
"""bf16 is chosen only when its median step is at least 5% shorter than fp32's."""
ROUNDS = 3
"""Timed forward+backward passes per precision (after one untimed warm-up each)."""
CACHE_FILE = "precision_probe.json"


def cache_key(model_name: str, model_cfg: dict[str, Any], vocab: int, batch: Batch) -> str:
    """What the verdict depends on: the machine (CPU, torch, threads), model and batch shape."""
    shape = (tuple(batch.src.shape), tuple(batch.tgt_input.shape))
    what = json.dumps([model_name, model_cfg, vocab, shape], sort_keys=True, default=str)
    digest = hashlib.sha1(what.encode()).hexdigest()[:12]
    return f"{this_machine().key()} | {digest}"


def read_cache(path: Path) -> dict[str, Any]:
    """The cache's entries; a missing or unreadable file is an empty cache."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_cache(path: Path, key: str, entry: dict[str, Any]) -> None:
    """Add ``entry`` under ``key`` (atomically; a failure to write is only logged)."""
    data = read_cache(path)
    data[key] = entry
    try:
        write_json(path, data, indent=1)
    except WriteError as err:
        log.warning("precision probe: %s; the verdict is not cached", err)


def _step_fn(model: nn.Module, batch: Batch, dtype: torch.dtype | None) -> Callable[[], None]:
    def step() -> None:
        with torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
            logits = model(batch)
        label_smoothed_nll(logits, batch.tgt_out, 0.1).loss.backward()

    return step


def time_steps(
    model: nn.Module,
    batch: Batch,
    rounds: int = ROUNDS,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Seconds per forward+backward in fp32 and bf16, interleaved after a warm-up of each.

    Restores every RNG and clears the gradients, so training continues unaffected.
    """
    saved, was_training = rng_state(), model.training
    steps = {"fp32": _step_fn(model, batch, None), "bf16": _step_fn(model, batch, torch.bfloat16)}
    times: dict[str, list[float]] = {name: [] for name in steps}
    model.train()
    try:
        for step in steps.values():
            step()
        for _ in range(rounds):
            for name, step in steps.items():
                start = clock()
                step()
                times[name].append(clock() - start)
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
        set_rng_state(saved)
    return times


def decide(times: dict[str, Sequence[float]]) -> tuple[str, str]:
    """(choice, reason) from the timed steps: bf16 only if MARGIN faster."""
    fp32, bf16 = statistics.median(times["fp32"]), statistics.median(times["bf16"])
    choice = "bf16" if bf16 < (1.0 - MARGIN) * fp32 else "fp32"
    return choice, f"timed step: bf16 {bf16:.3f} s vs fp32 {fp32:.3f} s ({fp32 / bf16:.2f}x)"


def probe(
    model: nn.Module,
    batch: Batch,
    cache_dir: Path,
    key: str,
    timer: Callable[[nn.Module, Batch], dict[str, list[float]]] | None = None,
) -> tuple[str, str]:
    """(fp32 | bf16, why): the cached verdict for ``key`` or a new timing, then cached."""
    path = Path(cache_dir) / CACHE_FILE
    entry = read_cache(path).get(key)
    if isinstance(entry, dict) and entry.get("choice") in ("fp32", "bf16"):
        return entry["choice"], f"{entry.get('reason', '')}; cached in {path}"
    times = (timer or time_steps)(model, batch)
    choice, reason = decide(times)
    write_cache(path, key, {"choice": choice, "reason": reason, "times": times})
    return choice, f"{reason}; cached in {path}"


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


def choose_precision(
    name: str,
    device: torch.device,
    model: nn.Module,
    batch: Callable[[], Batch],
    cache_dir: Path,
    dist: ddp.DistInfo,
    model_cfg: dict[str, Any],
    vocab: int,
) -> Precision:
    """:func:`resolve_precision`, except ``auto`` on a CPU with native bf16 kernels: timed
    by :func:`probe` (rank 0 times, every rank takes its verdict). Logs the choice and why."""
    if name != "auto" or device.type != "cpu":
        precision = resolve_precision(name, device)
        if name == "auto":
            log.info("precision auto -> %s (%s)", precision.name, device)
        return precision
    if not cpu_has_fast_bf16():
        log.info(
            "precision auto -> fp32: this CPU has no native bf16 kernels (oneDNN), so bf16 "
            "would be emulated (~20x slower where measured)"
        )
        return resolve_precision("fp32", device)
    choice, why = "fp32", ""
    if dist.is_main:
        b = batch()
        key = cache_key(str(model_cfg.get("name", "")), model_cfg, vocab, b)
        choice, why = probe(model, b.to(device), cache_dir, key)
    choice, why = ddp.broadcast_object((choice, why)) if dist.enabled else (choice, why)
    log.info("precision auto -> %s: %s", choice, why)
    return resolve_precision(choice, device)
