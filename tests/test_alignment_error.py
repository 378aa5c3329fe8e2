"""Alignment error rate (Och & Ney 2003) on hand-computed cases, and gold files checked
against their pairs."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnmt.data.gold import Alignment, parse_links
from attnmt.decode.alignment_error import alignment_error, check_gold_ranges, read_gold
from attnmt.errors import DataError


def gold(text: str) -> Alignment:
    return parse_links(text, "gold:1")


def test_identical_alignment_has_error_0_and_disjoint_has_error_1() -> None:
    g = gold("0-0 1-2 2-1")
    same = alignment_error([[(0, 0), (1, 2), (2, 1)]], [g])
    assert (same.aer, same.precision, same.recall) == (0.0, 1.0, 1.0)
    apart = alignment_error([[(0, 1), (1, 0), (2, 2)]], [g])
    assert (apart.aer, apart.precision, apart.recall) == (1.0, 0.0, 0.0)


def test_sure_and_possible_links() -> None:
    # S = {0-0, 1-1}, P = S + {2-1, 2-2}; A = {0-0, 2-1, 2-0}
    # |A∩S| = 1 (0-0), |A∩P| = 2 (0-0, 2-1): AER = 1 - (1 + 2) / (3 + 2) = 0.4
    g = gold("0-0 1-1 2?1 2?2")
    assert g.sure == {(0, 0), (1, 1)}
    assert g.possible == {(0, 0), (1, 1), (2, 1), (2, 2)}  # possible includes sure
    r = alignment_error([[(0, 0), (2, 1), (2, 0)]], [g])
    assert r.aer == pytest.approx(0.4)
    assert r.precision == pytest.approx(2 / 3)
    assert r.recall == pytest.approx(1 / 2)
    assert (r.links, r.sure, r.possible, r.links_in_sure, r.links_in_possible) == (3, 2, 4, 1, 2)
    # predicting only possible links: no error for them in precision, none found in recall
    only_possible = alignment_error([[(2, 1), (2, 2)]], [g])
    assert only_possible.aer == pytest.approx(1 - 2 / 4)
    assert (only_possible.precision, only_possible.recall) == (1.0, 0.0)


def test_a_link_marked_sure_and_possible_is_sure() -> None:
    assert gold("1?1 1-1").sure == {(1, 1)}


def test_empty_hypothesis_alignment() -> None:
    # A = ∅: AER = 1 - 0 / (0 + |S|) = 1; precision |A∩P| / |A| is 0/0: None
    r = alignment_error([[]], [gold("0-0 1-1")])
    assert (r.aer, r.precision, r.recall) == (1.0, None, 0.0)


def test_gold_with_only_possible_links() -> None:
    # |S| = 0: recall is 0/0 (None); AER = 1 - |A∩P| / |A| = 1 - precision
    r = alignment_error([[(0, 0), (1, 0)]], [gold("0?0 1?1")])
    assert r.sure == 0
    assert r.recall is None
    assert r.precision == pytest.approx(0.5)
    assert r.aer == pytest.approx(0.5)
    # nothing predicted and nothing sure: every ratio is 0/0
    empty = alignment_error([[]], [gold("0?0")])
    assert (empty.aer, empty.precision, empty.recall) == (None, None, None)


def test_counts_are_summed_over_the_corpus_not_averaged_per_sentence() -> None:
    # sentence 1: A = S = P = {0-0}: AER 0; sentence 2: S = P = {0-0 1-1 2-2 3-3}, A = {0-1}:
    # AER 1. Summed: |A∩S| = |A∩P| = 1, |A| = 2, |S| = 5: AER = 1 - 2/7 (the mean would be 0.5)
    r = alignment_error([[(0, 0)], [(0, 1)]], [gold("0-0"), gold("0-0 1-1 2-2 3-3")])
    assert r.aer == pytest.approx(5 / 7)
    assert r.precision == pytest.approx(1 / 2)
    assert r.recall == pytest.approx(1 / 5)
    assert r.sentences == 2


def test_duplicate_hypothesis_links_count_once() -> None:
    r = alignment_error([[(0, 0), (0, 0)]], [gold("0-0")])
    assert (r.links, r.aer) == (1, 0.0)


def test_lengths_must_match() -> None:
    with pytest.raises(ValueError, match="2 hypothesis alignments for 1 gold"):
        alignment_error([[], []], [gold("")])


def test_read_gold_files(tmp_path: Path) -> None:
    path = tmp_path / "test.align"
    path.write_text("0-0 1?2\n\n  2-1   0-1 \n", encoding="utf-8")
    g = read_gold(path)
    assert [x.sure for x in g] == [{(0, 0)}, set(), {(2, 1), (0, 1)}]
    assert g[0].possible == {(0, 0), (1, 2)}
    assert g[1].possible == set()


@pytest.mark.parametrize(
    ("line", "token"),
    [("0-0 1-x", "1-x"), ("0-0 1:2", "1:2"), ("-1-2", "-1-2"), ("0-0-1", "0-0-1"), ("1 2", "1")],
)
def test_malformed_links_name_file_line_and_link(tmp_path: Path, line: str, token: str) -> None:
    path = tmp_path / "bad.align"
    path.write_text(f"0-0\n{line}\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_gold(path)
    message = str(err.value)
    assert message.startswith(f"{path}:2: ")
    assert repr(token) in message
    assert "i-j" in message and "i?j" in message
    assert "\n" not in message


def test_link_beyond_the_sentence_names_file_line_and_word_counts(tmp_path: Path) -> None:
    path = tmp_path / "g.align"
    golds = [gold("0-0 1-1"), gold("2-0")]
    check_gold_ranges(golds, ["a b", "a b c"], ["x y", "x"], path)  # in range: no error
    with pytest.raises(DataError, match=rf"^{path}:2: link 3-0 .*\(3 source and 1 target words"):
        check_gold_ranges([golds[0], gold("3-0")], ["a b", "a b c"], ["x y", "x"], path)
    with pytest.raises(DataError, match=rf"^{path}:1: link 1-2 .*\(2 source and 2 target words"):
        check_gold_ranges([gold("1-2")], ["a b"], ["x y"], path)
