"""What the thin entry points share: their settings parsed once, and user errors as one
line on stderr, not a traceback."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from omegaconf import DictConfig, OmegaConf

from attnmt.decode.config import DecodeConfig
from attnmt.errors import AttnmtError, CommandInterrupted, ConfigError
from attnmt.schema import parse, unknown_key
from attnmt.train.run_lock import check_fresh, live_owner

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


def _unquoted(value: str) -> str:
    """A Hydra override value without the quotes that its grammar allows around it
    (``hydra.run.dir='/a b'``): Hydra strips them, so the pre-check must too."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _run_dir_taken(argv: list[str]) -> str | None:
    """The error line when ``hydra.run.dir=`` names a directory another run owns."""
    given = dict(arg.partition("=")[::2] for arg in argv)
    value = _unquoted(given.get("hydra.run.dir", given.get("+hydra.run.dir", "")))
    if not value or "${" in value:
        return None
    run_dir = Path(value)
    owner = live_owner(run_dir)
    if owner is not None:
        return (
            f"error: hydra.run.dir={run_dir}: another training ({owner}) is using this run "
            "directory; wait for it to end, or give this run its own directory"
        )
    if _unquoted(given.get("resume", "")) not in ("", "null", "None"):
        return None
    try:
        check_fresh(run_dir)
    except ConfigError as err:
        return f"error: {err}"
    return None


def check_output_dirs(argv: list[str]) -> str | None:
    """Before Hydra starts: a ``hydra.run.dir=`` / ``hydra.sweep.dir=`` given on the command
    line that cannot be created; the error line to print, or None.

    Hydra creates its output directory before any of our code runs and fails with its own
    traceback, so train.py checks the command line first. Only the part before the first
    ``${...}`` interpolation is tried. A ``hydra.run.dir`` that another run owns (its
    checkpoints, unless ``resume=`` is given, or a live lock) is refused here too: Hydra
    would otherwise rewrite that run's ``.hydra/`` files before the trainer refuses it.
    """
    taken = _run_dir_taken(argv)
    if taken is not None:
        return taken
    for arg in argv:
        key, _, value = arg.partition("=")
        if key.lstrip("+") not in ("hydra.run.dir", "hydra.sweep.dir") or not value:
            continue
        fixed = Path(_unquoted(value).split("${", 1)[0] or ".")
        try:
            fixed.mkdir(parents=True, exist_ok=True)
            if not os.access(fixed, os.W_OK):
                raise PermissionError(13, "not writable")
        except OSError as err:
            return (
                f"error: {key.lstrip('+')}={value}: cannot create or write {fixed} "
                f"({err.strerror or err}); choose a writable directory"
            )
    return None
