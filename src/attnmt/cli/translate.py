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

from attnmt.cli.common import parse_settings
from attnmt.decode.translator import Translator, load_translator
from attnmt.errors import ConfigError, DataError

log = logging.getLogger(__name__)


@dataclass
class TranslateSettings:
    """Schema of configs/translate.yaml (besides the decode group's keys, which sit at the
    top level there: beam, alpha, max_len_a, max_len_b, max_src_len, batch_tokens)."""

    ckpt: str = "???"  # a run directory (its best checkpoint, else last.pt) or a .pt file
    chunk_lines: int = 500
    device: str = "auto"
    interactive: bool | None = None  # None: when stdin is a terminal

    def check(self, prefix: str = "") -> None:
        if self.chunk_lines < 0:
            raise ConfigError(f"chunk_lines={self.chunk_lines} must be >= 0 (0: all of stdin)")


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
            if not text:  # stdin holds only a BOM: no line
                return
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


def translate_stream(
    translator: Translator, lines: Iterable[str], out: BinaryIO, chunk_lines: int
) -> int:
    """Translate ``lines`` chunk by chunk, writing one UTF-8 line each; returns the count."""
    count = 0
    for chunk in chunks(lines, chunk_lines):
        for text in translator.translate(chunk, first_line=count + 1):
            out.write((text + "\n").encode("utf-8"))
        out.flush()
        count += len(chunk)
    return count


def interactive(translator: Translator, stdin: BinaryIO, out: BinaryIO) -> None:
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
            (text,) = translator.translate([line])
            out.write((text + "\n").encode("utf-8"))
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
    s, decode = parse_settings(cfg, TranslateSettings)
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    translator = load_translator(s.ckpt, s.device, decode)
    is_tty = s.interactive if s.interactive is not None else stdin.isatty()
    if is_tty:
        interactive(translator, stdin, stdout)
        return
    n = translate_stream(translator, decode_lines(stdin), stdout, s.chunk_lines)
    log.info("translated %d lines", n)
