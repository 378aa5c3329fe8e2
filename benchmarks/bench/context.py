"""What every bench gets: the options, the device, the shared workload and matmul peaks."""

from __future__ import annotations

import argparse
import functools
from dataclasses import dataclass, field

import torch

from .matmul import bf16_native, matmul_peak
from .measure import Row
from .workload import Workload, load_workload


@dataclass
class Context:
    """One run's state; ``device`` is set by the driver before each device's benches."""

    args: argparse.Namespace
    devices: list[torch.device]
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    peaks: dict[tuple[str, str], Row] = field(default_factory=dict)

    @functools.cached_property
    def work(self) -> Workload:
        """The corpus, config and batches, loaded on first use (shared by all devices)."""
        return load_workload(self.args.overrides, self.args.batches)

    @property
    def first_device(self) -> bool:
        """Whether the benches run on the first device (device-independent ones run once)."""
        return self.device == self.devices[0]

    def peak(self, precision: str) -> Row:
        """The matmul peak of ``precision`` on this device, measured once."""
        key = (str(self.device), precision)
        if key not in self.peaks:
            args = self.args
            self.peaks[key] = matmul_peak(args.mm_sizes, precision, self.device, args.mm_repeat)
        return self.peaks[key]

    def precisions(self) -> dict[str, str]:
        """precision -> "" when it runs, else why not (bf16 without native kernels)."""
        bf16 = bf16_native(self.device) or self.args.force_bf16
        return {"fp32": "", "bf16": "" if bf16 else "skipped: emulated (--force-bf16 runs it)"}

    def close(self) -> None:
        """Remove temporary files (the stand-in corpus)."""
        if "work" in self.__dict__:
            self.work.close()
