"""attnmt.machine on fixture /proc/cpuinfo texts: parsed fields, the one line, the cache key."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnmt import machine
from attnmt.machine import Cpu, Machine, parse_cpuinfo


def _cpuinfo(vendor: str, family: int, model: int, stepping: int, name: str, flags: str) -> str:
    block = (
        f"processor\t: {{n}}\nvendor_id\t: {vendor}\ncpu family\t: {family}\n"
        f"model\t\t: {model}\nmodel name\t: {name}\nstepping\t: {stepping}\n"
        f"flags\t\t: fpu sse sse2 {flags}\n"
    )
    return "\n".join(block.format(n=n) for n in range(2))  # two processors, blank-separated


BASE = "fma avx avx2 bmi2"
EPYC = _cpuinfo("AuthenticAMD", 26, 2, 1, "AMD EPYC", f"{BASE} avx512f avx512_vnni avx512_bf16")
XEON = _cpuinfo(
    "GenuineIntel", 6, 143, 8, "Intel(R) Xeon(R) Platinum 8480+",
    f"{BASE} avx512f avx512_bf16 amx_bf16 amx_tile amx_int8",
)  # fmt: skip
AVX2 = _cpuinfo("AuthenticAMD", 23, 49, 0, "AMD EPYC 7B12", BASE)


def test_an_epyc_with_avx512_bf16() -> None:
    cpu = parse_cpuinfo(EPYC)
    assert cpu == Cpu("AMD EPYC", "AuthenticAMD", 26, 2, 1, ("avx2", "avx512f", "avx512_bf16"))
    m = Machine(cpu, "2.13.0", 2)
    assert m.short() == (
        "AMD EPYC (family 26 model 2 stepping 1) avx2 avx512 avx512-bf16, torch 2.13.0, 2 threads"
    )
    assert m.has("avx512_bf16") and not m.has("amx_bf16")


def test_a_xeon_with_amx() -> None:
    cpu = parse_cpuinfo(XEON)
    assert (cpu.vendor, cpu.family, cpu.model, cpu.stepping) == ("GenuineIntel", 6, 143, 8)
    assert cpu.flags == ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
    m = Machine(cpu, "2.5.1", 8, cuda="NVIDIA H100")
    assert m.short() == (
        "Intel(R) Xeon(R) Platinum 8480+ (family 6 model 143 stepping 8) avx2 avx512 "
        "avx512-bf16 amx amx-bf16, torch 2.5.1, 8 threads, CUDA NVIDIA H100"
    )


def test_an_avx2_only_cpu() -> None:
    cpu = parse_cpuinfo(AVX2)
    assert cpu.name == "AMD EPYC 7B12" and cpu.flags == ("avx2",)
    line = Machine(cpu, "2.13.0", 2).cpu_line()
    assert line == "AMD EPYC 7B12 (family 23 model 49 stepping 0) avx2"


def test_the_key_is_stable_and_tells_machines_apart() -> None:
    epyc = Machine(parse_cpuinfo(EPYC), "2.13.0", 2)
    assert epyc.key() == Machine(parse_cpuinfo(EPYC), "2.13.0", 2).key()
    others = [
        Machine(parse_cpuinfo(AVX2), "2.13.0", 2),
        Machine(parse_cpuinfo(EPYC), "2.5.1", 2),
        Machine(parse_cpuinfo(EPYC), "2.13.0", 1),
        Machine(parse_cpuinfo(EPYC), "2.13.0", 2, cuda="NVIDIA H100"),
    ]
    assert len({epyc.key(), *(o.key() for o in others)}) == 5
    assert epyc.key() == (
        "AuthenticAMD 26/2/1 AMD EPYC | avx2,avx512f,avx512_bf16 | torch 2.13.0 | 2 threads "
        "| cuda -"
    )


def test_to_dict_is_plain_data() -> None:
    d = Machine(parse_cpuinfo(AVX2), "2.13.0", 2).to_dict()
    assert d["cpu"]["flags"] == ["avx2"] and d["cpu"]["family"] == 23
    assert (d["torch_version"], d["threads"], d["cuda"]) == ("2.13.0", 2, None)


def test_without_proc_the_platform_names_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(machine.platform, "processor", lambda: "arm")
    cpu = machine.this_cpu(str(tmp_path / "absent"))
    assert cpu == Cpu("arm") and Machine(cpu, "2.13.0", 4).cpu_line() == "arm"
    assert parse_cpuinfo("").name == "arm"  # no model name line either


def test_this_machine_follows_the_thread_count() -> None:
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = machine.this_machine()
        assert one.threads == 1 and one.torch_version == torch.__version__
        assert one.cpu is machine.this_cpu()  # the CPU is read once
        assert one.kernels == torch.backends.cpu.get_cpu_capability()
    finally:
        torch.set_num_threads(before)
