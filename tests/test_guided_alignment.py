"""Guided alignment: the loss on hand-computed cases, word links as piece links in batches,
the refusal of links that do not match the corpus, the models' returned map, the config
checks and the logged figures."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmt.data.batching import make_batch
from attnmt.data.corpora import PreparedCorpus
from attnmt.data.guided_batches import GuidedCollate, piece_links, piece_words
from attnmt.data.silver import LinksRecord, record_path, split_hashes
from attnmt.data.train_links import shipped_links, silver_file, train_links
from attnmt.data.word_links import WordLinks, read_word_links
from attnmt.decode.word_alignment import word_index
from attnmt.errors import ConfigError, DataError
from attnmt.models.base import CrossAttentionRequest
from attnmt.models.registry import build_model
from attnmt.train.config import GuidedAlignmentConfig
from attnmt.train.guided_alignment import (
    EPS,
    GuidedAlignment,
    alignment_loss,
    check_guide,
    teacher_forced,
)
from attnmt.train.meter import TrainMeter
from attnmt.train.run_config import validate_config
from tests.helpers.toy_train import toy_train_config

# --------------------------------------------------------------------------- the loss


def _attn() -> torch.Tensor:
    """[1, 3, 3]: three rows over three source positions, each summing to 1."""
    return torch.tensor([[[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.25, 0.25, 0.5]]])


def test_one_link_costs_minus_log_of_its_weight() -> None:
    out = alignment_loss(_attn(), torch.tensor([[0, 0, 1]]))
    assert float(out.total) == pytest.approx(-math.log(0.3))
    assert int(out.rows) == 1
    assert float(out.mean) == pytest.approx(-math.log(0.3))


def test_several_links_share_their_row() -> None:
    """Row 0 links to sources 0 and 2 (p = 1/2 each), row 1 to source 1:
    L = [-(log .5 + log .2)/2 - log .8] / 2."""
    links = torch.tensor([[0, 0, 0], [0, 0, 2], [0, 1, 1]])
    out = alignment_loss(_attn(), links)
    row0 = -(math.log(0.5) + math.log(0.2)) / 2
    row1 = -math.log(0.8)
    assert float(out.total) == pytest.approx(row0 + row1)
    assert int(out.rows) == 2
    assert float(out.mean) == pytest.approx((row0 + row1) / 2)


def test_a_word_without_links_is_left_out() -> None:
    """Row 1 (a target word without links) counts neither in the sum nor in R, and gets
    no gradient; the linked entries get -p / (α R)."""
    attn = _attn().requires_grad_(True)
    links = torch.tensor([[0, 0, 0], [0, 0, 2], [0, 2, 2]])
    out = alignment_loss(attn, links)
    row0 = -(math.log(0.5) + math.log(0.2)) / 2
    row2 = -math.log(0.5)
    assert int(out.rows) == 2
    assert float(out.mean.detach()) == pytest.approx((row0 + row2) / 2)
    out.mean.backward()
    assert attn.grad is not None
    grad = attn.grad[0]
    assert torch.equal(grad[1], torch.zeros(3))  # the row without links
    assert float(grad[0, 0]) == pytest.approx(-0.5 / (0.5 * 2))
    assert float(grad[0, 2]) == pytest.approx(-0.5 / (0.2 * 2))
    assert float(grad[0, 1]) == 0.0  # an unlinked source position of a linked row
    assert float(grad[2, 2]) == pytest.approx(-1.0 / (0.5 * 2))


def test_padding_takes_no_part() -> None:
    """Two pairs in one padded batch cost what each costs alone; whatever the padded rows
    and columns hold."""
    a = torch.tensor([[0.7, 0.3], [0.4, 0.6]])  # pair 0: 2 target × 2 source pieces
    b = torch.tensor([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]])  # pair 1: 3 × 3
    batch = torch.full((2, 3, 3), 0.9)  # padding cells hold junk
    batch[0, :2, :2] = a
    batch[1] = b
    links_a = [[0, 0, 1], [0, 1, 0]]
    links_b = [[0, 0, 1], [0, 2, 0], [0, 2, 2]]
    together = alignment_loss(batch, torch.tensor(links_a + [[1, t, s] for _, t, s in links_b]))
    alone_a = alignment_loss(a[None], torch.tensor(links_a))
    alone_b = alignment_loss(b[None], torch.tensor(links_b))
    assert float(together.total) == pytest.approx(float(alone_a.total + alone_b.total))
    assert int(together.rows) == int(alone_a.rows) + int(alone_b.rows) == 4
    expected = -(
        math.log(0.3) + math.log(0.4) + math.log(0.5) + (math.log(0.3) + math.log(0.4)) / 2
    )
    assert float(together.total) == pytest.approx(expected)


def test_duplicate_links_count_once_and_zeros_are_floored() -> None:
    attn = torch.tensor([[[1.0, 0.0]]])
    out = alignment_loss(attn, torch.tensor([[0, 0, 1], [0, 0, 1]]))
    assert int(out.rows) == 1
    assert float(out.total) == pytest.approx(-math.log(EPS))
    empty = alignment_loss(attn, torch.zeros((0, 3), dtype=torch.long))
    assert float(empty.total) == 0.0 and int(empty.rows) == 0 and float(empty.mean) == 0.0


# ----------------------------------------------------------- word links -> piece links

# ids 0-3 are the specials; 4-6 open a word ("▁x"), 7-8 continue one
PIECES = ["<pad>", "<unk>", "<s>", "</s>", "▁a", "▁b", "▁c", "d", "e"]
STARTS = np.array([p.startswith("▁") for p in PIECES])


def test_pieces_belong_to_words_as_evaluation_reads_them() -> None:
    ids = [7, 4, 8, 8, 5, 6, 7]  # a first piece without ▁ still opens word 0
    assert piece_words(ids, STARTS).tolist() == word_index([PIECES[i] for i in ids])
    assert piece_words(ids, STARTS).tolist() == [0, 1, 1, 1, 2, 3, 3]


def test_a_word_link_links_every_piece_of_both_words() -> None:
    """Source pieces [▁a d ▁b] are words [0 0 1]; target [▁b ▁c e] words [0 1 1]. The
    word link 0-1 links target pieces 1, 2 (rows 1, 2) with source pieces 0, 1."""
    src, tgt = [4, 7, 5], [5, 6, 8]
    t, s = piece_links(
        piece_words(src, STARTS), piece_words(tgt, STARTS), (np.array([0]), np.array([1]))
    )
    assert sorted(zip(t.tolist(), s.tolist())) == [(1, 0), (1, 1), (2, 0), (2, 1)]


def _links(pairs: list[list[tuple[int, int]]], words: list[tuple[int, int]]) -> WordLinks:
    offsets = np.cumsum([0] + [len(p) for p in pairs])
    flat = [link for p in pairs for link in p]
    return WordLinks(
        offsets.astype(np.int64),
        np.array([i for i, _ in flat], dtype=np.int32),
        np.array([j for _, j in flat], dtype=np.int32),
        np.array([w for w, _ in words], dtype=np.int32),
        np.array([w for _, w in words], dtype=np.int32),
    )


def test_batches_carry_piece_links_at_the_rows_that_predict_them() -> None:
    """Row t of a pair is the step predicting tgt_out[t]; </s> rows and columns and
    padding get no links; a pair whose pieces make other words than its line is skipped."""
    links = _links(
        [[(0, 1), (1, 0)], [(0, 0)], [(0, 0)]],
        [(2, 2), (1, 1), (1, 1)],
    )
    collate = GuidedCollate(links, STARTS, STARTS)
    items = [
        ([4, 7, 5], [5, 6, 8], 0),  # the pair above, plus word link 1-0
        ([6], [4, 7, 7], 1),  # one word each: all target pieces link the source piece
        ([4, 5], [4], 2),  # two source words but its line has one: skipped
    ]
    batch = collate(items)
    assert batch.align_links is not None and batch.tgt_out is not None
    got = sorted(map(tuple, batch.align_links.tolist()))
    assert got == sorted(
        [(0, 1, 0), (0, 1, 1), (0, 2, 0), (0, 2, 1), (0, 0, 2), (1, 0, 0), (1, 1, 0), (1, 2, 0)]
    )
    # the rows predict the linked pieces: pair 0's rows 1 and 2 predict ▁c and e
    assert batch.tgt_out[0, 1:3].tolist() == [6, 8]
    assert batch.tgt_out[0, 3].item() == 3  # </s>: no link in its row
    assert all(s < 3 for _, _, s in got)  # no source </s> (position 3 of pair 0) either
    assert batch.align_rows == 6
    assert collate.skipped == 1
    unguided = make_batch([s for s, _, _ in items], [t for _, t, _ in items])
    assert torch.equal(batch.src, unguided.src) and torch.equal(batch.tgt_out, unguided.tgt_out)


def test_word_links_subset_and_flip() -> None:
    links = _links([[(0, 1)], [(2, 0), (1, 1)], []], [(1, 2), (3, 2), (1, 1)])
    picked = links.subset(np.array([2, 1]))
    assert len(picked) == 2 and picked.n_links == 2
    assert [pair_list(picked, k) for k in range(2)] == [[], [(2, 0), (1, 1)]]
    assert picked.src_words.tolist() == [1, 3]
    flipped = links.flipped()
    assert pair_list(flipped, 1) == [(0, 2), (1, 1)]
    assert flipped.src_words.tolist() == [2, 2, 1]


def pair_list(links: WordLinks, k: int) -> list[tuple[int, int]]:
    src, tgt = links.pair(k)
    return list(zip(src.tolist(), tgt.tolist()))


# ---------------------------------------------------- links that do not match the corpus


def _corpus(tmp_path: Path, src: list[str], tgt: list[str]) -> PreparedCorpus:
    d = tmp_path / "corpus"
    d.mkdir()
    (d / "train.de").write_text("".join(x + "\n" for x in src), encoding="utf-8")
    (d / "train.en").write_text("".join(x + "\n" for x in tgt), encoding="utf-8")
    return PreparedCorpus("mine", "de", "en", d, {"train": len(src)})


SRC = ["ein Haus", "das ist gut"]
TGT = ["a house", "this is good"]


def test_links_are_read_with_their_word_counts(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, SRC, TGT)
    path = tmp_path / "links.align"
    path.write_text("0-0 1-1\n0-0 1?1 2-2\n")
    read = train_links(corpus, str(path))
    assert pair_list(read, 0) == [(0, 0), (1, 1)]
    assert pair_list(read, 1) == [(0, 0), (2, 2)]  # the possible link is not trained
    assert read.src_words.tolist() == [2, 3] and read.tgt_words.tolist() == [2, 3]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0-0\n", "links.align: 1 lines of links, but the split has 2 pairs"),
        ("0-0\n0-0\n1-1\n", "links.align: 3 lines of links, but the split has 2 pairs"),
        ("0-0\n0-0 3-1\n", "links.align:2: link 3-1 lies outside pair 2 (3 source and 3 target"),
        ("0-2\n0-0\n", "links.align:1: link 0-2 lies outside pair 1 (2 source and 2 target"),
        ("0-0\n0:1\n", "links.align:2: '0:1' is not a link"),
    ],
)
def test_mismatched_links_are_refused_naming_file_line_and_link(
    tmp_path: Path, text: str, message: str
) -> None:
    corpus = _corpus(tmp_path, SRC, TGT)
    path = tmp_path / "links.align"
    path.write_text(text)
    with pytest.raises(DataError) as err:
        train_links(corpus, str(path))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def _record(corpus: PreparedCorpus, **changes: object) -> LinksRecord:
    record = LinksRecord("train", "de", "en", 2, 5, split_hashes(corpus, "train"), "eflomal (test)")
    return dataclasses.replace(record, **changes)


def _write_record(links: Path, record: LinksRecord) -> None:
    record_path(links).write_text(json.dumps(dataclasses.asdict(record)))


def test_links_of_another_corpus_are_refused_by_their_hash(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, SRC, TGT)
    path = tmp_path / "links.align"
    path.write_text("0-0\n0-0\n")
    other = {"train.de": "ab" * 32, "train.en": split_hashes(corpus, "train")["train.en"]}
    _write_record(path, _record(corpus, files=other))
    with pytest.raises(DataError) as err:
        train_links(corpus, str(path))
    msg = str(err.value)
    assert "links.align.json: made for another corpus: its train.de had sha256 abababababab" in msg
    assert "\n" not in msg
    _write_record(path, _record(corpus, split="test"))
    with pytest.raises(DataError, match="links of the test split, not train"):
        train_links(corpus, str(path))
    _write_record(path, _record(corpus))  # the right hash: read
    assert train_links(corpus, str(path)).n_links == 2


def test_silver_links_come_from_the_cache_a_kept_copy_or_a_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No cache, no matching kept copy and no eflomal: the error names the command; a kept
    copy whose record matches the corpus (either direction) is picked, flipped when it was
    written target → source; the cache beside the corpus comes first."""
    import lzma

    import attnmt.data.train_links as tl

    corpus = _corpus(tmp_path, SRC, TGT)
    shipped = tmp_path / "shipped"
    shipped.mkdir()

    def no_eflomal() -> None:
        raise ConfigError("eflomal is not installed; pip install -e '.[silver]'")

    monkeypatch.setattr(tl, "require_eflomal", no_eflomal)
    with pytest.raises(ConfigError) as err:
        silver_file(corpus, shipped)
    assert "scripts/silver_alignments.py --split train" in str(err.value)
    assert "trainer.guided_alignment.links=FILE" in str(err.value)

    kept = shipped / "mine.train.en-de.silver.align.xz"  # written en → de: flipped here
    kept.write_bytes(lzma.compress(b"1-0\n2-2 0-1\n"))
    hashes = split_hashes(corpus, "train")
    flipped_record = _record(
        corpus, src_lang="en", tgt_lang="de", files=dict(reversed(hashes.items()))
    )
    _write_record(kept, flipped_record)
    assert shipped_links(corpus, shipped) == (kept, True)
    read = train_links(corpus, None, shipped)
    assert pair_list(read, 0) == [(0, 1)] and pair_list(read, 1) == [(1, 0), (2, 2)]

    cache = corpus.directory / "train.de-en.silver.align"
    cache.write_text("0-0\n0-0\n")
    assert silver_file(corpus, shipped) == (cache, False)


def test_the_kept_ding_links_match_the_shipped_corpus(tmp_path: Path) -> None:
    """The compressed copy shipped for ding_de_en is found for the default corpus (by its
    train files' sha256) and passes the line and word checks; the other direction reads it
    flipped."""
    from attnmt.cli.data_group import data_config
    from attnmt.data.corpora import prepare_corpus

    configs = Path(__file__).resolve().parents[1] / "configs"
    corpus = prepare_corpus(data_config(["data=ding_de_en", f"data.root={tmp_path}"], configs))
    found = shipped_links(corpus)
    assert found is not None and found[1] is False
    links = train_links(corpus, None)
    assert len(links) == corpus.counts["train"] and links.n_links > 5 * len(links)
    reverse = prepare_corpus(
        data_config(
            ["data=ding_de_en", f"data.root={tmp_path}", "data.src_lang=en", "data.tgt_lang=de"],
            configs,
        )
    )
    flipped = train_links(reverse, None)
    assert pair_list(flipped, 0) == [(j, i) for i, j in pair_list(links, 0)]


def test_read_word_links_reads_xz(tmp_path: Path) -> None:
    import lzma

    corpus = _corpus(tmp_path, SRC, TGT)
    path = tmp_path / "l.align.xz"
    path.write_bytes(lzma.compress(b"1-1\n\n"))
    src, tgt = corpus.files("train")
    read = read_word_links(path, src, tgt, 2)
    assert pair_list(read, 0) == [(1, 1)] and pair_list(read, 1) == []


# ----------------------------------------------------------------- models and settings


@pytest.mark.parametrize("name", ["transformer", "rnn_luong", "rnn_bahdanau"])
def test_models_return_the_requested_map_beside_the_same_logits(name: str) -> None:
    torch.manual_seed(0)
    cfg = {"name": name}
    if name == "transformer":
        cfg.update(d_model=32, n_heads=4, d_ff=64, enc_layers=1, dec_layers=2)
    else:
        cfg.update(emb_dim=16, hidden_size=32)
    model = build_model(cfg, 20, 20, True).eval()
    batch = make_batch([[5, 6, 7], [8, 9]], [[5, 6], [7, 8, 9, 10]])
    with torch.no_grad():
        logits = model(batch)
        maps = model.attention(batch)
        if name == "transformer":
            request = CrossAttentionRequest(layer=0, heads=(1, 3))
            got_logits, attn = model(batch, request)
            expected = maps["cross/layer0"][:, [1, 3]].mean(dim=1)
            _, last = model(batch, CrossAttentionRequest())
            assert torch.allclose(last, maps["cross"], atol=1e-6)
        else:
            got_logits, attn = model(batch, CrossAttentionRequest())
            expected = maps["cross"]
    assert model.guidable_attention() == ((2, 4) if name == "transformer" else (1, 1))
    assert torch.allclose(got_logits, logits, atol=1e-5)
    assert attn.shape == (2, 5, 4)
    assert torch.allclose(attn, expected, atol=1e-6)
    assert torch.allclose(attn.sum(-1), torch.ones(2, 5), atol=1e-5)
    assert float(attn[1, :, 3:].abs().max()) < 1e-6  # pair 1's source padding


def test_teacher_forced_asks_for_the_map_only_when_guided() -> None:
    model = build_model({"name": "rnn_luong", "emb_dim": 8, "hidden_size": 16}, 20, 20, True)
    batch = make_batch([[5, 6]], [[7]])
    logits, attn = teacher_forced(model, batch, None)
    assert attn is None and logits.shape == (1, 2, 20)
    guide = GuidedAlignment(0.05, CrossAttentionRequest())
    _, attn = teacher_forced(model, batch, guide)
    assert attn is not None and attn.shape == (1, 2, 3)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["trainer.guided_alignment.layer=1"], "trainer.guided_alignment.layer=1: the model has 1"),
        (["trainer.guided_alignment.heads=[2]"], "trainer.guided_alignment.heads=[2]: the model"),
        (["trainer.guided_alignment.heads=[0,0]"], "must be null (all heads) or distinct"),
        (["trainer.guided_alignment.weight=-1"], "trainer.guided_alignment.weight: -1.0 is out"),
    ],
)
def test_settings_the_model_cannot_serve_are_refused_up_front(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    cfg = toy_train_config(tmp_path, "trainer.guided_alignment.weight=0.1", *overrides)
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert message in str(err.value)
    off = toy_train_config(tmp_path, "trainer.guided_alignment.layer=7")
    assert validate_config(off).trainer.guided_alignment.layer == 7  # off: not checked


def test_an_rnn_has_one_map_of_one_head() -> None:
    model = build_model({"name": "rnn_luong", "emb_dim": 8, "hidden_size": 16}, 20, 20, True)
    prefix = "trainer.guided_alignment"
    check_guide(GuidedAlignmentConfig(weight=0.1, layer=0, heads=[0]), model, prefix)
    with pytest.raises(ConfigError, match=r"heads=\[1\]: the model's cross-attention has 1 head"):
        check_guide(GuidedAlignmentConfig(weight=0.1, heads=[1]), model, prefix)
    with pytest.raises(ConfigError, match="layer=1: the model has 1 cross-attention layer"):
        check_guide(GuidedAlignmentConfig(weight=0.1, layer=1), model, prefix)


def test_the_alignment_loss_is_logged_apart() -> None:
    meter = TrainMeter()
    fig = {"loss": 2.0, "nll": 1.5, "tokens": 10.0, "seconds": 1.0, "lr": 1e-3, "grad_norm": 1.0}
    meter.add(fig)
    assert "train/align" not in meter.scalars() and "align" not in meter.line(1, 0)
    meter.add({**fig, "align": 1.0, "align_rows": 3.0})
    meter.add({**fig, "align": 2.0, "align_rows": 1.0})
    scalars = meter.scalars()
    assert scalars["train/align"] == pytest.approx((1.0 * 3 + 2.0 * 1) / 4)
    assert scalars["train/nll"] == pytest.approx(1.5)  # the translation loss alone
    assert "| align 1.250 |" in meter.line(3, 0)


def test_guided_training_logs_its_loss_apart_and_keeps_the_translation_loss(
    tmp_path: Path,
) -> None:
    """Two updates of a guided run and of its unguided twin: the first update's translation
    loss is the same number (the alignment term is not in it), and only the guided run's
    figures carry ``align`` over the rows that have links."""
    from attnmt.data.corpora import prepare_corpus
    from attnmt.train.loop import train

    toy = ["data=toy_align", "data.toy.train=100", "data.toy.valid=4", "data.toy.test=4"]
    small = [*toy, "trainer.max_steps=2", "trainer.val_every_steps=0", "trainer.num_samples=0"]
    corpus = prepare_corpus(validate_config(toy_train_config(tmp_path, *small)).data)
    gold = corpus.gold_alignments("train")
    figures: dict[str, list[dict[str, float]]] = {"plain": [], "guided": []}
    guided = ["trainer.guided_alignment.weight=0.5", f"trainer.guided_alignment.links={gold}"]
    for name, extra in (("plain", []), ("guided", guided)):
        cfg = toy_train_config(tmp_path, *small, *extra)
        train(cfg, tmp_path / name, on_step=lambda _, fig, n=name: figures[n].append(fig))
    plain, aligned = figures["plain"], figures["guided"]
    assert len(plain) == len(aligned) == 2
    assert aligned[0]["nll"] == pytest.approx(plain[0]["nll"], rel=1e-5)
    assert aligned[0]["loss"] == pytest.approx(plain[0]["loss"], rel=1e-5)
    assert "align" not in plain[0]
    assert all(f["align_rows"] > 0 and 0 < f["align"] < 20 for f in aligned)


def test_train_py_refuses_mismatched_links_in_one_line_with_status_2(tmp_path: Path) -> None:
    """Through the entry point: links with a line too few stop train.py before the
    tokenizer, exit status 2, one line naming the file, no traceback."""
    import subprocess
    import sys

    links = tmp_path / "short.align"
    links.write_text("0-0\n")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [
            sys.executable,
            str(root / "train.py"),
            "data=toy_align",
            "data.toy.train=20",
            "data.toy.valid=4",
            "data.toy.test=4",
            f"data.root={tmp_path / 'data'}",
            "model=transformer_tiny",
            "device=cpu",
            "trainer.guided_alignment.weight=0.05",
            f"trainer.guided_alignment.links={links}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "lines of links" in line]
    assert len(errors) == 1
    assert f"{links}: 1 lines of links, but the split has 20 pairs" in errors[0]
    assert not list((tmp_path / "data").glob("*/spm-*"))  # refused before the tokenizer


@pytest.mark.skipif(importlib.util.find_spec("eflomal") is None, reason="eflomal not installed")
def test_the_script_caches_train_links_where_guided_training_finds_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``silver_alignments.py --split train`` writes the train split's links beside the
    prepared corpus with their record; a guided run with links=null reads that cache."""
    from attnmt.cli.data_group import data_config
    from attnmt.data.corpora import prepare_corpus
    from scripts.silver_alignments import CONFIGS, main
    from tests.test_silver import _cli_args, _custom_dir

    args = _cli_args(tmp_path, _custom_dir(tmp_path))
    assert main([*args, "--split", "train"]) == 0
    corpus = prepare_corpus(data_config(args, CONFIGS))
    cache = corpus.directory / "train.de-en.silver.align"
    assert f"wrote {cache}: " in capsys.readouterr().out
    record = LinksRecord.read(record_path(cache))
    assert (record.split, record.pairs) == ("train", 600)
    assert record.files == split_hashes(corpus, "train")
    assert silver_file(corpus, tmp_path / "no-kept-copies") == (cache, False)
    links = train_links(corpus, None, tmp_path / "no-kept-copies")
    assert len(links) == 600 and links.n_links == record.links
    assert pair_list(links, 0) == [(0, 0), (1, 1), (2, 2)]  # der hund schläft: word for word
