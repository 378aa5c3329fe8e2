"""The machine a run or a measurement is on: CPU, the SIMD flags that decide its speed, torch.

    m = this_machine()
    m.short()    # AMD EPYC (family 26 model 2 stepping 1) avx2 avx512 avx512-bf16,
                 #   torch 2.13.0, 2 threads
    m.describe("plain")  # AMD EPYC family 26 model 2 (and the other forms of describe)
    m.key()      # a stable cache key (the precision probe's verdicts)
    m.to_dict()  # for JSON reports; Machine.from_dict(d) reads one back (a record's machine)

The CPU is read from /proc/cpuinfo (Linux); elsewhere (macOS) only ``platform.processor()``
names it and no flags are known. The one place attnmt describes a CPU
(:meth:`Machine.describe`).
"""

from __future__ import annotations

import functools
import os
import platform
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

FLAGS = {
    "avx2": "avx2",
    "avx512f": "avx512",
    "avx512_bf16": "avx512-bf16",
    "amx_tile": "amx",
    "amx_bf16": "amx-bf16",
}
"""The /proc/cpuinfo flags that decide fp32 and bf16 speed (oneDNN, MKL) -> their label."""

T = TypeVar("T")

CpuForm = Literal["line", "plain", "flags", "kind", "tag"]
"""The forms :meth:`Machine.describe` writes a CPU in."""


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
    """A CPU, the torch build and thread count, and the CUDA device if any.

    Read back from a record (:meth:`from_dict`), a field the record never had is None
    (the CPU's name "?")."""

    cpu: Cpu
    torch_version: str | None
    threads: int | None
    cuda: str | None = None
    kernels: str | None = None
    """The CPU kernels torch picked (``torch.backends.cpu.get_cpu_capability()``: AVX2...)."""
    cores: int | None = None
    """The host's CPU count, where the record has it (the migrated results records' machines)."""

    def has(self, flag: str) -> bool:
        """Whether the CPU reports ``flag`` (one of :data:`FLAGS`)."""
        return flag in self.cpu.flags

    def describe(self, form: CpuForm = "line") -> str:
        """The CPU in one of the forms logs, reports, pages and file names use (each kept
        as those already print it; ``?`` or ``x`` for a number the record lacks):

        ``line``   ``AMD EPYC (family 26 model 2 stepping 1) avx2 avx512 avx512-bf16`` (logs,
                   benchmark reports: the flags' labels)
        ``plain``  ``AMD EPYC family 26 model 2`` (the study pages' "Machines:" lines)
        ``flags``  ``AMD EPYC (family 26 model 2) avx2 avx512f avx512_bf16`` (results.md,
                   recipe.md: the flags as /proc/cpuinfo names them)
        ``kind``   ``AuthenticAMD 26/2 avx2 avx512f avx512_bf16, torch 2.13.0+cpu`` (what sets
                   a CPU run's speed: runs of one kind compare at equal minutes)
        ``tag``    ``cpu26.2`` (a kind in a file name)
        """
        c = self.cpu
        ids = [(k, v) for k, v in (("family", c.family), ("model", c.model)) if v is not None]
        if form == "tag":
            return "cpu" + ".".join("x" if v is None else str(v) for v in (c.family, c.model))
        if form == "kind":
            nums = "/".join("?" if v is None else str(v) for v in (c.family, c.model))
            flags = " ".join(c.flags) or "no avx2"
            return f"{c.vendor or c.name or '?'} {nums} {flags}, torch {self.torch_version or '?'}"
        if form == "plain":
            return " ".join([c.name, *(f"{k} {v}" for k, v in ids)])
        if form == "line":
            ids += [("stepping", c.stepping)] if c.stepping is not None else []
        words = " ".join(f"{k} {v}" for k, v in ids)
        name = f"{c.name} ({words})" if words else c.name
        shown = c.flags if form == "flags" else tuple(FLAGS.get(f, f) for f in c.flags)
        return " ".join([name, *shown])

    def short(self) -> str:
        """One line: the CPU, its flags, torch and its threads (and the CUDA device)."""
        cuda = f", CUDA {self.cuda}" if self.cuda else ""
        return f"{self.describe()}, torch {self.torch_version}, {self.threads} threads{cuda}"

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
        """Plain data for JSON (``cpu`` flattened, flags as a list; ``cores`` only where
        known): what :meth:`from_dict` reads back."""
        out = asdict(self)
        out["cpu"]["flags"] = list(self.cpu.flags)
        if self.cores is None:
            del out["cores"]
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Machine:
        """The machine of a record's ``machine`` object (:meth:`to_dict`'s, with or without
        ``cores``); fields it lacks are None (``vendor`` "", ``flags`` empty), fields it
        does not know are ignored. ValueError naming the field when one has the wrong type."""
        if not isinstance(data, Mapping):
            raise ValueError(f"machine: an object expected, got {type(data).__name__}")
        cpu = data.get("cpu")
        if not isinstance(cpu, Mapping):
            raise ValueError("machine.cpu: an object with the CPU's name expected")
        flags = cpu.get("flags") or []
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            raise ValueError(f"machine.cpu.flags: a list of names expected, got {flags!r}")
        return cls(
            cpu=Cpu(
                name=_typed(cpu, "name", str, "machine.cpu") or "?",
                vendor=_typed(cpu, "vendor", str, "machine.cpu") or "",
                family=_typed(cpu, "family", int, "machine.cpu"),
                model=_typed(cpu, "model", int, "machine.cpu"),
                stepping=_typed(cpu, "stepping", int, "machine.cpu"),
                flags=tuple(flags),
            ),
            torch_version=_typed(data, "torch_version", str, "machine"),
            threads=_typed(data, "threads", int, "machine"),
            cuda=_typed(data, "cuda", str, "machine"),
            kernels=_typed(data, "kernels", str, "machine"),
            cores=_typed(data, "cores", int, "machine"),
        )


def _typed(data: Mapping[str, Any], key: str, kind: type[T], where: str) -> T | None:
    """``data[key]`` when it is a ``kind`` (an int is not a bool), None when absent or null;
    ValueError naming ``where.key`` otherwise."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{where}.{key}: {kind.__name__} expected, got {value!r}")
    return value


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


def usable_cores() -> int:
    """The cores this process may run on (its affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def this_machine() -> Machine:
    """This machine now: the CPU, and torch's version and *current* thread count."""
    import torch  # here: reading a record's machine (Machine.from_dict) needs no torch

    cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    kernels = torch.backends.cpu.get_cpu_capability()
    return Machine(this_cpu(), torch.__version__, torch.get_num_threads(), cuda, kernels)
