"""Forced alignment: the map chosen (layer, head or their mean), pieces to words on a
hand-made attention matrix, and the references forced through a tiny trained model."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from helpers.tiny_checkpoint import MODEL_CONFIGS, shared_run, tiny_model, toy_tokenizer

from attnmt.decode.attention_maps import attention_maps, source_ids
from attnmt.decode.config import DecodeConfig
from attnmt.decode.forced_alignment import (
    MapChoice,
    check_map_choice,
    cross_layout,
    describe_map,
    forced_alignments,
    forced_links,
    select_map,
    table_choices,
)
from attnmt.decode.translator import Translator, load_translator
from attnmt.decode.word_alignment import Extraction, word_alignment
from attnmt.errors import ConfigError
from attnmt.models.registry import build_model

# source words: 0 = "▁ab" "c", 1 = "▁d", then </s>; target: 0 = "▁x", 1 = "▁y" "z" "w", </s>
SRC = ["▁ab", "c", "▁d", "</s>"]
TGT = ["▁x", "▁y", "z", "w", "</s>"]


def _cross() -> torch.Tensor:
    """[L=2, H=2, T=5, S=4]: layer 0 all uniform; layer 1 with two different heads."""
    uniform = torch.full((5, 4), 0.25)
    head0 = torch.tensor(
        [
            [0.1, 0.6, 0.2, 0.1],  # ▁x -> c (word 0)
            [0.1, 0.1, 0.7, 0.1],  # ▁y -> ▁d (word 1)
            [0.5, 0.2, 0.2, 0.1],  # z -> ▁ab (word 0)
            [0.0, 0.1, 0.2, 0.7],  # w -> </s> most; best real piece ▁d (word 1)
            [0.9, 0.0, 0.0, 0.1],  # </s> row: left out
        ]
    )
    head1 = torch.tensor(
        [
            [0.1, 0.1, 0.7, 0.1],  # ▁x -> ▁d
            [0.6, 0.1, 0.2, 0.1],  # ▁y -> ▁ab
            [0.1, 0.1, 0.7, 0.1],  # z -> ▁d
            [0.1, 0.6, 0.2, 0.1],  # w -> c
            [0.2, 0.2, 0.2, 0.4],
        ]
    )
    layer0 = torch.stack([uniform, uniform])
    return torch.stack([layer0, torch.stack([head0, head1])])


def test_multi_piece_words_link_when_any_of_their_pieces_do() -> None:
    cross = _cross()
    assert word_alignment(select_map(cross, -1, 0), SRC, TGT) == [(0, 0), (0, 1), (1, 1)]
    assert word_alignment(select_map(cross, 1, 1), SRC, TGT) == [(0, 1), (1, 0), (1, 1)]
    # the mean of the two heads: ▁x [.1 .35 .45 .1] -> ▁d; ▁y [.35 .1 .45 .1] -> ▁d;
    # z [.3 .15 .45 .1] -> ▁d; w [.05 .35 .2 .4] -> c
    mean = select_map(cross, -1, None)
    assert torch.allclose(mean, (cross[1, 0] + cross[1, 1]) / 2)
    assert word_alignment(mean, SRC, TGT) == [(0, 1), (1, 0), (1, 1)]
    # layer 0 is uniform: argmax picks the first real piece for every target piece
    assert word_alignment(select_map(cross, 0, None), SRC, TGT) == [(0, 0), (0, 1)]
    assert describe_map(-1, None) == "layer -1, mean of heads"
    assert describe_map(0, 1) == "layer 0, head 1"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_run(tmp_path_factory)


def test_forced_links_come_from_the_teacher_forced_reference(run_dir: Path) -> None:
    translator = load_translator(run_dir, "cpu")
    sources = ["a b c", "d e f a", "b", "c a"]
    refs = ["c b a", "a f e d", "b", "a c"]
    tok = translator.tokenizer
    for head in (None, 0, 1):
        got = forced_alignments(translator, sources, refs, -1, head, batch_size=3)
        maps = attention_maps(
            translator.model,
            tok,
            translator.device,
            source_ids(tok, sources, 250),
            [(ids, True) for ids in tok.encode_tgt(refs)],
        )
        want = [
            word_alignment(select_map(m.cross, -1, head), m.source_pieces, m.target_pieces)
            for m in maps
        ]
        assert got == want  # batched shortest first, returned in input order
        for links, src, ref in zip(got, sources, refs):
            # every reference word is linked, and only to words of the pair
            assert {j for _, j in links} == set(range(len(ref.split())))
            assert all(0 <= i < len(src.split()) for i, _ in links)


def test_map_choices_are_checked_against_the_model(run_dir: Path) -> None:
    translator = load_translator(run_dir, "cpu")
    model, device = translator.model, translator.device
    assert cross_layout(model, device) == (1, 2)  # the tiny Transformer: 1 layer, 2 heads
    check_map_choice(model, device, 0, 1)
    check_map_choice(model, device, -1, None)
    with pytest.raises(ConfigError, match=r"^align_layer=1: the model has 1 cross-attention"):
        check_map_choice(model, device, 1, None)
    with pytest.raises(ConfigError, match=r"^align_layer=-2: "):
        check_map_choice(model, device, -2, None)
    with pytest.raises(ConfigError, match=r"^align_head=2: the model's cross-attention has 2"):
        check_map_choice(model, device, -1, 2)


def test_cut_sources_and_word_mismatches_are_named(
    run_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    translator = load_translator(run_dir, "cpu", DecodeConfig(max_src_len=3))
    with caplog.at_level(logging.WARNING):
        links = forced_alignments(translator, ["a b", "a b c d e f"], ["b a", "f e d c b a"])
    assert "1 line(s) longer than decode.max_src_len=3 source pieces" in caplog.text
    assert ": line 2" in caplog.text
    assert all(i < 3 for i, _ in links[1])  # only words the model read can be linked
    assert "different number of words" not in caplog.text


def test_references_beyond_the_models_positions_are_cut_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A Transformer with learned positions reads max_positions - 1 target pieces: a longer
    reference is aligned from its first pieces (no position error), and the line named."""
    tok = toy_tokenizer(tmp_path)
    config = {**MODEL_CONFIGS["transformer"], "positions": "learned", "max_positions": 5}
    torch.manual_seed(0)
    model = build_model(config, tok.src_vocab_size, tok.tgt_vocab_size, tok.joint)
    translator = Translator(model, tok, torch.device("cpu"))
    assert model.max_target_length() == 4
    long_ref = "a b c d e f a b"
    assert len(tok.encode_tgt([long_ref])[0]) > 4
    with caplog.at_level(logging.WARNING):
        links = forced_alignments(translator, ["a b", "c d"], ["b a", long_ref])
    assert "1 line(s) longer than the model's 4 target positions" in caplog.text
    assert ": line 2" in caplog.text
    assert "different number of words" not in caplog.text
    assert links[1] and all(j < 4 for _, j in links[1])  # words past the cut: no links
    assert {j for _, j in links[0]} == {0, 1}


def test_words_the_tokenizer_sees_otherwise_are_named(
    run_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An ideographic space (U+3000) separates words for str.split but is a character to
    this tokenizer (identity normalisation): the reference has 2 words, its pieces 1."""
    translator = load_translator(run_dir, "cpu")
    with caplog.at_level(logging.WARNING):
        forced_alignments(translator, ["a b", "b a", "c"], ["b a", "a\u3000b", "c"])
    assert "1 line(s) split into a different number of words" in caplog.text
    assert "line 2" in caplog.text


def test_an_rnn_aligns_with_its_one_map(tmp_path: Path) -> None:
    tok = toy_tokenizer(tmp_path)
    translator = Translator(tiny_model("rnn_bahdanau", tok), tok, torch.device("cpu"))
    assert cross_layout(translator.model, translator.device) == (1, 1)
    check_map_choice(translator.model, translator.device, 0, 0)
    with pytest.raises(ConfigError, match=r"^align_head=1: the model's cross-attention has 1"):
        check_map_choice(translator.model, translator.device, -1, 1)
    links = forced_alignments(translator, ["a b c", "d"], ["c b a", "d"], -1, None)
    assert {j for _, j in links[0]} == {0, 1, 2} and links[1] == [(0, 0)]
    assert links == forced_alignments(translator, ["a b c", "d"], ["c b a", "d"], 0, 0)
    assert links == forced_alignments(translator, ["a b c", "d"], ["c b a", "d"], "all", None)


def test_every_map_of_a_deeper_transformer_is_read_in_one_pass(tmp_path: Path) -> None:
    """A 2-layer, 2-head Transformer: forced_links gives, per map of the table and per
    reading, the links of that map of the pair's own teacher-forced maps."""
    tok = toy_tokenizer(tmp_path)
    config = {**MODEL_CONFIGS["transformer"], "dec_layers": 2}
    torch.manual_seed(0)
    model = build_model(config, tok.src_vocab_size, tok.tgt_vocab_size, tok.joint)
    translator = Translator(model, tok, torch.device("cpu"))
    assert cross_layout(model, translator.device) == (2, 2)
    check_map_choice(model, translator.device, "all", None)
    with pytest.raises(ConfigError, match=r"^align_layer=2: the model has 2 cross-attention"):
        check_map_choice(model, translator.device, 2, None)
    sources, refs = ["a b c", "d e f a", "b"], ["c b a", "a f e d", "b"]
    choices = [*table_choices(2, 2), MapChoice(-1, None)]
    maps = attention_maps(
        model,
        tok,
        translator.device,
        source_ids(tok, sources, 250),
        [(ids, True) for ids in tok.encode_tgt(refs)],
    )
    for extraction in (Extraction(), Extraction("one", "unaligned", "shift")):
        got = forced_links(translator, sources, refs, choices, extraction, batch_size=2)
        for c, links in zip(choices, got):
            want = [
                word_alignment(c.select(m.cross), m.source_pieces, m.target_pieces, extraction)
                for m in maps
            ]
            assert links == want, c
    # the mean over layers is a map of its own: here not any single layer's
    mean_all = [select_map(m.cross, "all", None) for m in maps]
    assert not any(torch.allclose(a, m.cross[k].mean(dim=0)) for a, m in zip(mean_all, maps)
                   for k in range(2))  # fmt: skip
