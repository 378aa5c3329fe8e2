"""The attention table's paragraph against Luong et al. (2015): rankings from planted means,
their AER order read only among the cells that beat the diagonal alignment."""

from __future__ import annotations

from experiments import luong_reference as lr


def test_rankings_order_best_first_in_either_direction() -> None:
    values = {("dot", "global"): 1.0, ("general", "local_p"): 3.0, ("general", "global"): 2.0}
    best_first = "local_p general 3.0 > global general 2.0 > global dot 1.0"
    assert lr.ranking(values, True, 1) == best_first
    assert lr.ranking(values, False, 2) == (
        "global dot 1.00 < global general 2.00 < local_p general 3.00"
    )
    assert lr.rank_of(("general", "global"), values, True) == 2
    assert lr.rank_of(("general", "global"), values, False) == 2
    assert lr.rank_of(("dot", "global"), values, True) == 3


def test_the_paragraph_ranks_the_shared_cells_and_places_their_best() -> None:
    bleu = {
        ("general", "local_p"): 1.0,  # their best BLEU cell, last of the shared ones here
        ("dot", "global"): 2.5,
        ("general", "local_m"): 3.0,
        ("concat", "local_m"): 4.0,  # not theirs: left out of the ranking
        ("dot", "hard"): 0.5,
    }
    aer = {("general", "local_m"): 0.55, ("general", "local_p"): 0.80, ("location", "global"): 0.6}
    (text, blank) = lr.comparison(bleu, aer)
    assert blank == ""
    assert "here local_m general 3.00 > global dot 2.50 > local_p general 1.00" in text
    assert "(local_p dot, global location, global general not yet measured)" in text
    assert "their best, local_p general, ranks 3 of 3 here." in text
    assert (
        "here local_m general 0.550, local_p general 0.800, global location 0.600; without "
        "the diagonal alignment's AER their order is not tested here."
    ) in text
    assert "ranks 1 of 3" not in text
    assert "adds the mode hard and the scorers concat" in text
    assert "concat 4.00" not in text
    assert "Here local_m dot trains." not in text  # not measured in this plant


def test_too_few_shared_cells_say_so() -> None:
    (text, _) = lr.comparison({("general", "local_p"): 2.0}, {})
    assert "BLEU: theirs local_p general 20.9 > global dot 20.5" in text
    assert "here too few of these cells are measured yet" in text
    assert "AER (here: silver): theirs local_m general 0.34 < local_p general 0.36" in text


def test_their_best_unmeasured_is_named() -> None:
    (text, _) = lr.comparison({("dot", "global"): 2.0, ("general", "global"): 1.0}, {})
    assert "their best, local_p general, is not yet measured here." in text


def test_their_aer_order_is_read_among_the_cells_that_beat_the_diagonal() -> None:
    """Diagonal 0.554. Two of their cells beat it beyond the noise (local_p general 0.30,
    global location 0.40): those two are ranked and their best (local_m general) is not
    among them; with local_m general beating it too, it ranks 2 of the 3."""
    aer = {("general", "local_m"): 0.35, ("general", "local_p"): 0.30, ("location", "global"): 0.4}
    two = {("general", "local_p"), ("location", "global")}
    (text, _) = lr.comparison({}, aer, 0.554, two)
    assert (
        "here local_m general 0.350, local_p general 0.300, global location 0.400, the "
        "diagonal alignment 0.554; beyond the silver file's noise 2 beat the diagonal: "
        "local_p general 0.300 < global location 0.400; their best, local_m general, is not "
        "among them."
    ) in text
    (text, _) = lr.comparison({}, aer, 0.554, {*two, ("general", "local_m")})
    assert "3 beat the diagonal: local_p general 0.300 < local_m general 0.350 < " in text
    assert "their best, local_m general, ranks 2 of 3 of those." in text
    (text, _) = lr.comparison({}, {}, 0.554, set())
    assert "AER (here: silver): theirs local_m general 0.34" in text
    assert "here none of these cells is measured yet." in text
