"""Two torchrun "nodes" on one machine, as two machines would run them.

Each node is its own ``torchrun --nnodes=2 --nproc-per-node=1 --node-rank=K --rdzv-backend=c10d
--rdzv-endpoint=127.0.0.1:PORT --rdzv-id=ID train.py ...`` process, started in its own folder
with its own environment (no torchrun variables inherited) and its own ``data.root``, as on
two machines without a shared file system. The c10d rendezvous, the gloo process group
across agents, rank 0's checkpoint and a SIGTERM that reaches one node only are what the
single-node tests (tests/test_ddp.py) cannot show.

Every process a test starts is killed when it ends, passed or not: each agent runs in its
own session, and so does each worker torchrun starts, so both are looked up and killed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from helpers.toy_train import DDP_TOY

from attnmt.checkpoint import load_checkpoint
from attnmt.checkpoint_format import Checkpoint
from attnmt.run_dir import RunDir
from attnmt.run_record import RecordError, read_record
from attnmt.train import distributed as ddp
from attnmt.train.interrupt import StopFlag, TrainingInterrupted

ROOT = Path(__file__).resolve().parents[1]
NODES = 2
STEPS = 5
RUN_DIR = "outputs/two-nodes"
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
TOY = [
    *DDP_TOY,
    "model.d_model=32",
    "model.d_ff=64",
    "model.n_heads=2",
    "model.enc_layers=1",
    "model.dec_layers=1",
    "trainer.log_every_steps=1",
]
"""A 1+1-layer Transformer on 400 toy pairs, dropout off, constant learning rate."""
PLACED = re.compile(rf"\] - rank (\d+) of {NODES} ")
"""The line every rank logs as it joins (attnmt.train.distributed.init_distributed)."""


# ------------------------------------------------------------ stop requests, in-process


def test_a_repeated_sigterm_is_one_stop_request_and_ctrl_c_still_aborts() -> None:
    # SLURM signals every process of a step and torchrun forwards its own copy: a worker
    # can get SIGTERM twice for one request
    with StopFlag() as flag:
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGTERM)
        assert flag.requested and flag.signum == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)


def test_other_ranks_point_at_rank_0_for_the_checkpoint(tmp_path: Path) -> None:
    last = tmp_path / "checkpoints" / "last.pt"  # where rank 1 would have it; rank 0 wrote it
    rank1 = TrainingInterrupted(8, last, True, signal.SIGTERM, main_host="gpu-a")
    assert rank1.exit_code == 143
    assert rank1.message() == (
        "interrupted at step 8 with every rank: rank 0, on host gpu-a, saved "
        "checkpoints/last.pt in its run folder and printed how to continue"
    )
    assert str(last) in TrainingInterrupted(8, last, True, signal.SIGTERM).message()


def stop_rank(rank: int, port: int, out: str) -> None:
    """One of two gloo ranks: a signal on one rank reaches the other's stop decision."""
    os.environ.update(RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    info = ddp.init_distributed("cpu")
    seen: dict[str, object] = {"main_host": info.main_host}
    flag = StopFlag()
    # no signal: rank 0's reason (its clock decides the time budget)
    seen["plain"] = ddp.agreed_stop_reason("time_budget" if rank == 0 else None, flag, info)
    # a SIGTERM on rank 1 alone stops both, with its signal
    if rank == 1:
        flag.requested, flag.signum = True, signal.SIGTERM
    seen["signalled"] = ddp.agreed_stop_reason(None, flag, info)
    seen["signum"] = flag.signum
    # a signal ends rank 0's validation: rank 1 leaves the block by KeyboardInterrupt too
    later = StopFlag()
    try:
        with ddp.stop_together(later, info):
            if rank == 0:
                later.signum = signal.SIGINT
                raise KeyboardInterrupt
        seen["block"] = "left normally"
    except KeyboardInterrupt:
        seen["block"] = f"interrupted {later.requested} {later.signum}"
    with ddp.stop_together(StopFlag(), info):
        seen["quiet block"] = "left normally"
    ddp.cleanup()
    Path(out, f"rank{rank}.json").write_text(json.dumps(seen))


def test_a_signal_on_one_rank_stops_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in TORCHRUN_VARS:
        monkeypatch.delenv(var, raising=False)
    mp.spawn(stop_rank, args=(free_port(), str(tmp_path)), nprocs=2)
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for rank in (0, 1):
        assert seen[rank]["main_host"] == socket.gethostname()
        assert seen[rank]["plain"] == "time_budget"
        assert seen[rank]["signalled"] == "interrupted"
        assert seen[rank]["signum"] == signal.SIGTERM
        assert seen[rank]["block"] == f"interrupted True {int(signal.SIGINT)}"
        assert seen[rank]["quiet block"] == "left normally"


# ------------------------------------------------------------ two torchrun nodes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def machine_env() -> dict[str, str]:
    """The environment of a fresh shell on another machine: no torchrun variables."""
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARS}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


def torchrun(node_rank: int, port: int, rdzv_id: str) -> list[str]:
    """The launcher line a user types on machine ``node_rank``."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={NODES}",
        "--nproc-per-node=1",
        f"--node-rank={node_rank}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}",
        f"--rdzv-id={rdzv_id}",
        str(ROOT / "train.py"),
    ]


def children(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (read from /proc), depth first."""
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], list(kids.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(kids.get(child, []))
    return found


def runs_train_py(pid: int) -> bool:
    """Whether process ``pid`` is (still) a ``train.py`` worker."""
    try:
        return str(ROOT / "train.py").encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class Node:
    """One machine's ``torchrun ... train.py`` process, run in its own folder."""

    def __init__(self, rank: int, home: Path, port: int, rdzv_id: str, args: list[str]) -> None:
        self.rank, self.home = rank, home
        self.seen: set[int] = set()  # the workers found so far, killed even if orphaned
        home.mkdir(parents=True, exist_ok=True)
        self.out = home / "torchrun.out"
        cmd = [*torchrun(rank, port, rdzv_id), *TOY, "data.root=data", f"hydra.run.dir={RUN_DIR}"]
        with open(self.out, "w") as out:
            self.proc = subprocess.Popen(
                [*cmd, *args],
                cwd=home,
                env=machine_env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def run_dir(self) -> Path:
        return self.home / RUN_DIR

    def output(self) -> str:
        return self.out.read_text(errors="replace")

    def tree(self) -> list[int]:
        """torchrun and every process under it now; the workers are remembered."""
        below = children(self.proc.pid)
        self.seen.update(pid for pid in below if runs_train_py(pid))
        return [self.proc.pid, *below]

    def worker_rank(self) -> int | None:
        """The global rank of this node's worker (its RANK variable), once it runs."""
        for pid in self.tree()[1:]:
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            for var in environ:
                if var.startswith(b"RANK="):
                    return int(var[5:])
        return None

    def signal_tree(self, sig: int) -> None:
        """Send ``sig`` to torchrun and to every process under it, as SLURM does at its
        time limit."""
        for pid in self.tree():
            with suppress(ProcessLookupError):
                os.kill(pid, sig)

    def kill(self) -> None:
        """SIGKILL the agent, its workers and their sessions."""
        orphans = [pid for pid in self.seen if runs_train_py(pid)]
        for pid in [*self.tree(), *orphans]:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)  # the worker's own session
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


@contextmanager
def two_nodes(base: Path, *args: str) -> Iterator[list[Node]]:
    """Start node 0 and node 1 with one rendezvous; kill whatever is left on the way out."""
    port, rdzv_id = free_port(), f"attnmt-{uuid.uuid4().hex[:8]}"
    nodes: list[Node] = []
    try:
        for k in range(NODES):
            nodes.append(Node(k, base / f"node{k}", port, rdzv_id, list(args)))
        yield nodes
    finally:
        for node in nodes:
            node.kill()


def outputs(nodes: list[Node], tail: int = 3000) -> str:
    """The end of every node's terminal output, for failure messages."""
    return "\n".join(f"--- node {n.rank}\n{n.output()[-tail:]}" for n in nodes)


def wait_all(nodes: list[Node], timeout: float) -> list[int]:
    """Every node's exit status; fails with their output when one is still running."""
    deadline = time.monotonic() + timeout
    for node in nodes:
        try:
            node.proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            pytest.fail(f"node {node.rank} still running after {timeout} s\n{outputs(nodes)}")
    return [node.proc.returncode for node in nodes]


def check_stopped_together(nodes: list[Node], main: Node, codes: list[int]) -> int:
    """Both nodes ended on the signal, without an error of ours; rank 0 saved last.pt once
    and told how to continue, the other rank pointed at it. The step it stopped at."""
    assert all(code != 0 for code in codes), outputs(nodes)
    full = outputs(nodes, tail=10**7)
    assert "src/attnmt" not in full and "RuntimeError" not in full, full  # no traceback of ours
    stopped = load_checkpoint(main.run_dir / "checkpoints" / "last.pt").step
    log = (main.run_dir / "train.log").read_text()
    assert log.count(f"interrupted at step {stopped}; saving") == 1, log[-3000:]
    assert f"step {stopped + 1} |" not in log  # no update after the one in flight
    assert f"continue with resume={main.run_dir}" in main.output()
    other = next(n for n in nodes if n is not main)
    assert f"interrupted at step {stopped} with every rank: rank 0, on host" in other.output()
    return stopped


def main_node(nodes: list[Node]) -> Node:
    """The node whose worker was rank 0 in the latest run, as its train.log says."""
    found = [n for n in nodes if PLACED.findall((n.run_dir / "train.log").read_text())[-1] == "0"]
    assert len(found) == 1, [n.rank for n in found]
    return found[0]


def only_main_wrote(nodes: list[Node]) -> Node:
    """The node with a checkpoint, checked to be rank 0's alone."""
    main = main_node(nodes)
    with_ckpt = [n for n in nodes if (n.run_dir / "checkpoints").exists()]
    assert with_ckpt == [main], [n.rank for n in with_ckpt]
    return main


def single_process(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python train.py ...`` alone, in its own folder."""
    home.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(ROOT / "train.py"), *TOY, "data.root=data", *args]
    return subprocess.run(
        [*cmd, f"hydra.run.dir={RUN_DIR}"],
        cwd=home,
        env=machine_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def train_nll(ckpt: Checkpoint) -> list[tuple[int, float]]:
    """(step, train NLL) of every logged update, from a checkpoint's history."""
    assert ckpt.training is not None
    history = ckpt.training.trainer["history"]["train"]
    return [(int(step), float(nll)) for step, _, nll in history]


@pytest.mark.slow
def test_two_nodes_equal_one_process_with_accumulation(tmp_path: Path) -> None:
    one = single_process(tmp_path / "single", f"trainer.max_steps={STEPS}", "trainer.accum_steps=2")
    assert one.returncode == 0, one.stderr[-3000:]
    single = load_checkpoint(tmp_path / "single" / RUN_DIR / "checkpoints" / "last.pt")
    assert single.step == STEPS

    with two_nodes(tmp_path, f"trainer.max_steps={STEPS}") as nodes:
        assert wait_all(nodes, timeout=90) == [0, 0], outputs(nodes)
        main = only_main_wrote(nodes)
    ckpt = load_checkpoint(main.run_dir / "checkpoints" / "last.pt")
    assert ckpt.step == STEPS and ckpt.training is not None
    assert len(ckpt.training.rng_ranks or []) == NODES

    # the same losses, update for update, and the same weights as one process that
    # accumulates the two ranks' batches
    ddp_nll, one_nll = train_nll(ckpt), train_nll(single)
    assert [s for s, _ in ddp_nll] == [s for s, _ in one_nll] == list(range(1, STEPS + 1))
    for (_, a), (_, b) in zip(ddp_nll, one_nll, strict=True):
        assert a == pytest.approx(b, rel=1e-5)
    assert abs(one_nll[-1][1] - one_nll[0][1]) > 1e-3, "training did not move the loss"
    for k, v in single.weights.items():
        torch.testing.assert_close(ckpt.weights[k], v, atol=1e-5, rtol=1e-4, msg=k)

    # rank 0 logged every update once; the other node's log holds no update lines
    other = next(n for n in nodes if n is not main)
    steps = [e["step"] for e in read_record(main.run_dir).train]
    assert steps == list(range(1, STEPS + 1))
    assert not RunDir(other.run_dir).metrics.is_file()  # the run record is rank 0's too
    # each machine prepared its own data.root: the same tokenizer on both
    models = [sorted((n.home / "data").glob("*/spm-*/spm.model")) for n in nodes]
    assert [len(m) for m in models] == [1, 1]
    assert models[0][0].read_bytes() == models[1][0].read_bytes()


def wait_for_step(nodes: list[Node], step: int, timeout: float) -> None:
    """Until some node's run record shows update ``step``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node in nodes:
            node.tree()
            try:
                if any(e["step"] >= step for e in read_record(node.run_dir).train):
                    return
            except RecordError:
                pass  # no record on this node (yet)
            if node.proc.poll() is not None:
                pytest.fail(f"node {node.rank} ended early:\n{node.output()[-3000:]}")
        time.sleep(0.05)
    pytest.fail(f"no step {step} within {timeout} s")


STOPS = {
    "rank1": ((1,), signal.SIGTERM, True),
    "rank0": ((0,), signal.SIGTERM, True),
    "both": ((0, 1), signal.SIGTERM, True),
    "ctrl-c": ((1,), signal.SIGINT, False),
}
"""(ranks whose node is signalled, signal, to the whole tree or to torchrun alone)."""


@pytest.mark.slow
@pytest.mark.parametrize("stop", STOPS.values(), ids=STOPS.keys())
def test_a_signal_on_one_node_stops_both_with_last_pt(
    tmp_path: Path, stop: tuple[tuple[int, ...], int, bool]
) -> None:
    # SIGTERM to every process of the node of rank 1 alone (its own time limit, preemption,
    # kill there), of rank 0 alone, or of both (SLURM's time limit); Ctrl-C at one node's
    # terminal reaches torchrun alone (its workers run in sessions of their own)
    signalled, sig, tree = stop
    endless = ("trainer.max_steps=100000", "trainer.val_every_steps=100000")
    with two_nodes(tmp_path, *endless) as nodes:
        wait_for_step(nodes, 3, timeout=60)
        ranks = {node.worker_rank(): node for node in nodes}
        assert set(ranks) == {0, 1}, ranks
        for rank in signalled:
            if tree:
                ranks[rank].signal_tree(sig)
            else:
                ranks[rank].proc.send_signal(sig)
        codes = wait_all(nodes, timeout=60)
        main = only_main_wrote(nodes)
        assert main is ranks[0]
        stopped = check_stopped_together(nodes, main, codes)
    assert stopped >= 3
    if signalled != (1,) or not tree:
        return  # resuming is checked once, after a stop from the other node (preemption)

    # both nodes resume from it and go on for two more updates
    for k in range(NODES):  # rank 0's run folder on both machines (copied, or shared)
        shutil.copytree(main.run_dir, tmp_path / "resumed" / f"node{k}" / RUN_DIR)
    with two_nodes(
        tmp_path / "resumed", f"resume={RUN_DIR}", f"trainer.max_steps={stopped + 2}"
    ) as nodes:
        assert wait_all(nodes, timeout=90) == [0, 0], outputs(nodes)
        main = main_node(nodes)
    resumed = load_checkpoint(main.run_dir / "checkpoints" / "last.pt")
    assert resumed.step == stopped + 2
    assert [s for s, _ in train_nll(resumed)] == list(range(1, stopped + 3))  # no gap


@pytest.mark.slow
def test_sigterm_on_rank_0_during_validation_stops_both_with_last_pt(tmp_path: Path) -> None:
    # rank 0 validates alone while rank 1 waits for its figures; a SIGTERM there stops
    # rank 0's decoding between two decoder steps
    long_validation = (
        "trainer.max_steps=100000",
        "trainer.val_every_steps=4",
        "data.toy.valid=1500",
        "trainer.val_subset=0",
        "trainer.val_beam_size=5",
    )
    with two_nodes(tmp_path, *long_validation) as nodes:
        wait_for_step(nodes, 4, timeout=60)
        ranks = {node.worker_rank(): node for node in nodes}
        ranks[0].signal_tree(signal.SIGTERM)
        codes = wait_all(nodes, timeout=60)
        main = only_main_wrote(nodes)
        assert main is ranks[0]
        assert check_stopped_together(nodes, main, codes) == 4
    log = (main.run_dir / "train.log").read_text()
    assert "valid step 4 |" not in log, log[-3000:]  # the signal came during validation
