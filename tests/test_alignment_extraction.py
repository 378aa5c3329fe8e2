"""Extraction choices on hand-built maps (pieces to words, the source </s>, Shift-Att),
the map choices (a layer, a head, the mean over layers), and the AER table of every map,
each against links and AER computed by hand; the default reading is the one attnmt always
had."""

from __future__ import annotations

import pytest
import torch

from attnmt.data.gold import Alignment, Link, parse_links
from attnmt.decode.alignment_error import alignment_error
from attnmt.decode.alignment_table import aer_table
from attnmt.decode.forced_alignment import (
    EVALUATE_EXTRACTION,
    EVALUATE_MAP,
    MapChoice,
    check_choice_setting,
    select_map,
    table_choices,
)
from attnmt.decode.word_alignment import (
    Extraction,
    aligning_rows,
    word_alignment,
    word_alignments,
    word_index,
)
from attnmt.errors import ConfigError

# source words: 0 = "▁a" "b", 1 = "▁c", then </s>; target words: 0 = "▁x" "y", 1 = "▁z"
SRC = ["▁a", "b", "▁c", "</s>"]
TGT = ["▁x", "y", "▁z", "</s>"]
#                  ▁a    b     ▁c    </s>
W = torch.tensor(
    [
        [0.20, 0.25, 0.10, 0.45],  # ▁x: b among the words, </s> over all
        [0.10, 0.05, 0.65, 0.20],  # y: ▁c
        [0.30, 0.30, 0.35, 0.05],  # ▁z: ▁c as a piece, word 0 (0.60) as a word
        [0.10, 0.05, 0.25, 0.60],  # </s> row: ▁c among the words, </s> over all
    ]
)
# gold: S = {0-0, 1-1}, P = S + {1?0}
GOLD = parse_links("0-0 1-1 1?0")

# (words, eos, step) -> links, by hand from W (rows read: predict ▁x r0, y r1, ▁z r2;
# shift ▁x r1, y r2, ▁z r3; "one": x = r0 + r1, z = r2 (shift: x = r1 + r2, z = r3),
# then source word 0 = ▁a + b, word 1 = ▁c, and </s>)
HAND: dict[tuple[str, str, str], list[Link]] = {
    # ▁x -> b (0,0); y -> ▁c (1,0); ▁z -> ▁c (1,1)
    ("any", "ignore", "predict"): [(0, 0), (1, 0), (1, 1)],
    # ▁x -> </s>: no link
    ("any", "unaligned", "predict"): [(1, 0), (1, 1)],
    # x: [.30 .30 .75 .65] -> word 0 .60, word 1 .75 -> (1,0); z: .60 vs .35 -> (0,1)
    ("one", "ignore", "predict"): [(0, 1), (1, 0)],
    # x: </s> .65 < .75; z: </s> .05: as above
    ("one", "unaligned", "predict"): [(0, 1), (1, 0)],
    # ▁x r1 -> ▁c (1,0); y r2 -> ▁c (1,0); ▁z r3 -> ▁c (1,1)
    ("any", "ignore", "shift"): [(1, 0), (1, 1)],
    # ▁z r3 -> </s>
    ("any", "unaligned", "shift"): [(1, 0)],
    # x: r1 + r2 = [.40 .35 1.0 .25] -> word 1; z: r3 -> word 0 .15, word 1 .25
    ("one", "ignore", "shift"): [(1, 0), (1, 1)],
    # z: </s> .60 beats .25
    ("one", "unaligned", "shift"): [(1, 0)],
}
# AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|), |S| = 2
HAND_AER = {
    ("any", "ignore", "predict"): 1 - (2 + 3) / (3 + 2),  # 0
    ("any", "unaligned", "predict"): 1 - (1 + 2) / (2 + 2),  # 0.25
    ("one", "ignore", "predict"): 1 - (0 + 1) / (2 + 2),  # 0.75
    ("one", "unaligned", "predict"): 1 - (0 + 1) / (2 + 2),
    ("any", "ignore", "shift"): 1 - (1 + 2) / (2 + 2),
    ("any", "unaligned", "shift"): 1 - (0 + 1) / (1 + 2),  # 2/3
    ("one", "ignore", "shift"): 1 - (1 + 2) / (2 + 2),
    ("one", "unaligned", "shift"): 1 - (0 + 1) / (1 + 2),
}


@pytest.mark.parametrize("choice", sorted(HAND))
def test_each_extraction_choice_gives_the_hand_computed_links(
    choice: tuple[str, str, str],
) -> None:
    extraction = Extraction(*choice)
    links = word_alignment(W, SRC, TGT, extraction)
    assert links == HAND[choice]
    assert alignment_error([links], [GOLD]).aer == pytest.approx(HAND_AER[choice])


def test_one_link_per_target_word_and_none_on_eos() -> None:
    """``one`` gives at most one link per target word; ``any`` may give several."""
    for eos in ("ignore", "unaligned"):
        for step in ("predict", "shift"):
            links = word_alignment(W, SRC, TGT, Extraction("one", eos, step))
            targets = [j for _, j in links]
            assert len(targets) == len(set(targets))
            if eos == "ignore":  # every target word links
                assert set(targets) == {0, 1}
    assert [j for _, j in HAND["any", "ignore", "predict"]].count(0) == 2


def test_the_default_reading_is_the_one_attnmt_always_had() -> None:
    """Extraction()'s links equal the reading before the choices existed (each target
    piece's argmax over the real source pieces, a word pair linked when any pieces are,
    the predicting row), on random maps and pieces."""

    def before(weights: torch.Tensor, src: list[str], tgt: list[str]) -> list[Link]:
        src_words, tgt_words = word_index(src), word_index(tgt)
        real = [j for j, w in enumerate(src_words) if w >= 0]
        pairs = set()
        for t, w in enumerate(tgt_words[: weights.size(0)]):
            if w >= 0:
                pairs.add((src_words[real[int(weights[t, real].argmax())]], w))
        return sorted(pairs)

    assert Extraction() == Extraction("any", "ignore", "predict")
    gen = torch.Generator().manual_seed(0)
    pieces = ["▁p", "q", "▁r", "s", "t", "▁u"]
    for _ in range(50):
        n_src, n_tgt = (int(x) for x in torch.randint(1, 7, (2,), generator=gen))
        src = [*pieces[:n_src], "</s>"]
        tgt = [*pieces[-n_tgt:], "</s>"]
        weights = torch.rand(len(tgt), len(src), generator=gen).softmax(dim=-1)
        assert word_alignment(weights, src, tgt) == before(weights, src, tgt)


def test_shift_reads_the_next_row_and_the_last_keeps_its_own() -> None:
    rows = aligning_rows(W, "shift")
    assert torch.equal(rows[:3], W[1:]) and torch.equal(rows[3], W[3])
    assert aligning_rows(W, "predict") is W
    # a hypothesis cut before </s>: its last piece has no next row and keeps its own
    # (▁x r1 -> ▁c, y r2 -> ▁c, ▁z r2 -> ▁c)
    cut = W[:3]
    assert word_alignment(cut, SRC, TGT[:3], Extraction(step="shift")) == [(1, 0), (1, 1)]


def test_maps_of_one_pair_are_read_together() -> None:
    uniform = torch.full_like(W, 0.25)
    got = word_alignments(torch.stack([W, uniform]), SRC, TGT, Extraction("any", "unaligned"))
    assert got[0] == HAND["any", "unaligned", "predict"]
    assert got[1] == [(0, 0), (0, 1)]  # ties go to the first column, ▁a
    # no source word at all: nothing links, whatever the reading
    only_eos = torch.ones(4, 1)
    for choice in HAND:
        assert word_alignment(only_eos, ["</s>"], TGT, Extraction(*choice)) == []


def test_bad_readings_are_named() -> None:
    with pytest.raises(ConfigError, match=r"^align_words='all': choose one of any, one$"):
        Extraction(words="all").check()
    with pytest.raises(ConfigError, match=r"^align_eos='keep': choose one of ignore, unaligned"):
        Extraction(eos="keep").check()
    with pytest.raises(ConfigError, match=r"^align_step='next': choose one of predict, shift"):
        Extraction(step="next").check()


# ---------------------------------------------------------------- maps and the table

E = torch.tensor(  # one-hot: ▁x -> ▁a, y -> ▁c, ▁z -> ▁a, </s> -> </s>
    [[1.0, 0, 0, 0], [0, 0, 1.0, 0], [1.0, 0, 0, 0], [0, 0, 0, 1.0]]
)
U = torch.full((4, 4), 0.25)
CROSS = torch.stack([torch.stack([W, W]), torch.stack([U, E])])  # [L=2, H=2, T=4, S=4]


def test_the_mean_over_layers_averages_every_layer_and_head() -> None:
    assert torch.allclose(select_map(CROSS, "all", None), (2 * W + U + E) / 4)
    assert torch.allclose(select_map(CROSS, -1, None), (U + E) / 2)
    assert torch.equal(select_map(CROSS, 1, 0), U)
    assert MapChoice("all").describe() == "all layers, mean of heads"
    assert MapChoice(1, 0).describe() == "layer 1, head 0"


def test_table_rows_are_each_layer_its_heads_and_the_mean_over_layers() -> None:
    assert table_choices(2, 2) == [
        MapChoice(0, None),
        MapChoice(0, 0),
        MapChoice(0, 1),
        MapChoice(1, None),
        MapChoice(1, 0),
        MapChoice(1, 1),
        MapChoice("all", None),
    ]
    assert table_choices(1, 1) == [MapChoice(0, None)]  # an RNN: its one map
    assert table_choices(1, 2) == [MapChoice(0, None), MapChoice(0, 0), MapChoice(0, 1)]
    assert table_choices(3, 1) == [*(MapChoice(i, None) for i in range(3)), MapChoice("all")]


def test_the_aer_table_equals_the_hand_computed_aer_of_each_map() -> None:
    """Two sentences: the hand-built pair and a second whose gold the maps all miss."""
    choices = table_choices(2, 2)
    extraction = Extraction()
    golds: list[Alignment] = [GOLD, parse_links("1-0")]
    second = torch.zeros(2, 2, 2, 2)
    second[..., 0] = 1.0  # ▁v -> ▁m: 0-0, never the gold 1-0
    links = [
        [
            word_alignment(c.select(CROSS), SRC, TGT, extraction),
            word_alignment(c.select(second), ["▁m", "</s>"], ["▁v", "</s>"], extraction),
        ]
        for c in choices
    ]
    table = aer_table(choices, links, golds, extraction)
    # sentence 1, by hand: layer 0 (W, W, their mean W): {0-0 1-0 1-1}: |A∩S| 2, |A∩P| 3;
    # layer 1 head 0 (uniform -> ▁a): {0-0 0-1}: 1, 1; head 1 and the mean (E's argmax):
    # {0-0 1-0 0-1}: 1, 2; all = (2W + U + E)/4: ▁x [1.4 .5 .2 .9]/4 -> ▁a, y -> ▁c,
    # ▁z [1.6 .6 .7 .1]/4 -> ▁a: {0-0 1-0 0-1}: 1, 2.
    # sentence 2 adds |A| 1, |S| 1, nothing matched. AER = 1 - (AS + AP) / (A + S)
    want = {
        MapChoice(0, None): 1 - (2 + 3) / (3 + 1 + 3),
        MapChoice(0, 0): 1 - (2 + 3) / (3 + 1 + 3),
        MapChoice(0, 1): 1 - (2 + 3) / (3 + 1 + 3),
        MapChoice(1, None): 1 - (1 + 2) / (3 + 1 + 3),
        MapChoice(1, 0): 1 - (1 + 1) / (2 + 1 + 3),
        MapChoice(1, 1): 1 - (1 + 2) / (3 + 1 + 3),
        MapChoice("all", None): 1 - (1 + 2) / (3 + 1 + 3),
    }
    got = {row.choice: row.scores.aer for row in table.rows}
    assert got == pytest.approx(want)
    best = table.best()
    assert best is not None and best.choice == MapChoice(0, None)  # the first of equals
    data = table.to_dict()
    assert data["extraction"] == {"words": "any", "eos": "ignore", "step": "predict"}
    assert data["best"] == "layer 0, mean of heads"
    assert [(r["layer"], r["head"]) for r in data["rows"]] == [(c.layer, c.head) for c in choices]
    first = data["rows"][0]
    assert (first["links"], first["sure"], first["links_in_sure"]) == (4, 3, 2)
    assert first["precision"] == pytest.approx(3 / 4) and "sentences" not in first
    assert table.lines() == [
        "AER by cross-attention map (align_words=any align_eos=ignore align_step=predict; "
        "lower is better):",
        "layer    mean  head 0  head 1",
        "0      0.2857  0.2857  0.2857",
        "1      0.5714  0.6667  0.5714",
        "all    0.5714",
        "best: layer 0, mean of heads (AER 0.2857)",
    ]


def test_map_settings_are_checked_before_any_model_is_read() -> None:
    check_choice_setting(-1, None)
    check_choice_setting("all", None)
    check_choice_setting(2, 3)
    with pytest.raises(ConfigError, match=r"^align_layer='last': give a decoder layer index"):
        check_choice_setting("last", None)
    with pytest.raises(ConfigError, match=r"^align_layer=True: "):
        check_choice_setting(True, None)
    with pytest.raises(ConfigError, match=r"^align_layer=all align_head=1: the mean over"):
        check_choice_setting("all", 1)


def test_evaluate_defaults_are_configs_evaluate_yaml() -> None:
    """configs/evaluate.yaml, EvalSettings and the serve page read with one default."""
    from pathlib import Path

    from omegaconf import OmegaConf

    from attnmt.cli.evaluate import EvalSettings

    cfg = OmegaConf.load(Path(__file__).parents[1] / "configs" / "evaluate.yaml")
    s = EvalSettings()
    assert (cfg.align_layer, cfg.align_head) == (EVALUATE_MAP.layer, EVALUATE_MAP.head)
    assert (cfg.align_words, cfg.align_eos, cfg.align_step) == (
        EVALUATE_EXTRACTION.words,
        EVALUATE_EXTRACTION.eos,
        EVALUATE_EXTRACTION.step,
    )
    assert (s.map_choice, s.extraction) == (EVALUATE_MAP, EVALUATE_EXTRACTION)
