"""A CTranslate2 decode can be interrupted (issue 66, item 14): CTranslate2 cannot stop
inside a ``translate_batch`` call, so :class:`CT2Translator` decodes in the Translator's
batches (padded source pieces × beam within ``batch_tokens``), one call each, and checks
``should_stop`` before each; serve.py's stop reaches it. A stand-in for
``ctranslate2.Translator`` records the calls, so these tests need no ctranslate2 package
(tests/test_ctranslate2.py runs the real one)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.tiny_checkpoint import toy_tokenizer

from attnmt.data.tokenizer import Tokenizer
from attnmt.decode.config import DecodeConfig
from attnmt.decode.ct2 import CT2Translator


@dataclass
class Result:
    hypotheses: list[list[str]]


class Recording:
    """A stand-in for ``ctranslate2.Translator``: echoes each source, records the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int]] = []  # (sentences, longest source, beam)

    def translate_batch(self, source: list[list[str]], **kw: Any) -> list[Result]:
        self.calls.append((len(source), max(len(s) for s in source), kw["beam_size"]))
        return [Result([list(s)]) for s in source]


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    return toy_tokenizer(Path(tmp_path_factory.mktemp("ct2-stop")))


def translator(tok: Tokenizer, **decode: Any) -> tuple[CT2Translator, Recording]:
    fake = Recording()
    return CT2Translator(fake, tok, 1024, DecodeConfig(**decode)), fake


LINES = ["a b c d"] * 12


def test_a_decode_is_cut_into_the_translators_batches(tok: Tokenizer) -> None:
    (pieces,) = {len(x) for x in tok.encode_src(LINES)}
    budget = 4 * (pieces + 1) * 3
    greedy, fake_greedy = translator(tok, beam=1, batch_tokens=budget)
    beam, fake_beam = translator(tok, beam=3, batch_tokens=budget)
    out = greedy.piece_ids(LINES)
    assert beam.piece_ids(LINES) == out
    assert [n for n, _, _ in fake_greedy.calls] == [12]
    assert [n for n, _, _ in fake_beam.calls] == [4, 4, 4]
    for n, longest, k in fake_beam.calls:
        assert n * (longest + 1) * k <= budget


def test_should_stop_is_checked_before_each_batch(tok: Tokenizer) -> None:
    ct2, fake = translator(tok, beam=2, batch_tokens=1)  # one sentence a batch
    checks: list[int] = []

    def stop_after_three() -> bool:
        checks.append(len(fake.calls))
        return len(fake.calls) >= 3

    ct2.should_stop = stop_after_three
    with pytest.raises(KeyboardInterrupt):
        ct2.piece_ids(LINES)
    assert len(fake.calls) == 3 and checks == [0, 1, 2, 3]


def test_serve_stops_a_ctranslate2_decode_between_batches(tok: Tokenizer) -> None:
    pytest.importorskip("fastapi", reason="serve.py needs attnmt[serve]")
    from attnmt.serve.backend import Options, ServedModel

    ct2, fake = translator(tok, beam=1, batch_tokens=1)
    model = ServedModel("ckpt", ct2)
    with pytest.raises(KeyboardInterrupt):
        model.search(LINES, Options(beam=2, alpha=0.6), 1, lambda: len(fake.calls) >= 1)
    assert len(fake.calls) == 1 and ct2.should_stop is None
    found = model.search(LINES[:2], Options(beam=2, alpha=0.6), 1, lambda: False)
    assert len(found) == 2 and len(fake.calls) == 3
