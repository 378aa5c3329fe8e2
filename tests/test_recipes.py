"""configs/recipe/<model>.yaml is optional: a preset without one trains with the defaults.

Every model preset is composed twice: with the repository's configs (the trainer defaults,
then the preset's recipe file if it has one) and with a copy of configs/ without any recipe
file (exactly the trainer defaults). Composing only, no data or model work.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
MODELS = sorted(p.stem for p in (CONFIGS / "model").glob("*.yaml"))


def _trainer(config_dir: Path, model: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        return compose("train", overrides=[f"model={model}"]).trainer


def test_recipe_files_are_not_empty() -> None:
    """A file that changes nothing says nothing: leave the preset without one instead."""
    for path in (CONFIGS / "recipe").glob("*.yaml"):
        assert OmegaConf.load(path), f"{path} sets nothing; delete it (defaults apply)"


@pytest.mark.parametrize("model", MODELS)
def test_each_preset_composes_with_and_without_a_recipe_file(model: str, tmp_path: Path) -> None:
    default = OmegaConf.load(CONFIGS / "trainer" / "default.yaml")
    recipe_file = CONFIGS / "recipe" / f"{model}.yaml"
    recipe = OmegaConf.load(recipe_file) if recipe_file.is_file() else OmegaConf.create()
    assert _trainer(CONFIGS, model) == OmegaConf.merge(default, recipe)

    bare = tmp_path / "configs"
    shutil.copytree(CONFIGS, bare)
    shutil.rmtree(bare / "recipe")  # no recipe group at all: every preset on the defaults
    assert _trainer(bare, model) == default
