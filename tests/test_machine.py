"""attnmt.machine on fixture /proc/cpuinfo texts (parsed fields, the one line, the cache key)
and on machines recorded under results/ (read back, described as the pages print them)."""

from __future__ import annotations

import json
import re
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
    line = Machine(cpu, "2.13.0", 2).describe()
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
    assert cpu == Cpu("arm") and Machine(cpu, "2.13.0", 4).describe() == "arm"
    assert parse_cpuinfo("").name == "arm"  # no model name line either


def test_usable_cores_is_the_affinity_else_the_cpu_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert machine.usable_cores() == 3
    monkeypatch.delattr(machine.os, "sched_getaffinity")  # not Linux
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 8)
    assert machine.usable_cores() == 8
    monkeypatch.setattr(machine.os, "cpu_count", lambda: None)
    assert machine.usable_cores() == 1


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


ROOT = Path(__file__).resolve().parents[1]


def _recorded(path: str, *keys: str | int) -> dict:
    """The ``machine`` object at ``keys`` of a committed record under results/."""
    obj = json.loads((ROOT / path).read_text())
    for key in keys:
        obj = obj[key]
    return obj


ZEN2 = ("results/recipe_seeds/seed-1/summary.json", "machine")
ZEN4 = ("results/results_main/data-ding_de_en_model-rnn_bahdanau_seed-1/summary.json", "machine")
XEON_AMX = ("results/gpu_check/2026-11-26_h100/transformer-auto/summary.json", "machine")


@pytest.mark.parametrize(
    ("where", "plain", "flags", "kind", "tag"),
    [
        (
            ZEN2,
            "AMD EPYC family 23 model 49",
            "AMD EPYC (family 23 model 49) avx2",
            "AuthenticAMD 23/49 avx2, torch 2.13.0+cpu",
            "cpu23.49",
        ),
        (
            ZEN4,
            "AMD EPYC family 25 model 17",
            "AMD EPYC (family 25 model 17) avx2 avx512f avx512_bf16",
            "AuthenticAMD 25/17 avx2 avx512f avx512_bf16, torch 2.13.0+cpu",
            "cpu25.17",
        ),
        (
            XEON_AMX,
            "Intel(R) Xeon(R) Processor family 6 model 207",
            "Intel(R) Xeon(R) Processor (family 6 model 207) avx2 avx512f avx512_bf16 amx_tile "
            "amx_bf16",
            "GenuineIntel 6/207 avx2 avx512f avx512_bf16 amx_tile amx_bf16, torch 2.11.0+cu130",
            "cpu6.207",
        ),
    ],
)
def test_a_recorded_machine_reads_back_and_is_described_as_the_pages_print_it(
    where: tuple[str, str], plain: str, flags: str, kind: str, tag: str
) -> None:
    """The forms of docs/alignment.md and results.md ("Machines:", plain), recipe.md and
    results.md's machine lines (flags), recipe.md's CPU kinds (kind) and a kind in a stem."""
    d = _recorded(*where)
    m = Machine.from_dict(d)
    assert m.to_dict() == d and Machine.from_dict(m.to_dict()) == m  # lossless both ways
    assert (m.describe("plain"), m.describe("flags")) == (plain, flags)
    assert (m.describe("kind"), m.describe("tag")) == (kind, tag)


def test_the_line_form_labels_the_flags_and_names_the_stepping() -> None:
    m = Machine.from_dict(_recorded(*XEON_AMX))
    assert m.describe() == (
        "Intel(R) Xeon(R) Processor (family 6 model 207 stepping 2) avx2 avx512 avx512-bf16 "
        "amx amx-bf16"
    )
    assert m.short().endswith(", torch 2.11.0+cu130, 16 threads, CUDA NVIDIA H100 80GB HBM3")


def test_a_ledger_machine_keeps_its_cores_and_a_bare_one_has_none() -> None:
    d = {**Machine(parse_cpuinfo(AVX2), "2.13.0", 2).to_dict(), "cores": 2}
    assert Machine.from_dict(d).cores == 2 and Machine.from_dict(d).to_dict() == d
    assert "cores" not in Machine(parse_cpuinfo(AVX2), "2.13.0", 2).to_dict()


def test_fields_a_record_lacks_are_none_not_made_up() -> None:
    m = Machine.from_dict({"cpu": {"name": "Toy CPU", "model": 1}, "summary": "ignored"})
    assert m == Machine(Cpu("Toy CPU", model=1), None, None)
    assert (m.cpu.family, m.cuda, m.kernels, m.cores) == (None, None, None, None)
    assert m.describe("plain") == "Toy CPU model 1" and m.describe("flags") == "Toy CPU (model 1)"
    assert m.describe("kind") == "Toy CPU ?/1 no avx2, torch ?" and m.describe("tag") == "cpux.1"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([], "machine"),
        ({"threads": 2}, "machine.cpu"),
        ({"cpu": {"name": "x", "family": "25"}}, "machine.cpu.family"),
        ({"cpu": {"name": "x", "flags": "avx2"}}, "machine.cpu.flags"),
        ({"cpu": {"name": "x"}, "threads": True}, "machine.threads"),
    ],
)
def test_a_malformed_machine_names_its_field(data: object, field: str) -> None:
    with pytest.raises(ValueError, match=rf"^{re.escape(field)}:"):
        Machine.from_dict(data)
