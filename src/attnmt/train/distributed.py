"""Distributed data parallel helpers: one code path for 1 process and for ``torchrun``.

``torchrun --nproc_per_node N train.py ...`` sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR`` and ``MASTER_PORT``; :func:`init_distributed` reads them and joins the
process group (NCCL on CUDA, gloo on CPU). Without them (or with ``WORLD_SIZE=1``) every
helper here is a no-op, so the trainer calls them unconditionally.

Token-normalised loss under DDP
-------------------------------
DDP *averages* gradients over the ``W`` ranks. One process on the combined batch would
minimise ``L = (sum_r S_r) / N`` where ``S_r`` is rank r's summed token loss and
``N = sum_r n_r`` the global count of non-pad target tokens. So each rank back-propagates

    loss_r = S_r * W / N          (N = global_token_count(n_r, info))

and DDP's mean gives ``(1/W) sum_r grad(S_r) * W / N = grad(L)`` exactly. With gradient
accumulation over micro-batches, ``N`` is the global count over all micro-batches of the
update (sum the local counts first, then call :func:`global_token_count` once).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from attnmt.errors import ConfigError
from attnmt.train.interrupt import StopFlag

T = TypeVar("T")
log = logging.getLogger(__name__)

BACKENDS: dict[str, str] = {"cuda": "nccl", "cpu": "gloo"}
"""Process-group backend per device type."""


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands in the job.

    rank: global rank (0..world_size-1); local_rank: rank on this machine (picks the GPU);
    is_main: rank 0, the only one that logs and writes checkpoints;
    enabled: a process group is in use (world_size > 1);
    main_host: the host name of rank 0's machine ("" when single).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    is_main: bool = True
    enabled: bool = False
    main_host: str = ""


SINGLE = DistInfo()
"""The single-process job."""


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"environment variable {name}={raw!r} is not an integer") from None


def is_enabled() -> bool:
    """True when a default process group is initialised in this process."""
    return dist.is_available() and dist.is_initialized()


def init_distributed(
    device: torch.device | str, timeout_s: float = 1800.0, quiet: bool = True
) -> DistInfo:
    """Join the process group described by torchrun's environment variables.

    Returns :data:`SINGLE` (``enabled=False``) when ``WORLD_SIZE`` is unset or 1.
    On CUDA it also makes ``cuda:LOCAL_RANK`` the current device (see :func:`local_device`).
    With ``quiet`` the other ranks log warnings and errors only (:func:`quiet_non_main`).
    Calling it again in a process whose group already exists reuses that group.
    """
    world_size = _env_int("WORLD_SIZE", 1)
    if world_size <= 1:
        return SINGLE
    rank = _env_int("RANK", 0)
    local_rank = _env_int("LOCAL_RANK", rank)
    if not 0 <= rank < world_size:
        raise ConfigError(f"RANK={rank} is outside 0..WORLD_SIZE-1={world_size - 1}")
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(k)]
    if missing:
        raise ConfigError(
            f"WORLD_SIZE={world_size} but {', '.join(missing)} unset; start the job with "
            "torchrun (torchrun --nproc_per_node N train.py ...)"
        )
    if not dist.is_available():
        raise ConfigError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    dev_type = torch.device(device).type
    if dev_type == "cuda":
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        backend = BACKENDS.get(dev_type, "gloo")
        dist.init_process_group(
            backend=backend,
            init_method="env://",
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout_s),
        )
    host = socket.gethostname()
    info = DistInfo(
        rank=rank,
        world_size=world_size,
        local_rank=local_rank,
        is_main=rank == 0,
        enabled=True,
        main_host=broadcast_object(host),
    )
    # c10d rendezvous numbers the nodes itself (torchrun ignores --node-rank), so every
    # machine's train.log says where rank 0 writes the log and the checkpoints
    log.info(
        "rank %d of %d (local rank %d) on host %s; rank 0, on host %s, logs, validates "
        "and writes the checkpoints",
        rank,
        world_size,
        local_rank,
        host,
        info.main_host,
    )
    if quiet:
        quiet_non_main(info)
    return info


def quiet_non_main(info: DistInfo, level: int = logging.WARNING) -> None:
    """Rank-0-only logging: on other ranks raise the root logger's level to ``level``.

    Call once after :func:`init_distributed` (Hydra has configured logging by then);
    warnings and errors of every rank still show.
    """
    if info.enabled and not info.is_main:
        logging.getLogger().setLevel(level)


def local_device(device: torch.device | str, info: DistInfo) -> torch.device:
    """The device this rank computes on: ``cuda:LOCAL_RANK`` for CUDA jobs, else ``device``."""
    dev = torch.device(device)
    if dev.type == "cuda" and info.enabled:
        return torch.device("cuda", info.local_rank)
    return dev


def _comm_device() -> torch.device:
    """Tensors passed to collectives must live here (NCCL needs CUDA, gloo takes CPU)."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_sum(t: Tensor) -> Tensor:
    """Sum ``t`` over ranks in place and return it; returns ``t`` unchanged when single."""
    if not is_enabled():
        return t
    comm = _comm_device()
    if t.device == comm:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t
    buf = t.to(comm)
    dist.all_reduce(buf, op=dist.ReduceOp.SUM)
    t.copy_(buf)
    return t


def global_token_count(n_tokens: int, info: DistInfo) -> int:
    """``N = sum_r n_r``: this update's non-pad target tokens over every rank.

    Each rank then back-propagates ``summed_loss * info.world_size / N`` (module docstring).
    """
    if not info.enabled:
        return int(n_tokens)
    t = torch.tensor([int(n_tokens)], dtype=torch.long, device=_comm_device())
    all_reduce_sum(t)
    return int(t.item())


def loss_scale(n_global: int, info: DistInfo) -> float:
    """Factor applied to a rank's *summed* loss: ``world_size / N`` (1/N single-process)."""
    return info.world_size / max(int(n_global), 1)


def broadcast_object(obj: T, src: int = 0) -> T:
    """Rank ``src``'s ``obj`` on every rank (picklable objects); ``obj`` when single."""
    if not is_enabled():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src, device=_comm_device())
    return box[0]


def gather_object(obj: T, info: DistInfo) -> list[T] | None:
    """Every rank's ``obj`` (a list in rank order) on rank 0, None elsewhere; ``[obj]``
    when single. Every rank must call it."""
    if not info.enabled:
        return [obj]
    box: list[Any] | None = [None] * info.world_size if info.is_main else None
    dist.gather_object(obj, box, dst=0)
    return box


def agreed_stop_reason(
    reason: str | None, flag: StopFlag, info: DistInfo, interrupted: str = "interrupted"
) -> str | None:
    """The reason every rank stops for now (None: go on); every rank calls it.

    ``interrupted`` when a signal reached any rank: a SIGTERM can reach one node only (its
    own time limit, preemption, ``kill`` there), and ranks that went on would wait in the
    next all-reduce until killed, with no checkpoint. The ranks that were not signalled
    set ``flag`` as if they had been, with the first signalled rank's signal (so every
    process exits 128 + it). Otherwise rank 0's ``reason`` (its clock decides the time
    budget). ``reason`` itself when single.
    """
    if not info.enabled:
        return reason
    votes: list[tuple[int, str | None]] = [(0, None)] * info.world_size
    dist.all_gather_object(votes, (flag.signum if flag.requested else 0, reason))
    signalled = [rank for rank, (signum, _) in enumerate(votes) if signum]
    if not signalled:
        return votes[0][1]
    if not flag.requested:
        first = signalled[0]
        flag.requested, flag.signum = True, votes[first][0]
        log.warning(
            "%s reached rank %d: every rank stops after this update, and rank 0 saves "
            "checkpoints/last.pt",
            signal.Signals(flag.signum).name,
            first,
        )
    return interrupted


@contextlib.contextmanager
def stop_together(flag: StopFlag, info: DistInfo) -> Iterator[None]:
    """A block that a signal may end on one rank (KeyboardInterrupt: rank 0's validation or
    test decoding stops between two decoder steps) and that every rank leaves alike; every
    rank enters it.

    On the way out the ranks share whether a signal ended the block on any of them; if so
    the others raise KeyboardInterrupt too, with ``flag`` set to that signal, so every rank
    goes on to the same next collective (the one saving last.pt) instead of waiting for
    figures that never come. A plain block when single.
    """
    if not info.enabled:
        yield
        return
    try:
        yield
    except KeyboardInterrupt:
        _share_stop(flag, stopped=True)
        raise
    if _share_stop(flag, stopped=False):
        raise KeyboardInterrupt


def _share_stop(flag: StopFlag, stopped: bool) -> bool:
    """Whether a signal stopped any rank (every rank calls it); if so ``flag`` holds it."""
    mine = (flag.signum or signal.SIGINT) if stopped else 0
    t = torch.tensor([int(mine)], dtype=torch.long, device=_comm_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    signum = int(t.item())
    if signum and not flag.requested:
        flag.requested, flag.signum = True, signum
    return signum != 0


def rank_seed(seed: int, rank: int) -> int:
    """The seed of rank ``rank``'s own random streams (dropout): ``seed`` on rank 0, a
    distinct value derived from (seed, rank) elsewhere, so ranks draw different masks."""
    if rank == 0:
        return seed
    return int(np.random.SeedSequence([seed, rank]).generate_state(1)[0])


def barrier() -> None:
    """Wait for every rank; no-op when single."""
    if is_enabled():
        dist.barrier()


def cleanup(together: bool = False) -> None:
    """Leave and destroy the process group (safe to call when single or twice).

    ``together``: every rank calls it here (a run that finished, or a stop every rank agreed
    on); each first waits for the others, and holds that barrier's work until the group is
    destroyed. Destroying a gloo group joins its worker threads while holding the GIL, and
    a worker that is still releasing the last collective's work needs the GIL to release
    its tensors: the two would wait for each other forever (torch 2.13). A held work is not
    released by a worker, so the join finds the workers idle. The DDP wrapper must be gone
    by then (``Trainer.close``), so that the group's last reference is the one dropped
    here. A barrier that fails (a rank already gone) is let be: the group is destroyed all
    the same. Without ``together`` (an error on one rank: the others may never arrive)
    there is no barrier.
    """
    if not is_enabled():
        return
    last = None
    if together:
        try:
            last = dist.barrier(async_op=True)
            last.wait()
        except RuntimeError as err:  # gloo's DistBackendError: a peer closed its end
            log.debug("the last barrier failed (%s); destroying the group without it", err)
    dist.destroy_process_group()
    del last  # after the group: see above


def wrap_ddp(
    model: nn.Module,
    info: DistInfo,
    device: torch.device | str,
    find_unused_parameters: bool = False,
) -> nn.Module:
    """``DistributedDataParallel(model)`` when enabled, else ``model`` itself.

    The model must already be on ``device``. DDP broadcasts rank 0's parameters at
    construction, so every replica starts identical. Only ``forward`` goes through the
    wrapper; call ``unwrap(model).attention(...)``/``decode_step`` for everything else.
    """
    if not info.enabled:
        return model
    dev = torch.device(device)
    kwargs: dict[str, Any] = {"find_unused_parameters": find_unused_parameters}
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else info.local_rank
        return DistributedDataParallel(model, device_ids=[index], output_device=index, **kwargs)
    return DistributedDataParallel(model, **kwargs)


def unwrap(model: nn.Module) -> nn.Module:
    """The plain model inside DDP and/or ``torch.compile`` wrappers."""
    while True:
        if isinstance(model, DistributedDataParallel):
            model = model.module
        elif hasattr(model, "_orig_mod") and isinstance(model._orig_mod, nn.Module):
            model = model._orig_mod
        else:
            return model


def no_sync(model: nn.Module, sync: bool) -> contextlib.AbstractContextManager[Any]:
    """Skip DDP's gradient all-reduce for accumulation micro-batches (``sync=False``).

    Use ``with no_sync(model, sync=is_last_micro_batch): loss.backward()``; a plain
    context on an unwrapped model.
    """
    if not sync and isinstance(model, DistributedDataParallel):
        return model.no_sync()
    return contextlib.nullcontext()


def shard(items: Sequence[T], info: DistInfo) -> list[T]:
    """Rank r's share of an ordered list of batches: items r, r+W, r+2W, ...

    The tail is dropped so every rank gets exactly ``len(items) // W`` items; otherwise
    the rank with one more batch would wait forever in DDP's all-reduce. Pass batches
    already built (token-bucketed, shuffled with the same seed on every rank) so the
    shards keep the bucketing.
    """
    if not info.enabled:
        return list(items)
    n = (len(items) // info.world_size) * info.world_size
    return list(items[info.rank : n : info.world_size])
