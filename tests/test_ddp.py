"""Two CPU ranks (gloo) through the real trainer equal one process with the combined batch.

The token sampler gives rank r the batches r, r+2, r+4, ... of the epoch's batch list, so
step k of a 2-rank job sees batches (2k, 2k+1). One process with ``accum_steps=2`` sees
the same pair in the same step, and the trainer normalises both by the global token
count: the parameters must agree (dropout off; float summation order differs, hence a
small tolerance) and both replicas must be bit-identical.
"""

from __future__ import annotations

import os
import socket
import weakref
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp
from helpers.toy_train import DDP_TOY
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
WORLD = 2
STEPS = 5
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def single_process_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No torchrun variables inherited from the caller: the test spawns its own ranks."""
    for var in TORCHRUN_VARS:
        monkeypatch.delenv(var, raising=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_config(root: Path, accum_steps: int, *extra: str) -> dict[str, Any]:
    overrides = [
        *DDP_TOY,
        f"data.root={root}",
        f"trainer.max_steps={STEPS}",
        f"trainer.accum_steps={accum_steps}",
        *extra,
    ]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    return {str(k): v for k, v in container.items()}


def train_and_dump(cfg: dict[str, Any], run_dir: Path, out: Path) -> None:
    """Run the trainer in this process; save its final parameters and per-step figures."""
    from attnmt.train import distributed as ddp
    from attnmt.train.loop import Trainer

    torch.set_num_threads(1)
    steps: list[dict[str, float]] = []
    trainer = Trainer(OmegaConf.create(cfg), run_dir, on_step=lambda s, fig: steps.append(fig))
    finished = False
    try:
        result = trainer.run()
        finished = True
    finally:
        wrapper, wrapped = weakref.ref(trainer.net), type(trainer.net).__name__
        trainer.close()
        ddp.cleanup(together=finished)
    params = {k: v.detach().cpu().clone() for k, v in trainer.parts.model.state_dict().items()}
    # whether close() let the DDP wrapper (and its reducer's hold on the group) go
    released = wrapper() is None
    dump = {"params": params, "steps": steps, "result": result, "wrapped": wrapped}
    torch.save({**dump, "wrapper_released": released}, out)


def rank_worker(rank: int, port: int, cfg: dict[str, Any], run_dir: str, out_dir: str) -> None:
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(WORLD),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    train_and_dump(cfg, Path(run_dir), Path(out_dir) / f"rank{rank}.pt")


@pytest.mark.slow
@pytest.mark.usefixtures("single_process_env")
def test_two_ranks_match_one_process_with_the_combined_batch(tmp_path: Path) -> None:
    root = tmp_path / "data"

    # one process, accumulating the two batches each step; also prepares the corpus
    # and tokenizer, so the ranks below find them ready
    single_cfg = run_config(root, accum_steps=WORLD)
    train_and_dump(single_cfg, tmp_path / "single", tmp_path / "single.pt")
    single = torch.load(tmp_path / "single.pt", weights_only=True)
    assert single["result"]["step"] == STEPS

    ddp_cfg = run_config(root, accum_steps=1)
    args = (free_port(), ddp_cfg, str(tmp_path / "ddp"), str(tmp_path))
    mp.spawn(rank_worker, args=args, nprocs=WORLD, join=True)
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    assert r0["result"]["step"] == r1["result"]["step"] == STEPS
    # Trainer.close() let each rank's DDP wrapper go, so the group ended in ddp.cleanup
    assert [r["wrapped"] for r in (r0, r1)] == ["DistributedDataParallel"] * WORLD
    assert r0["wrapper_released"] and r1["wrapper_released"]

    # both replicas identical, bit for bit
    assert r0["params"].keys() == r1["params"].keys()
    for k in r0["params"]:
        assert torch.equal(r0["params"][k], r1["params"][k]), k

    # same tokens per update and same losses as the single process, step for step
    for s, d0, d1 in zip(single["steps"], r0["steps"], r1["steps"], strict=True):
        assert d0["tokens"] == d1["tokens"] == s["tokens"]
        assert d0["loss"] == pytest.approx(s["loss"], rel=1e-5)
        assert d1["loss"] == pytest.approx(s["loss"], rel=1e-5)
        assert d0["grad_norm"] == pytest.approx(s["grad_norm"], rel=1e-4)

    # same parameters as the single process; and training moved them
    moved = 0.0
    for k, v in single["params"].items():
        torch.testing.assert_close(r0["params"][k], v, atol=1e-5, rtol=1e-4, msg=k)
    first = single["steps"][0]["loss"]
    moved = abs(single["steps"][-1]["loss"] - first)
    assert moved > 1e-3, "losses did not change; the comparison would be vacuous"

    # rank 0 alone wrote the checkpoint, holding rank 0's parameters
    from attnmt.checkpoint import load_checkpoint

    ckpt = load_checkpoint(tmp_path / "ddp" / "checkpoints" / "last.pt")
    assert ckpt.step == STEPS
    for k, v in r0["params"].items():
        assert torch.equal(ckpt.weights[k], v), k


def spawn_ranks(cfg: dict[str, Any], run_dir: Path, out_dir: Path) -> list[dict[str, Any]]:
    """Train on WORLD spawned gloo ranks; each rank's dump (params, steps, result)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    mp.spawn(rank_worker, args=(free_port(), cfg, str(run_dir), str(out_dir)), nprocs=WORLD)
    return [torch.load(out_dir / f"rank{r}.pt", weights_only=True) for r in range(WORLD)]


@pytest.mark.slow
@pytest.mark.usefixtures("single_process_env")
def test_two_ranks_with_dropout_resume_exactly_and_draw_their_own_masks(tmp_path: Path) -> None:
    root, run = tmp_path / "data", tmp_path / "run"
    dropout = ("model.dropout=0.3", "seed=11")
    train_and_dump(run_config(root, 1, *dropout), tmp_path / "prep", tmp_path / "prep.pt")
    full = spawn_ranks(
        run_config(root, 1, *dropout, "trainer.max_steps=6"), tmp_path / "full", tmp_path / "a"
    )
    spawn_ranks(run_config(root, 1, *dropout, "trainer.max_steps=3"), run, tmp_path / "b")
    ckpt = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["step"] == 3 and len(ckpt["rng_ranks"]) == WORLD
    assert not torch.equal(ckpt["rng_ranks"][0]["torch"], ckpt["rng_ranks"][1]["torch"])
    resumed = spawn_ranks(
        run_config(root, 1, *dropout, "trainer.max_steps=6", f"resume={run}"), run, tmp_path / "c"
    )
    for rank in range(WORLD):  # every rank's losses of steps 4..6 repeat, bit for bit
        assert [f["loss"] for f in resumed[rank]["steps"]] == [
            f["loss"] for f in full[rank]["steps"][3:]
        ]
    for k, v in full[0]["params"].items():
        assert torch.equal(resumed[0]["params"][k], v), k


def failure_excerpt(output: str, head: int = 4000, tail: int = 2000) -> str:
    """What a failed torchrun printed, for the assertion message: from the first rank's
    ``Traceback`` on (the rank's own error, which the launcher's summary at the end does not
    repeat), then the summary's tail."""
    start = output.find("Traceback")
    if start < 0:
        return output[-(head + tail) :]
    cause = output[start : start + head]
    return cause if start + head >= len(output) - tail else f"{cause}\n...\n{output[-tail:]}"


@pytest.mark.slow
def test_torchrun_train_py_two_cpu_ranks(tmp_path: Path) -> None:
    """The user's command: ``torchrun --standalone --nproc_per_node 2 train.py ...``."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={WORLD}",
        str(root / "train.py"),
        "data=toy_reverse",
        f"data.root={tmp_path / 'data'}",
        "data.toy.train=300",
        "data.toy.valid=8",
        "data.toy.test=8",
        "model=transformer_tiny",
        "device=cpu",
        "trainer.max_steps=3",
        "trainer.max_tokens=200",
        "trainer.val_every_steps=0",
        "trainer.test=false",
        "trainer.progress_bar=false",
        "trainer.log_every_steps=1",
        f"hydra.run.dir={run_dir}",
    ]
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARS}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, failure_excerpt(output)
    from attnmt.checkpoint import load_checkpoint

    ckpt = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert ckpt.step == 3
    # rank-0-only logging: every training log line appears once
    assert output.count("step 2 |") == 1, failure_excerpt(output)


def test_failure_excerpt_keeps_the_ranks_traceback_and_the_summary() -> None:
    rank_error = "Traceback (most recent call last):\n  File x\nRuntimeError: rank 1 broke\n"
    output = "log line\n" * 2000 + rank_error + "launcher " * 1000 + "ChildFailedError"
    excerpt = failure_excerpt(output, head=200, tail=100)
    assert excerpt.startswith("Traceback") and "rank 1 broke" in excerpt
    assert excerpt.endswith("ChildFailedError") and "\n...\n" in excerpt
    assert failure_excerpt("short " + rank_error) == rank_error
    assert failure_excerpt("x" * 10, head=3, tail=2) == "x" * 5
