"""A tiny Transformer on toy_reverse through the real trainer config, for loop-level tests."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


TOY_OVERRIDES = [
    "data=toy_reverse",
    "model=transformer_tiny",
    "model.d_model=32",
    "model.d_ff=64",
    "model.n_heads=2",
    "model.enc_layers=1",
    "model.dec_layers=1",
    "device=cpu",
    "trainer.time_budget_min=0",
    "trainer.num_heatmaps=0",
    "trainer.test=false",
    "trainer.progress_bar=false",
    "trainer.precision=fp32",
]
"""A 1+1-layer d_model 32 Transformer on a small toy_reverse, on CPU in fp32, no time
budget, no heatmaps, samples, test decoding or progress bar (also for train.py's command line)."""


DDP_TOY = [
    "data=toy_reverse",
    "data.toy.train=400",
    "data.toy.valid=8",
    "data.toy.test=8",
    "model=transformer_tiny",
    "model.dropout=0.0",
    "model.attention_dropout=0.0",
    "device=cpu",
    "seed=5",
    "trainer.max_tokens=200",
    "trainer.schedule=constant",
    "trainer.lr=0.001",
    "trainer.precision=fp32",
    "trainer.val_every_steps=0",
    "trainer.val_every_epoch=false",
    "trainer.val_subset=4",
    "trainer.num_heatmaps=0",
    "trainer.num_samples=0",
    "trainer.early_stopping_patience=0",
    "trainer.time_budget_min=0",
    "trainer.test=false",
    "trainer.progress_bar=false",
]
"""What the distributed tests compare (several ranks against one process accumulating): a
tiny Transformer on 400 toy pairs, dropout off, constant learning rate, no validation
between updates, fp32."""


def toy_train_config(data_root: Path, *overrides: str) -> DictConfig:
    """configs/train.yaml with :data:`TOY_OVERRIDES` and ``data.root``; ``overrides`` come
    last and win."""
    base = [*TOY_OVERRIDES, f"data.root={data_root}"]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose(config_name="train", overrides=base + list(overrides))
