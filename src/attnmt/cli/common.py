"""What the thin entry points share: their settings parsed once, and user errors as one
line on stderr, not a traceback."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from omegaconf import DictConfig, OmegaConf

from attnmt.decode.config import DecodeConfig
from attnmt.errors import AttnmtError, CommandInterrupted, ConfigError
from attnmt.schema import parse, unknown_key

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
Settings = TypeVar("Settings", bound="DataclassInstance")


def log_to_stderr() -> None:
    """Plain INFO logging on stderr (evaluate/translate keep stdout for results)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[%(name)s] %(message)s")


SIGPIPE_EXIT = 141  # 128 + SIGPIPE, what a shell reports for ``yes | head -1``
INTERRUPT_EXIT = 130  # 128 + SIGINT, what a shell reports after Ctrl-C


def run_cli(fn: Callable[[], T]) -> T:
    """Call ``fn``; on an :class:`AttnmtError` print ``error: <message>`` and exit 2.

    A closed stdout (``translate.py ... | head``) ends the program quietly with status 141,
    as Unix filters do, instead of a BrokenPipeError traceback; a
    :class:`~attnmt.errors.CommandInterrupted` (Ctrl-C) prints its line and exits 130.
    """
    try:
        return fn()
    except CommandInterrupted as err:
        print(err, file=sys.stderr)
        sys.exit(INTERRUPT_EXIT)
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:
        # stdout's reader is gone: point fd 1 at /dev/null so the flush at exit is silent
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(SIGPIPE_EXIT)


def parse_settings(
    cfg: DictConfig | Mapping[str, Any], schema: type[Settings]
) -> tuple[Settings, DecodeConfig]:
    """(settings, decoding) of evaluate.py / translate.py, each parsed once.

    Their configs hold the ``decode`` group's keys at the top level (``beam=5``, via
    ``decode@_global_`` in configs/evaluate.yaml and translate.yaml): those become a
    :class:`DecodeConfig`, the rest ``schema``. A key in neither fails naming it.
    """
    if isinstance(cfg, DictConfig):
        values = OmegaConf.to_container(cfg, resolve=False)
    elif isinstance(cfg, Mapping):
        values = dict(cfg)
    else:
        raise ConfigError(f"expected a mapping of settings, got {cfg!r}")
    assert isinstance(values, dict)
    values.pop("hydra", None)
    decode_keys = {f.name for f in dataclasses.fields(DecodeConfig)}
    own_keys = {f.name for f in dataclasses.fields(schema)}
    for key in values:
        if key not in decode_keys | own_keys:
            raise unknown_key(str(key), decode_keys | own_keys, "")
    if "ckpt" in own_keys and values.get("ckpt") in (None, "???"):
        raise ConfigError(
            "ckpt: no checkpoint given; pass e.g. ckpt=outputs/<date>/<time>_<model>_<corpus> "
            "(a run directory) or ckpt=path/to/checkpoint.pt"
        )
    own = {k: v for k, v in values.items() if k in own_keys}
    decode = {k: v for k, v in values.items() if k in decode_keys}
    return parse(own, schema, ""), parse(decode, DecodeConfig, "")


def check_ckpt(ckpt: Any, ensemble: int) -> None:
    """``ckpt`` is a path or a non-empty list of paths (an ensemble), and ``ensemble`` >= 1
    with one path only; ConfigError naming the key otherwise."""
    if isinstance(ckpt, list | tuple):
        if not ckpt or not all(isinstance(p, str) and p for p in ckpt):
            raise ConfigError(
                f"ckpt={ckpt!r}: a list must name checkpoint files or run directories, "
                "e.g. ckpt=[run/checkpoints/best-900.pt,run/checkpoints/best-1000.pt]"
            )
    elif not isinstance(ckpt, str):
        raise ConfigError(f"ckpt: expected a path or a list of paths, got {ckpt!r}")
    if isinstance(ensemble, bool) or ensemble < 1:
        raise ConfigError(f"ensemble={ensemble!r} must be >= 1 (1: one model)")
    if ensemble > 1 and isinstance(ckpt, list | tuple) and len(ckpt) > 1:
        raise ConfigError(
            f"ckpt lists {len(ckpt)} checkpoints and ensemble={ensemble}: give either "
            "ckpt=[A,B,...] (those models) or ckpt=RUN ensemble=k (a run's k best)"
        )
