"""The machine a run or a measurement is on: CPU, the SIMD flags that decide its speed, torch.

    m = this_machine()
    m.short()    # AMD EPYC (family 26 model 2 stepping 1) avx2 avx512 avx512-bf16,
                 #   torch 2.13.0, 2 threads
    m.key()      # a stable cache key (the precision probe's verdicts)
    m.to_dict()  # for JSON reports

The CPU is read from /proc/cpuinfo (Linux); elsewhere (macOS) only ``platform.processor()``
names it and no flags are known. The one place attnmt describes a CPU.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

FLAGS = {
    "avx2": "avx2",
    "avx512f": "avx512",
    "avx512_bf16": "avx512-bf16",
    "amx_tile": "amx",
    "amx_bf16": "amx-bf16",
}
"""The /proc/cpuinfo flags that decide fp32 and bf16 speed (oneDNN, MKL) -> their label."""


@dataclass(frozen=True)
class Cpu:
    """What /proc/cpuinfo says about the first processor."""

    name: str
    vendor: str = ""
    family: int | None = None
    model: int | None = None
    stepping: int | None = None
    flags: tuple[str, ...] = ()
    """The :data:`FLAGS` this CPU reports, in :data:`FLAGS` order."""


@dataclass(frozen=True)
class Machine:
    """A CPU, the torch build and thread count, and the CUDA device if any."""

    cpu: Cpu
    torch_version: str
    threads: int
    cuda: str | None = None
    kernels: str = ""
    """The CPU kernels torch picked (``torch.backends.cpu.get_cpu_capability()``: AVX2...)."""

    def has(self, flag: str) -> bool:
        """Whether the CPU reports ``flag`` (one of :data:`FLAGS`)."""
        return flag in self.cpu.flags

    def cpu_line(self) -> str:
        """``AMD EPYC (family 26 model 2 stepping 1) avx2 avx512 avx512-bf16``."""
        c = self.cpu
        ids = [f"{k} {v}" for k, v in (("family", c.family), ("model", c.model)) if v is not None]
        ids += [f"stepping {c.stepping}"] if c.stepping is not None else []
        text = f"{c.name} ({' '.join(ids)})" if ids else c.name
        return " ".join([text, *(FLAGS[f] for f in c.flags)])

    def short(self) -> str:
        """One line: the CPU, its flags, torch and its threads (and the CUDA device)."""
        cuda = f", CUDA {self.cuda}" if self.cuda else ""
        return f"{self.cpu_line()}, torch {self.torch_version}, {self.threads} threads{cuda}"

    def key(self) -> str:
        """A stable cache key: equal exactly when CPU kind, flags, torch, threads and CUDA
        device are (the CPU's numbers, not its marketing name, tell kinds apart)."""
        c = self.cpu
        ids = "/".join("?" if v is None else str(v) for v in (c.family, c.model, c.stepping))
        cpu = f"{c.vendor or '?'} {ids} {c.name}"
        flags = ",".join(c.flags) or "-"
        torch_part = f"torch {self.torch_version} | {self.threads} threads"
        return f"{cpu} | {flags} | {torch_part} | cuda {self.cuda or '-'}"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (``cpu`` flattened, flags as a list)."""
        out = asdict(self)
        out["cpu"]["flags"] = list(self.cpu.flags)
        return out


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def parse_cpuinfo(text: str) -> Cpu:
    """The first processor block of /proc/cpuinfo ``text``."""
    fields: dict[str, str] = {}
    for line in text.strip().split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    present = set(fields.get("flags", "").split())
    return Cpu(
        name=fields.get("model name") or platform.processor() or platform.machine() or "unknown",
        vendor=fields.get("vendor_id", ""),
        family=_int(fields.get("cpu family")),
        model=_int(fields.get("model")),
        stepping=_int(fields.get("stepping")),
        flags=tuple(f for f in FLAGS if f in present),
    )


@functools.cache
def this_cpu(cpuinfo: str = "/proc/cpuinfo") -> Cpu:
    """This machine's CPU (read once per process); the platform's name where /proc is absent."""
    try:
        return parse_cpuinfo(Path(cpuinfo).read_text(errors="replace"))
    except OSError:
        return Cpu(name=platform.processor() or platform.machine() or "unknown")


def this_machine() -> Machine:
    """This machine now: the CPU, and torch's version and *current* thread count."""
    cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    kernels = torch.backends.cpu.get_cpu_capability()
    return Machine(this_cpu(), torch.__version__, torch.get_num_threads(), cuda, kernels)
