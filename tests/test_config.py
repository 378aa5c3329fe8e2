"""Every config group composes, validates and instantiates; typos fail naming the key.

No data work: models are built with tiny vocabularies, DataConfig and TrainerConfig are
constructed from the composed config, nothing is downloaded or tokenized.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from attnmt.errors import ConfigError
from attnmt.train.run_config import RunConfig, validate_config

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"


def names(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIGS / group).glob("*.yaml"))


def compose_cfg(overrides: list[str], config_dir: Path = CONFIGS) -> DictConfig:
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        return compose("train", overrides=overrides)


def fill_missing(cfg: DictConfig, value: str) -> list[str]:
    """Set every ``???`` value (e.g. data.path of a custom corpus) to ``value``."""
    missing = sorted(OmegaConf.missing_keys(cfg))
    for key in missing:
        OmegaConf.update(cfg, key, value, force_add=True)
    return missing


def validated(overrides: list[str], tmp_path: Path) -> RunConfig:
    cfg = compose_cfg(overrides)
    fill_missing(cfg, str(tmp_path))
    return validate_config(cfg)


def build_small_model(model_cfg: Any) -> torch.nn.Module:
    """Build the model with tiny vocabularies and run one teacher-forced batch through it."""
    from attnmt.data.batching import make_batch
    from attnmt.models.base import Seq2Seq
    from attnmt.models.registry import build_model

    model = build_model(model_cfg, 12, 12, True)
    assert isinstance(model, Seq2Seq)
    assert model.name == model_cfg.name
    model.eval()
    batch = make_batch([[4, 5, 6], [7, 8]], [[9, 10], [11, 4, 5, 6]])
    with torch.no_grad():
        logits = model(batch)
    assert logits.shape == (2, 5, 12)
    assert torch.isfinite(logits).all()
    return model


# ---------------------------------------------------------------- every group


def test_config_groups_are_not_empty() -> None:
    for group in ("model", "data", "trainer"):
        assert names(group), f"configs/{group}/ has no yaml files"


@pytest.mark.parametrize("model", names("model"))
def test_every_model_config_validates_and_builds(model: str, tmp_path: Path) -> None:
    cfg = validated([f"model={model}"], tmp_path)
    raw = OmegaConf.load(CONFIGS / "model" / f"{model}.yaml")
    for key, value in raw.items():  # the preset's values survive validation
        if not isinstance(value, DictConfig):
            assert getattr(cfg.model, key) == value, f"model={model}: model.{key}"
    build_small_model(cfg.model)


@pytest.mark.parametrize("data", names("data"))
def test_every_data_config_validates_and_constructs(data: str, tmp_path: Path) -> None:
    from attnmt.data.config import DataConfig, to_data_config

    cfg = validated([f"data={data}"], tmp_path)
    dc = to_data_config(cfg.data)
    assert isinstance(dc, DataConfig)
    raw = OmegaConf.load(CONFIGS / "data" / f"{data}.yaml")
    assert dc.name == raw.get("name", dc.name)
    assert dc.src_lang != dc.tgt_lang


@pytest.mark.parametrize("trainer", names("trainer"))
def test_every_trainer_config_validates_and_constructs(trainer: str, tmp_path: Path) -> None:
    from attnmt.train.config import TrainerConfig

    cfg = validated([f"trainer={trainer}"], tmp_path)
    tc = cfg.trainer
    assert isinstance(tc, TrainerConfig)
    raw = OmegaConf.load(CONFIGS / "trainer" / f"{trainer}.yaml")
    for key, value in raw.items():
        if key != "defaults" and not isinstance(value, (DictConfig,)):
            assert getattr(tc, key) == value, f"trainer={trainer}: trainer.{key}"


def test_every_recipe_belongs_to_a_model_preset() -> None:
    orphans = set(names("recipe")) - set(names("model"))
    assert not orphans, f"configs/recipe/ files without a configs/model/ preset: {orphans}"


@pytest.mark.parametrize("model", names("model"))
def test_the_model_presets_recipe_is_applied_and_the_command_line_wins(
    model: str, tmp_path: Path
) -> None:
    from attnmt.train.config import TrainerConfig

    default = OmegaConf.load(CONFIGS / "trainer" / "default.yaml")
    path = CONFIGS / "recipe" / f"{model}.yaml"
    recipe = OmegaConf.load(path) if path.is_file() else OmegaConf.create({})
    tc = validated([f"model={model}"], tmp_path).trainer
    assert isinstance(tc, TrainerConfig)
    for key, value in default.items():  # the recipe's value, else the trainer default
        assert getattr(tc, key) == recipe.get(key, value), f"model={model}: trainer.{key}"
    tc = validated([f"model={model}", "trainer.lr=0.0123"], tmp_path).trainer
    assert tc.lr == 0.0123


def experiment_override(name: str) -> str:
    defaults = OmegaConf.load(CONFIGS / "train.yaml").get("defaults", [])
    listed = any(isinstance(d, DictConfig) and "experiment" in str(next(iter(d))) for d in defaults)
    return f"experiment={name}" if listed else f"+experiment={name}"


@pytest.mark.parametrize("experiment", names("experiment"))
def test_every_experiment_validates_and_builds(experiment: str, tmp_path: Path) -> None:
    from attnmt.data.config import to_data_config
    from attnmt.train.config import TrainerConfig

    cfg = validated([experiment_override(experiment)], tmp_path)
    build_small_model(cfg.model)
    assert to_data_config(cfg.data) == cfg.data
    assert isinstance(cfg.trainer, TrainerConfig)


def test_small_data_recipe_sets_every_lever_and_yields_to_the_command_line(
    tmp_path: Path,
) -> None:
    """experiment=small_data (docs/training.md): regularisers on, vocabulary sized to the
    corpus, averaging and beam search; any corpus, and command-line keys still win."""
    cfg = validated([experiment_override("small_data")], tmp_path)
    assert cfg.model.name == "transformer" and cfg.model.attention_dropout > 0
    assert cfg.data.name == "ding_de_en" and cfg.data.tokenizer.vocab_size == "auto"
    assert cfg.data.tokenizer.sampling.enabled
    t = cfg.trainer
    assert t.src_word_dropout > 0 and t.tgt_word_dropout > 0 and t.label_smoothing > 0.1
    assert t.average_best and t.keep_best >= 2 and t.time_budget_min == 120
    assert cfg.decode.beam > 1
    custom = validated(
        [experiment_override("small_data"), "data=bible_en_fr", "trainer.time_budget_min=10"],
        tmp_path,
    )
    assert custom.data.name == "bible_en_fr" and custom.trainer.time_budget_min == 10
    assert custom.data.tokenizer.vocab_size == "auto"


def test_defaults_validate_and_fill_the_schema(tmp_path: Path) -> None:
    cfg = validated([], tmp_path)
    top = {"seed", "device", "resume", "finetune", "data", "model", "trainer", "decode"}
    assert set(cfg.to_dict()) == top
    assert cfg.seed == 1234 and cfg.device == "auto" and cfg.resume is cfg.finetune is None
    # every section is typed: the model's own schema, chosen by model.name
    from attnmt.decode.config import DecodeConfig
    from attnmt.models.registry import model_class

    assert type(cfg.model) is model_class(cfg.model.name).Config
    assert cfg.decode == DecodeConfig()  # configs/decode/default.yaml = the schema's defaults
    assert {f.name for f in fields(cfg.model)} == set(cfg.to_dict()["model"])


def test_overrides_reach_the_validated_config(tmp_path: Path) -> None:
    cfg = validated(
        ["seed=7", "device=cpu", "trainer.max_steps=5", "trainer.lr=0.5", "resume=auto"],
        tmp_path,
    )
    assert (cfg.seed, cfg.device, cfg.resume) == (7, "cpu", "auto")
    assert cfg.trainer.max_steps == 5 and cfg.trainer.lr == 0.5


def test_interpolations_are_resolved(tmp_path: Path) -> None:
    cfg = validated(["trainer.max_epochs=${seed}", "seed=3"], tmp_path)
    assert cfg.trainer.max_epochs == 3


# ---------------------------------------------------------------- typos and types


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["+sede=3"], "sede: unknown key; did you mean seed?"),
        (
            ["+trainer.max_stpes=5"],
            "trainer.max_stpes: unknown key; did you mean trainer.max_steps?",
        ),
        (["+model.d_modle=32"], "model.d_modle: unknown key; did you mean model.d_model?"),
        (
            ["model=rnn_luong", "+model.attention.scroe=dot"],
            "model.attention.scroe: unknown key; did you mean model.attention.score?",
        ),
        (
            ["model=rnn_bahdanau", "+model.hiden_size=8"],
            "model.hiden_size: unknown key; did you mean model.hidden_size?",
        ),
        (["+data.max_lenn=5"], "data.max_lenn: unknown key; did you mean data.max_len?"),
        (
            ["+data.tokenizer.vocab_sise=100"],
            "data.tokenizer.vocab_sise: unknown key; did you mean data.tokenizer.vocab_size?",
        ),
    ],
)
def test_misspelt_key_names_the_key(overrides: list[str], message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        validated(overrides, tmp_path)
    assert str(err.value) == message


def test_unknown_key_without_a_close_match_lists_the_valid_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        validated(["+zzz=1"], tmp_path)
    assert str(err.value).startswith("zzz: unknown key; valid keys under the top level: data,")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["trainer.max_steps=abc"], "trainer.max_steps: expected int, got 'abc' (str)"),
        (["seed=1.5"], "seed: expected int, got 1.5 (float)"),
        (["model=transformer_tiny", "model.d_model=big"], "model.d_model: expected int, got 'big'"),
        (
            ["model=rnn_luong", "model.attention.window=wide"],
            "model.attention.window: expected int",
        ),
        (["data.max_len=x"], "data.max_len: expected int, got 'x' (str)"),
    ],
)
def test_wrong_type_names_the_key(overrides: list[str], message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        validated(overrides, tmp_path)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (["model.name=transfomer"], ["model.name", "rnn_bahdanau, rnn_luong, transformer"]),
        (["trainer.optimizer=adamm"], ["trainer.optimizer", "adam, adamw", "did you mean"]),
        (["device=gpu"], ["device", "auto, cpu, cuda"]),
        (["model=rnn_luong", "model.attention.score=dott"], ["model.attention.score", "dot"]),
        (["trainer.lr=-1"], ["trainer.lr"]),
        (["data.tokenizer.normalization=nfd"], ["tokenizer.normalization", "nmt_nfkc"]),
        (
            ["data.tokenizer.character_coverage=1.5"],
            ["data.tokenizer.character_coverage: 1.5 is out of range; allowed: 0 < data."],
        ),
        (["trainer.log_every_steps=0"], ["trainer.log_every_steps must be > 0"]),
        (["decode.beam=0"], ["decode.beam must be >= 1"]),
        (["decode.beam=100000"], ["decode.beam=100000", "at most 16"]),
        (["trainer.val_beam_size=17"], ["trainer.val_beam_size=17", "at most 16"]),
        (["+trainer.test_beam_size=2"], ["trainer.test_beam_size: unknown key"]),
        (["trainer.val_every_steps=-5"], ["trainer.val_every_steps must be >= 0"]),
        (["trainer.early_stopping_patience=-1"], ["trainer.early_stopping_patience"]),
        (["decode.max_len_a=-1"], ["decode.max_len_a: -1.0 is out of range; allowed: 0 <="]),
        (["decode.max_len_b=-5"], ["decode.max_len_b: -5 is out of range; allowed: 0 <="]),
        (["decode.max_len_a=0", "decode.max_len_b=0"], ["decode.max_len_b >= 1"]),
        (["trainer.betas=[0.9,1.5]"], ["trainer.betas"]),
        (["trainer.plateau_factor=1.0"], ["trainer.plateau_factor"]),
        (["model=transformer_tiny", "model.n_heads=3"], ["model.n_heads"]),
    ],
)
def test_bad_choice_or_value_names_the_key_and_choices(
    overrides: list[str], fragments: list[str], tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as err:
        validated(overrides, tmp_path)
    for fragment in fragments:
        assert fragment in str(err.value)


def float_settings(model: str) -> list[str]:
    """Every dotted setting of ``model``'s run whose default is a float (or floats)."""
    from attnmt.train.run_config import setting_defaults

    def is_float(v: Any) -> bool:
        return isinstance(v, float) or (
            isinstance(v, list) and any(isinstance(x, float) for x in v)
        )

    return sorted(k for k, v in setting_defaults(model).items() if is_float(v))


@pytest.mark.parametrize("model", ["transformer_tiny", "rnn_luong"])
@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
def test_every_float_setting_must_be_finite(model: str, bad: str, tmp_path: Path) -> None:
    keys = float_settings("transformer" if model.startswith("transformer") else model)
    assert {"trainer.lr", "decode.alpha", "decode.max_len_a", "model.dropout"} <= set(keys)
    for key in keys:
        value = f"[0.9,{bad}]" if key == "trainer.betas" else bad
        with pytest.raises(ConfigError) as err:
            validated([f"model={model}", f"{key}={value}"], tmp_path)
        assert str(err.value).startswith(key), (key, str(err.value))
        assert "not a finite number" in str(err.value), (key, str(err.value))


@pytest.mark.parametrize("model", ["transformer_tiny", "rnn_luong"])
@pytest.mark.parametrize("huge", ["1e308", "-1e308"])
def test_every_float_setting_states_a_finite_range(model: str, huge: str, tmp_path: Path) -> None:
    """decode.max_len_a=1e308 once trained to the first validation and crashed there
    (OverflowError), trainer.lr=1e308 at startup: each float setting states a range, and a
    value outside it fails up front naming the key, the value and the range."""
    keys = float_settings("transformer" if model.startswith("transformer") else model)
    for key in keys:
        value = f"[0.9,{huge}]" if key == "trainer.betas" else huge
        with pytest.raises(ConfigError) as err:
            validated([f"model={model}", f"{key}={value}"], tmp_path)
        message = str(err.value)
        assert message.startswith(f"{key}") and f": {float(huge)} is out of range" in message
        assert "; allowed: " in message and f" {key}" in message.split("allowed: ")[1]


@pytest.mark.parametrize(
    ("override", "allowed"),
    [
        ("decode.max_len_a=11", "0 <= decode.max_len_a <= 10"),
        ("decode.alpha=10.5", "0 <= decode.alpha <= 10"),
        ("trainer.lr=0", "0 < trainer.lr <= 10"),
        ("trainer.label_smoothing=1", "0 <= trainer.label_smoothing < 1"),
        ("model.dropout=1", "0 <= model.dropout < 1"),
        ("trainer.clip_grad_norm=1e7", "0 <= trainer.clip_grad_norm <= 1000000"),
        ("decode.max_len_b=100001", "0 <= decode.max_len_b <= 100000"),
    ],
)
def test_a_number_out_of_its_range_names_the_range(
    override: str, allowed: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=r"is out of range; allowed: (.*)$") as err:
        validated([override], tmp_path)
    assert str(err.value).startswith(override.split("=")[0] + ": ")
    assert str(err.value).endswith(f"allowed: {allowed}")


def test_the_ends_of_closed_ranges_are_allowed(tmp_path: Path) -> None:
    cfg = validated(["decode.max_len_a=10", "decode.alpha=10", "trainer.lr=10"], tmp_path)
    assert (cfg.decode.max_len_a, cfg.decode.alpha, cfg.trainer.lr) == (10, 10, 10)


def test_misspelt_key_in_an_experiment_file(tmp_path: Path) -> None:
    configs = tmp_path / "configs"
    shutil.copytree(CONFIGS, configs)
    (configs / "experiment").mkdir(exist_ok=True)
    (configs / "experiment" / "typo.yaml").write_text(
        "# @package _global_\ntrainer:\n  warmup_stpes: 10\n"
    )
    cfg = compose_cfg([experiment_override("typo")], config_dir=configs)
    fill_missing(cfg, str(tmp_path))
    with pytest.raises(ConfigError, match=r"^trainer\.warmup_stpes: unknown key; did you mean"):
        validate_config(cfg)


def test_command_line_typo_is_refused_by_hydra_naming_the_key() -> None:
    """Without ``+`` Hydra's struct mode already refuses a new key, naming it in full."""
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match=r"trainer\.max_stpes"):
        compose_cfg(["trainer.max_stpes=5"])


def test_group_given_a_scalar_is_a_config_error() -> None:
    cfg = OmegaConf.create({"seed": 1, "model": {"name": "transformer"}, "trainer": 5})
    with pytest.raises(ConfigError, match=r"^trainer: expected a config group"):
        validate_config(cfg)


def test_missing_value_names_the_key() -> None:
    cfg = OmegaConf.create(
        {"seed": 1, "model": {"name": "transformer"}, "trainer": {"max_steps": "???"}}
    )
    with pytest.raises(ConfigError, match=r"^trainer\.max_steps: no value given"):
        validate_config(cfg)


def test_validation_has_no_global_side_effects() -> None:
    from hydra.core.config_store import ConfigStore

    before = set(ConfigStore.instance().list(""))
    import importlib

    import attnmt.train.run_config

    importlib.reload(attnmt.train.run_config)
    assert set(ConfigStore.instance().list("")) == before


# ---------------------------------------------------------------- sweeps


SWEEP = "model.attention.score=dot,general,concat"


def sweep_jobs(overrides: list[str]) -> Iterator[list[str]]:
    """Expand ``a=x,y`` sweep overrides like Hydra's basic sweeper (cartesian product)."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    jobs: list[list[str]] = [[]]
    for o in parsed:
        values = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.value()]
        key = o.get_key_element()
        jobs = [[*job, f"{key}={v}"] for job in jobs for v in values]
    yield from jobs


def test_sweep_overrides_compose_and_validate(tmp_path: Path) -> None:
    jobs = list(sweep_jobs(["model=rnn_luong", SWEEP]))
    assert len(jobs) == 3
    scores = []
    for job in jobs:
        cfg = validated(job, tmp_path)
        assert cfg.model.name == "rnn_luong"
        scores.append(cfg.model.attention.score)
        build_small_model(cfg.model)
    assert scores == ["dot", "general", "concat"]


APP = """
import sys
from pathlib import Path
import hydra
from omegaconf import DictConfig
from attnmt.train.run_config import validate_config

@hydra.main(config_path={configs!r}, config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    v = validate_config(cfg)
    with open({out!r}, "a") as f:
        f.write(f"{{v.model.name}} {{v.model.attention.score}}\\n")

if __name__ == "__main__":
    main()
"""


def test_multirun_sweep_runs_one_job_per_value(tmp_path: Path) -> None:
    """A real ``-m`` launch through Hydra's basic launcher with a validating task."""
    out = tmp_path / "jobs.txt"
    app = tmp_path / "app.py"
    app.write_text(APP.format(configs=str(CONFIGS), out=str(out)))
    proc = subprocess.run(
        [
            sys.executable,
            str(app),
            "-m",
            "model=rnn_luong",
            SWEEP,
            f"hydra.sweep.dir={tmp_path / 'multirun'}",
            "hydra/job_logging=disabled",
            "hydra/hydra_logging=disabled",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(out.read_text().split("\n")[:-1]) == sorted(
        f"rnn_luong {s}" for s in ("dot", "general", "concat")
    )
