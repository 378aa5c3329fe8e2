"""Convert a trained Transformer checkpoint into a CTranslate2 model directory.

    python scripts/export_ctranslate2.py ckpt=outputs/DATE/TIME out=ct2-model [quantization=int8]
    echo "Das ist ein Test." | python translate.py ckpt=ct2-model backend=ctranslate2

``ckpt`` is a run directory (its best checkpoint, else last.pt) or a .pt file. ``out`` gets
CTranslate2's model files, the checkpoint's SentencePiece model(s) and attnmt_export.json.
Settings: ``quantization`` (none | int8 | int8_float32 | int8_float16 | int8_bfloat16 |
int16 | float16 | bfloat16 | float32; default none = float32 weights), ``max_positions``
(positions of the sinusoidal table, default 1024; learned positions keep the model's),
``force=true`` to replace a previous export in ``out`` (never a folder an export did
not write). Needs ``pip install 'attnmt[ct2]'``.
How the model maps onto CTranslate2's spec: src/attnmt/decode/ct2.py.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import OmegaConf

from attnmt.cli.common import run_cli
from attnmt.decode.ct2 import DEFAULT_MAX_POSITIONS, export
from attnmt.errors import ConfigError
from attnmt.schema import parse


@dataclass
class ExportSettings:
    ckpt: str = "???"  # a run directory or a checkpoint file
    out: str = "???"  # the CTranslate2 model directory to write
    quantization: str = "none"
    max_positions: int = DEFAULT_MAX_POSITIONS
    force: bool = False


def parse_args(argv: Sequence[str]) -> ExportSettings:
    """``key=value`` arguments -> ExportSettings; ConfigError naming a bad one."""
    for arg in argv:
        if "=" not in arg or arg.startswith("-"):
            raise ConfigError(
                f"{arg!r}: expected key=value, e.g. ckpt=outputs/DATE/TIME out=ct2-model"
            )
    try:
        values: Any = OmegaConf.from_dotlist(list(argv))
    except Exception as err:  # omegaconf's grammar errors
        raise ConfigError(f"cannot parse the arguments: {err}") from None
    for key in ("ckpt", "out"):
        if values.get(key) in (None, "???", ""):
            raise ConfigError(f"{key}: no value given; usage: {__doc__.splitlines()[2].strip()}")
    return parse(values, ExportSettings, "")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return {}
    s = parse_args(args)
    info = export(s.ckpt, s.out, s.quantization, s.max_positions, s.force)
    print(f"exported {info['checkpoint']} -> {s.out} ({info['quantization']})")
    for name in info["files"]:
        print(f"  {s.out}/{name}")
    diff = info.get("verify_max_abs_logprob_diff")
    if diff is not None:
        print(f"self-check: CTranslate2 log-probs within {diff:.2g} of attnmt's")
    print(f"translate: python translate.py ckpt={s.out} backend=ctranslate2")
    return info


if __name__ == "__main__":
    run_cli(main)
