"""The ``device`` setting: ``auto`` | ``cpu`` | ``cuda`` | ``cuda:N`` | ``mps``."""

from __future__ import annotations

import torch

from attnmt.errors import ConfigError


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` → CUDA when present, else CPU; otherwise the named device, which must exist.

    A device this machine lacks fails here with a ConfigError naming ``device``, before
    any data work, instead of a torch error deep inside training.
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ConfigError(
            f"device={name!r} is not a device (auto, cpu, cuda, cuda:N, mps): {err}"
        ) from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device={name!r} but CUDA is not available here; use device=cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(
                f"device={name!r} but only {torch.cuda.device_count()} CUDA device(s) exist"
            )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"device={name!r} but MPS is not available here; use device=cpu")
    return device
