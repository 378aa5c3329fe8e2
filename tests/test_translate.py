"""translate.py: one line out per line in, blank lines, chunks, pipes, prompts, bad input."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.tiny_checkpoint import run_entry_point, shared_run

from attnmt.cli.common import SIGPIPE_EXIT
from attnmt.cli.translate import run
from attnmt.decode.translator import load_translator
from attnmt.errors import ConfigError, DataError

ROOT = Path(__file__).resolve().parents[1]
LINES = ["a b c", "", "d e f a", "   ", "b", "f e d c b a", "c  a   b"]


@pytest.fixture
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_run(tmp_path_factory)


def _translate(ckpt: Path, lines: list[str], **settings: object) -> list[str]:
    stdin = io.BytesIO("".join(f"{line}\n" for line in lines).encode())
    out = io.BytesIO()
    run({"ckpt": str(ckpt), "interactive": False, **settings}, stdin, out)
    text = out.getvalue().decode("utf-8")
    assert text.endswith("\n") or not lines
    return text.split("\n")[:-1]


def test_one_line_per_line_blank_to_blank_and_same_as_translator(ckpt: Path) -> None:
    got = _translate(ckpt, LINES, beam=2)
    assert len(got) == len(LINES)
    assert got[1] == got[3] == ""
    expected = load_translator(ckpt, "cpu").translate(LINES, beam=2)
    assert got == expected
    # whitespace is normalised as in training: "c  a   b" translates like "c a b"
    (same,) = load_translator(ckpt, "cpu").translate(["c a b"], beam=2)
    assert got[6] == same


def test_chunks_and_tiny_batches_do_not_change_output(ckpt: Path) -> None:
    whole = _translate(ckpt, LINES, beam=3)
    assert _translate(ckpt, LINES, beam=3, chunk_lines=2, batch_tokens=1) == whole
    assert _translate(ckpt, ["", ""], beam=3) == ["", ""]
    assert _translate(ckpt, []) == []


def test_crlf_and_bom_input(ckpt: Path) -> None:
    stdin = io.BytesIO("\ufeffa b c\r\n\r\nd e\r\n".encode())
    out = io.BytesIO()
    run({"ckpt": str(ckpt), "interactive": False, "beam": 1}, stdin, out)
    got = out.getvalue().decode().split("\n")[:-1]
    assert got == _translate(ckpt, ["a b c", "", "d e"], beam=1)


def test_invalid_utf8_names_the_line(ckpt: Path) -> None:
    stdin = io.BytesIO(b"a b\nc \xff d\n")
    with pytest.raises(DataError, match=r"stdin line 2: invalid UTF-8 \(byte 0xff at column 3\)"):
        run({"ckpt": str(ckpt), "interactive": False}, stdin, io.BytesIO())


def test_interactive_prompt_goes_to_stderr(ckpt: Path, capsys: pytest.CaptureFixture) -> None:
    out = io.BytesIO()
    run({"ckpt": str(ckpt), "interactive": True, "beam": 1}, io.BytesIO(b"a b c\n\n"), out)
    assert out.getvalue().decode().split("\n")[:-1] == _translate(ckpt, ["a b c", ""], beam=1)
    assert capsys.readouterr().err.count("> ") == 3  # two lines, then end of input


def test_a_terminal_on_stdin_gets_the_prompt(ckpt: Path, capsys: pytest.CaptureFixture) -> None:
    # interactive=None (the default) detects the terminal; Ctrl-D (\x04) ends the input
    master, slave = os.openpty()
    os.write(master, b"a b c\n\x04")
    out = io.BytesIO()
    with open(slave, "rb") as tty:
        run({"ckpt": str(ckpt), "beam": 1}, tty, out)
    os.close(master)
    assert out.getvalue().decode().split("\n")[:-1] == _translate(ckpt, ["a b c"], beam=1)
    assert "type a sentence" in capsys.readouterr().err


def test_pipe_subprocess(ckpt: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "translate.py", f"ckpt={ckpt}", "beam=2", "device=cpu"],
        input="\n".join(LINES) + "\n",
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:-1] == load_translator(ckpt, "cpu").translate(LINES, beam=2)
    assert "translated 7 lines" in done.stderr


def test_closed_stdout_ends_quietly(ckpt: Path, tmp_path: Path) -> None:
    # like `translate.py ... | head -0`: the reader is gone before the first line is written
    source = tmp_path / "in.txt"
    source.write_text("a b c\n" * 50)
    with source.open("rb") as stdin:
        proc = subprocess.Popen(
            [sys.executable, "translate.py", f"ckpt={ckpt}", "beam=1", "device=cpu"],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        err = proc.stderr.read().decode()
        proc.wait(timeout=300)
    assert proc.returncode == SIGPIPE_EXIT, err
    assert "Traceback" not in err and "Exception ignored" not in err


def test_missing_checkpoint_no_traceback(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a\n")))
    code, out, err = run_entry_point(
        "translate", [f"ckpt={tmp_path / 'none'}"], monkeypatch, capsys
    )
    assert code == 2 and out == ""
    assert err.strip() == f"error: checkpoint or run directory not found: {tmp_path / 'none'}"


def test_detokenize_lines_keeps_one_line_per_hypothesis() -> None:
    from attnmt.decode.translator import detokenize_lines

    class Pieces:  # decode_tgt of a tokenizer whose piece 9 holds a line break
        def decode_tgt(self, ids: list[list[int]]) -> list[str]:
            return ["".join({5: "a", 6: "b c", 9: "\r\n"}[i] for i in row) for row in ids]

    hyps = [[5, 9, 6], None, [], [9, 5, 9, 9, 6]]
    assert detokenize_lines(Pieces(), hyps) == ["a b c", "", "", " a  b c"]


def test_length_batches_respect_the_budget() -> None:
    from attnmt.data.batching import length_batches

    # longest first: 10+10 fill 20; then 5, 3, 2 (5 x 3 = 15 <= 20)
    assert length_batches([3, 10, 2, 10, 5], 20) == [[1, 3], [4, 0, 2]]
    assert length_batches([30, 1], 20) == [[0], [1]]  # too long for the budget: alone
    assert length_batches([], 20) == []


def test_a_pathological_line_is_cut_with_a_warning_and_holds_nothing_back(
    ckpt: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One line of 100k characters (tens of thousands of pieces) among short ones: its
    source is cut to decode.max_src_len pieces (the warning names line 2), every line
    still gets its own output line, in order, and the short lines translate as alone."""
    huge = " ".join("abcdef"[i % 6] for i in range(50_000))  # 99,999 characters
    lines = ["a b c", huge, "d e f a"]
    with caplog.at_level(logging.WARNING):
        got = _translate(ckpt, lines, beam=2, chunk_lines=2)
    assert len(got) == 3
    assert "longer than decode.max_src_len=250 pieces" in caplog.text
    assert "line 2 (" in caplog.text
    assert [got[0], got[2]] == _translate(ckpt, ["a b c", "d e f a"], beam=2)
    cut = " ".join("abcdef"[i % 6] for i in range(250))  # what the long line is cut to
    assert got[1] == _translate(ckpt, [cut], beam=2, max_src_len=250)[0]


def test_n_best_lines_are_tab_separated_best_first_with_optional_scores(ckpt: Path) -> None:
    lines = ["a b c", "", "d e f a"]
    one = _translate(ckpt, lines, beam=3)
    three = [row.split("\t") for row in _translate(ckpt, lines, beam=3, n_best=3)]
    assert len(three) == 3 and three[1] == [""]  # blank stays blank, one line per line
    assert [row[0] for row in three] == one  # the first of the n best is the 1-best
    assert all(len(row) == 3 for row in (three[0], three[2]))
    scored = [row.split("\t") for row in _translate(ckpt, lines, beam=3, n_best=3, scores=True)]
    texts, values = scored[0][0::2], [float(v) for v in scored[0][1::2]]
    assert texts == three[0] and values == sorted(values, reverse=True)  # best first
    with pytest.raises(ConfigError, match="n_best=4 must be between 1 and beam=3"):
        _translate(ckpt, lines, beam=3, n_best=4)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"alpha": "nan"}, "alpha: nan is not a finite number"),
        ({"alpha": float("inf")}, "alpha: inf is not a finite number"),
        ({"max_len_a": "inf"}, "max_len_a: inf is not a finite number"),
    ],
)
def test_non_finite_decode_settings_fail_naming_the_key(
    ckpt: Path, setting: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _translate(ckpt, ["a b c"], beam=2, **setting)


def test_a_beam_over_the_cap_fails_before_decoding(ckpt: Path) -> None:
    """beam=100000 took 53 s and 4.3 GB for one line; the cap is serve's default max_beam."""
    from attnmt.decode.config import MAX_BEAM

    assert MAX_BEAM == 16
    assert _translate(ckpt, ["a b c"], beam=MAX_BEAM)  # the cap itself decodes
    with pytest.raises(ConfigError, match=r"beam=100000 .*at most 16"):
        _translate(ckpt, ["a b c"], beam=100000)


def test_a_long_line_is_cut_by_characters_before_encoding_to_the_same_pieces(
    ckpt: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The first ``limit`` pieces of a line cut by characters are those of the whole line
    (pieces never cross a space), and the warning names the line by its characters."""
    from attnmt.data.textio import normalize_space
    from attnmt.decode.translator import encode_sources

    tok = load_translator(ckpt, "cpu").tokenizer
    words = ["a", "bc", "def", "abcdef", "fedcba" * 5, "xyz", "äöü", "a\u0301"]
    lines = [
        "  ".join(words[(i * 7 + j * 3) % len(words)] for j in range(n))
        for i, n in enumerate([1, 3, 40, 400, 2000, 9000])
    ] + ["abcdef" * 3000, " " * 50_000 + "a b c"]
    for limit in (1, 5, 17, 60):
        whole = [ids[:limit] for ids in tok.encode_src([normalize_space(s) for s in lines])]
        with caplog.at_level(logging.WARNING):
            assert encode_sources(tok, lines, limit) == whole, limit
    assert f"6 ({len(lines[5])} characters)" in caplog.text
    assert "8 (" not in caplog.text  # 50,000 spaces and "a b c": short once normalised


def test_a_20_mb_line_is_never_encoded_whole(ckpt: Path) -> None:
    """Encoding a 4 MB line allocates a few kB: it is cut by characters (a bound from
    decode.max_src_len and the longest piece) before SentencePiece sees it."""
    import tracemalloc

    translator = load_translator(ckpt, "cpu")
    huge = "ab c " * 800_000
    tracemalloc.start()
    try:
        (ids,) = translator.encode([huge])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(ids) == translator.decode.max_src_len
    assert peak < 1_000_000, peak
