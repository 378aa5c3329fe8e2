"""Gold links that are well formed but absurd: an index of thousands of digits is refused in
the same one line as any malformed link (it raised int()'s ValueError, a 500 in serve), and a
gold file without a single link is read with a warning naming it (it scored AER 1 silently)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from attnmt.cli.eval_alignment import load_gold
from attnmt.data.gold import MAX_INDEX_DIGITS, parse_links
from attnmt.decode.alignment_error import alignment_error, read_gold
from attnmt.errors import DataError

LONG = "9" * 5000


@pytest.mark.parametrize("link", [f"0-{LONG}", f"{LONG}?0", f"1{'0' * MAX_INDEX_DIGITS}-0"])
def test_an_index_of_too_many_digits_is_one_line_naming_file_line_and_link(
    tmp_path: Path, link: str
) -> None:
    path = tmp_path / "gold.align"
    path.write_text(f"0-0\n1-1 {link}\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_gold(path)
    message = str(err.value)
    assert message.startswith(f"{path}:2: link '{link[:20]}")
    digits = max(len(part) for part in link.replace("?", "-").split("-"))
    assert f"names a word index of {digits:,} digits" in message
    assert "\n" not in message and len(message) < 300  # the link is quoted cut, not whole


def test_the_longest_index_and_leading_zeros_still_parse() -> None:
    top = "9" * MAX_INDEX_DIGITS
    assert parse_links(f"{top}-0 {'0' * 5000}7?3").possible == {(int(top), 0), (7, 3)}


def test_a_long_malformed_token_is_quoted_cut() -> None:
    with pytest.raises(DataError) as err:
        parse_links("x" * 100_000, "g:1")
    assert str(err.value).startswith("g:1: 'xxxxxxxxxxxxxxxxxxxx'…") and len(str(err.value)) < 300


def test_a_gold_file_without_any_link_is_warned_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    empty, some = tmp_path / "empty.align", tmp_path / "some.align"
    empty.write_text("\n  \n\n", encoding="utf-8")
    some.write_text("\n0-0\n\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        golds = read_gold(empty)
    assert alignment_error([{(0, 0)}] * 3, golds).aer == 1.0  # what it would silently give
    assert f"gold alignments {empty} hold no links on any of their 3 lines" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        read_gold(some)
    assert caplog.text == ""


def test_evaluates_gold_loading_warns_of_a_file_without_links(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gold = tmp_path / "test.de-en.align"
    gold.write_text("\n\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        loaded = load_gold(gold, ["a b", "c"], ["x y", "z"], "split test")
    assert len(loaded.links) == 2 and f"{gold} hold no links" in caplog.text


def test_serve_answers_an_overlong_gold_index_with_a_422_and_keeps_serving(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    pytest.importorskip("fastapi", reason="serve.py needs attnmt[serve] (fastapi, uvicorn)")
    pytest.importorskip("httpx", reason="FastAPI's test client needs httpx")
    from helpers.serving import client, post, tiny_models, tiny_runs

    models = tiny_models(tiny_runs(tmp_path_factory))
    body: dict[str, Any] = {"text": "a b", "reference": "b a", "gold": f"0-1 1-{LONG}"}
    with client(models) as c:
        response = c.post("/translate", json=body)
        assert response.status_code == 422, response.text
        error = response.json()
        assert error["field"] == "gold" and "names a word index of 5,000 digits" in error["error"]
        assert post(c, text="a b", reference="b a", gold="0-1 1-0")["lines"]
