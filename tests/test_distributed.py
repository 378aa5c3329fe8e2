"""DDP helpers: single-process no-ops, and a 2-process gloo job without the trainer.

The 2-process test checks the token-normalised loss recipe of attnmt.train.distributed:
rank r back-propagates ``S_r * W / N`` (S_r summed token loss, N global token count);
after DDP's gradient mean both replicas must equal one process that steps on the
combined batch with loss ``(S_0 + S_1) / N``.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from torch import nn
from torch.nn import functional as F

from attnmt import PAD_ID
from attnmt.errors import ConfigError
from attnmt.train.distributed import (
    SINGLE,
    DistInfo,
    all_reduce_sum,
    barrier,
    broadcast_object,
    cleanup,
    global_token_count,
    init_distributed,
    local_device,
    loss_scale,
    no_sync,
    quiet_non_main,
    shard,
    unwrap,
    wrap_ddp,
)

WORLD = 2
STEPS = 4
DIM, CLASSES = 5, 7
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def no_torchrun_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in TORCHRUN_VARS:
        monkeypatch.delenv(var, raising=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------- single process


def test_no_env_is_single_process(no_torchrun_env: None) -> None:
    info = init_distributed("cpu")
    assert info == SINGLE
    assert (info.rank, info.world_size, info.local_rank, info.is_main, info.enabled) == (
        0,
        1,
        0,
        True,
        False,
    )


def test_world_size_one_is_single_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    assert init_distributed("cpu").enabled is False


def test_helpers_are_noops_when_single(no_torchrun_env: None) -> None:
    info = init_distributed("cpu")
    t = torch.tensor([1.5, 2.0])
    out = all_reduce_sum(t)
    assert out is t and out.tolist() == [1.5, 2.0]
    obj = {"a": [1, 2]}
    assert broadcast_object(obj) is obj
    barrier()
    cleanup()
    assert global_token_count(17, info) == 17
    assert loss_scale(20, info) == pytest.approx(1 / 20)
    model = nn.Linear(2, 2)
    assert wrap_ddp(model, info, "cpu") is model
    assert unwrap(model) is model
    with no_sync(model, sync=False):
        pass
    assert local_device("cpu", info) == torch.device("cpu")
    assert shard([1, 2, 3], info) == [1, 2, 3]


class FakeWork:
    """A collective's work that notes when it is waited on and released."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def wait(self) -> None:
        self.calls.append("wait")

    def __del__(self) -> None:
        self.calls.append("work released")


@pytest.fixture
def group_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A process group that notes the barriers and destruction cleanup() asks of it."""
    from attnmt.train import distributed as ddp

    calls: list[str] = []

    def fake_barrier(async_op: bool = False) -> FakeWork:
        calls.append(f"barrier async_op={async_op}")
        return FakeWork(calls)

    monkeypatch.setattr(ddp, "is_enabled", lambda: True)
    monkeypatch.setattr(ddp.dist, "barrier", fake_barrier)
    monkeypatch.setattr(ddp.dist, "destroy_process_group", lambda: calls.append("destroy"))
    return calls


@pytest.mark.parametrize("together", [True, False])
def test_cleanup_holds_the_last_barrier_until_the_group_is_gone(
    group_calls: list[str], together: bool
) -> None:
    # a gloo worker releasing the last work needs the GIL that the group's destruction
    # holds while it joins the workers: the work must outlive the group
    cleanup(together=together)
    if together:
        assert group_calls == ["barrier async_op=True", "wait", "destroy", "work released"]
    else:  # an error on one rank: the others may never come to a barrier
        assert group_calls == ["destroy"]


def test_cleanup_destroys_the_group_when_the_last_barrier_fails(
    group_calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a rank that is already gone: gloo's barrier raises (DistBackendError, a RuntimeError)
    from attnmt.train import distributed as ddp

    def failing_barrier(async_op: bool = False) -> FakeWork:
        raise RuntimeError("Connection closed by peer")

    monkeypatch.setattr(ddp.dist, "barrier", failing_barrier)
    cleanup(together=True)
    assert group_calls == ["destroy"]


def test_shard_drops_the_ragged_tail() -> None:
    items = list(range(7))
    r0 = DistInfo(rank=0, world_size=2, local_rank=0, is_main=True, enabled=True)
    r1 = DistInfo(rank=1, world_size=2, local_rank=1, is_main=False, enabled=True)
    assert shard(items, r0) == [0, 2, 4]
    assert shard(items, r1) == [1, 3, 5]
    assert loss_scale(40, r1) == pytest.approx(2 / 40)


def test_quiet_non_main_raises_the_level_on_other_ranks_only() -> None:
    root = logging.getLogger()
    old = root.level
    try:
        root.setLevel(logging.INFO)
        quiet_non_main(DistInfo(rank=0, world_size=2, local_rank=0, is_main=True, enabled=True))
        quiet_non_main(SINGLE)
        assert root.level == logging.INFO
        quiet_non_main(DistInfo(rank=1, world_size=2, local_rank=1, is_main=False, enabled=True))
        assert root.level == logging.WARNING
    finally:
        root.setLevel(old)


def test_unwrap_compiled_wrapper() -> None:
    class Wrapper(nn.Module):
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self._orig_mod = inner

    inner = nn.Linear(2, 2)
    assert unwrap(Wrapper(inner)) is inner


def test_missing_master_addr_is_a_config_error(
    no_torchrun_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ConfigError, match=r"MASTER_ADDR, MASTER_PORT unset.*torchrun"):
        init_distributed("cpu")


def test_bad_rank_is_a_config_error(no_torchrun_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "5")
    with pytest.raises(ConfigError, match="RANK=5"):
        init_distributed("cpu")
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(ConfigError, match="RANK='x' is not an integer"):
        init_distributed("cpu")


# ---------------------------------------------------------------- two processes


def make_batches(seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """STEPS*WORLD batches of (features [B,T,DIM], targets [B,T]) with ragged padding.

    Batches differ in size and padding so that the token counts differ per rank.
    """
    g = torch.Generator().manual_seed(seed)
    batches = []
    for i in range(STEPS * WORLD):
        b, t = 2 + i % 3, 3 + (i * 5) % 4
        x = torch.randn(b, t, DIM, generator=g)
        y = torch.randint(1, CLASSES, (b, t), generator=g)
        lengths = torch.randint(1, t + 1, (b,), generator=g)
        y[torch.arange(t)[None, :] >= lengths[:, None]] = PAD_ID
        batches.append((x, y))
    return batches


def summed_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Summed token cross-entropy over non-pad targets, and the token count."""
    logits = model(x)  # [B,T,C]
    loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=PAD_ID, reduction="sum")
    return loss, int(y.ne(PAD_ID).sum())


def make_model() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(DIM, 8), nn.Tanh(), nn.Linear(8, CLASSES))


def ddp_worker(rank: int, port: int, out_dir: str) -> None:
    import os

    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(WORLD),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    torch.set_num_threads(1)
    logging.getLogger().setLevel(logging.INFO)  # as Hydra's job logging leaves it
    info = init_distributed("cpu")
    try:
        assert info.enabled and info.rank == rank and info.world_size == WORLD
        assert info.is_main == (rank == 0)
        if rank == 1:  # replicas start different; DDP must broadcast rank 0's weights
            torch.manual_seed(99)
            model: nn.Module = nn.Sequential(nn.Linear(DIM, 8), nn.Tanh(), nn.Linear(8, CLASSES))
        else:
            model = make_model()
        model = wrap_ddp(model, info, "cpu")
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        mine = shard(make_batches(seed=7), info)
        counts = []
        for x, y in mine:
            opt.zero_grad()
            s, n = summed_loss(model, x, y)
            n_global = global_token_count(n, info)
            counts.append((n, n_global))
            (s * loss_scale(n_global, info)).backward()
            opt.step()
        token = broadcast_object(f"hello from {rank}", src=0)
        summed = all_reduce_sum(torch.tensor([float(rank + 1)]))
        barrier()
        torch.save(
            {
                "params": {k: v.detach().clone() for k, v in unwrap(model).state_dict().items()},
                "counts": counts,
                "token": token,
                "summed": summed.item(),
                "log_level": logging.getLogger().level,
            },
            Path(out_dir) / f"rank{rank}.pt",
        )
    finally:
        cleanup()


def test_two_gloo_ranks_match_one_process_on_the_combined_batch(tmp_path: Path) -> None:
    mp.spawn(ddp_worker, args=(free_port(), str(tmp_path)), nprocs=WORLD, join=True)
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=True)

    # rank-0-only logging
    assert r0["log_level"] == logging.INFO
    assert r1["log_level"] == logging.WARNING

    # collectives
    assert r0["token"] == r1["token"] == "hello from 0"
    assert r0["summed"] == r1["summed"] == 3.0
    # the global count is the sum of the two local counts, seen identically on both ranks
    for (n0, g0), (n1, g1) in zip(r0["counts"], r1["counts"], strict=True):
        assert g0 == g1 == n0 + n1
        assert n0 != n1 or n0 > 0

    # both replicas identical
    for k in r0["params"]:
        assert torch.equal(r0["params"][k], r1["params"][k]), k

    # one process stepping on the combined batch (b0 ∪ b1) with loss (S0+S1)/N
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    batches = make_batches(seed=7)
    for step in range(STEPS):
        opt.zero_grad()
        parts = [summed_loss(model, *batches[step * WORLD + r]) for r in range(WORLD)]
        total = torch.stack([s for s, _ in parts]).sum()  # S_0 + S_1 + ...
        n = sum(c for _, c in parts)
        (total / n).backward()
        opt.step()
    ref = model.state_dict()
    moved = False
    for k, v in ref.items():
        torch.testing.assert_close(r0["params"][k], v, atol=1e-6, rtol=1e-6)
        moved |= not torch.equal(make_model().state_dict()[k], v)
    assert moved, "the reference model never changed; the test would be vacuous"
