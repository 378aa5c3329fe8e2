"""serve.py with a reference and a gold alignment per line: the reference's forced
alignment, its AER, precision and recall against the gold (as evaluate.py scores them), the
gold links echoed, the reference's maps within the response bound, and every refusal a 422
naming the field, for that request alone."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="serve.py needs attnmt[serve] (fastapi, uvicorn)")
pytest.importorskip("httpx", reason="FastAPI's test client needs httpx")

from helpers.serving import attention_values, client, post, tiny_models, tiny_runs

from attnmt.data.gold import parse_links
from attnmt.decode.alignment_error import alignment_error
from attnmt.decode.forced_alignment import EVALUATE_EXTRACTION, EVALUATE_MAP, forced_alignments
from attnmt.decode.translator import Translator
from attnmt.decode.word_alignment import pharaoh, word_index
from attnmt.serve.backend import ServedModel
from attnmt.serve.references import word_warnings

# toy_reverse: the target is the source reversed, so word i of n aligns with word n-1-i
TEXT = ["a b c", "d e f a", "", "b c"]
REFS = ["c b a", "a f e d", None, "c b"]
GOLD = ["0-2 1-1 2-0", "0-3 1?2 2-1 3-0 3?1", None, "0-0 1?1"]
EVALUATE_READING = (EVALUATE_MAP.layer, EVALUATE_MAP.head)  # evaluate.py's default map


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_runs(tmp_path_factory)


@pytest.fixture(scope="module")
def models(runs: dict[str, Path]) -> list[ServedModel]:
    return tiny_models(runs)


def refuse(c: Any, body: dict[str, Any], field: str) -> str:
    """POST ``body`` (ASCII JSON: a lone surrogate as its ``\\ud800`` escape); it must get a
    422 naming ``field``; its message."""
    content = json.dumps(body)
    response = c.post("/translate", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    error = response.json()
    assert error["field"] == field, error
    assert error["error"].startswith(f"{field}:"), error
    return error["error"]


# ---------------------------------------------------------------- the scores


@pytest.mark.parametrize("index", [0, 1], ids=["transformer", "rnn"])
def test_aer_equals_alignment_error_on_the_forced_links(
    models: list[ServedModel], index: int
) -> None:
    """Per line: the reference's links are those of forced_alignments (evaluate.py's
    path), its scores those of alignment_error on them; the gold comes back parsed."""
    translator = models[index].translator
    assert isinstance(translator, Translator)
    with client(models) as c:
        data = post(c, text=TEXT, reference=REFS, gold=GOLD, model=index)
    for line, src, ref, gold in zip(data["lines"], TEXT, REFS, GOLD):
        got = line["reference"]
        if ref is None:
            assert got is None
            continue
        (links,) = forced_alignments(
            translator, [src], [ref], *EVALUATE_READING, extraction=EVALUATE_EXTRACTION
        )
        assert got["text"] == ref and got["alignment"] == pharaoh(links)
        parsed = parse_links(gold)
        want = alignment_error([links], [parsed]).to_dict()
        del want["sentences"]
        assert got["scores"] == want
        # every map's AER, as evaluate.py's table scores it: the tiny Transformer has one
        # layer of two heads, the RNN one map
        rows = got["aer_table"]["rows"]
        maps = [(0, None), (0, 0), (0, 1)] if index == 0 else [(0, None)]
        assert [(r["layer"], r["head"]) for r in rows] == maps
        for row in rows:
            (own,) = forced_alignments(
                translator, [src], [ref], row["layer"], row["head"], extraction=EVALUATE_EXTRACTION
            )
            assert row["aer"] == alignment_error([own], [parsed]).aer
            assert row["links"] == len(own)
        assert got["aer_table"]["best"] == min(rows, key=lambda r: r["aer"])["map"]
        assert got["scores"]["aer"] is not None and 0 <= got["scores"]["aer"] <= 1
        assert {tuple(x) for x in got["gold"]["sure"]} == parsed.sure
        assert {tuple(x) for x in got["gold"]["possible"]} == parsed.possible - parsed.sure
        # pieces and their words, for drawing word links on the piece map
        assert got["target_pieces"][-1] == "</s>"
        assert got["target_words"] == word_index(got["target_pieces"])
        assert got["source_words"] == word_index(line["source_pieces"])
        assert max(got["target_words"]) == len(ref.split()) - 1
        assert "attention" not in got  # not asked for


def test_the_models_own_forced_links_as_gold_score_aer_0(models: list[ServedModel]) -> None:
    with client(models) as c:
        refs = [line["reference"] for line in post(c, text=TEXT, reference=REFS)["lines"]]
        assert all(
            r is None or (r["gold"], r["scores"], r["aer_table"]) == (None, None, None)
            for r in refs
        )
        forced = [None if r is None else r["alignment"] for r in refs]
        scored = post(c, text=TEXT, reference=REFS, gold=forced)
    for line, gold in zip(scored["lines"], forced):
        if gold is None:
            continue
        scores = line["reference"]["scores"]
        assert scores["aer"] == 0.0 and scores["precision"] == 1.0 and scores["recall"] == 1.0
        assert scores["links"] == scores["sure"] == len(gold.split())


def test_a_hand_made_gold_scores_as_och_and_ney_define_it(models: list[ServedModel]) -> None:
    """A: the forced links; S: one of them and a link A lacks; P: S and another of A's."""
    with client(models) as c:
        (line,) = post(c, text="d e f a", reference="a f e d")["lines"]
        links = sorted(
            tuple(map(int, x.split("-"))) for x in line["reference"]["alignment"].split()
        )
        assert len(links) >= 2
        missing = next((i, j) for i in range(4) for j in range(4) if (i, j) not in links)
        (s, p), a = links[:2], len(links)
        gold = f"{s[0]}-{s[1]} {missing[0]}-{missing[1]} {p[0]}?{p[1]}"
        (line,) = post(c, text="d e f a", reference="a f e d", gold=gold)["lines"]
    scores = line["reference"]["scores"]
    # |A ∩ S| = 1, |A ∩ P| = 2, |S| = 2
    assert scores["precision"] == pytest.approx(2 / a)
    assert scores["recall"] == pytest.approx(1 / 2)
    assert scores["aer"] == pytest.approx(1 - (1 + 2) / (a + 2))
    assert line["reference"]["gold"] == {
        "sure": sorted([list(s), list(missing)]),
        "possible": [list(p)],
    }


def test_lines_without_a_reference_keep_their_answer(models: list[ServedModel]) -> None:
    with client(models) as c:
        alone = post(c, text=TEXT, beam=2, alignments=True)
        both = post(c, text=TEXT, beam=2, alignments=True, reference=REFS, gold=GOLD)
    for a, b in zip(alone["lines"], both["lines"]):
        assert b.pop("reference", "absent") != "absent"
        assert a == b
    assert all("reference" not in line for line in alone["lines"])


def test_words_split_otherwise_than_by_whitespace_are_warned() -> None:
    """The links name words by the tokenizer's word marks; when they count other words than
    whitespace does, the line says which side (a cut source is left out: it is shorter)."""
    out = {"text": "x y z", "source_words": [0, 0, 1, -1], "target_words": [0, 1, -1]}
    (warning,) = word_warnings(2, "a b", out, source_cut=False)
    assert warning.startswith("line 3: ") and "reference into 2 words, whitespace into 3" in warning
    both = word_warnings(0, "a b c", out, source_cut=False)
    assert len(both) == 2 and "source into 2 words, whitespace into 3" in both[0]
    assert len(word_warnings(0, "a b c", out, source_cut=True)) == 1
    assert word_warnings(0, "a b", {**out, "text": "x y"}, source_cut=False) == []


# ---------------------------------------------------------------- maps and the bound


def test_the_reference_maps_count_toward_max_attention_values(models: list[ServedModel]) -> None:
    """The reference's maps come after every line's best translation, and are left out,
    with a warning, when they would pass the bound."""
    model = models[0]
    body = {"text": TEXT, "reference": REFS, "gold": GOLD, "attention": True}
    with client(models) as c:
        full = post(c, **body)
    firsts = refs = 0
    for line in full["lines"]:
        ref = line["reference"]
        if line["translations"]:
            firsts += attention_values(line["translations"][0]["attention"])
        if ref is not None:
            s, t = len(line["source_pieces"]), len(ref["target_pieces"])
            cross = ref["attention"]["cross"]
            assert len(cross[0][0]) == t and len(cross[0][0][0]) == s
            assert attention_values(ref["attention"]) == model.map_values(t, s)
            refs += attention_values(ref["attention"])
    with client(models, max_attention_values=firsts) as c:
        cut = post(c, **body)
    for before, after in zip(full["lines"], cut["lines"]):
        assert after["translations"] == before["translations"]
        if before["reference"] is None:
            assert after["warnings"] == []
            continue
        assert after["reference"]["attention"] is None
        assert {k: v for k, v in after["reference"].items() if k != "attention"} == {
            k: v for k, v in before["reference"].items() if k != "attention"
        }
        (warning,) = after["warnings"]
        assert "no attention maps for the reference" in warning
        assert f"max_attention_values={firsts}" in warning
    with client(models, max_attention_values=firsts + refs) as c:
        assert post(c, **body) == full


# ---------------------------------------------------------------- refusals

TWO = {"text": ["a b", "c"], "reference": ["b a", "c"]}
REFUSED: list[tuple[str, dict[str, Any], str, str]] = [
    ("gold without reference", {"text": "a b", "gold": "0-1"}, "gold", "reference"),
    ("gold for a line without", {**TWO, "reference": ["b a", None], "gold": [None, "0-0"]},
     "gold[1]", "reference[1]"),
    ("malformed gold", {**TWO, "gold": ["0-1 1-0", "0-x"]}, "gold[1]", "'0-x'"),
    ("negative link", {"text": "a b", "reference": "b a", "gold": "-1-0"}, "gold", "'-1-0'"),
    ("source word beyond", {**TWO, "gold": ["2-0", ""]}, "gold[0]", "2-0"),
    ("target word beyond", {**TWO, "gold": ["0-1", "0?1"]}, "gold[1]", "0?1"),
    ("fewer references", {"text": ["a b", "c"], "reference": ["b a"]}, "reference", "2 lines"),
    ("more golds", {**TWO, "gold": ["0-1", "0-0", "0-0"]}, "gold", "2 lines"),
    ("a string for 2 lines", {"text": ["a b", "c"], "reference": "b a"}, "reference", "2 lines"),
    ("no entry for 1 line", {"text": "a", "reference": []}, "reference", "0 entries for 1 line "),
    ("empty reference", {"text": "a b", "reference": " "}, "reference", "empty"),
    ("reference to a blank line", {"text": ["a", ""], "reference": ["a", "b"]}, "reference[1]",
     "text[1]"),
    ("reference not text", {"text": "a", "reference": 5}, "reference", "string"),
    ("reference item not text", {"text": ["a", "b"], "reference": ["a", 5]}, "reference[1]",
     "string"),
    ("gold item not text", {**TWO, "gold": ["0-0", 1]}, "gold[1]", "string"),
    ("lone surrogate", {"text": "a", "reference": "a \ud800"}, "reference", "surrogate"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "field", "named"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_bad_references_and_golds_get_a_422_naming_the_field(
    models: list[ServedModel], body: dict[str, Any], field: str, named: str
) -> None:
    with client(models) as c:
        message = refuse(c, body, field)
        assert named in message, message
        assert post(c, text="a b", reference="b a", gold="0-1 1-0")["lines"]


def test_a_reference_longer_than_the_model_can_read_is_refused(models: list[ServedModel]) -> None:
    model = models[1]  # an RNN: 1024 target pieces at most
    cap = model.translator.model.max_target_length()  # type: ignore[union-attr]
    long = " ".join(["a"] * (cap + 1))
    with client(models) as c:
        message = refuse(c, {"text": ["a", "b"], "reference": ["a", long], "model": 1},
                         "reference[1]")  # fmt: skip
    assert str(cap) in message


class Gate:
    """Holds a model's search until opened; records the lines of every search."""

    def __init__(self, model: ServedModel, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started, self.open = threading.Event(), threading.Event()
        self.searched: list[list[str]] = []
        real = model.search

        def held(lines: list[str], *args: Any, **kw: Any) -> Any:
            self.searched.append(list(lines))
            self.started.set()
            assert self.open.wait(30)
            return real(lines, *args, **kw)

        monkeypatch.setattr(model, "search", held)


def test_a_refused_gold_leaves_the_batch_it_would_have_joined_alone(
    models: list[ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the decode thread is busy, a plain request and one with a reference queue up;
    a malformed gold is refused at once; the two queued ones decode as one batch, each
    with the answer it gets alone."""
    with client(models) as c:
        alone = {
            "plain": post(c, text="b c a"),
            "scored": post(c, text="a b c", reference="c b a", gold="0-2 1-1 2-0"),
        }
    gate = Gate(models[0], monkeypatch)
    bodies = {
        "first": {"text": "a"},
        "plain": {"text": "b c a"},
        "scored": {"text": "a b c", "reference": "c b a", "gold": "0-2 1-1 2-0"},
    }
    with client(models) as c:
        answers: dict[str, Any] = {}

        def ask(name: str) -> None:
            answers[name] = c.post("/translate", json=bodies[name])

        first = threading.Thread(target=ask, args=("first",))
        first.start()
        assert gate.started.wait(30)
        worker = c.app.state.workers[0]  # type: ignore[attr-defined]
        others = [threading.Thread(target=ask, args=(n,)) for n in ("plain", "scored")]
        for k, t in enumerate(others, 1):
            t.start()
            deadline = time.monotonic() + 20
            while worker.pending() < k:
                assert time.monotonic() < deadline, "never queued"
                time.sleep(0.01)
        refuse(c, {"text": "a b c", "reference": "c b a", "gold": "0-2 x"}, "gold")
        gate.open.set()
        for t in [first, *others]:
            t.join(30)
    assert ["b c a", "a b c"] in gate.searched  # one batch
    for name in ("plain", "scored"):
        assert answers[name].status_code == 200, answers[name].text
        assert rounded(answers[name].json()) == rounded(alone[name])


def rounded(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its scores to 4 decimals (padding in a batch moves the 7th)."""
    for line in data["lines"]:
        for t in line["translations"]:
            t["score"] = round(t["score"], 4)
    return data
