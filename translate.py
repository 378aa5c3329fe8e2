"""python translate.py ckpt=PATH [beam=5] < in.txt > out.txt (see configs/translate.yaml)."""

import hydra
from omegaconf import DictConfig

from attnmt.cli.common import log_to_stderr, run_cli


@hydra.main(config_path="configs", config_name="translate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    log_to_stderr()
    from attnmt.cli.translate import run

    run_cli(lambda: run(cfg))


if __name__ == "__main__":
    main()
