"""decode.batch_tokens bounds a batch's beam-expanded size: sentences × padded source pieces
× beam (issue 66, item 14): beam k gets k times fewer sentences per batch than greedy
search, and the batching never changes a translation."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.tiny_checkpoint import shared_run

from attnmt.decode import translator as translator_module
from attnmt.decode.translator import Translator, load_translator


@pytest.fixture(scope="module")
def translator(tmp_path_factory: pytest.TempPathFactory) -> Translator:
    return load_translator(shared_run(tmp_path_factory), "cpu")


def batches_of(
    translator: Translator, monkeypatch: pytest.MonkeyPatch, lines: list[str], **decode: Any
) -> list[tuple[int, int]]:
    """(sentences, padded source width) of every batch the searches get."""
    seen: list[tuple[int, int]] = []
    for name in ("beam_search", "greedy_search"):
        real = getattr(translator_module, name)

        def recording(model: Any, batch: Any, *args: Any, _real: Any = real, **kw: Any) -> Any:
            seen.append((len(batch), batch.src.size(1)))
            return _real(model, batch, *args, **kw)

        monkeypatch.setattr(translator_module, name, recording)
    translator.n_best(lines, 1, **decode)
    monkeypatch.undo()
    return seen


def test_a_beam_k_batch_holds_k_times_fewer_sentences(
    translator: Translator, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = ["a b c d"] * 12
    (pieces,) = {len(ids) for ids in translator.encode(lines)}
    k = 3
    budget = 4 * (pieces + 1) * k  # 4 beam-3 sentences, or 12 greedy ones
    greedy = batches_of(translator, monkeypatch, lines, beam=1, batch_tokens=budget)
    beam = batches_of(translator, monkeypatch, lines, beam=k, batch_tokens=budget)
    assert [n for n, _ in greedy] == [12]
    assert [n for n, _ in beam] == [4, 4, 4]
    for n, width in beam:
        assert n * width * k <= budget


def test_a_source_over_the_budget_alone_gets_its_own_batch(
    translator: Translator, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = ["a b c d e f a b c", "a b", "c d"]
    beam = batches_of(translator, monkeypatch, lines, beam=4, batch_tokens=8)
    assert [n for n, _ in beam] == [1, 1, 1]


def test_batching_never_changes_a_translation(translator: Translator) -> None:
    lines = ["a b c d e f", "b", "", "f e d c b a a b", "c d", "e f a"] * 3
    one_batch = translator.n_best(lines, 3, beam=3, batch_tokens=1_000_000)
    one_each = translator.n_best(lines, 3, beam=3, batch_tokens=1)
    budget = translator.n_best(lines, 3, beam=3, batch_tokens=40)
    for a, b, c in zip(one_batch, one_each, budget):
        assert [h.tokens for h in a] == [h.tokens for h in b] == [h.tokens for h in c]
        for x, y, z in zip(a, b, c):
            assert x.score == pytest.approx(y.score, abs=1e-5)
            assert x.score == pytest.approx(z.score, abs=1e-5)
    assert one_batch[2] == []
