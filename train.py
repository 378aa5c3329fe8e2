"""Train a model: ``python train.py [group=choice ...] [key=value ...]`` (configs/train.yaml)."""

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from attnmt.cli.common import check_output_dirs, run_cli
from attnmt.train.continuation import explicit_keys
from attnmt.train.loop import TrainingInterrupted, train


@hydra.main(config_path="configs", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> float:
    """Run one training job in Hydra's run directory; returns the best validation BLEU."""
    try:
        hydra_cfg = HydraConfig.get()
        given = explicit_keys(hydra_cfg.overrides.task)
        result = run_cli(lambda: train(cfg, hydra_cfg.runtime.output_dir, explicit=given))
    except TrainingInterrupted as err:
        print(err.message(), file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        print("interrupted before training started; nothing was saved", file=sys.stderr)
        sys.exit(130)
    return float(result["best_val_bleu"])


if __name__ == "__main__":
    problem = check_output_dirs(sys.argv[1:])
    if problem:
        print(problem, file=sys.stderr)
        sys.exit(2)
    main()
