"""Train a model: ``python train.py [group=choice ...] [key=value ...]`` (configs/train.yaml)."""

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from attnmt.cli.common import run_cli
from attnmt.train.loop import TrainingInterrupted, train


@hydra.main(config_path="configs", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> float:
    """Run one training job in Hydra's run directory; returns the best validation BLEU."""
    try:
        result = run_cli(lambda: train(cfg, HydraConfig.get().runtime.output_dir))
    except TrainingInterrupted as err:
        print(err.message(), file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        print("interrupted before training started; nothing was saved", file=sys.stderr)
        sys.exit(130)
    return float(result["best_val_bleu"])


if __name__ == "__main__":
    main()
