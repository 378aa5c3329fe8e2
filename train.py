"""Train a model: ``python train.py [group=choice ...] [key=value ...]`` (configs/train.yaml)."""

import logging
import math
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from attnmt.cli.common import run_cli
from attnmt.cli.run_folder import claimed
from attnmt.errors import AttnmtError
from attnmt.train.continuation import explicit_keys
from attnmt.train.interrupt import (
    interrupted_exit_code,
    signals_interrupt,
    stop_under_way,
)
from attnmt.train.loop import train


@hydra.main(config_path="configs", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> float:
    """Run one training job in Hydra's run directory; returns the best validation BLEU.

    The run folder is claimed before anything is written into it (attnmt.cli.run_folder,
    whose Hydra callback configs/train.yaml names). In a sweep (``-m``) a job that fails
    with an attnmt error (a bad setting, a diverged run, a folder another run holds) is
    reported, in the terminal and its train.log, and the sweep goes on (NaN); the sweep
    then exits with status 2.
    """
    try:
        with signals_interrupt():  # SIGTERM raises as Ctrl-C does, with a message
            hydra_cfg = HydraConfig.get()
            given = explicit_keys(hydra_cfg.overrides.task)
            out = Path(hydra_cfg.runtime.output_dir)

            def job() -> dict[str, Any]:
                with claimed(cfg, out):
                    return train(cfg, out, explicit=given)

            if hydra_cfg.mode == RunMode.MULTIRUN:
                try:
                    result = job()
                except AttnmtError as err:
                    where = f"job {hydra_cfg.job.num} ({hydra_cfg.runtime.output_dir})"
                    logging.getLogger("attnmt").error(
                        "error: %s [%s; the sweep goes on]", err, where
                    )
                    return math.nan
            else:
                result = run_cli(job)
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM (signals_interrupt)
        stop = stop_under_way(err)  # the stop itself, or the one a later signal interrupted
        if stop is not None:
            print(stop.message(), file=sys.stderr)
            sys.exit(stop.exit_code)
        print("interrupted before training started; nothing was saved", file=sys.stderr)
        sys.exit(interrupted_exit_code(err))
    return float(result["best_val_bleu"])


if __name__ == "__main__":
    main()
