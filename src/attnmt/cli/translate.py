"""``python translate.py ckpt=PATH``: stdin → stdout, one output line per input line.

From a pipe or file, stdin is read in chunks of ``chunk_lines`` lines (0: all of it)
and each chunk is translated in length-sorted batches; from a terminal, each line is
translated as soon as it is entered. Blank lines give blank lines. Everything except
the translations (logs, the prompt) goes to stderr.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

from omegaconf import DictConfig

from attnmt.cli.evaluate import parse_settings
from attnmt.decode.translator import Translator, load_translator
from attnmt.errors import ConfigError, DataError

log = logging.getLogger(__name__)


@dataclass
class TranslateSettings:
    """Schema of configs/translate.yaml."""

    ckpt: str = "???"
    beam: int = 5
    alpha: float = 0.6
    max_len_a: float = 1.5
    max_len_b: int = 10
    batch_tokens: int = 4000
    chunk_lines: int = 500
    device: str = "auto"
    interactive: bool | None = None  # None: when stdin is a terminal


def decode_lines(raw_lines: Iterable[bytes]) -> Iterator[str]:
    """UTF-8 lines without their line ending; DataError naming the line if invalid."""
    for lineno, raw in enumerate(raw_lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(
                f"stdin line {lineno}: invalid UTF-8 (byte 0x{raw[err.start]:02x} at column "
                f"{err.start + 1}); convert the input to UTF-8, e.g. iconv -f latin1 -t utf-8"
            ) from None
        if lineno == 1:
            text = text.removeprefix("\ufeff")
        yield text.rstrip("\r\n")


def chunks(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    """Lists of ``size`` lines (size 0: one list with everything)."""
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if size and len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _one_line(text: str) -> str:
    return " ".join(text.splitlines())


def translate_stream(
    translator: Translator, lines: Iterable[str], out: BinaryIO, chunk_lines: int, **kw: Any
) -> int:
    """Translate ``lines`` chunk by chunk, writing one UTF-8 line each; returns the count."""
    count = 0
    for chunk in chunks(lines, chunk_lines):
        for text in translator.translate(chunk, **kw):
            out.write((_one_line(text) + "\n").encode("utf-8"))
        out.flush()
        count += len(chunk)
    return count


def interactive(translator: Translator, stdin: BinaryIO, out: BinaryIO, **kw: Any) -> None:
    """Prompt on stderr, translate each entered line; Ctrl-D or Ctrl-C ends."""
    print("type a sentence and press Enter (Ctrl-D to quit)", file=sys.stderr)
    try:
        while True:
            sys.stderr.write("> ")
            sys.stderr.flush()
            raw = stdin.readline()
            if not raw:
                break
            (line,) = decode_lines([raw])
            (text,) = translator.translate([line], **kw)
            out.write((_one_line(text) + "\n").encode("utf-8"))
            out.flush()
    except KeyboardInterrupt:
        pass
    sys.stderr.write("\n")


def run(
    cfg: DictConfig | Mapping[str, Any],
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> None:
    """Translate stdin to stdout as configs/translate.yaml describes."""
    s: TranslateSettings = parse_settings(cfg, TranslateSettings)
    if s.chunk_lines < 0:
        raise ConfigError(f"chunk_lines={s.chunk_lines} must be >= 0 (0: all of stdin)")
    if s.beam < 1:
        raise ConfigError(f"beam={s.beam} must be >= 1 (1 = greedy)")
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    translator = load_translator(s.ckpt, s.device)
    kw = {
        "beam_size": s.beam,
        "alpha": s.alpha,
        "batch_tokens": s.batch_tokens,
        "max_len_a": s.max_len_a,
        "max_len_b": s.max_len_b,
    }
    is_tty = s.interactive if s.interactive is not None else stdin.isatty()
    if is_tty:
        interactive(translator, stdin, stdout, **kw)
        return
    n = translate_stream(translator, decode_lines(stdin), stdout, s.chunk_lines, **kw)
    log.info("translated %d lines", n)
