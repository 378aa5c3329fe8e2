"""attnmt vs JoeyNMT 2.3.0: test BLEU and training speed at the same wall-clock budget.

    python -m benchmarks.compare_joeynmt [--budget-min 12] [--quick] [--attnmt-run RUN]
        [--out DIR] [--test-lines N] [KEY=VALUE ...]

1. JoeyNMT 2.3.0 into its own venv (``--joeynmt-venv``, never an attnmt dependency);
2. attnmt: ``train.py model=transformer trainer.time_budget_min=M KEY=VALUE...`` (or a
   finished ``--attnmt-run``, decoded with ``evaluate.py``);
3. :func:`prepare`: JoeyNMT's data from that run: the pairs attnmt trained on (its own
   length filter), its validation subset, the test sources, its SentencePiece model(s),
   and a config mirroring its model, optimiser and schedule (:func:`joeynmt_config`);
4. :func:`watch`: JoeyNMT trains, SIGINT ``M`` minutes after its first epoch starts;
5. JoeyNMT decodes the test split with its best checkpoint, the run's ``decode.beam``;
6. :func:`report`: both scored by :func:`attnmt.decode.metrics.corpus_scores` against the
   same reference file: ``OUT/results.md`` and ``OUT/results.json``.

``--quick`` is a smoke test (1-minute budgets, first 100 test sentences). Decoding speed on
the same output folder: ``python -m benchmarks.compare_decoding``.
"""

from __future__ import annotations

import argparse
import math
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from attnmt.atomic import write_json, write_text
from attnmt.errors import AttnmtError
from attnmt.run_dir import RunDir
from attnmt.run_record import read_record
from attnmt.run_summary import Summary

ROOT = Path(__file__).resolve().parents[1]
JOEYNMT = "joeynmt==2.3.0"
JOEY_SPECIALS = ("<unk>", "<pad>", "<s>", "</s>")  # JoeyNMT puts these first itself
START_MARKER = re.compile(r" - joeynmt\.training - EPOCH 1\s*$")
QUICK = ["trainer.val_every_steps=50", "trainer.val_subset=50", "trainer.log_every_steps=5"]


class CompareError(AttnmtError):
    """A problem the user can fix; printed without a traceback."""


# ---- JoeyNMT's config and vocabulary ----------------------------------------------------------


def log_and_val_freq(log_every: int, val_every: int) -> tuple[int, int]:
    """(logging_freq, validation_freq): JoeyNMT needs the first to divide the second; attnmt's
    ``val_every_steps=0`` (epoch ends only) becomes every 1000 updates."""
    val = val_every if val_every > 0 else 1000
    log = log_every if log_every > 0 else val
    return (log if val % log == 0 else math.gcd(log, val)), val


def joeynmt_config(a: Mapping[str, Any], paths: Mapping[str, str]) -> tuple[dict, list[str]]:
    """JoeyNMT's config mirroring the resolved attnmt config ``a``, and what still differs.

    ``paths``: model_dir, train, dev (prefixes of ``<prefix>.<lang>``), src_vocab, trg_vocab,
    src_spm, trg_spm. CompareError for what JoeyNMT cannot mirror.
    """
    data, model, tr, dec = (a[k] for k in ("data", "model", "trainer", "decode"))
    if model["name"] != "transformer":
        raise CompareError(f"model {model['name']!r}: only the transformer presets are mirrored")
    if tr["schedule"] != "noam":
        raise CompareError(f"trainer.schedule={tr['schedule']!r}: only 'noam' is mirrored")
    if tr["optimizer"] not in ("adam", "adamw"):
        raise CompareError(f"trainer.optimizer={tr['optimizer']!r}: adam or adamw only")
    d, beam, drop = int(model["d_model"]), int(dec["beam"]), float(model["dropout"])
    logging_freq, validation_freq = log_and_val_freq(tr["log_every_steps"], tr["val_every_steps"])

    def side(lang: str, vocab: str, spm: str) -> dict[str, Any]:
        return {"lang": lang, "level": "bpe", "tokenizer_type": "sentencepiece",
                "tokenizer_cfg": {"model_file": spm}, "voc_file": vocab,
                "max_length": data["max_len"], "lowercase": False, "normalize": False}  # fmt: skip

    def stack(layers: int) -> dict[str, Any]:
        return {"type": "transformer", "num_layers": layers, "num_heads": model["n_heads"],
                "embeddings": {"embedding_dim": d, "scale": True, "dropout": drop},
                "hidden_size": d, "ff_size": model["d_ff"], "dropout": drop,
                "layer_norm": model["norm"], "activation": model["activation"]}  # fmt: skip

    training = {
        "optimizer": tr["optimizer"], "adam_betas": list(tr["betas"]),
        "weight_decay": tr["weight_decay"], "scheduling": "warmupinversesquareroot",
        "learning_rate": tr["lr"], "learning_rate_warmup": tr["warmup_steps"],
        "learning_rate_min": 1.0e-8,  # JoeyNMT's default 1e-4 would stop it during warm-up
        "label_smoothing": tr["label_smoothing"], "loss": "crossentropy",
        "normalization": "tokens", "batch_size": tr["max_tokens"], "batch_type": "token",
        "batch_multiplier": tr["accum_steps"], "epochs": tr["max_epochs"] or 1_000_000,
        "early_stopping_metric": "bleu", "validation_freq": validation_freq,
        "logging_freq": logging_freq, "keep_best_ckpts": tr["keep_best"], "shuffle": True,
        "print_valid_sents": [0, 1, 2][: tr["num_samples"]], "overwrite": False,
        "num_workers": 0,
    }  # fmt: skip
    if tr["clip_grad_norm"] > 0:
        training["clip_grad_norm"] = tr["clip_grad_norm"]
    if tr["max_steps"] > 0:
        training["updates"] = tr["max_steps"]
    cfg = {
        "name": f"compare_{data['name']}", "model_dir": paths["model_dir"], "use_cuda": False,
        "fp16": False, "random_seed": a["seed"],
        "data": {"train": paths["train"], "dev": paths["dev"], "dataset_type": "plain",
                 "src": side(data["src_lang"], paths["src_vocab"], paths["src_spm"]),
                 "trg": side(data["tgt_lang"], paths["trg_vocab"], paths["trg_spm"])},
        "testing": {"n_best": 1, "beam_size": beam, "beam_alpha": dec["alpha"] if beam > 1 else -1,
                    "batch_size": dec["batch_tokens"], "batch_type": "token",
                    "max_output_length": -1, "eval_metrics": ["bleu", "chrf"],
                    "sacrebleu_cfg": {"tokenize": "13a"}, "generate_unk": True},
        "training": training,
        "model": {"initializer": "xavier_uniform", "bias_initializer": "zeros", "init_gain": 1.0,
                  "embed_initializer": "normal", "embed_init_weight": d**-0.5,  # as attnmt
                  "tied_embeddings": bool(data["tokenizer"]["joint"] and model["share_embeddings"]),
                  "tied_softmax": bool(model["tie_embeddings"]),
                  "encoder": stack(model["enc_layers"]), "decoder": stack(model["dec_layers"])},
    }  # fmt: skip
    notes = [
        f"Adam eps: attnmt {tr['eps']:g}, JoeyNMT 1e-08",
        "first update: JoeyNMT at the peak lr, attnmt at lr/warmup (then one step behind)",
        "batches: attnmt sorts buckets by length before packing; JoeyNMT packs in random order",
        f"decoding length: attnmt {dec['max_len_a']}·|src|+{dec['max_len_b']}, JoeyNMT "
        "1.5 x the longest source in the batch",
    ]
    if model.get("attention_dropout", 0.0) != drop:
        notes.append(
            f"attention dropout: attnmt {model.get('attention_dropout', 0.0)}, JoeyNMT {drop}"
        )
    only = {"word dropout": tr.get("src_word_dropout") or tr.get("tgt_word_dropout"),
            "early stopping": tr.get("early_stopping_patience"),
            "checkpoint averaging": tr.get("average_best")}  # fmt: skip
    notes += [f"{what}: attnmt only" for what, on in only.items() if on]
    return cfg, notes


def vocab_lines(pieces: Sequence[str]) -> list[str]:
    """A JoeyNMT vocabulary file's lines: ``pieces`` in id order without JoeyNMT's specials
    (it reads the file with ``splitlines``, so each piece must be exactly one line)."""
    for i, piece in enumerate(pieces):
        if piece.splitlines() != [piece]:
            raise CompareError(f"piece {i} ({piece!r}) cannot be one line of a vocabulary file")
    return [p for p in pieces if p not in JOEY_SPECIALS]


def spm_vocab_lines(model_file: Path) -> list[str]:
    """:func:`vocab_lines` of a SentencePiece model, its control pieces and ``<unk>`` left out."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model_file))
    ids = [i for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]
    return vocab_lines([sp.id_to_piece(i) for i in ids])


# ---- prepare ----------------------------------------------------------------------------------


def prepare(run: Path, work: Path, test_lines: int = 0) -> dict[str, Any]:
    """JoeyNMT's data, vocabulary and config under ``work`` from the attnmt ``run``; returns
    (and writes to ``work/setup.json``) what the later steps need. The prepared corpus is
    whitespace-normalised, so JoeyNMT reads every file back line for line."""
    import numpy as np
    import yaml

    from attnmt.checkpoint import load_checkpoint
    from attnmt.data.corpora import prepare_corpus
    from attnmt.data.dataset import filter_lengths
    from attnmt.data.textio import read_lines, write_lines
    from attnmt.data.tokenizer import JOINT_FILE, SRC_FILE, TGT_FILE, Tokenizer
    from attnmt.models.registry import build_model

    if not RunDir(run).last.is_file():
        raise CompareError(f"{run}: no checkpoints/last.pt; not a finished attnmt run")
    checkpoint = load_checkpoint(RunDir(run).last)
    cfg, files = checkpoint.config, checkpoint.tokenizer
    corpus = prepare_corpus(cfg["data"])
    sl, tl = corpus.src_lang, corpus.tgt_lang
    tok = Tokenizer.from_files_dict(files)
    dd = work / "data"
    dd.mkdir(parents=True, exist_ok=True)
    spm = {"src": dd / JOINT_FILE, "trg": dd / JOINT_FILE}
    vocab = {"src": dd / "vocab.txt", "trg": dd / "vocab.txt"}
    if not tok.joint:
        spm, vocab = (
            {"src": dd / SRC_FILE, "trg": dd / TGT_FILE},
            {s: dd / f"vocab.{s}" for s in spm},
        )
    for s in ("src", "trg")[: 1 if tok.joint else 2]:
        spm[s].write_bytes(files[spm[s].name])
        write_lines(vocab[s], spm_vocab_lines(spm[s]))

    src, tgt = corpus.read("train")  # exactly the pairs attnmt trains on
    lens = [np.array([len(x) for x in ids]) for ids in (tok.encode_src(src), tok.encode_tgt(tgt))]
    kept, removed = filter_lengths(lens[0], lens[1], cfg["data"].get("max_len"),
                                   cfg["data"].get("max_len_ratio"), "train")  # fmt: skip
    vsrc, vref = corpus.read("valid")
    n_val = int(cfg["trainer"].get("val_subset") or 0) or len(vsrc)  # attnmt's validation set
    test_src, test_ref = corpus.files("test")
    test = read_lines(test_src)
    for name, lang, lines in [
        ("train", sl, [src[i] for i in kept]), ("train", tl, [tgt[i] for i in kept]),
        ("dev", sl, vsrc[:n_val]), ("dev", tl, vref[:n_val]),
        ("test", sl, test[: test_lines or len(test)]),
    ]:  # fmt: skip
        write_lines(dd / f"{name}.{lang}", lines)
    paths = {"model_dir": str(work / "model"), "train": str(dd / "train"), "dev": str(dd / "dev")}
    paths |= {f"{s}_{k}": str(v[s]) for k, v in (("vocab", vocab), ("spm", spm)) for s in spm}
    jcfg, notes = joeynmt_config(cfg, paths)
    write_text(work / "config.yaml", yaml.safe_dump(jcfg, sort_keys=False, allow_unicode=True))
    v = checkpoint.vocab
    model = build_model(checkpoint.model_config, v.src_size, v.tgt_size, v.joint)
    setup = {
        "attnmt_run": str(run), "attnmt_params": sum(p.numel() for p in model.parameters()),
        "corpus": corpus.name, "pair": f"{sl}->{tl}", "test_src": str(dd / f"test.{sl}"),
        "reference": str(Path(test_ref).resolve()), "beam": int(cfg["decode"]["beam"]),
        "train_pairs": len(kept), "train_removed": removed, "dev_pairs": min(n_val, len(vsrc)),
        "test_pairs": min(test_lines or len(test), len(test)), "test_pairs_all": len(test),
        "config": str(work / "config.yaml"), "model_dir": paths["model_dir"], "differences": notes,
    }  # fmt: skip
    write_json(work / "setup.json", setup)
    return setup


# ---- watch ------------------------------------------------------------------------------------


def watch(
    cmd: Sequence[str], log: Path, budget_s: float, console: Path | None = None,
    startup_timeout: float = 900.0, grace: float = 300.0,
) -> dict[str, Any]:  # fmt: skip
    """Run JoeyNMT's training ``cmd``; SIGINT (it saves its weights) ``budget_s`` after
    ``log`` shows the first epoch, SIGTERM ``grace`` seconds later if it still runs.
    Returns {train_s, stopped_by (budget | exit), returncode}."""
    out = open(console, "ab") if console else None  # noqa: SIM115
    default_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    # a background job inherits SIGINT ignored: give the child the default back
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, preexec_fn=default_sigint)
    t0, started, stopped = time.monotonic(), None, None
    try:
        while proc.poll() is None:
            now = time.monotonic()
            if (
                started is None
                and log.is_file()
                and any(
                    START_MARKER.search(line)
                    for line in log.read_text(errors="replace").splitlines()
                )
            ):
                started = now
            if started is None and now - t0 > startup_timeout:
                proc.terminate()
                proc.wait(30)
                raise CompareError(f"{log}: training did not start in {startup_timeout:.0f} s")
            if started is not None and stopped is None and now - started >= budget_s:
                proc.send_signal(signal.SIGINT)
                stopped = now
            if stopped is not None and now - stopped > grace:
                proc.terminate()  # JoeyNMT 2.3.0 may sit in a validation past SIGINT
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
            time.sleep(0.2)
    finally:
        if out:
            out.close()
    train_s = None if started is None else (stopped or time.monotonic()) - started
    verdict = {"train_s": train_s, "stopped_by": "budget" if stopped else "exit"}
    verdict["returncode"] = proc.returncode
    if proc.returncode != 0 and not stopped:
        raise CompareError(f"JoeyNMT training exited with status {proc.returncode}; see {log}")
    return verdict


# ---- logs, scores, table ----------------------------------------------------------------------

_JOEY_RATE = re.compile(r"Step:\s+(\d+),.*Tokens per Sec:\s+([\d.]+),")
_JOEY_STEP = re.compile(r"Interrupt at epoch \d+, step (\d+)\.|Checkpoint saved in .*?(\d+)\.ckpt")
_JOEY_PARAMS = re.compile(r"Total params: (\d+)")


def attnmt_tok_s(run: Path) -> float | None:
    """Median of the run record's target tokens/s windows (step 1's one-update window left
    out if there are others)."""
    rates = [(e["step"], e["tokens_per_sec"]) for e in read_record(run).train]
    windows = [r for s, r in rates if s != 1] or [r for _, r in rates]
    return statistics.median(windows) if windows else None


def parse_joeynmt_log(log: str) -> dict[str, Any]:
    """``updates`` (the interrupt's, last checkpoint's or last logged step), ``tok_s`` (median
    of its ``Tokens per Sec``: window time without validation), ``params``."""
    rates = [(int(s), float(r)) for s, r in _JOEY_RATE.findall(log)]
    steps = [int(a or b) for a, b in _JOEY_STEP.findall(log)] + [s for s, _ in rates]
    params = _JOEY_PARAMS.search(log)
    return {"updates": max(steps, default=0),
            "tok_s": statistics.median(r for _, r in rates) if rates else None,
            "params": int(params.group(1)) if params else None}  # fmt: skip


COLUMNS = (
    ("system", "system", "{}"), ("BLEU", "bleu", "{:.2f}"), ("chrF", "chrf", "{:.2f}"),
    ("train min", "minutes", "{:.1f}"), ("updates", "updates", "{:d}"),
    ("updates/min", "updates_per_min", "{:.0f}"), ("tgt tok/s", "tok_s", "{:.0f}"),
    ("params", "params", "{:,}"),
)  # fmt: skip


def markdown_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """One row per system; a missing figure is ``n/a``."""
    lines = ["| " + " | ".join(h for h, _, _ in COLUMNS) + " |"]
    lines.append("|---" + "|---:" * (len(COLUMNS) - 1) + "|")
    for row in rows:
        cells = ["n/a" if row.get(k) is None else f.format(row[k]) for _, k, f in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def system_row(name: str, hyps: Sequence[str], refs: Sequence[str], **figures: Any) -> dict:
    """A table row: BLEU and chrF of ``hyps`` (attnmt's scorer: sacrebleu's defaults)."""
    from attnmt.decode.metrics import corpus_scores

    s = corpus_scores(hyps, refs, ("bleu", "chrf"))
    m, u = figures.get("minutes"), figures.get("updates")
    return {"system": name, "bleu": s["bleu"].score, "chrf": s["chrf"].score,
            "signatures": [s["bleu"].signature, s["chrf"].signature],
            "updates_per_min": u / m if m and u else None, **figures}  # fmt: skip


def report(out: Path, setup: Mapping[str, Any], attnmt_hyps: Path, joey_hyps: Path,
           watched: Mapping[str, Any]) -> str:  # fmt: skip
    """Score both systems, write ``out/results.md`` and ``results.json``; the table."""
    from attnmt.data.textio import read_lines

    n = setup["test_pairs"]
    refs = read_lines(setup["reference"])[:n]
    run = Path(setup["attnmt_run"])
    summary = read_record(run).summary or Summary()
    joey_log = parse_joeynmt_log((Path(setup["model_dir"]) / "train.log").read_text())
    rows = [
        system_row("attnmt (transformer)", read_lines(attnmt_hyps)[:n], refs,
                   minutes=summary.minutes, updates=summary.step,
                   params=setup["attnmt_params"], tok_s=attnmt_tok_s(run)),
        system_row(f"JoeyNMT {JOEYNMT.split('==')[1]}", read_lines(joey_hyps), refs,
                   minutes=(watched.get("train_s") or 0) / 60 or None, **joey_log),
    ]  # fmt: skip
    table = markdown_table(rows)
    subset = "" if n == setup["test_pairs_all"] else f"the first {n} of "
    md = [f"# attnmt vs {rows[1]['system']}: {watched['budget_min']:g}-minute budget each", "",
          f"{setup['corpus']} {setup['pair']}, {subset}{setup['test_pairs_all']} test sentences, "
          f"beam {setup['beam']}; {datetime.now():%Y-%m-%d %H:%M}.", "", table, "",
          f"sacrebleu: `{'`, `'.join(rows[0]['signatures'])}`. *train min*: attnmt's checkpoint "
          "clock, JoeyNMT's first epoch to SIGINT. *tgt tok/s*: median of the rates each logs.",
          "", "Settings that still differ:", *[f"- {d}" for d in setup["differences"]],
          ""]  # fmt: skip
    write_text(out / "results.md", "\n".join(md))
    write_json(out / "results.json", {"setup": setup, "watch": watched, "systems": rows})
    return table


# ---- the whole comparison ---------------------------------------------------------------------


def setup_joeynmt(venv: Path) -> Path:
    """JoeyNMT in ``venv`` (its python). ``pip install joeynmt`` with its dependencies pins
    protobuf<3.21 (tensorboard needs newer) and pulls dev tools and a CUDA torch, so: this
    torch's CPU wheel, joeynmt --no-deps, then only what ``joeynmt train|translate`` import."""
    import torch

    py = venv / "bin" / "python"
    check = [str(py), "-c", "import joeynmt.training, joeynmt.prediction"]
    if py.is_file() and subprocess.run(check, capture_output=True).returncode == 0:
        return py
    pip = [str(py), "-m", "pip", "install", "-q"]
    for cmd in (
        [sys.executable, "-m", "venv", str(venv)],
        [*pip, f"torch=={torch.__version__.split('+')[0]}"],
        [*pip, "--no-deps", JOEYNMT],
        [*pip, "importlib_metadata", "sentencepiece==0.2.0", "subword-nmt", "tensorboard",
         "sacrebleu", "matplotlib", "tqdm", "pyyaml", "numpy", "packaging", "pillow"],
        check,
    ):  # fmt: skip
        if subprocess.run(cmd).returncode != 0:
            raise CompareError(f"installing JoeyNMT failed at: {' '.join(cmd)}")
    return py


def compare(args: argparse.Namespace) -> str:
    """Steps 1-6 of the module's docstring; the results table."""
    out = args.out or ROOT / "outputs" / "compare_joeynmt" / f"{datetime.now():%Y%m%d-%H%M%S}"
    out = out.resolve()
    if out.is_dir() and any(out.iterdir()):
        raise CompareError(f"{out} exists and is not empty")
    out.mkdir(parents=True, exist_ok=True)
    joey_py = setup_joeynmt(args.joeynmt_venv)

    def step(cmd: list[str], what: str, **kw: Any) -> None:
        if subprocess.run(cmd, cwd=ROOT, **kw).returncode != 0:
            raise CompareError(f"{what} failed")

    run = args.attnmt_run.resolve() if args.attnmt_run else out / "attnmt"
    if not args.attnmt_run:
        budget = f"trainer.time_budget_min={args.budget_min}"
        cmd = [sys.executable, "train.py", "model=transformer", f"hydra.run.dir={run}", budget]
        step([*cmd, *args.overrides], "attnmt training")
    work = out / "joeynmt"
    setup = prepare(run, work, args.test_lines)
    attnmt_hyps = RunDir(run).hyps / "test.txt"  # a fresh run's own final test decoding
    if args.attnmt_run or not attnmt_hyps.is_file():
        step([sys.executable, "evaluate.py", f"ckpt={run}", "split=test", f"beam={setup['beam']}",
              f"out_dir={out / 'attnmt-eval'}"], "attnmt decoding")  # fmt: skip
        attnmt_hyps = out / "attnmt-eval" / "hyps.txt"
    cmd = [str(joey_py), "-m", "joeynmt", "train", setup["config"], "--skip-test"]
    model_dir = Path(setup["model_dir"])
    watched = watch(cmd, model_dir / "train.log", 60 * args.budget_min, work / "train-console.log")
    watched["budget_min"] = args.budget_min
    joey_hyps = work / "hyps.test.txt"  # `translate -o` crashes in 2.3.0: stdout it is
    log = work / "translate-console.log"
    with open(setup["test_src"]) as src, joey_hyps.open("w") as hyps, log.open("w") as err:
        step([str(joey_py), "-m", "joeynmt", "translate", setup["config"]],
             f"JoeyNMT decoding (see {log})", stdin=src, stdout=hyps, stderr=err)  # fmt: skip
    return report(out, setup, attnmt_hyps, joey_hyps, watched)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("overrides", nargs="*", help="KEY=VALUE: attnmt overrides (JoeyNMT mirrors)")
    ap.add_argument("--budget-min", type=float, default=12.0, help="per system (default 12)")
    ap.add_argument("--quick", action="store_true", help="smoke test: 1 min, 100 test lines")
    ap.add_argument("--attnmt-run", type=Path, help="a finished attnmt run instead of training")
    ap.add_argument("--test-lines", type=int, default=0, help="first N test sentences (0: all)")
    ap.add_argument("--out", type=Path, help="default outputs/compare_joeynmt/<time>")
    ap.add_argument("--joeynmt-venv", type=Path, default=ROOT / ".venv-joeynmt")
    args = ap.parse_args(argv)
    if args.attnmt_run and args.overrides:
        ap.error("KEY=VALUE overrides apply only when attnmt is trained here (no --attnmt-run)")
    if args.quick:
        args.budget_min, args.test_lines = 1.0, args.test_lines or 100
        args.overrides = [*QUICK, *args.overrides]
    try:
        print(compare(args))
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
