"""How long serve.py's largest requests hold the model, and its memory, against the decode
work limit ``max_decode_work`` (issue 66, item 7; :mod:`attnmt.serve.cost`).

    python -m benchmarks.serve_cost [--repeat 5] [--old-repeat 1] [--threads 2]
    python -m benchmarks.serve_cost --ckpt RUN          # a trained model instead
    python -m benchmarks.serve_cost --quick             # a tiny end-to-end check, no figures

The model: by default an **untrained** ``--model`` preset (configs/model/<preset>.yaml,
default ``transformer``) with the SentencePiece model of ``--data`` (configs/data/, default
ding_de_en, prepared under ``--root``, nothing downloaded for the shipped corpus): its
hypotheses never end before the length limit, so every request costs all the decoder
positions it is charged, the worst case for its decode work. ``--ckpt`` takes a trained
run instead (it stops earlier: times are lower). Words come from the corpus' test split.

Requests (decoding defaults of configs/decode/default.yaml, server limits of
configs/serve.yaml unless said):

* ``item7``: issue 66's item-7 request, 64 lines × 220 words, each with a 200-word
  reference and 200 gold links, beam 16, n_best 16, attention. ``item7 refused``: under
  the default limits (expected: 413 at once); ``item7 old limits``: decoded with
  ``max_decode_work`` lifted and ``timeout_s`` 3600, ``--old-repeat`` times (0: skipped),
  as serve.py had to before the limit (batches now count beam rows, issue 66 item 14).
* ``largest ...``: the most lines of the same length (``max_src_len`` pieces, the costliest
  per decoder position) that the default ``max_decode_work`` admits, in item 7's shape
  and as plain requests at beams 16, 4 and 1 (at most ``max_lines`` lines).

Each request is sent ``--repeat`` times through the app (FastAPI's test client) in its own
process (``--threads`` torch threads; forked from a server that imported torch and the app
once, where the platform has ``forkserver``), so its peak resident memory (VmHWM, reset
after the model is loaded where Linux allows) is its own. Reported: status, decode work (decoder
positions), seconds per request p50 / p99 (nearest rank; decode, maps and JSON: the time
the model is held), ms per 1,000 decoder positions, memory idle and at the peak. Writes
``outputs/serve_cost/<time>.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from attnmt.checkpoint import save_checkpoint
from attnmt.checkpoint_format import Checkpoint, VocabInfo
from attnmt.data.corpora import prepare_corpus
from attnmt.data.tokenizer import load_or_train_tokenizer
from attnmt.decode.config import DecodeConfig
from attnmt.decode.translator import Translator
from attnmt.machine import this_machine
from attnmt.models.registry import build_model
from attnmt.serve.backend import Options, ServedModel, load_model
from attnmt.serve.cost import decode_work
from attnmt.serve.references import Reference
from attnmt.serve.settings import ServeSettings
from benchmarks.serve_throughput import percentile, rss_mb

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
SRC_WORDS, REF_WORDS, GOLD_LINKS = 220, 200, 200  # item 7's line, reference and gold
LIFTED = {"max_decode_work": 10**12, "timeout_s": 3600.0}  # "the old limits"


def item7_request(
    src_words: list[str], tgt_words: list[str] | None = None, lines: int = 64
) -> dict[str, Any]:
    """Item 7's request: ``lines`` lines of 220 words (cycled from ``src_words``), each with
    a 200-word reference (from ``tgt_words``, default ``src_words``) and 200 gold links
    ``i-i``, beam 16, n_best 16, attention."""
    tgt_words = tgt_words or src_words

    def words(pool: list[str], n: int, start: int) -> str:
        return " ".join(pool[(start + k) % len(pool)] for k in range(n))

    return {
        "text": [words(src_words, SRC_WORDS, i * SRC_WORDS) for i in range(lines)],
        "reference": [words(tgt_words, REF_WORDS, i * REF_WORDS) for i in range(lines)],
        "gold": [" ".join(f"{k}-{k}" for k in range(GOLD_LINKS))] * lines,
        "beam": 16,
        "n_best": 16,
        "attention": True,
    }


def options_of(body: dict[str, Any], decode: DecodeConfig) -> Options:
    return Options(
        body.get("beam", decode.beam),
        decode.alpha,
        body.get("n_best", 1),
        body.get("attention", False),
        body.get("alignments", False),
    )


def work_of(model: ServedModel, body: dict[str, Any]) -> int:
    """``body``'s decode work as the server counts it."""
    refs = body.get("reference")
    references = None if refs is None else [Reference(r) for r in refs]
    return decode_work(model, body["text"], options_of(body, model.decode), references).total


def largest_admitted(model: ServedModel, body: dict[str, Any], limit: int) -> dict[str, Any]:
    """``body`` cut to its most first lines whose decode work is within ``limit`` (no line:
    an empty ``text``)."""
    keep = 0
    while keep < len(body["text"]) and work_of(model, _first(body, keep + 1)) <= limit:
        keep += 1
    return _first(body, keep)


def _first(body: dict[str, Any], n: int) -> dict[str, Any]:
    return {k: v[:n] if isinstance(v, list) else v for k, v in body.items()}


def yaml_dict(path: Path) -> dict[str, Any]:
    """A config file of configs/ as plain data."""
    data = OmegaConf.to_container(OmegaConf.load(path))
    assert isinstance(data, dict), path
    return {str(k): v for k, v in data.items()}


def built_model(args: argparse.Namespace, tmp: Path) -> tuple[str, list[str], list[str], str]:
    """(checkpoint, source words, target words, what it is): ``--ckpt``, or an untrained
    ``--model`` preset with ``--data``'s tokenizer saved as a checkpoint in ``tmp``."""
    if args.ckpt:
        translator = load_model("ckpt", args.ckpt, "attnmt", "cpu", DecodeConfig()).translator
        assert isinstance(translator, Translator)
        src, tgt = prepare_corpus(translator.config["data"]).read("test")
        return args.ckpt, " ".join(src).split(), " ".join(tgt).split(), f"trained: {args.ckpt}"
    data = yaml_dict(CONFIGS / "data" / f"{args.data}.yaml")
    data["root"] = args.root or str(tmp / "data")
    corpus = prepare_corpus(data)
    tok = load_or_train_tokenizer(*corpus.files("train"), data["tokenizer"], corpus.directory)
    config = yaml_dict(CONFIGS / "model" / f"{args.model}.yaml")
    torch.manual_seed(0)
    model = build_model(config, tok.src_vocab_size, tok.tgt_vocab_size, tok.joint)
    v = tok.vocab_info()
    checkpoint = Checkpoint(
        model_name=str(config["name"]),
        model_config=config,
        vocab=VocabInfo(v["src_size"], v["tgt_size"], v["joint"]),
        weights=model.state_dict(),
        tokenizer=tok.to_files_dict(),
        config={"data": data, "model": config},
    )
    path = save_checkpoint(checkpoint, tmp / "untrained.pt")
    src, tgt = corpus.read("test")
    what = f"untrained {args.model} preset, {args.data} tokenizer ({tok.tgt_vocab_size} pieces)"
    return str(path), " ".join(src).split(), " ".join(tgt).split(), what


PRELOAD = ["benchmarks.serve_cost", "attnmt.serve.app", "fastapi.testclient"]
"""What each scenario's process needs imported before it loads the model (torch with them)."""


def fresh_processes() -> multiprocessing.context.BaseContext:
    """Where each scenario's process comes from: forked from a server that imported
    :data:`PRELOAD` once (``forkserver``: a new process with its own memory, without the
    seconds of imports each), else spawned (platforms without it)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def measure(job: dict[str, Any]) -> dict[str, Any]:
    """In a fresh process: load the model, send ``job["body"]`` ``job["repeat"]`` times."""
    from fastapi.testclient import TestClient

    from attnmt.serve.app import create_app

    torch.set_num_threads(job["threads"])
    model = load_model("ckpt", job["ckpt"], "attnmt", "cpu", DecodeConfig(**job["decode"]))
    app = create_app(ServeSettings(ckpt="x", **job["settings"]), [model])
    with contextlib.suppress(OSError):  # peak memory from here on (Linux: "5" resets VmHWM)
        Path("/proc/self/clear_refs").write_text("5")
    idle = rss_mb(os.getpid(), "VmRSS")
    seconds, statuses, error = [], [], None
    with TestClient(app) as client:
        for _ in range(job["repeat"]):
            start = time.perf_counter()
            response = client.post("/translate", json=job["body"])
            seconds.append(time.perf_counter() - start)
            statuses.append(response.status_code)
            if response.status_code != 200:
                error = response.json().get("error")
    return {
        "seconds": seconds,
        "statuses": statuses,
        "error": error,
        "idle_mb": idle,
        "peak_mb": rss_mb(os.getpid()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", help="a trained run or .pt file (default: untrained preset)")
    parser.add_argument("--model", default="transformer", help="configs/model/<preset>.yaml")
    parser.add_argument("--data", default="ding_de_en", help="configs/data/<name>.yaml")
    parser.add_argument("--root", default="data", help="where --data is prepared")
    parser.add_argument("--repeat", type=int, default=5, help="requests per scenario")
    parser.add_argument("--old-repeat", type=int, default=1, help="item 7 under the old limits")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--max-decode-work", type=int, help="default: configs/serve.yaml's")
    parser.add_argument("--out", default="outputs/serve_cost")
    parser.add_argument("--quick", action="store_true", help="tiny settings: runs end to end")
    args = parser.parse_args()
    decode: dict[str, Any] = {}
    if args.quick:
        args.model, args.data, args.root = "transformer_tiny", "toy_reverse", None
        args.repeat, args.old_repeat = 1, 1
        decode = {"max_src_len": 12}
    settings = ServeSettings(ckpt="x")
    limit = args.max_decode_work or settings.max_decode_work
    limits = {"max_decode_work": limit}
    context = fresh_processes()
    with tempfile.TemporaryDirectory(prefix="serve-cost-") as tmp:
        ckpt, src, tgt, what = built_model(args, Path(tmp))
        model = load_model("ckpt", ckpt, "attnmt", "cpu", DecodeConfig(**decode))
        item7 = item7_request(src, tgt, settings.max_lines)
        plain = {"text": item7["text"]}
        scenarios = [("item7 refused", item7, limits, args.repeat)]
        if args.old_repeat > 0:
            scenarios.append(("item7 old limits", item7, LIFTED, args.old_repeat))
        scenarios.append(
            ("largest, item 7's shape", largest_admitted(model, item7, limit), limits, args.repeat)
        )
        for beam in (16, 4, 1):
            body = largest_admitted(model, {**plain, "beam": beam}, limit)
            scenarios.append((f"largest, beam {beam}", body, limits, args.repeat))
        rows = []
        for name, body, over, repeat in scenarios:
            job = {
                "ckpt": ckpt,
                "decode": decode,
                "settings": over,
                "body": body,
                "repeat": repeat,
                "threads": args.threads,
            }
            with ProcessPoolExecutor(1, mp_context=context) as pool:
                got = pool.submit(measure, job).result()
            work = work_of(model, body) if body["text"] else 0
            p50, p99 = percentile(got["seconds"], 50), percentile(got["seconds"], 99)
            decoded = got["statuses"] and set(got["statuses"]) == {200}
            rows.append(
                {
                    "scenario": name,
                    "lines": len(body["text"]),
                    "beam": body.get("beam", model.decode.beam),
                    "n_best": body.get("n_best", 1),
                    "work": work,
                    **got,
                    "p50_s": p50,
                    "p99_s": p99,
                    "ms_per_1000": p50 * 1e6 / work if decoded and work and p50 else None,
                }
            )
    machine = this_machine().short()
    record = {
        "model": what,
        "decode": decode,
        "max_decode_work": limit,
        "threads": args.threads,
        "machine": machine,
        "date": datetime.now().isoformat(timespec="seconds"),
        "quick": args.quick,
        "rows": rows,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{datetime.now():%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"{what}; max_decode_work {limit:,}; {args.threads} threads; {machine}\n")
    print(
        "| request | lines | beam | n_best | decode work | status | p50 s | p99 s | "
        "ms / 1k positions | memory idle → peak MB |"
    )
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---|")
    for r in rows:
        status = ", ".join(str(s) for s in sorted(set(r["statuses"]))) or "-"
        per = "-" if r["ms_per_1000"] is None else f"{r['ms_per_1000']:.1f}"
        print(
            f"| {r['scenario']} | {r['lines']} | {r['beam']} | {r['n_best']} | {r['work']:,} | "
            f"{status} | {r['p50_s']:.2f} | {r['p99_s']:.2f} | {per} | "
            f"{r['idle_mb']:.0f} → {r['peak_mb']:.0f} |"
        )
    refused = next(r for r in rows if r["scenario"] == "item7 refused")
    if refused["error"]:
        print(f"\nitem 7's request: {refused['error']}")
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
