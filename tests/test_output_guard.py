"""One output guard (attnmt.output_guard) for every path a user names as a command's output:
on 0e30e32 ``scripts/silver_alignments.py --out RUN/checkpoints/last.pt`` (or
``RUN/summary.json``, or a corpus' gold ``<cache>/test.src-tgt.align``) replaced the file
with Pharaoh text and exited 0, after minutes of preparing the corpus; compare_runs.py
``--out RUN/results`` replaced the run's curves; average_checkpoints.py ``--force`` replaced
a run's summary.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import attnmt.data.silver as silver
from attnmt.data.corpora import PreparedCorpus, prepare_corpus
from attnmt.errors import ConfigError
from attnmt.output_guard import OutputKind, check_output, check_output_dir, corpus_cache_of
from scripts import (
    average_checkpoints,
    compare_runs,
    make_custom_example,
    rebuild_ding,
    silver_alignments,
)

SILVER = silver_alignments.SILVER


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A run folder as the trainer leaves it (its files' bytes stand for their contents)."""
    run = tmp_path / "outputs" / "run"
    for name in ("checkpoints/last.pt", "checkpoints/best-60.pt", "summary.json",
                 "metrics.jsonl", ".hydra/config.yaml", "results.png", "train.log"):  # fmt: skip
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_bytes(f"the run's {name}".encode())
    (run / "checkpoints" / "best.json").write_text(json.dumps([{"file": "best-60.pt"}]))
    return run


@pytest.fixture(scope="module")
def toy_align(tmp_path_factory: pytest.TempPathFactory) -> PreparedCorpus:
    root = tmp_path_factory.mktemp("data")
    cfg = {"name": "toy_align", "src_lang": "src", "tgt_lang": "tgt", "toy": {"train": 20}}
    return prepare_corpus({**cfg, "root": str(root)})


def _files(*folders: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for d in folders for p in sorted(d.rglob("*")) if p.is_file()}


def _no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the script starts its real work (preparing, aligning, reading)."""

    def work(*_: object, **__: object) -> None:
        raise AssertionError("the output was not checked before the work began")

    monkeypatch.setattr(silver_alignments, "prepare_corpus", work)
    monkeypatch.setattr(silver, "require_eflomal", lambda: None)
    monkeypatch.setattr(compare_runs, "read_run", work)
    monkeypatch.setattr(rebuild_ding.ding, "rebuild", work)
    monkeypatch.setattr(make_custom_example.download, "pip_download", work)


def test_silver_out_never_replaces_a_runs_files_or_a_corpus_gold(
    run: Path,
    toy_align: PreparedCorpus,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    gold = toy_align.gold_alignments("test")
    assert gold is not None and gold.name == "test.src-tgt.align"
    before = _files(run, toy_align.directory)
    _no_work(monkeypatch)
    for out, why in [
        (run / "checkpoints" / "last.pt", f"lies inside the run directory {run.resolve()}"),
        (run / "summary.json", f"lies inside the run directory {run.resolve()}"),
        (run / "new.align", "lies inside the run directory"),
        (gold, f"is a file of the prepared corpus {toy_align.directory.resolve()}"),
        (toy_align.directory / "train.src", "is a file of the prepared corpus"),
        (run.parent, "is a directory"),
    ]:
        assert silver_alignments.main(["data=toy_align", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: --out {out} {why}"), err
        assert err.count("\n") == 1 and "(nothing was written)" in err
    assert _files(run, toy_align.directory) == before


def test_silver_out_never_replaces_a_foreign_file_with_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The links' record goes beside them as ``<out>.json``: guarded like --out."""
    _no_work(monkeypatch)
    (tmp_path / "notes").write_text("mine\n")
    (tmp_path / "links.txt.json").write_text("not json, mine\n")
    for out, refused in [("notes", "notes"), ("links.txt", "links.txt.json")]:
        assert silver_alignments.main(["data=toy_align", "--out", str(tmp_path / out)]) == 2
        err = capsys.readouterr().err
        assert f"--out {tmp_path / refused} exists and is not " in err, err
    assert (tmp_path / "links.txt.json").read_text() == "not json, mine\n"


def test_silver_checks_eflomal_before_preparing_the_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _no_work(monkeypatch)

    def missing() -> None:
        raise ConfigError(f"eflomal is not installed; {silver.INSTALL}")

    monkeypatch.setattr(silver, "require_eflomal", missing)
    assert silver_alignments.main(["data=toy_align", "--out", str(tmp_path / "s.align")]) == 2
    assert silver.INSTALL in capsys.readouterr().err


def test_an_existing_file_is_replaced_only_when_of_the_commands_own_kind(
    tmp_path: Path, toy_align: PreparedCorpus
) -> None:
    previous = tmp_path / "test.silver.align"
    previous.write_text("0-0\n")
    check_output(previous, SILVER)  # a previous run's silver links: written afresh
    check_output(toy_align.directory / "test.src-tgt.silver.align", SILVER)  # the default
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    with pytest.raises(ConfigError, match=r"notes.txt exists and is not silver alignments; "):
        check_output(notes, SILVER)
    ckpt = tmp_path / "model.bin"
    ckpt.write_bytes(b"PK\x03\x04 torch.save's zip")
    with pytest.raises(ConfigError, match=r"model.bin is a checkpoint file, not silver"):
        check_output(ckpt, SILVER)
    with_force = OutputKind("a table", "--out", "t.md", force="--force")
    check_output(notes, with_force, force=True)  # the user asked
    with pytest.raises(ConfigError, match=r"notes.txt exists; pass --force to replace it"):
        check_output(notes, with_force)
    for cached in (toy_align.directory / "meta.json", toy_align.directory / "test.src"):
        with pytest.raises(ConfigError, match="is a file of the prepared corpus"):
            check_output(cached, with_force, force=True)  # --force never lifts it
    assert corpus_cache_of(toy_align.directory / "sub" / "x") == toy_align.directory.resolve()


def test_a_link_into_a_run_is_refused_as_the_run(tmp_path: Path, run: Path) -> None:
    link = tmp_path / "innocent.align"
    link.symlink_to(run / "summary.json")
    with pytest.raises(ConfigError, match="lies inside the run directory"):
        check_output(link, SILVER)


def test_averaging_never_replaces_a_runs_record_even_with_force(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _files(run)
    for out in (run / "summary.json", run / ".hydra" / "config.yaml", run / "metrics.jsonl"):
        args = ["--inputs", str(run / "checkpoints" / "best-60.pt"), "--output", str(out)]
        assert average_checkpoints.main([*args, "--force"]) == 2
        err = capsys.readouterr().err
        assert f"--output {out} is part of the record of the run" in err, err
    assert _files(run) == before


def test_compare_runs_out_never_replaces_a_runs_curves_or_a_foreign_file(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _no_work(monkeypatch)
    readme = tmp_path / "README.md"
    readme.write_text("# my notes\n")
    before = _files(run, tmp_path)
    for out, why in [(run / "results", "lies inside the run directory"), (tmp_path / "README",
                     "exists and is not a comparison of runs")]:  # fmt: skip
        assert compare_runs.main([str(run), "--out", str(out)]) == 2
        assert f"--out {out}.md {why}" in capsys.readouterr().err
    assert _files(run, tmp_path) == before
    ours = tmp_path / "cmp.md"
    ours.write_text(compare_runs.table([]))
    check_output(ours, compare_runs.COMPARISON)  # a previous comparison: replaced
    check_output(ours.with_suffix(".png"), compare_runs.COMPARISON)


def test_folder_outputs_stay_out_of_runs_and_corpora(
    run: Path,
    toy_align: PreparedCorpus,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _no_work(monkeypatch)
    for out in (run, run / "eval", toy_align.directory):
        assert make_custom_example.main(["--out", str(out)]) == 2
        assert "is or is inside the" in capsys.readouterr().err
    assert rebuild_ding.main(["--out", str(run / "checkpoints" / "last.pt")]) == 2
    assert "lies inside the run directory" in capsys.readouterr().err
    in_runs = OutputKind("snapshots", "--out", "RUN/snapshots", in_runs=True)
    check_output_dir(run / "snapshots", in_runs)  # a folder of its own in a run
    for out in (run, run / "checkpoints", run / ".hydra"):  # never the run's own
        with pytest.raises(ConfigError, match="is or is inside the run directory"):
            check_output_dir(out, in_runs)
