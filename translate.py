"""python translate.py ckpt=PATH [beam=5] < in.txt > out.txt (see configs/translate.yaml)."""

import logging
import sys

import hydra
from omegaconf import DictConfig

from attnmt.errors import AttnmtError


@hydra.main(config_path="configs", config_name="translate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[%(name)s] %(message)s")
    from attnmt.translation import run

    try:
        run(cfg)
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
