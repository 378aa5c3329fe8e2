"""trainer.precision: resolution per device, autocast dtype, GradScaler only for fp16."""

from __future__ import annotations

import pytest
import torch

from attnmt.errors import ConfigError
from attnmt.train.precision import resolve_precision

CPU = torch.device("cpu")


def test_fp32_is_a_plain_context_without_scaling() -> None:
    p = resolve_precision("fp32", CPU)
    assert p.name == "fp32" and p.dtype is None and not p.scaler.is_enabled()
    with p.autocast():
        y = torch.ones(2, 3) @ torch.ones(3, 2)
    assert y.dtype == torch.float32


def test_bf16_autocasts_matmuls_on_cpu() -> None:
    p = resolve_precision("bf16", CPU)
    with p.autocast():
        y = torch.nn.Linear(3, 2)(torch.ones(4, 3))
    assert y.dtype == torch.bfloat16 and not p.scaler.is_enabled()


def test_auto_on_cpu_without_the_probe_is_fp32() -> None:
    """bf16 on a CPU is only chosen by precision_probe.choose_precision's timing."""
    assert resolve_precision("auto", CPU).name == "fp32"


def test_auto_on_cuda_without_the_probe_is_fp32(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not bf16 because the GPU has it: on CUDA too, autocast is only the probe's call."""
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    p = resolve_precision("auto", torch.device("cuda"))
    assert p.name == "fp32" and p.dtype is None and not p.scaler.is_enabled()


def test_fp16_needs_cuda() -> None:
    with pytest.raises(ConfigError, match="fp16 needs a CUDA device"):
        resolve_precision("fp16", CPU)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_fp16_on_cuda_enables_the_grad_scaler() -> None:
    p = resolve_precision("fp16", torch.device("cuda"))
    assert p.dtype == torch.float16 and p.scaler.is_enabled()
