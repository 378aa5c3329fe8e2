"""Sentences/s of serve.py's API with 1 and 8 concurrent clients against translate.py.

    python -m benchmarks.serve_throughput --ckpt RUN [--lines 300] [--beam 1]

The first ``--lines`` test sentences of the run's corpus are translated

* by translate.py's path (``output_lines`` on all of them: one length-sorted call, model
  already loaded), and
* through ``POST /translate`` of a uvicorn server on a loopback port, one sentence per
  request, by 1 and by 8 client threads (httpx), with cross-request batching
  (``batch_lines=64``) and without it (``batch_lines=1``), and once with
  ``attention=true``.

Every setting's translations are checked to equal translate.py's. Writes
``outputs/serve_throughput/<time>.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from attnmt.cli.translate import output_lines
from attnmt.data.corpora import prepare_corpus
from attnmt.decode.config import DecodeConfig
from attnmt.machine import this_machine
from attnmt.serve.app import create_app
from attnmt.serve.backend import ServedModel, load_model
from attnmt.serve.settings import ServeSettings


def test_sentences(model: ServedModel, n: int) -> list[str]:
    """The first ``n`` non-blank test sentences of the checkpoint's corpus."""
    src, _ = prepare_corpus(model.translator.config["data"]).read("test")
    return [s for s in src if s.strip()][:n]


class Server:
    """uvicorn serving ``model`` on a free loopback port, in a thread."""

    def __init__(self, model: ServedModel, batch_lines: int) -> None:
        settings = ServeSettings(ckpt="x", port=0, batch_lines=batch_lines, queue_size=64)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        app = create_app(settings, [model])
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> Server:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


def through_api(url: str, lines: list[str], clients: int, **body: Any) -> tuple[float, list[str]]:
    """(seconds, translations) of ``lines`` sent one per request by ``clients`` threads."""
    out: list[str] = [""] * len(lines)
    local = threading.local()

    def one(i: int) -> None:
        if not hasattr(local, "client"):
            local.client = httpx.Client(base_url=url, timeout=600)
        response = local.client.post("/translate", json={"text": lines[i], **body})
        response.raise_for_status()
        out[i] = response.json()["lines"][0]["translations"][0]["text"]

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(len(lines))))
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", required=True, help="a run directory or .pt file")
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--out", default="outputs/serve_throughput")
    args = parser.parse_args()

    model = load_model("ckpt", args.ckpt, "attnmt", "cpu", DecodeConfig(beam=args.beam))
    lines = test_sentences(model, args.lines)
    output_lines(model.translator, lines[:8])  # warm-up
    start = time.perf_counter()
    reference = output_lines(model.translator, lines)
    rows = [("translate.py (one call, all lines)", "-", "-", time.perf_counter() - start)]
    runs = [(1, 64, {}), (8, 64, {}), (8, 1, {}), (1, 64, {"attention": True})]
    for clients, batch_lines, body in runs:
        with Server(model, batch_lines) as server:
            through_api(server.url, lines[:8], clients)  # warm-up
            seconds, got = through_api(server.url, lines, clients, **body)
        assert got == reference, "the API's translations differ from translate.py's"
        what = "POST /translate" + (", attention=true" if body else "")
        rows.append((what, str(clients), str(batch_lines), seconds))
    machine = this_machine().short()
    record = {
        "ckpt": args.ckpt,
        "lines": len(lines),
        "beam": args.beam,
        "machine": machine,
        "date": datetime.now().isoformat(timespec="seconds"),
        "rows": [
            {
                "what": w,
                "clients": c,
                "batch_lines": b,
                "seconds": s,
                "sentences_per_s": len(lines) / s,
            }
            for w, c, b, s in rows
        ],
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{datetime.now():%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"{len(lines)} sentences, beam {args.beam}, {machine}\n")
    print("| how | clients | batch_lines | seconds | sentences/s |\n|---|---:|---:|---:|---:|")
    for w, c, b, s in rows:
        print(f"| {w} | {c} | {b} | {s:.2f} | {len(lines) / s:.1f} |")
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
