"""evaluate.py: files written, sacrebleu CLI agreement, plots, bad input, and unreadable
checkpoints of a run skipped for the next (evaluate.py and translate.py alike)."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.tiny_checkpoint import private_run, run_entry_point

from attnmt.checkpoint import load_checkpoint, save_checkpoint
from attnmt.cli import translate
from attnmt.cli.evaluate import decoding_speed, run
from attnmt.decode.search import Hypothesis
from attnmt.decode.translator import load_translator
from attnmt.errors import CheckpointError, ConfigError, DataError

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
SACREBLEU = Path(sys.executable).with_name("sacrebleu")
WIDTH = ["-w", "2", "-f", "text"]  # evaluate.py prints 2 decimals


@pytest.fixture
def run_dir(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return private_run(tmp_path_factory, tmp_path)


def test_evaluate_split_writes_hyps_scores_and_plots(
    run_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = io.StringIO()
    with caplog.at_level(logging.INFO):
        scores = run({"ckpt": str(run_dir), "split": "test", "beam": 2, "plot_attention": 2}, out)
    (ckpt_dir,) = (run_dir / "eval").glob("best-60-test-beam2-*")  # best.json: best-60 first
    hyp = ckpt_dir / "hyps.txt"
    ref = ckpt_dir / "refs.txt"
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir() if p.suffix != ".pt") == [
        "best.json"
    ]  # nothing written beside the weights
    assert len(hyp.read_text().splitlines()) == 12 == len(ref.read_text().splitlines())
    lines = out.getvalue().splitlines()
    assert [line.split("|")[0] for line in lines] == ["BLEU", "chrF2", "TER"]
    assert lines[0] == scores["bleu"].text
    saved = json.loads((ckpt_dir / "scores.json").read_text())
    entry = saved[ckpt_dir.name]
    assert entry["metrics"]["bleu"]["score"] == pytest.approx(scores["bleu"].score)
    assert entry["hyp_file"] == str(hyp) and entry["sentences"] == 12
    assert entry["settings"]["beam"] == 2
    speed = entry["speed"]
    assert speed["decode_seconds"] > 0 and speed["pieces"] >= 1
    assert speed["sentences_per_sec"] == pytest.approx(12 / speed["decode_seconds"])
    assert speed["pieces_per_sec"] == pytest.approx(speed["pieces"] / speed["decode_seconds"])
    assert "decoded 12 sentences in" in caplog.text
    pngs = sorted(ckpt_dir.glob("attention-*.png"))
    assert [p.name for p in pngs] == ["attention-0000.png", "attention-0001.png"]
    assert pngs[0].read_bytes()[:4] == b"\x89PNG"
    for path in (hyp, ref, ckpt_dir / "scores.json", *pngs):  # every path written is printed
        assert f"wrote {path}" in caplog.text
    # another checkpoint, split or beam gets a folder of its own
    run({"ckpt": str(run_dir / "checkpoints" / "best-61.pt"), "split": "valid", "beam": 1})
    assert sorted(p.name[:-9] for p in (run_dir / "eval").iterdir()) == [
        "best-60-test-beam2",
        "best-61-valid-beam1",
    ]


def test_printed_scores_equal_sacrebleu_cli(run_dir: Path, tmp_path: Path) -> None:
    """evaluate.py in a subprocess; then the sacrebleu command on the files it wrote."""
    # references: the model's own output on even lines, so BLEU is neither 0 nor 100
    src = [f"{a} {b} {c} {d}" for a, b, c, d in zip("abcdef", "bcdefa", "cdefab", "fedcba")]
    own = load_translator(run_dir, "cpu").translate(src, beam=3)
    refs = [hyp if i % 2 == 0 else s[::-1] for i, (s, hyp) in enumerate(zip(src, own))]
    (tmp_path / "in.src").write_text("\n".join(src) + "\n")
    (tmp_path / "in.ref").write_text("\n".join(refs) + "\n")
    cmd = [PYTHON, "evaluate.py", f"ckpt={run_dir}", "beam=3", f"out_dir={tmp_path}"]
    cmd += [f"src_file={tmp_path / 'in.src'}", f"ref_file={tmp_path / 'in.ref'}"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    assert len(printed) == 3
    hyp = tmp_path / "hyps.txt"
    sacre = subprocess.run(
        [SACREBLEU, str(tmp_path / "in.ref"), "-i", str(hyp), "-m", "bleu", "chrf", "ter", *WIDTH],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert [line.strip() for line in sacre.stdout.splitlines()] == printed
    default = subprocess.run(
        [SACREBLEU, str(tmp_path / "in.ref"), "-i", str(hyp), "-m", "bleu"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    cli_bleu = json.loads(default.stdout)["score"]
    ours = float(printed[0].split(" = ")[1].split()[0])
    assert cli_bleu == pytest.approx(round(ours, 1))
    assert 0.0 < ours < 100.0


def test_missing_and_corrupt_checkpoint(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    code, out, err = run_entry_point(
        "evaluate", [f"ckpt={tmp_path / 'nope.pt'}"], monkeypatch, capsys
    )
    assert code == 2 and out == ""
    assert f"checkpoint or run directory not found: {tmp_path / 'nope.pt'}" in err
    assert "Traceback" not in err
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint at all")
    code, out, err = run_entry_point("evaluate", [f"ckpt={bad}"], monkeypatch, capsys)
    assert code == 2 and f"cannot read checkpoint {bad}" in err and "Traceback" not in err
    code, _, err = run_entry_point("evaluate", [], monkeypatch, capsys)
    assert code == 2 and "ckpt: no checkpoint given" in err


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "has no usable tokenizer files (got [], some empty or none)"),
        # torch.load(weights_only=True) itself rejects a pickled b"": "cannot read"
        ({"spm.model": b""}, "cannot read checkpoint"),
        ({"spm.model": b"garbage"}, "cannot read SentencePiece model spm.model"),
    ],
)
def test_checkpoint_without_tokenizer(run_dir: Path, files: dict, message: str) -> None:
    checkpoint = load_checkpoint(run_dir / "checkpoints" / "best-60.pt")
    checkpoint.tokenizer = files
    broken = save_checkpoint(checkpoint, run_dir / "broken.pt")
    with pytest.raises(CheckpointError) as info:
        run({"ckpt": str(broken), "split": "test"}, io.StringIO())
    assert message in str(info.value) and str(broken) in str(info.value)


def test_src_and_ref_of_different_lengths(
    run_dir: Path, tmp_path: Path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "a.src").write_text("a b c\nb c d\nc d e\n")
    (tmp_path / "a.ref").write_text("c b a\nd c b\n")
    args = [f"ckpt={run_dir}", f"src_file={tmp_path / 'a.src'}", f"ref_file={tmp_path / 'a.ref'}"]
    code, out, err = run_entry_point("evaluate", args, monkeypatch, capsys)
    assert code == 2 and out == "" and "Traceback" not in err
    assert (
        f"src_file {tmp_path / 'a.src'} has 3 lines but ref_file {tmp_path / 'a.ref'} has 2" in err
    )
    with pytest.raises(DataError, match="has 3 lines but ref_file"):
        run(
            {
                "ckpt": str(run_dir),
                "src_file": str(tmp_path / "a.src"),
                "ref_file": str(tmp_path / "a.ref"),
            }
        )


def test_bad_settings(run_dir: Path) -> None:
    with pytest.raises(ConfigError, match="beam must be >= 1, got 0"):
        run({"ckpt": str(run_dir), "beam": 0})
    with pytest.raises(ConfigError, match="give both src_file"):
        run({"ckpt": str(run_dir), "src_file": "x.txt"})
    with pytest.raises(ConfigError, match="beam: expected int, got 'wide'"):
        run({"ckpt": str(run_dir), "beam": "wide"})


def test_blank_source_lines_give_blank_hypotheses(run_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "b.src").write_text("a b c\n\n   \nc d e\n")
    (tmp_path / "b.ref").write_text("c b a\n\nx\ne d c\n")
    run(
        {
            "ckpt": str(run_dir),
            "src_file": str(tmp_path / "b.src"),
            "ref_file": str(tmp_path / "b.ref"),
            "out_dir": str(tmp_path),
            "beam": 1,
            "plot_attention": 5,
        },
        io.StringIO(),
    )
    hyps = (tmp_path / "hyps.txt").read_text().split("\n")
    assert len(hyps) == 5 and hyps[1] == hyps[2] == "" and hyps[4] == ""
    # blank lines are skipped in the plots; sentence numbers are kept in the names
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "attention-0000.png",
        "attention-0003.png",
    ]


@pytest.mark.parametrize("name", ["evaluate", "translate"])
def test_config_files_match_their_schemas(name: str) -> None:
    from hydra import compose, initialize_config_dir

    from attnmt.cli.common import parse_settings
    from attnmt.cli.evaluate import EvalSettings
    from attnmt.cli.translate import TranslateSettings
    from attnmt.decode.config import DecodeConfig

    schema = {"evaluate": EvalSettings, "translate": TranslateSettings}[name]
    with initialize_config_dir(str(ROOT / "configs"), version_base="1.3"):
        cfg = compose(config_name=name, overrides=["ckpt=x.pt"])
    settings, decode = parse_settings(cfg, schema)
    assert settings == schema(ckpt="x.pt")  # the YAML defaults are the schema's defaults
    assert decode == DecodeConfig()  # the decode group, at the top level here
    with pytest.raises(ConfigError, match="ckpt: no checkpoint given"):
        parse_settings({}, schema)
    with pytest.raises(ConfigError, match="bem: unknown key; did you mean beam"):
        parse_settings({"ckpt": "x.pt", "bem": 3}, schema)


def _truncate(path: Path) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


class _RunsCode:
    """Unpickled without weights_only, this writes ``marker``: a file that would run code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def test_an_unreadable_best_checkpoint_of_a_run_is_skipped_for_the_next(
    run_dir: Path, caplog
) -> None:  # type: ignore[no-untyped-def]
    ckpt_dir = run_dir / "checkpoints"  # best.json: best-60.pt, then best-61.pt
    broken = _truncate(ckpt_dir / "best-60.pt")
    run({"ckpt": str(run_dir), "split": "test", "beam": 1}, io.StringIO())
    (folder,) = (run_dir / "eval").iterdir()
    assert folder.name.startswith("best-61-test-beam1-") and (folder / "hyps.txt").is_file()
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(f"skipping {broken}" in w and "corrupt" in w for w in warned)
    # translate.py goes the same way
    out = io.BytesIO()
    translate.run({"ckpt": str(run_dir), "beam": 1}, io.BytesIO(b"a b c\n"), out)
    expected = load_translator(ckpt_dir / "best-61.pt", "cpu").translate(["a b c"], beam=1)
    assert out.getvalue().decode().splitlines() == expected


def test_a_named_file_keeps_its_error_and_a_run_names_every_file_tried(
    run_dir: Path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    ckpt_dir = run_dir / "checkpoints"
    first = _truncate(ckpt_dir / "best-60.pt")
    code, out, err = run_entry_point("evaluate", [f"ckpt={first}"], monkeypatch, capsys)
    assert code == 2 and out == "" and f"cannot read checkpoint {first}" in err
    assert "best-61" not in err and "Traceback" not in err
    second = _truncate(ckpt_dir / "best-61.pt")
    code, out, err = run_entry_point("evaluate", [f"ckpt={run_dir}"], monkeypatch, capsys)
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"no readable checkpoint in {run_dir}: tried 2 file(s)" in err
    assert f"cannot read checkpoint {first}" in err and f"cannot read checkpoint {second}" in err
    assert "weights_only" not in err


def test_a_checkpoint_that_would_run_code_is_refused_without_unsafe_advice(
    run_dir: Path, tmp_path: Path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "ran.txt"
    payload = load_checkpoint(run_dir / "checkpoints" / "best-60.pt").to_dict()
    payload["metrics"] = {"val_bleu": _RunsCode(marker)}
    evil = tmp_path / "evil.pt"
    torch.save(payload, evil)
    torch.load(evil, weights_only=False)  # loaded unsafely, it does run code
    assert marker.read_text() == "ran"
    marker.unlink()
    code, out, err = run_entry_point("evaluate", [f"ckpt={evil}"], monkeypatch, capsys)
    assert code == 2 and out == "" and f"cannot read checkpoint {evil}" in err
    unsafe_advice = ("weights_only", "set to `False`", "can still be loaded", "trust the source")
    assert not [advice for advice in unsafe_advice if advice in err]
    assert "more than tensors and plain data" in err and "Traceback" not in err
    assert not marker.exists()
    # as a run's best checkpoint, it is skipped for the next one, still without running
    torch.save(payload, run_dir / "checkpoints" / "best-60.pt")
    translator = load_translator(run_dir, "cpu")
    assert translator.checkpoint_path == run_dir / "checkpoints" / "best-61.pt"
    assert not marker.exists()


def test_decoding_speed_counts_output_pieces_without_eos() -> None:
    hyps = [
        Hypothesis([5, 6, 7], -1.0, torch.zeros(4, 2), finished=True),
        None,  # a blank source line: a sentence with no pieces
        Hypothesis([8], -2.0, torch.zeros(1, 2), finished=False),
    ]
    speed = decoding_speed(hyps, 2.0)
    assert speed == {
        "decode_seconds": 2.0,
        "sentences_per_sec": 1.5,
        "pieces": 4.0,
        "pieces_per_sec": 2.0,
    }
