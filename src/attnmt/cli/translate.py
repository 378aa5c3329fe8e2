"""``python translate.py ckpt=PATH``: stdin → stdout, one output line per input line.

From a pipe or file, stdin is read in chunks of ``chunk_lines`` lines (0: all of it)
and each chunk is translated in length-sorted batches; from a terminal, each line is
translated as soon as it is entered. Blank lines give blank lines. Everything except
the translations (logs, the prompt) goes to stderr.
"""

from __future__ import annotations

import io
import logging
import os
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from omegaconf import DictConfig

from attnmt.atomic import write_error
from attnmt.cli.common import check_ckpt, parse_settings
from attnmt.data.textio import utf8_lines
from attnmt.decode.config import DecodeConfig
from attnmt.decode.translator import Translator, load_translator
from attnmt.decode.word_alignment import hypothesis_alignments
from attnmt.errors import CommandInterrupted, ConfigError, WriteError
from attnmt.schema import check_choice
from attnmt.whole_lines import PartialWrite, write_lines

if TYPE_CHECKING:
    from attnmt.decode.ct2 import CT2Translator

log = logging.getLogger(__name__)


@dataclass
class TranslateSettings:
    """Schema of configs/translate.yaml (besides the decode group's keys, which sit at the
    top level there: beam, alpha, max_len_a, max_len_b, max_src_len, batch_tokens)."""

    # a run directory (its best checkpoint, else last.pt) or a .pt file; a list [A,B,...]
    # decodes those models as an ensemble (attnmt.decode.ensemble)
    ckpt: Any = "???"
    ensemble: int = 1  # k > 1: ckpt=RUN's k best checkpoints (best.json) as an ensemble
    chunk_lines: int = 500
    n_best: int = 1  # > 1: the n best translations per line, tab-separated (needs beam >= n)
    scores: bool = False  # also print each translation's score (tab after it)
    device: str = "auto"
    interactive: bool | None = None  # None: when stdin is a terminal
    backend: str = "attnmt"  # attnmt | ctranslate2 (then ckpt is an exported directory)
    alignments: bool = False  # also print each translation's Pharaoh word alignment (tab)

    def check(self, prefix: str = "") -> None:
        check_ckpt(self.ckpt, self.ensemble)
        if self.chunk_lines < 0:
            raise ConfigError(f"chunk_lines={self.chunk_lines} must be >= 0 (0: all of stdin)")
        check_choice("backend", self.backend, BACKENDS)


BACKENDS = ("attnmt", "ctranslate2")


def load_backend(s: TranslateSettings, decode: DecodeConfig) -> Translator | CT2Translator:
    """The translator of ``s.backend``: attnmt's own, or a directory that
    scripts/export_ctranslate2.py wrote (same ``translate`` contract, greedy-exact)."""
    from attnmt.decode import ct2  # imports the ctranslate2 package only when used

    if s.backend == "ctranslate2":
        if not isinstance(s.ckpt, str) or s.ensemble != 1:
            raise ConfigError(
                "backend=ctranslate2 translates with one exported model, not an ensemble"
            )
        if s.n_best != 1 or s.scores or s.alignments:
            raise ConfigError(
                "backend=ctranslate2 supports neither n_best > 1 nor scores=true nor "
                "alignments=true (it gives no scores or attention)"
            )
        return ct2.load_ct2_translator(s.ckpt, s.device, decode)
    if isinstance(s.ckpt, str) and ct2.is_export_dir(s.ckpt):
        raise ConfigError(
            f"ckpt={s.ckpt} is a CTranslate2 export; add backend=ctranslate2 to translate with it"
        )
    return load_translator(s.ckpt, s.device, decode, s.ensemble)


def std_stream(stream: TextIO | None, name: str, advice: str) -> BinaryIO:
    """The binary buffer of ``sys.stdin``/``sys.stdout``; ConfigError when it is closed
    (``translate.py ... <&-`` leaves ``sys.stdin`` None)."""
    if stream is None or getattr(stream, "buffer", None) is None:
        raise ConfigError(f"{name} is closed; {advice}")
    return stream.buffer


def check_room(out: BinaryIO) -> None:
    """Before decoding: WriteError when ``out`` is a file on a full filesystem."""
    try:
        fd = out.fileno()
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return  # a pipe or a terminal: nothing to check up front
        stats = os.fstatvfs(fd)
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return  # a test's buffer
    if stats.f_bavail == 0:
        raise WriteError(
            f"cannot write the translations: no space left on the device of "
            f"{getattr(out, 'name', 'stdout')}; free some space or write elsewhere "
            "(nothing was translated)"
        )


def _written(lines: int) -> str:
    """What stdout holds after ``lines`` complete output lines."""
    if lines == 0:
        return "no translation was written"
    return f"the translations of the first {lines} line{'s' if lines != 1 else ''} were written"


def _fd(out: BinaryIO) -> int | None:
    """The file descriptor under ``out`` (None: an in-memory buffer, as in tests)."""
    try:
        return out.fileno()
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return None


def write_out(out: BinaryIO, data: bytes, done: int = 0) -> None:
    """Write whole lines to stdout, which holds ``done`` complete lines so far; a full disk
    or other write error is one WriteError line saying how many lines are there whole.

    A real file or pipe is written through its descriptor (:mod:`attnmt.whole_lines`): a
    write the disk cuts short is cut back to the last whole line, so the count is what
    the file holds; a pipe keeps the part of a line its reader got, and the message says so.
    """
    name = getattr(out, "name", "stdout")
    fd = _fd(out)
    try:
        if fd is None:
            out.write(data)
            out.flush()
            return
        out.flush()  # nothing is left in its buffer: every line goes through write_lines
        write_lines(fd, data)
    except BrokenPipeError:
        raise
    except PartialWrite as err:
        lines = done + err.lines
        outcome = _written(lines) + (
            ", and part of the next one" if err.torn else ", and nothing after them"
        )
        raise write_error(name, err.error, outcome) from None
    except OSError as err:
        outcome = _written(done) + (", anything after them is cut off" if done else "")
        raise write_error(name, err, outcome) from None


def decode_lines(raw_lines: Iterable[bytes]) -> Iterator[str]:
    """UTF-8 lines without their line ending; DataError naming the line if invalid."""
    return utf8_lines(raw_lines, "stdin line ", "convert the input to UTF-8")


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


def output_lines(
    translator: Translator | CT2Translator,
    lines: list[str],
    first_line: int = 1,
    n_best: int = 1,
    scores: bool = False,
    alignments: bool = False,
) -> list[str]:
    """One output line per input line: the translation, or with ``n_best > 1`` the n best
    separated by tabs; ``scores`` puts each one's search score after it, ``alignments`` its
    Pharaoh word alignment (:mod:`attnmt.decode.word_alignment`) last, tab-separated."""
    if n_best == 1 and not scores and not alignments:
        return translator.translate(lines, first_line)
    if not isinstance(translator, Translator):  # load_backend refuses these settings first
        raise ConfigError("backend=ctranslate2 gives no n-best lists, scores or alignments")
    found = translator.n_best(lines, n_best, first_line)
    links = hypothesis_alignments(translator, lines, found) if alignments else None
    out = []
    for i, hyps in enumerate(found):
        fields = []
        for j, h in enumerate(hyps):
            fields.append(translator.text(h))
            if scores:
                fields.append(f"{h.score:.4f}")
            if links is not None:
                fields.append(links[i][j])
        out.append("\t".join(fields))
    return out


def translate_stream(
    translator: Translator | CT2Translator,
    lines: Iterable[str],
    out: BinaryIO,
    chunk_lines: int,
    **kw: Any,
) -> int:
    """Translate ``lines`` chunk by chunk, writing one UTF-8 line each; returns the count.
    ``kw``: ``n_best`` and ``scores`` of :func:`output_lines`."""
    count = 0
    try:
        for chunk in chunks(lines, chunk_lines):
            texts = output_lines(translator, chunk, count + 1, **kw)
            write_out(out, "".join(text + "\n" for text in texts).encode("utf-8"), count)
            count += len(chunk)
    except KeyboardInterrupt:
        raise CommandInterrupted(f"interrupted (Ctrl-C): {_written(count)}") from None
    return count


def interactive(
    translator: Translator | CT2Translator, stdin: BinaryIO, out: BinaryIO, **kw: Any
) -> None:
    """Prompt on stderr, translate each entered line; Ctrl-D or Ctrl-C ends."""
    print("type a sentence and press Enter (Ctrl-D to quit)", file=sys.stderr)
    done = 0
    try:
        while True:
            sys.stderr.write("> ")
            sys.stderr.flush()
            raw = stdin.readline()
            if not raw:
                break
            (line,) = decode_lines([raw])
            (text,) = output_lines(translator, [line], **kw)
            write_out(out, (text + "\n").encode("utf-8"), done)
            done += 1
    except KeyboardInterrupt:
        pass
    sys.stderr.write("\n")


def run(
    cfg: DictConfig | Mapping[str, Any],
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> None:
    """Translate stdin to stdout as configs/translate.yaml describes; Ctrl-C ends it with
    :class:`CommandInterrupted` saying how many lines were written (interactively, it just
    ends)."""
    try:
        _run(cfg, stdin, stdout)
    except KeyboardInterrupt:  # before the first line was translated
        raise CommandInterrupted(f"interrupted (Ctrl-C): {_written(0)}") from None


def _run(
    cfg: DictConfig | Mapping[str, Any], stdin: BinaryIO | None, stdout: BinaryIO | None
) -> None:
    """:func:`run`, Ctrl-C aside."""
    s, decode = parse_settings(cfg, TranslateSettings)
    stdin = stdin or std_stream(sys.stdin, "stdin", "give input, e.g. translate.py ... < in.txt")
    stdout = stdout or std_stream(
        sys.stdout, "stdout", "give it somewhere to write, e.g. > out.txt"
    )
    check_room(stdout)
    translator = load_backend(s, decode)
    if not 1 <= s.n_best <= decode.beam:
        raise ConfigError(f"n_best={s.n_best} must be between 1 and beam={decode.beam}")
    kw: dict[str, Any] = {"n_best": s.n_best, "scores": s.scores, "alignments": s.alignments}
    is_tty = s.interactive if s.interactive is not None else stdin.isatty()
    if is_tty:
        interactive(translator, stdin, stdout, **kw)
        return
    n = translate_stream(translator, decode_lines(stdin), stdout, s.chunk_lines, **kw)
    log.info("translated %d lines", n)
