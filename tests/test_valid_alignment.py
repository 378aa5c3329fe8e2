"""The AER at each validation (trainer.valid_alignments): the figure equals evaluate.py's on
the same checkpoint and split; a run without links logs none and forces nothing; links that
do not fit the valid split are refused naming the file and line; the run record reads it."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from attnmt.data.corpora import PreparedCorpus, prepare_corpus
from attnmt.data.gold import format_links, parse_links
from attnmt.data.silver import LinksRecord, record_path, split_hashes
from attnmt.errors import DataError
from attnmt.run_record import RecordError, Validation, read_record
from attnmt.run_summary import Best, Summary
from attnmt.train.evaluation import ValResult
from attnmt.train.valid_links import links_file, silver_cache, valid_links
from tests.helpers.toy_train import toy_train_config

TOY = {"train": 40, "valid": 6, "test": 4}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> PreparedCorpus:
    root = tmp_path_factory.mktemp("data")
    return prepare_corpus({"name": "toy_align", "root": str(root), "toy": TOY})


def _valid(corpus: PreparedCorpus) -> tuple[list[str], list[str]]:
    return corpus.read("valid")


# --------------------------------------------------------------------------- which links


def test_auto_takes_the_gold_then_the_silver_cache_none_turns_it_off(
    corpus: PreparedCorpus, tmp_path: Path
) -> None:
    assert links_file(corpus, "auto") == corpus.gold_alignments("valid")
    assert links_file(corpus, "none") is None
    assert links_file(corpus, "x.align") == Path("x.align")
    src, ref = _valid(corpus)
    read = valid_links(corpus, "auto", src, ref)
    assert read is not None and len(read) == TOY["valid"]
    assert [len(a.possible) > 0 for a in read.links] == [True] * TOY["valid"]
    assert read.first(2).links == read.links[:2] and read.first(0) is read
    # a corpus without gold: its valid silver cache when there is one, else nothing
    plain = prepare_corpus({"name": "toy_reverse", "root": str(tmp_path), "toy": TOY})
    assert plain.gold_alignments("valid") is None
    assert links_file(plain, "auto") is None
    assert valid_links(plain, "auto", *_valid(plain)) is None
    cache = silver_cache(plain)
    assert cache.name == f"valid.{plain.src_lang}-{plain.tgt_lang}.silver.align"
    cache.write_text("".join(f"0-{len(r.split()) - 1}\n" for r in _valid(plain)[1]))
    read = valid_links(plain, "auto", *_valid(plain))
    assert read is not None and read.path == cache
    assert [sorted(a.sure) for a in read.links] == [
        [(0, len(r.split()) - 1)] for r in _valid(plain)[1]
    ]


def _gold_lines(corpus: PreparedCorpus) -> list[str]:
    gold = corpus.gold_alignments("valid")
    assert gold is not None
    return gold.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda lines: lines[:-1], "has 5 lines but the valid split of"),
        (lambda lines: [lines[0], "0-0 x-1", *lines[2:]], ":2: 'x-1' is not a link"),
        (lambda lines: [*lines[:2], "0-999", *lines[3:]], ":3: link 0-999 lies outside the pair"),
    ],
    ids=["line count", "malformed", "out of range"],
)
def test_links_that_do_not_fit_the_split_are_refused_naming_file_and_line(
    corpus: PreparedCorpus, tmp_path: Path, edit, message: str
) -> None:
    bad = tmp_path / "bad.align"
    bad.write_text("\n".join(edit(_gold_lines(corpus))) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=message) as err:
        valid_links(corpus, str(bad), *_valid(corpus))
    assert str(bad) in str(err.value)


def test_a_missing_file_is_refused_naming_the_setting(
    corpus: PreparedCorpus, tmp_path: Path
) -> None:
    with pytest.raises(DataError, match=r"trainer\.valid_alignments"):
        valid_links(corpus, str(tmp_path / "absent.align"), *_valid(corpus))


def _record(corpus: PreparedCorpus, path: Path, **change: object) -> None:
    src, tgt = corpus.src_lang, corpus.tgt_lang
    record = LinksRecord("valid", src, tgt, 6, 0, split_hashes(corpus, "valid"), "hand")
    data = {**dataclasses.asdict(record), **change}
    record_path(path).write_text(json.dumps(data), encoding="utf-8")


def test_a_record_of_other_sentences_is_refused_a_reversed_one_read_flipped(
    corpus: PreparedCorpus, tmp_path: Path
) -> None:
    src, ref = _valid(corpus)
    links = tmp_path / "valid.align"
    links.write_text("\n".join(_gold_lines(corpus)) + "\n", encoding="utf-8")
    _record(corpus, links, split="test")
    with pytest.raises(DataError, match="links of the test split, not valid"):
        valid_links(corpus, str(links), src, ref)
    _record(corpus, links, files={"valid.src": "0" * 64, "valid.tgt": "1" * 64})
    with pytest.raises(DataError, match="made for another corpus"):
        valid_links(corpus, str(links), src, ref)
    # written target-source: each link (j, i) in the file is read as (i, j)
    flipped = []
    for line in _gold_lines(corpus):
        a = parse_links(line)
        flipped.append(format_links({(j, i) for i, j in a.sure}, {(j, i) for i, j in a.possible}))
    links.write_text("\n".join(flipped) + "\n", encoding="utf-8")
    hashes = dict(reversed(split_hashes(corpus, "valid").items()))
    _record(corpus, links, src_lang=corpus.tgt_lang, tgt_lang=corpus.src_lang, files=hashes)
    read = valid_links(corpus, str(links), src, ref)
    gold = valid_links(corpus, "auto", src, ref)
    assert read is not None and gold is not None
    assert [a.possible for a in read.links] == [a.possible for a in gold.links]


# --------------------------------------------------------------------------- figures


def test_val_result_reports_aer_only_when_measured() -> None:
    base = ValResult(loss=1.0, ppl=2.7, accuracy=0.5, bleu=10.0, chrf=30.0, hyps=[])
    assert "val/aer" not in base.scalars() and "AER" not in base.line()
    with_aer = dataclasses.replace(base, aer=0.25)
    assert with_aer.scalars()["val/aer"] == 0.25
    assert with_aer.line().endswith("| AER 0.2500")


def test_the_run_record_reads_validations_and_the_best_aer(tmp_path: Path) -> None:
    """Planted metrics.jsonl and summary.json: the typed reader gives the AER (None where a
    validation had none) and refuses a figure that is no number, naming file and step."""
    events = [
        {"event": "valid", "step": 10, "time": 1.0, "minutes": 0.5, "bleu": 3.0, "aer": 0.61},
        {"event": "valid", "step": 20, "time": 2.0, "minutes": 1.0, "bleu": 4.5},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    summary = Summary(best=Best(file="best-20.pt", step=20, val_bleu=4.5, val_aer=0.58))
    (tmp_path / "summary.json").write_text(json.dumps(summary.to_dict()))
    record = read_record(tmp_path)
    assert record.validations() == [
        Validation(step=10, minutes=0.5, nll=None, bleu=3.0, chrf=None, aer=0.61),
        Validation(step=20, minutes=1.0, nll=None, bleu=4.5, chrf=None, aer=None),
    ]
    assert record.summary is not None and record.summary.best is not None
    assert record.summary.best.val_aer == 0.58
    assert Summary.from_dict(summary.to_dict()) == summary
    events[1]["aer"] = "low"
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    with pytest.raises(RecordError, match="valid event of step 20: field aer: a number"):
        read_record(tmp_path).validations()


# --------------------------------------------------------------------------- in training

SMALL = [
    "data.toy.train=60",
    "data.toy.valid=8",
    "data.toy.test=4",
    "model.dec_layers=2",
    "trainer.max_steps=6",
    "trainer.val_every_steps=3",
    "trainer.num_samples=0",
    "trainer.keep_best=1",
]


def test_valid_aer_equals_evaluate_py_on_the_same_checkpoint(tmp_path: Path) -> None:
    """A tiny toy_align run (its valid gold found by auto): each validation logs ``aer``,
    and the last one equals evaluate.py's AER of last.pt (that step's weights) on split
    valid with the default map (the mean over both decoder layers) and reading."""
    from attnmt.cli.evaluate import run
    from attnmt.train.loop import train

    cfg = toy_train_config(tmp_path, "data=toy_align", *SMALL)
    train(cfg, tmp_path / "run")
    record = read_record(tmp_path / "run")
    points = record.validations()
    assert [p.step for p in points] == [3, 6]
    assert all(p.aer is not None and 0.0 <= p.aer <= 1.0 for p in points)
    last = tmp_path / "run" / "checkpoints" / "last.pt"
    run({"ckpt": str(last), "split": "valid", "beam": 1, "out_dir": str(tmp_path / "ev")},
        io.StringIO())  # fmt: skip
    scores = json.loads((tmp_path / "ev" / "scores.json").read_text())
    (entry,) = scores.values()
    assert entry["align_layer"] == "all" and entry["alignment"]["sentences"] == 8
    assert points[-1].aer == pytest.approx(entry["aer"], abs=1e-12)
    assert record.summary is not None and record.summary.best is not None
    best = {p.step: p.aer for p in points}[record.summary.best.step]
    assert record.summary.best.val_aer == pytest.approx(best)
    events = EventAccumulator(str(tmp_path / "run"), size_guidance={"scalars": 0})
    events.Reload()
    logged = [(e.step, e.value) for e in events.Scalars("val/aer")]
    assert logged == [(p.step, pytest.approx(p.aer, rel=1e-6)) for p in points]


def test_a_run_without_links_logs_no_aer_and_forces_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """toy_reverse has no gold and no silver cache; toy_align with valid_alignments=none:
    neither validation forces a reference through the model, nor logs an AER."""
    import attnmt.train.evaluation as evaluation
    from attnmt.train.loop import train

    def forced(*_: object, **__: object) -> None:
        raise AssertionError("forced alignment without links")

    monkeypatch.setattr(evaluation, "forced_alignments", forced)
    small = [*SMALL, "trainer.max_steps=3"]
    for name, extra in (
        ("reverse", []),
        ("off", ["data=toy_align", "trainer.valid_alignments=none"]),
    ):
        train(toy_train_config(tmp_path, *small, *extra), tmp_path / name)
        record = read_record(tmp_path / name)
        assert [e["step"] for e in record.valid] == [3]
        assert all("aer" not in e for e in record.valid)
        assert record.summary is not None and record.summary.best is not None
        assert record.summary.best.val_aer is None
        events = EventAccumulator(str(tmp_path / name))
        events.Reload()
        assert "val/bleu" in events.Tags()["scalars"]
        assert "val/aer" not in events.Tags()["scalars"]


def test_the_kept_ding_valid_links_fit_the_shipped_corpus(tmp_path: Path) -> None:
    """results/silver's valid links of ding_de_en pass the checks for the default corpus
    (line count, word ranges, the record's sha256); en → de reads them flipped."""
    from attnmt.cli.data_group import data_config

    root = Path(__file__).resolve().parents[1]
    kept = root / "results" / "silver" / "ding_de_en.valid.de-en.silver.align"
    base = ["data=ding_de_en", f"data.root={tmp_path}"]
    corpus = prepare_corpus(data_config(base, root / "configs"))
    read = valid_links(corpus, str(kept), *_valid(corpus))
    assert read is not None and len(read) == corpus.counts["valid"] == 879
    assert sum(len(a.sure) for a in read.links) == 5826
    reverse = prepare_corpus(
        data_config([*base, "data.src_lang=en", "data.tgt_lang=de"], root / "configs")
    )
    flipped = valid_links(reverse, str(kept), *_valid(reverse))
    assert flipped is not None
    assert flipped.links[0].sure == {(j, i) for i, j in read.links[0].sure}


def test_train_py_refuses_bad_valid_links_in_one_line_with_status_2(tmp_path: Path) -> None:
    """Through the entry point: a malformed valid link stops train.py before the tokenizer,
    exit status 2, one line naming the file and line, no traceback."""
    import subprocess
    import sys

    links = tmp_path / "valid.align"
    links.write_text("0-0\n0-x\n0-0\n0-0\n")
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
            f"trainer.valid_alignments={links}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "is not a link" in line]
    assert len(errors) == 1 and f"{links}:2: '0-x' is not a link" in errors[0]
    assert not list((tmp_path / "data").glob("*/spm-*"))  # refused before the tokenizer
