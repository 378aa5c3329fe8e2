"""python serve.py ckpt=PATH [ckpt2=PATH2] [host=127.0.0.1 port=8000] (see configs/serve.yaml)."""

import hydra
from omegaconf import DictConfig

from attnmt.cli.common import log_to_stderr, run_cli


@hydra.main(config_path="configs", config_name="serve", version_base="1.3")
def main(cfg: DictConfig) -> None:
    log_to_stderr()
    from attnmt.cli.serve import run

    run_cli(lambda: run(cfg))


if __name__ == "__main__":
    main()
