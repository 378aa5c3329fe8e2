"""sacrebleu wrappers: hand-checkable scores, signatures, and errors."""

from __future__ import annotations

import math

import pytest

from attnmt.decode.metrics import corpus_scores
from attnmt.errors import ConfigError, DataError

HYPS = ["the cat sat on the mat", "hello there"]
REFS = ["the cat sat on a mat", "hello there friend"]


def test_perfect_and_disjoint_scores() -> None:
    perfect = corpus_scores(REFS, REFS)
    assert perfect["bleu"].score == pytest.approx(100.0)
    assert perfect["chrf"].score == pytest.approx(100.0)
    assert perfect["ter"].score == pytest.approx(0.0)
    zero = corpus_scores(["xyz qqq"], ["abc def"], metrics=("bleu", "ter"))
    assert set(zero) == {"bleu", "ter"}
    assert zero["bleu"].score == pytest.approx(0.0)
    assert zero["ter"].score == pytest.approx(100.0)  # 2 substitutions / 2 reference words


def test_bleu_hand_computed() -> None:
    # clipped n-gram precisions 7/8, 4/6, 2/4, 1/3; hyp 8 words, ref 9: BP = exp(1 - 9/8)
    r = corpus_scores(HYPS, REFS, metrics=("bleu",))["bleu"]
    p = [7 / 8, 4 / 6, 2 / 4, 1 / 3]
    geo = (p[0] * p[1] * p[2] * p[3]) ** 0.25
    assert r.score == pytest.approx(100 * geo * math.exp(1 - 9 / 8), abs=1e-6)


def test_ter_hand_computed() -> None:
    # 1 substitution (the→a) + 1 deletion (friend) over 9 reference words
    r = corpus_scores(HYPS, REFS, metrics=("ter",))["ter"]
    assert r.score == pytest.approx(100 * 2 / 9)


def test_signature_and_text_are_sacrebleus_own() -> None:
    r = corpus_scores(HYPS, REFS)
    assert r["bleu"].name == "BLEU" and r["chrf"].name == "chrF2" and r["ter"].name == "TER"
    assert r["bleu"].signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|")
    assert r["bleu"].text.startswith(f"BLEU|{r['bleu'].signature} = {r['bleu'].score:.2f} ")
    assert r["ter"].text == f"TER|{r['ter'].signature} = {r['ter'].score:.2f}"
    assert r["chrf"].to_dict()["score"] == r["chrf"].score


def test_bad_input() -> None:
    with pytest.raises(DataError, match="2 hypotheses against 1 references"):
        corpus_scores(HYPS, REFS[:1])
    with pytest.raises(ConfigError, match="unknown metric 'meteor'"):
        corpus_scores(HYPS, REFS, metrics=("meteor",))
