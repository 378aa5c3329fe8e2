"""python evaluate.py ckpt=PATH [split=test] [beam=5] ... (see configs/evaluate.yaml)."""

import hydra
from omegaconf import DictConfig

from attnmt.cli.common import log_to_stderr, run_cli


@hydra.main(config_path="configs", config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    log_to_stderr()
    from attnmt.cli.evaluate import run

    run_cli(lambda: run(cfg))


if __name__ == "__main__":
    main()
