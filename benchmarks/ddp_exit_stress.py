"""How often a two-rank gloo job hangs as it ends: the process group's teardown, repeated.

    python -m benchmarks.ddp_exit_stress --order attnmt --iterations 300
    python -m benchmarks.ddp_exit_stress --order unsafe --iterations 300

Each iteration joins a fresh two-rank gloo group, takes one DDP step on a tiny model,
all-reduces a tensor and ends the group. ``unsafe`` ends it as attnmt did before: a barrier,
``destroy_process_group``, then the DDP wrapper freed (its reducer drops the group's last
reference, and the group's destructor joins gloo's worker threads holding the GIL while a
worker may still be releasing the barrier's work, which needs the GIL). ``attnmt`` ends it as
the trainer does now: the wrapper dropped first, then
:func:`attnmt.train.distributed.cleanup` with ``together=True``. A pair that shows no
progress for ``--stall`` seconds is reported hung, with the ranks' stacks when py-spy is
installed. The race needs loaded cores: run ``--pairs 2`` (four processes) on two cores.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.context import SpawnProcess
from multiprocessing.queues import Queue
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from attnmt.train import distributed as ddp

ORDERS = ("attnmt", "unsafe")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_loop(rank: int, ports: list[int], order: str, done: Queue) -> None:
    """One rank: ``len(ports)`` groups, one after another, each joined and wrapped as the
    trainer does (torchrun's variables, :func:`~attnmt.train.distributed.init_distributed`,
    :func:`~attnmt.train.distributed.wrap_ddp`); rank 0 reports each one ended."""
    torch.set_num_threads(1)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    for i, port in enumerate(ports):
        os.environ["MASTER_PORT"] = str(port)
        info = ddp.init_distributed("cpu", timeout_s=60.0)
        net = ddp.wrap_ddp(nn.Linear(8, 8), info, "cpu")
        net(torch.randn(4, 8)).sum().backward()
        dist.all_reduce(torch.tensor([rank]))
        if order == "unsafe":
            dist.barrier()
            dist.destroy_process_group()
            del net  # the reducer drops the group's last reference here
        else:
            del net
            ddp.cleanup(together=True)
        if rank == 0:
            done.put(i)


def stacks(pid: int) -> str:
    """A process's Python and native stacks (py-spy), or why there are none."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        return "(pip install py-spy to see where it hangs)"
    cmd = [spy, "dump", "--native", "--pid", str(pid)]
    return subprocess.run(cmd, capture_output=True, text=True).stdout


def run_pair(order: str, iterations: int, stall: float) -> tuple[int, str]:
    """Start one pair of ranks; (groups ended, stacks if it hung) once it ends or stalls."""
    ctx = mp.get_context("spawn")
    done: Queue = ctx.Queue()
    ports = [free_port() for _ in range(iterations)]
    procs: list[SpawnProcess] = [
        ctx.Process(target=rank_loop, args=(rank, ports, order, done)) for rank in range(2)
    ]
    for p in procs:
        p.start()
    ended, last = 0, time.monotonic() + 60.0  # start-up: two imports of torch
    while ended < iterations and time.monotonic() - last < stall:
        with contextlib.suppress(queue.Empty):
            ended, last = done.get(timeout=1.0) + 1, time.monotonic()
    dump = "" if ended == iterations else "\n".join(stacks(p.pid or 0) for p in procs)
    for p in procs:
        p.kill()
    return ended, dump


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--order", choices=ORDERS, default="attnmt")
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--pairs", type=int, default=2, help="pairs of ranks at once (load)")
    ap.add_argument("--stall", type=float, default=20.0, help="seconds without progress")
    args = ap.parse_args(argv)
    with ThreadPoolExecutor(args.pairs) as pool:  # each pair's ranks are processes
        jobs = [
            pool.submit(run_pair, args.order, args.iterations, args.stall)
            for _ in range(args.pairs)
        ]
        results = [job.result() for job in jobs]
    hung = 0
    for k, (ended, dump) in enumerate(results):
        state = "ended every group" if ended == args.iterations else "HUNG"
        print(f"pair {k}: {args.order}: {ended} of {args.iterations} groups; {state}")
        if dump:
            hung += 1
            print(dump)
    print(f"{args.order}: {hung} of {args.pairs} pairs hung", file=sys.stderr)
    return 1 if hung else 0


if __name__ == "__main__":
    sys.exit(main())
