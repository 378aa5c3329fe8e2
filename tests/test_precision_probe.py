"""trainer.precision=auto on a CPU: the timed probe, its verdict, its cache (kept only from
an idle machine and steady timings, re-checked, refreshable), and that it leaves the run
untouched. The decisions are driven by a simulated machine: no real timing."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

import attnmt.train.precision_probe as pp
from attnmt.data.batching import make_batch
from attnmt.errors import ConfigError
from attnmt.models.registry import build_model
from attnmt.train.config import TrainerConfig
from attnmt.train.continuation import MAY_CHANGE
from attnmt.train.distributed import DistInfo

CPU = torch.device("cpu")
TINY = {
    "name": "transformer",
    "d_model": 32,
    "n_heads": 2,
    "enc_layers": 1,
    "dec_layers": 1,
    "d_ff": 64,
}
SINGLE = DistInfo()
IDLE_FP32, IDLE_BF16 = [0.36], [0.28]  # the 2-core EPYC with AVX512-BF16, idle
BUSY_FP32, BUSY_BF16 = [4.1], [4.7]  # ... while another job loaded its cores


def _model():
    torch.manual_seed(0)
    return build_model(dict(TINY), 40, 40, True)


def _batch():
    return make_batch([[5, 6, 7], [8, 9]], [[10, 11], [12, 13, 14]])


class FakeMachine:
    """Simulated clocks: each step advances the wall clock by its next scripted duration
    (cycled) and the process CPU clock by duration x threads x ``cpu_share``."""

    def __init__(self, fp32, bf16, *, load=1.0, cpu_share=1.0, cores=2, threads=2, low="bf16"):
        self.script = {"fp32": itertools.cycle(fp32), low: itertools.cycle(bf16)}
        self.load, self.cpu_share, self.cores, self.threads = load, cpu_share, cores, threads
        self.wall = self.cpu = 0.0
        self.ran: list[str] = []

    def _step(self, name: str) -> None:
        took = next(self.script[name])
        self.ran.append(name)
        self.wall += took
        self.cpu += took * self.threads * self.cpu_share

    def steps(self):
        return {name: functools.partial(self._step, name) for name in self.script}

    def sensors(self) -> pp.Sensors:
        return pp.Sensors(
            wall=lambda: self.wall,
            cpu=lambda: self.cpu,
            load=lambda: self.load,
            cores=self.cores,
            threads=self.threads,
        )

    def probe(self, cache_dir: Path, key: str = "k", mode: str = "cache"):
        return pp.probe(_model(), _batch(), cache_dir, key, mode, self.steps(), self.sensors())


def _cache(tmp_path: Path) -> dict:
    path = tmp_path / pp.CACHE_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def _seed_cache(tmp_path: Path, choice: str, fp32: list[float], bf16: list[float]) -> None:
    entry = {"choice": choice, "reason": "earlier", "times": {"fp32": fp32, "bf16": bf16}}
    (tmp_path / pp.CACHE_FILE).write_text(json.dumps({"k": entry}))


@pytest.mark.parametrize(
    ("fp32", "bf16", "choice"),
    [
        ([1.0, 1.0, 1.0], [0.5, 0.6, 0.4], "bf16"),
        ([1.0] * 3, [0.97] * 3, "fp32"),
        ([1.0] * 3, [20.0] * 3, "fp32"),
    ],
)
def test_decide_takes_bf16_only_when_clearly_faster(fp32, bf16, choice) -> None:
    got, reason = pp.decide({"fp32": fp32, "bf16": bf16})
    assert got == choice
    assert "bf16" in reason and "fp32" in reason


def test_steps_alternate_after_one_warm_up_each_and_stop_once_steady() -> None:
    m = FakeMachine(IDLE_FP32, IDLE_BF16)
    timing = pp.measure(m.steps(), m.sensors())
    assert m.ran == ["fp32", "bf16"] * (1 + pp.MIN_ROUNDS)  # warm-ups, then interleaved
    assert timing.rounds == pp.MIN_ROUNDS and timing.times["bf16"] == pytest.approx(
        IDLE_BF16 * pp.MIN_ROUNDS
    )


def test_a_large_spread_takes_more_rounds_up_to_the_maximum() -> None:
    m = FakeMachine([0.3, 0.3, 0.5], IDLE_BF16)
    timing = pp.measure(m.steps(), m.sensors())
    assert timing.rounds == pp.MAX_ROUNDS
    assert pp.noisy(timing) is not None and "fp32 IQR/median" in pp.noisy(timing)


def test_rounds_are_bounded_in_time() -> None:
    m = FakeMachine(BUSY_FP32, BUSY_BF16)  # 8.8 s a round
    timing = pp.measure(m.steps(), m.sensors())
    assert timing.rounds == 4 and timing.wall >= pp.BUDGET_S  # no round begun after 30 s
    assert "only 4 rounds" in pp.noisy(timing)


def test_one_outlier_is_not_noise() -> None:
    assert pp.spread([1.0, 1.0, 1.0, 1.0, 9.0]) == 0.0
    assert pp.spread([1.0]) == float("inf")


def test_a_clear_bf16_win_is_cached(tmp_path: Path) -> None:
    choice, why = FakeMachine(IDLE_FP32, IDLE_BF16).probe(tmp_path)
    assert choice == "bf16" and f"cached in {tmp_path / pp.CACHE_FILE}" in why
    entry = _cache(tmp_path)["k"]
    assert entry["choice"] == "bf16" and entry["times"]["bf16"] == pytest.approx(
        IDLE_BF16 * pp.MIN_ROUNDS
    )


def test_a_clear_bf16_loss_is_cached_as_fp32(tmp_path: Path) -> None:
    choice, why = FakeMachine(IDLE_BF16, IDLE_FP32).probe(tmp_path)  # bf16 the slower
    assert choice == "fp32" and "cached in" in why
    assert _cache(tmp_path)["k"]["choice"] == "fp32"


def test_a_busy_load_gives_this_run_a_verdict_but_no_cache(tmp_path: Path) -> None:
    m = FakeMachine(BUSY_FP32, [4.7, 4.7, 4.7, 4.7, 4.7, 4.7], load=3.9)  # the incident
    choice, why = m.probe(tmp_path)
    assert choice == "fp32"  # used for this run
    assert "not cached: machine busy: 1-minute load 3.90" in why
    assert _cache(tmp_path) == {}


def test_cpu_starvation_while_timed_is_busy(tmp_path: Path) -> None:
    choice, why = FakeMachine(IDLE_FP32, IDLE_BF16, cpu_share=0.3).probe(tmp_path)
    assert choice == "bf16" and "not cached: machine busy: the process got 0.60 CPU" in why
    assert _cache(tmp_path) == {}


@pytest.mark.parametrize(
    ("load", "cores", "threads", "is_busy"),
    [
        (1.4, 2, 2, False),  # only this process's main thread, and a little
        (3.9, 2, 2, True),  # another job on both cores
        (3.0, 4, 2, False),  # another job on the two cores the probe leaves free
        (4.0, 4, 2, True),
        (None, 2, 2, False),  # no load average on this OS: the other rules decide
    ],
)
def test_the_load_rule(load, cores, threads, is_busy) -> None:
    m = FakeMachine(IDLE_FP32, IDLE_BF16, load=load, cores=cores, threads=threads)
    assert (pp.load_busy(load, m.sensors()) is not None) == is_busy


def test_noisy_timings_are_not_cached(tmp_path: Path) -> None:
    choice, why = FakeMachine([0.36, 0.36, 0.6], IDLE_BF16).probe(tmp_path)
    assert choice == "bf16"
    assert "not cached: timings noisy: fp32 IQR/median" in why and "after 15 rounds" in why
    assert _cache(tmp_path) == {}


def test_a_cached_verdict_is_rechecked_by_one_pair(tmp_path: Path) -> None:
    _seed_cache(tmp_path, "bf16", IDLE_FP32, IDLE_BF16)
    m = FakeMachine(IDLE_FP32, IDLE_BF16)
    choice, why = m.probe(tmp_path)
    assert choice == "bf16" and len(m.ran) == 4  # warm-ups + one timed pair
    assert why.startswith("cached bf16 (earlier) in") and "re-check" in why and "agrees" in why


def test_a_busy_load_skips_the_recheck(tmp_path: Path) -> None:
    _seed_cache(tmp_path, "bf16", IDLE_FP32, IDLE_BF16)
    m = FakeMachine(BUSY_FP32, BUSY_BF16, load=3.9)
    choice, why = m.probe(tmp_path)
    assert choice == "bf16" and m.ran == []
    assert "re-check skipped: machine busy" in why


def test_a_recheck_much_slower_than_the_cache_is_ignored(tmp_path: Path) -> None:
    """Spinning threads keep the CPU time up while the steps crawl: caught by rule (3)."""
    _seed_cache(tmp_path, "bf16", IDLE_FP32, IDLE_BF16)
    m = FakeMachine(BUSY_FP32, BUSY_BF16)  # contradicts, but 11x slower than cached
    choice, why = m.probe(tmp_path)
    assert choice == "bf16" and len(m.ran) == 4  # no full probe
    assert "ignored: machine busy: steps fp32 11.4x, bf16 16.8x slower" in why
    assert _cache(tmp_path)["k"]["reason"] == "earlier"


def test_a_cached_verdict_contradicted_by_a_clean_recheck_is_reprobed(tmp_path: Path) -> None:
    _seed_cache(tmp_path, "fp32", BUSY_FP32 * 3, BUSY_BF16 * 3)  # the incident's verdict
    m = FakeMachine(IDLE_FP32, IDLE_BF16)
    choice, why = m.probe(tmp_path)
    assert choice == "bf16" and len(m.ran) == 4 + 2 * (1 + pp.MIN_ROUNDS)
    assert why.startswith("cached fp32 (earlier) in")
    assert "contradicted by a clean re-check" in why and "re-probed: timed step" in why
    assert _cache(tmp_path)["k"]["choice"] == "bf16"


def test_a_small_disagreement_in_the_recheck_keeps_the_cache(tmp_path: Path) -> None:
    _seed_cache(tmp_path, "bf16", IDLE_FP32, IDLE_BF16)
    m = FakeMachine([0.36], [0.37])  # bf16 3% slower now: not clearly the other way
    assert m.probe(tmp_path)[0] == "bf16" and len(m.ran) == 4


def test_refresh_retimes_and_overwrites_the_cache(tmp_path: Path) -> None:
    _seed_cache(tmp_path, "bf16", IDLE_FP32, IDLE_BF16)
    m = FakeMachine(IDLE_BF16, IDLE_FP32)  # now fp32 is the faster
    choice, why = m.probe(tmp_path, mode="refresh")
    assert choice == "fp32" and len(m.ran) == 2 * (1 + pp.MIN_ROUNDS)
    assert why.startswith("refresh: timed step") and "cached in" in why
    assert _cache(tmp_path)["k"]["choice"] == "fp32"


def test_refresh_on_a_busy_machine_keeps_the_old_cache(tmp_path: Path) -> None:
    _seed_cache(tmp_path, "bf16", IDLE_FP32, IDLE_BF16)
    choice, why = FakeMachine(BUSY_FP32, BUSY_BF16, load=3.9).probe(tmp_path, mode="refresh")
    assert choice == "fp32" and "not cached: machine busy" in why  # this run only
    assert _cache(tmp_path)["k"]["choice"] == "bf16"


def test_the_verdict_is_cached_per_key(tmp_path: Path) -> None:
    FakeMachine(IDLE_FP32, IDLE_BF16).probe(tmp_path, "k1")
    FakeMachine(IDLE_BF16, IDLE_FP32).probe(tmp_path, "k2")
    saved = _cache(tmp_path)
    assert {k: v["choice"] for k, v in saved.items()} == {"k1": "bf16", "k2": "fp32"}


def test_an_unreadable_cache_is_an_empty_one(tmp_path: Path) -> None:
    (tmp_path / pp.CACHE_FILE).write_text("{not json")
    assert FakeMachine(IDLE_BF16, IDLE_FP32).probe(tmp_path)[0] == "fp32"
    assert "k" in _cache(tmp_path)


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cache \| refresh"):
        FakeMachine(IDLE_FP32, IDLE_BF16).probe(tmp_path, mode="off")
    with pytest.raises(ConfigError, match=r"trainer\.precision_probe must be one of"):
        TrainerConfig(precision_probe="always").check()


def test_the_setting_is_in_the_default_config_and_may_change_on_resume() -> None:
    root = Path(__file__).resolve().parents[1]
    default = yaml.safe_load((root / "configs/trainer/default.yaml").read_text())
    assert default["precision_probe"] == TrainerConfig().precision_probe == "cache"
    assert "trainer.precision_probe" in MAY_CHANGE


def test_timing_leaves_weights_gradients_and_random_state_as_they_were() -> None:
    model, batch = _model(), _batch()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(7)
    with pp.untouched(model):
        timing = pp.measure(pp.model_steps(model, batch), pp.Sensors(), 2, 2)
    after_probe = torch.rand(5)
    torch.manual_seed(7)
    assert torch.equal(after_probe, torch.rand(5))  # as if the probe had not run
    assert set(timing.times) == {"fp32", "bf16"} and timing.rounds == 2
    assert all(t > 0 for v in timing.times.values() for t in v)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])
    assert all(p.grad is None for p in model.parameters())


def test_cache_key_names_cpu_torch_threads_and_changes_with_the_model() -> None:
    b = _batch()
    a = pp.cache_key("transformer", TINY, 40, b)
    assert torch.__version__ in a and f"{torch.get_num_threads()} threads" in a
    assert pp.cache_key("transformer", {**TINY, "d_ff": 128}, 40, b) != a
    assert pp.cache_key("transformer", TINY, 80, b) != a


def test_no_native_bf16_means_fp32_without_a_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(pp, "cpu_has_fast_bf16", lambda: False)
    monkeypatch.setattr(pp, "model_steps", lambda m, b, n: pytest.fail("no probe expected"))
    with caplog.at_level(logging.INFO):
        p = pp.choose_precision("auto", CPU, _model(), _batch, tmp_path, SINGLE, TINY, 40)
    assert p.name == "fp32" and "no native bf16" in caplog.text
    assert not (tmp_path / pp.CACHE_FILE).exists()


@pytest.mark.parametrize("faster", ["fp32", "bf16"])
def test_native_bf16_is_probed_and_the_faster_one_chosen_on_one_log_line(
    faster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    m = FakeMachine([2.0], [1.0]) if faster == "bf16" else FakeMachine([1.0], [2.0])
    monkeypatch.setattr(pp, "cpu_has_fast_bf16", lambda: True)
    monkeypatch.setattr(pp, "model_steps", lambda model, batch, names: m.steps())
    monkeypatch.setattr(pp, "Sensors", functools.partial(lambda s: s, m.sensors()))
    with caplog.at_level(logging.INFO, logger=pp.__name__):
        p = pp.choose_precision("auto", CPU, _model(), _batch, tmp_path, SINGLE, TINY, 40)
    assert p.name == faster
    (line,) = [r.getMessage() for r in caplog.records if r.name == pp.__name__]
    assert line.startswith(f"precision auto -> {faster}: timed step") and "cached in" in line


def test_choose_precision_passes_refresh_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    m = FakeMachine(IDLE_FP32, IDLE_BF16, load=3.9)
    monkeypatch.setattr(pp, "cpu_has_fast_bf16", lambda: True)
    monkeypatch.setattr(pp, "model_steps", lambda model, batch, names: m.steps())
    monkeypatch.setattr(pp, "Sensors", functools.partial(lambda s: s, m.sensors()))
    with caplog.at_level(logging.INFO, logger=pp.__name__):
        p = pp.choose_precision(
            "auto", CPU, _model(), _batch, tmp_path, SINGLE, TINY, 40, mode="refresh"
        )
    assert p.name == "bf16" and "refresh: timed step" in caplog.text
    assert "not cached: machine busy" in caplog.text and _cache(tmp_path) == {}


@pytest.mark.parametrize("name", ["fp32", "bf16"])
def test_an_explicit_precision_is_never_probed(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pp, "model_steps", lambda m, b, n: pytest.fail("no probe expected"))
    assert pp.choose_precision(name, CPU, _model(), _batch, tmp_path, SINGLE, TINY, 40).name == name


def test_probe_batch_fills_about_max_tokens_from_the_first_pairs() -> None:
    data = [([7] * 9, [8] * 9, i) for i in range(100)]
    batch = pp.probe_batch(data, 100)
    assert batch.src.shape == (10, 10)  # 10 pairs of 9 pieces + EOS = 100 tokens a side


def test_the_trainer_passes_trainer_precision_probe_to_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.toy_train import toy_train_config

    import attnmt.train.setup as setup
    from attnmt.train.loop import Trainer

    seen: list[str] = []
    real = setup.choose_precision

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["mode"])
        return real(*args, **kwargs)

    monkeypatch.setattr(setup, "choose_precision", spy)
    cfg = toy_train_config(tmp_path / "data", "trainer.precision_probe=refresh")
    Trainer(cfg, tmp_path / "run").close()
    assert seen == ["refresh"]


GPU = torch.device("cuda")
H100 = "NVIDIA H100 80GB HBM3"


def _fake_gpu(
    monkeypatch: pytest.MonkeyPatch, m: FakeMachine, *, bf16: bool = True, name: str = H100
) -> list[tuple[str, ...]]:
    """``GPU`` simulated on a CPU-only torch: its name, bf16 support and synchronize (which
    records "sync" among ``m``'s steps), ``m``'s steps and wall clock as the probe's, and
    ``m``'s CPU sensors left in place: a CPU's busy machine (load 9.9, CPU-starved) that the
    GPU's probe must neither read nor judge by. Returns the precisions the probe timed."""

    def fail(*_: Any, **__: Any) -> None:
        pytest.fail("a CPU check ran for a GPU")

    timed: list[tuple[str, ...]] = []
    base = m.sensors()
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: bf16)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: m.ran.append("sync"))
    monkeypatch.setattr(pp.Batch, "to", lambda self, device: self)
    monkeypatch.setattr(pp, "Sensors", lambda **kw: dataclasses.replace(base, **kw))
    monkeypatch.setattr(
        pp, "model_steps", lambda model, batch, names: timed.append(tuple(names)) or m.steps()
    )
    monkeypatch.setattr(pp, "cpu_has_fast_bf16", fail)
    monkeypatch.setattr(pp.os, "getloadavg", fail)
    return timed


@pytest.mark.parametrize("faster", ["fp32", "bf16"])
def test_auto_on_cuda_times_fp32_against_bf16_and_keeps_the_faster(
    faster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Not bf16 because it is a GPU: timed like a CPU, each step between two synchronize
    calls, with no CPU load rule (this simulated CPU is loaded and starved), and cached under
    the GPU's name."""
    fast, slow = [0.010], [0.037]
    m = FakeMachine(*((slow, fast) if faster == "bf16" else (fast, slow)), load=9.9, cpu_share=0.01)
    timed = _fake_gpu(monkeypatch, m)
    with caplog.at_level(logging.INFO, logger=pp.__name__):
        p = pp.choose_precision("auto", GPU, _model(), _batch, tmp_path, SINGLE, TINY, 40)
    assert p.name == faster and timed == [("fp32", "bf16")]
    (line,) = [r.getMessage() for r in caplog.records if r.name == pp.__name__]
    assert line.startswith(f"precision auto -> {faster} (cuda: {H100}): timed step"), line
    assert "cached in" in line and "busy" not in line
    (key,) = _cache(tmp_path)
    assert key.startswith(f"cuda: {H100} | ") and _cache(tmp_path)[key]["choice"] == faster
    warm_ups = ["fp32", "bf16"]
    assert m.ran[:2] == warm_ups  # then every timed step between two synchronize calls
    assert m.ran[2:] == [e for name in warm_ups * pp.MIN_ROUNDS for e in ("sync", name, "sync")]


@pytest.mark.filterwarnings("ignore:.*GradScaler is enabled, but CUDA is not available")
def test_auto_on_a_gpu_without_native_bf16_times_fp16(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = FakeMachine([0.02], [0.01], low="fp16")
    timed = _fake_gpu(monkeypatch, m, bf16=False)
    p = pp.choose_precision("auto", GPU, _model(), _batch, tmp_path, SINGLE, TINY, 40)
    assert timed == [("fp32", "fp16")] and p.name == "fp16" and p.dtype == torch.float16
    assert pp.candidates(GPU) == ("fp32", "fp16") and pp.candidates(CPU) == ("fp32", "bf16")


def test_a_verdict_is_keyed_by_the_gpu_and_never_shared_with_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = _batch()
    gpu = ["NVIDIA H100 80GB HBM3"]  # the name torch reports for the machine's GPU
    with monkeypatch.context() as gpu_machine:  # as on a machine with CUDA, where the CPU's
        gpu_machine.setattr(torch.cuda, "is_available", lambda: True)  # key names it too
        gpu_machine.setattr(torch.cuda, "get_device_name", lambda device=None: gpu[0])
        h100 = pp.cache_key("transformer", TINY, 40, b, GPU)
        gpu[0] = "NVIDIA A100-SXM4-40GB"
        a100 = pp.cache_key("transformer", TINY, 40, b, GPU)
        cpu = pp.cache_key("transformer", TINY, 40, b, CPU)
        assert cpu == pp.cache_key("transformer", TINY, 40, b)  # a CPU's key as before
    assert h100.startswith("cuda: NVIDIA H100") and a100.startswith("cuda: NVIDIA A100")
    assert len({h100, a100, cpu}) == 3 and not cpu.startswith("cuda")

    # a cached CPU verdict (bf16) is not taken on the GPU, where fp32 is faster
    (tmp_path / pp.CACHE_FILE).write_text(json.dumps({cpu: {"choice": "bf16", "times": {}}}))
    m = FakeMachine([0.01], [0.03])
    timed = _fake_gpu(monkeypatch, m)
    p = pp.choose_precision("auto", GPU, _model(), _batch, tmp_path, SINGLE, TINY, 40)
    assert p.name == "fp32"
    assert timed == [("fp32", "bf16")] and _cache(tmp_path)[cpu]["choice"] == "bf16"


@pytest.mark.parametrize("name", ["fp32", "bf16"])
def test_an_explicit_precision_on_cuda_is_never_probed(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    timed = _fake_gpu(monkeypatch, FakeMachine([0.01], [0.03]))
    p = pp.choose_precision(name, GPU, _model(), _batch, tmp_path, SINGLE, TINY, 40)
    assert p.name == name and timed == [] and not (tmp_path / pp.CACHE_FILE).exists()


@pytest.mark.parametrize("kept", ["fp32", "bf16"])
def test_a_resume_keeps_the_precision_its_checkpoint_trained_in(
    kept: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``auto`` at a resume, on a device that runs the recorded precision natively: that
    precision, no probe (a probe could pick the other one and break exact continuation)."""
    monkeypatch.setattr(pp, "cpu_has_fast_bf16", lambda: True)
    monkeypatch.setattr(pp, "model_steps", lambda m, b, n: pytest.fail("no probe expected"))
    with caplog.at_level(logging.INFO, logger=pp.__name__):
        p = pp.choose_precision(
            "auto", CPU, _model(), _batch, tmp_path, SINGLE, TINY, 40, resumed=kept
        )
    assert p.name == kept and f"trained in {kept} (kept" in caplog.text
    assert not (tmp_path / pp.CACHE_FILE).exists()


@pytest.mark.parametrize(
    ("kept", "native_bf16", "why"),
    [
        ("bf16", False, "this CPU has no native bf16 kernels"),
        ("fp16", True, "fp16 needs a CUDA device and this run is on cpu"),
    ],
)
def test_a_resume_decides_afresh_and_warns_where_the_device_cannot_keep_it(
    kept: str,
    native_bf16: bool,
    why: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A bf16 run resumed on a CPU without native bf16, an fp16 (GPU) run resumed on a CPU:
    ``auto`` decides as for a new run, and a warning says the continuation is not exact."""
    m = FakeMachine([1.0], [2.0])  # where bf16 is native, fp32 times faster here
    monkeypatch.setattr(pp, "cpu_has_fast_bf16", lambda: native_bf16)
    monkeypatch.setattr(pp, "model_steps", lambda model, batch, names: m.steps())
    monkeypatch.setattr(pp, "Sensors", functools.partial(lambda s: s, m.sensors()))
    with caplog.at_level(logging.INFO, logger=pp.__name__):
        p = pp.choose_precision(
            "auto", CPU, _model(), _batch, tmp_path, SINGLE, TINY, 40, resumed=kept
        )
    assert p.name == "fp32"
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(f"the checkpoint's run trained in {kept}, but {why}")
    assert "differ from the uninterrupted run" in warning


def test_a_resume_on_a_gpu_without_native_bf16_does_not_keep_bf16(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)
    assert pp.lacks("bf16", GPU) == "this GPU has no native bf16"
    assert pp.lacks("fp16", GPU) == "" and pp.lacks("fp32", GPU) == ""
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert pp.lacks("bf16", GPU) == ""


@pytest.mark.parametrize("name", ["fp32", "bf16"])
def test_an_explicit_precision_wins_over_the_checkpoints(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pp, "cpu_has_fast_bf16", lambda: True)
    other = "bf16" if name == "fp32" else "fp32"
    p = pp.choose_precision(name, CPU, _model(), _batch, tmp_path, SINGLE, TINY, 40, resumed=other)
    assert p.name == name
