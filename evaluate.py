"""python evaluate.py ckpt=PATH [split=test] [beam=5] ... (see configs/evaluate.yaml)."""

import logging
import sys

import hydra
from omegaconf import DictConfig

from attnmt.errors import AttnmtError


@hydra.main(config_path="configs", config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[%(name)s] %(message)s")
    from attnmt.evaluation import run

    try:
        run(cfg)
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
