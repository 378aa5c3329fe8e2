"""Mixed precision: ``trainer.precision = fp32 | bf16 | fp16 | auto``.

* ``bf16``: ``torch.autocast`` with bfloat16 (CPU or CUDA); no loss scaling needed.
* ``fp16``: CUDA only; autocast with float16 plus a ``GradScaler`` (dynamic loss scaling).
* ``auto``: the trainer decides by timing
  (:func:`attnmt.train.precision_probe.choose_precision`, before this module is asked):
  on CUDA whichever of fp32 and bf16 (fp16 on a GPU without native bf16) trains the run's
  own model faster; on a CPU fp32 without native bf16 kernels, else whichever of fp32 and
  bf16 trains it faster. Asked directly (no model to time), this module resolves ``auto``
  to fp32 on every device.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch

from attnmt.errors import ConfigError


@dataclass
class Precision:
    """name: resolved precision; dtype: autocast dtype (None = fp32);
    scaler: GradScaler (enabled only for fp16)."""

    name: str
    dtype: torch.dtype | None
    device_type: str
    scaler: torch.amp.GradScaler

    def autocast(self) -> AbstractContextManager:
        """Context for the forward pass and loss."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)


def cpu_has_fast_bf16() -> bool:
    """oneDNN has native bf16 kernels on this CPU (AVX512-BF16 or AMX)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def _auto(device: torch.device) -> str:
    """fp32 on every device: bf16 or fp16, on a GPU or a CPU, is only ever the timed probe's
    call (see the module docstring), never assumed from the device."""
    return "fp32"


def _fp16_check(device: torch.device) -> str:
    if device.type != "cuda":
        raise ConfigError(
            "trainer.precision=fp16 needs a CUDA device (no fast fp16 on CPU); "
            "use trainer.precision=bf16 or fp32"
        )
    return "fp16"


RESOLVERS: dict[str, Callable[[torch.device], str]] = {
    "fp32": lambda device: "fp32",
    "bf16": lambda device: "bf16",
    "fp16": _fp16_check,
    "auto": _auto,
}
DTYPES: dict[str, torch.dtype | None] = {
    "fp32": None,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


def resolve_precision(name: str, device: torch.device) -> Precision:
    """Turn the config value (validated by attnmt.train.run_config) into a :class:`Precision`."""
    resolved = RESOLVERS[name](device)
    scaler = torch.amp.GradScaler(device.type, enabled=resolved == "fp16")
    return Precision(resolved, DTYPES[resolved], device.type, scaler)
