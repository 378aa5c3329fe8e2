"""evaluate.py with gold word alignments: AER, precision and recall in scores.json and on
stdout equal the scorer's on the links it wrote; the gold is checked against the pairs;
a split whose corpus has gold is scored without being asked."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch
from helpers.tiny_checkpoint import MODEL_CONFIGS, make_run, private_run, run_entry_point

from attnmt.checkpoint import save_checkpoint
from attnmt.checkpoint_format import Checkpoint, VocabInfo
from attnmt.cli.evaluate import run
from attnmt.data.corpora import prepare_corpus
from attnmt.data.gold import parse_links
from attnmt.data.tokenizer import load_or_train_tokenizer
from attnmt.decode.alignment_error import alignment_error, read_gold
from attnmt.decode.attention_maps import attention_maps, source_ids
from attnmt.decode.forced_alignment import EVALUATE_EXTRACTION, forced_alignments
from attnmt.decode.translator import load_translator
from attnmt.decode.word_alignment import Extraction, pharaoh, word_alignment
from attnmt.errors import ConfigError, DataError
from attnmt.models.registry import build_model

SOURCES = ["a b c", "d e f a", "b", "c a", "e d c b a f"]
REFS = [" ".join(reversed(s.split())) for s in SOURCES]  # toy_reverse: word i -> n-1-i


def _reversal(n: int) -> str:
    """The reversal's links i-(n-1-i): sure for even i, possible for odd i."""
    return " ".join(f"{i}{'-' if i % 2 == 0 else '?'}{n - 1 - i}" for i in range(n))


GOLD = [_reversal(len(s.split())) for s in SOURCES]


@pytest.fixture
def run_dir(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return private_run(tmp_path_factory, tmp_path)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {"src_file": tmp_path / "in.src", "ref_file": tmp_path / "in.ref"}
    paths["src_file"].write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    paths["ref_file"].write_text("\n".join(REFS) + "\n", encoding="utf-8")
    gold = tmp_path / "in.align"
    gold.write_text("\n".join(GOLD) + "\n", encoding="utf-8")
    return {**{k: str(v) for k, v in paths.items()}, "gold_alignments": str(gold)}


def _entry(run_dir: Path) -> tuple[Path, dict]:
    (folder,) = (run_dir / "eval").iterdir()
    return folder, json.loads((folder / "scores.json").read_text())[folder.name]


@pytest.mark.parametrize(("layer", "head"), [("all", None), (-1, 1)])
def test_scores_equal_the_scorer_on_the_links_written(
    run_dir: Path, files: dict[str, str], layer: int | str, head: int | None
) -> None:
    """The default map (the mean over layers) and one head, read as evaluate.py reads by
    default (configs/evaluate.yaml: EVALUATE_EXTRACTION)."""
    out = io.StringIO()
    choice = {} if layer == "all" else {"align_layer": layer, "align_head": head}
    run({"ckpt": str(run_dir), "beam": 1, **choice, **files}, out)
    folder, entry = _entry(run_dir)
    written = (folder / "forced-alignments.txt").read_text(encoding="utf-8").splitlines()
    links = [sorted(parse_links(line, "x").sure) for line in written]
    # the file holds the model's forced links of each pair, in input order
    translator = load_translator(run_dir, "cpu")
    reading = EVALUATE_EXTRACTION
    assert links == forced_alignments(translator, SOURCES, REFS, layer, head, extraction=reading)
    want = alignment_error(links, read_gold(files["gold_alignments"]))
    assert want.sure == 9 and want.possible == 16  # 16 words: 9 sure links, 7 possible
    assert entry["aer"] == pytest.approx(want.aer)
    assert entry["aer_precision"] == pytest.approx(want.precision)
    assert entry["aer_recall"] == pytest.approx(want.recall)
    assert (entry["align_layer"], entry["align_head"]) == (layer, head)
    assert (entry["align_words"], entry["align_eos"], entry["align_step"]) == (
        "any",
        "unaligned",
        "predict",
    )
    assert entry["alignment"]["links"] == want.links
    assert entry["alignment"]["gold_file"] == files["gold_alignments"]
    printed = out.getvalue().splitlines()
    assert [line.split("|")[0] for line in printed[:4]] == ["BLEU", "chrF2", "TER", "AER"]
    head_text = "mean" if head is None else str(head)
    assert printed[3].startswith(
        f"AER|layer:{layer}|head:{head_text}|words:any|eos:unaligned|step:predict|gold:in.align = "
        f"{want.aer:.4f}"
    )
    assert f"precision {want.precision:.4f}, recall {want.recall:.4f}" in printed[3]
    # the table of every map (the tiny Transformer: 1 layer, 2 heads), each row the AER of
    # that map's own forced links
    table = entry["aer_table"]
    assert [(r["layer"], r["head"]) for r in table["rows"]] == [(0, None), (0, 0), (0, 1)]
    for row in table["rows"]:
        own = forced_alignments(
            translator, SOURCES, REFS, row["layer"], row["head"], extraction=reading
        )
        assert row["aer"] == pytest.approx(
            alignment_error(own, read_gold(files["gold_alignments"])).aer
        )
    best = min(table["rows"], key=lambda r: r["aer"])
    assert table["best"] == best["map"]
    assert printed[4].startswith("AER by cross-attention map (align_words=any")
    assert printed[5].split() == ["layer", "mean", "head", "0", "head", "1"]
    assert printed[6].split() == ["0", *(f"{r['aer']:.4f}" for r in table["rows"])]
    assert printed[7] == f"best: {best['map']} (AER {best['aer']:.4f})"
    assert len(printed) == 8


def test_a_perfect_alignment_scores_0(run_dir: Path, files: dict[str, str]) -> None:
    """The gold is the model's own forced links: AER 0, precision and recall 1."""
    translator = load_translator(run_dir, "cpu")
    own = forced_alignments(translator, SOURCES, REFS, "all", None, extraction=EVALUATE_EXTRACTION)
    Path(files["gold_alignments"]).write_text(
        "".join(" ".join(f"{i}-{j}" for i, j in x) + "\n" for x in own), encoding="utf-8"
    )
    run({"ckpt": str(run_dir), "beam": 1, **files}, io.StringIO())
    _, entry = _entry(run_dir)
    assert (entry["aer"], entry["aer_precision"], entry["aer_recall"]) == (0.0, 1.0, 1.0)


def test_another_gold_or_map_gets_its_own_folder(run_dir: Path, files: dict[str, str]) -> None:
    base = {"ckpt": str(run_dir), "beam": 1, **files}
    run({**base, "gold_alignments": None}, io.StringIO())
    run(base, io.StringIO())
    gold = Path(files["gold_alignments"])
    gold.write_text("\n".join([*GOLD[:-1], "0-0"]) + "\n", encoding="utf-8")  # same name
    run(base, io.StringIO())
    run({**base, "align_layer": -1, "align_head": 0}, io.StringIO())
    folders = sorted((run_dir / "eval").iterdir())
    assert len(folders) == 4
    plain = [f for f in folders if not (f / "forced-alignments.txt").exists()]
    assert len(plain) == 1 and "aer" not in json.loads((plain[0] / "scores.json").read_text())
    assert "alignment" not in json.loads((plain[0] / "evaluation.json").read_text())
    keys = [json.loads((f / "evaluation.json").read_text()) for f in folders if f not in plain]
    records = {(k["alignment"]["gold_sha256"], k["alignment"]["align_head"]) for k in keys}
    assert len(records) == 3  # two gold contents under one name, and another head


def test_gold_with_another_line_count_fails_naming_both(
    run_dir: Path, files: dict[str, str], monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    gold = Path(files["gold_alignments"])
    gold.write_text("\n".join(GOLD[:-1]) + "\n", encoding="utf-8")
    args = [f"ckpt={run_dir}", *(f"{k}={v}" for k, v in files.items())]
    code, out, err = run_entry_point("evaluate", args, monkeypatch, capsys)
    assert code == 2 and out == "" and "Traceback" not in err
    assert (
        f"error: gold_alignments {gold} has 4 lines but src_file {files['src_file']} / "
        f"ref_file {files['ref_file']} has 5 pairs" in err
    )
    assert len(err.strip().splitlines()) == 1
    assert not (run_dir / "eval").exists()  # nothing written


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("0-0 1-x", r"in\.align:2: '1-x' is not a link"),
        ("0-0 0-4", r"in\.align:2: link 0-4 lies outside the pair \(4 source and 4 target"),
    ],
)
def test_malformed_gold_fails_before_anything_is_written(
    run_dir: Path, files: dict[str, str], line: str, message: str
) -> None:
    Path(files["gold_alignments"]).write_text(
        "\n".join([GOLD[0], line, *GOLD[2:]]) + "\n", encoding="utf-8"
    )
    with pytest.raises(DataError, match=message):
        run({"ckpt": str(run_dir), **files}, io.StringIO())
    assert not (run_dir / "eval").exists()


def test_a_map_the_model_lacks_fails_before_anything_is_written(
    run_dir: Path, files: dict[str, str]
) -> None:
    with pytest.raises(ConfigError, match=r"^align_layer=1: the model has 1 cross-attention"):
        run({"ckpt": str(run_dir), "align_layer": 1, **files}, io.StringIO())
    with pytest.raises(ConfigError, match=r"^align_head=5: "):
        run({"ckpt": str(run_dir), "align_layer": 0, "align_head": 5, **files}, io.StringIO())
    assert not (run_dir / "eval").exists()


def _toy_align_run(root: Path) -> Path:
    """An untrained tiny Transformer whose checkpoint names a small toy_align corpus."""
    data = {
        "name": "toy_align",
        "src_lang": "src",
        "tgt_lang": "tgt",
        "root": str(root),
        "toy": {"train": 200, "valid": 10, "test": 12, "min_symbols": 3, "max_symbols": 10},
        "tokenizer": {"model_type": "bpe", "vocab_size": 100, "joint": True},
    }
    tok = load_or_train_tokenizer(*prepare_corpus(data).files("train"), data["tokenizer"], root)
    torch.manual_seed(0)
    config = MODEL_CONFIGS["transformer"]
    model = build_model(config, tok.src_vocab_size, tok.tgt_vocab_size, tok.joint)
    v = tok.vocab_info()
    checkpoint = Checkpoint(
        model_name="transformer",
        model_config=dict(config),
        vocab=VocabInfo(v["src_size"], v["tgt_size"], v["joint"]),
        weights=model.state_dict(),
        tokenizer=tok.to_files_dict(),
        config={"data": data, "model": dict(config)},
    )
    return save_checkpoint(checkpoint, root / "run" / "checkpoints" / "last.pt")


def test_a_split_with_gold_is_scored_without_being_asked(tmp_path: Path) -> None:
    ckpt = _toy_align_run(tmp_path)
    out = io.StringIO()
    run({"ckpt": str(ckpt), "split": "test", "beam": 1}, out)
    folder, entry = _entry(tmp_path / "run")
    corpus_gold = prepare_corpus(load_translator(ckpt, "cpu").config["data"]).gold_alignments(
        "test"
    )
    assert corpus_gold is not None and entry["alignment"]["gold_file"] == str(corpus_gold)
    written = (folder / "forced-alignments.txt").read_text(encoding="utf-8").splitlines()
    links = [parse_links(line, "x").sure for line in written]
    want = alignment_error(links, read_gold(corpus_gold))
    assert want.sure > 0 and want.possible > want.sure  # the corpus marks possible links
    assert entry["aer"] == pytest.approx(want.aer)
    assert entry["aer_precision"] == pytest.approx(want.precision)
    assert entry["aer_recall"] == pytest.approx(want.recall)
    (line,) = [x for x in out.getvalue().splitlines() if x.startswith("AER|")]
    assert line.startswith(
        "AER|layer:all|head:mean|words:any|eos:unaligned|step:predict|gold:test."
    )


def test_an_ensemble_aligns_with_its_members_mean_of_the_chosen_map(
    run_dir: Path, files: dict[str, str]
) -> None:
    """Each member's head-0 map, then their mean (an ensemble was limited to its members'
    last-layer mean before); its table has that one row."""
    head0 = {"align_layer": -1, "align_head": 0, "align_eos": "ignore"}
    run({"ckpt": str(run_dir), "ensemble": 2, "beam": 1, **head0, **files}, io.StringIO())
    folder, entry = _entry(run_dir)
    assert entry["alignment"]["sentences"] == len(SOURCES) and entry["aer"] is not None
    written = (folder / "forced-alignments.txt").read_text(encoding="utf-8").splitlines()
    ensemble = load_translator(run_dir, "cpu", ensemble=2)
    tok = ensemble.tokenizer
    want = []
    for src, ref in zip(SOURCES, REFS):
        per_member = [
            attention_maps(m, tok, ensemble.device, source_ids(tok, [src], 250),
                           [(tok.encode_tgt([ref])[0], True)])[0]
            for m in ensemble.model.members
        ]  # fmt: skip
        mean = torch.stack([m.cross[0, 0] for m in per_member]).mean(dim=0)
        m = per_member[0]
        want.append(pharaoh(word_alignment(mean, m.source_pieces, m.target_pieces)))
    assert written == want
    assert [(r["layer"], r["head"]) for r in entry["aer_table"]["rows"]] == [(-1, 0)]
    assert entry["aer_table"]["rows"][0]["aer"] == entry["aer"]


def test_another_reading_reaches_the_links_the_key_and_the_line(
    run_dir: Path, files: dict[str, str]
) -> None:
    base = {"ckpt": str(run_dir), "beam": 1, **files}
    run(base, io.StringIO())
    reading = {"align_layer": "all", "align_words": "one", "align_eos": "unaligned"}
    out = io.StringIO()
    run({**base, **reading, "align_step": "shift"}, out)
    folders = sorted((run_dir / "eval").iterdir())
    assert len(folders) == 2  # another reading, another folder
    (folder,) = [f for f in folders if json.loads((f / "evaluation.json").read_text())[
        "alignment"]["align_step"] == "shift"]  # fmt: skip
    entry = json.loads((folder / "scores.json").read_text())[folder.name]
    translator = load_translator(run_dir, "cpu")
    extraction = Extraction("one", "unaligned", "shift")
    want = forced_alignments(translator, SOURCES, REFS, "all", None, extraction=extraction)
    written = (folder / "forced-alignments.txt").read_text(encoding="utf-8").splitlines()
    assert written == [pharaoh(x) for x in want]
    assert entry["aer"] == pytest.approx(
        alignment_error(want, read_gold(files["gold_alignments"])).aer
    )
    assert (entry["align_layer"], entry["align_words"], entry["align_eos"]) == (
        "all",
        "one",
        "unaligned",
    )
    assert entry["alignment"]["map"] == "all layers, mean of heads"
    assert entry["aer_table"]["extraction"] == {"words": "one", "eos": "unaligned", "step": "shift"}
    assert "AER|layer:all|head:mean|words:one|eos:unaligned|step:shift|gold:in.align" in (
        out.getvalue()
    )


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("align_layer=last", "error: align_layer='last': give a decoder layer index"),
        ("align_words=each", "error: align_words='each': choose one of any, one"),
        ("align_eos=keep", "error: align_eos='keep': choose one of ignore, unaligned"),
        ("align_step=next", "error: align_step='next': choose one of predict, shift"),
    ],
)
def test_a_bad_reading_fails_in_one_line_before_anything_is_written(
    run_dir: Path, files: dict[str, str], monkeypatch, capsys, setting: str, message: str
) -> None:  # type: ignore[no-untyped-def]
    args = [f"ckpt={run_dir}", setting, *(f"{k}={v}" for k, v in files.items())]
    code, out, err = run_entry_point("evaluate", args, monkeypatch, capsys)
    assert code == 2 and out == "" and "Traceback" not in err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (run_dir / "eval").exists()


def test_an_rnn_has_a_table_of_one_row_and_prints_none(
    tmp_path: Path, files: dict[str, str]
) -> None:
    rnn = make_run(tmp_path / "rnn", "rnn_bahdanau")
    out = io.StringIO()
    run({"ckpt": str(rnn), "beam": 1, **files}, out)
    _, entry = _entry(rnn)
    (row,) = entry["aer_table"]["rows"]
    assert (row["layer"], row["head"], row["aer"]) == (0, None, entry["aer"])
    assert out.getvalue().splitlines()[-1].startswith("AER|layer:all|head:mean|")
