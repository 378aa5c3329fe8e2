"""Sentences/s of serve.py's API with 1 and 8 concurrent clients against translate.py;
with ``--load``, latency, errors and peak memory under 100 concurrent clients.

    python -m benchmarks.serve_throughput --ckpt RUN [--lines 300] [--beam 1]
    python -m benchmarks.serve_throughput --ckpt RUN --load [--clients 100] [--heavy 4]

The first ``--lines`` test sentences of the run's corpus are translated

* by translate.py's path (``output_lines`` on all of them: one length-sorted call, model
  already loaded), and
* through ``POST /translate`` of a uvicorn server on a loopback port, one sentence per
  request, by 1 and by 8 client threads (httpx), with cross-request batching
  (``batch_lines=64``) and without it (``batch_lines=1``), and once with
  ``attention=true``.

Every setting's translations are checked to equal translate.py's. Writes
``outputs/serve_throughput/<time>.json`` and prints a markdown table.

``--load`` starts ``python serve.py`` (its default limits: queue_size 16, timeout_s 120,
max_attention_values 4,000,000) in its own process and runs ``--clients`` threads at once:
``--heavy`` of them send the hostile probe of issue 32 (64 lines of 300 characters, beam
16, n_best 16, attention), the others ``--requests`` one-sentence requests each with
attention (the page's request). It reports per kind the answers by status, p50 and p99
latency, the server's peak resident memory (VmHWM) and how Ctrl-C then ends it (status,
seconds, tracebacks in its log). Writes ``outputs/serve_throughput/load-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import socket
import subprocess
import sys
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
from attnmt.decode.translator import Translator
from attnmt.machine import this_machine
from attnmt.serve.app import create_app
from attnmt.serve.backend import ServedModel, load_model
from attnmt.serve.settings import ServeSettings


def test_sentences(model: ServedModel, n: int) -> list[str]:
    """The first ``n`` non-blank test sentences of the checkpoint's corpus (a CTranslate2
    export does not name its corpus: exits with a message)."""
    if not isinstance(model.translator, Translator):
        raise SystemExit(
            f"{model.translator.model_dir}: a CTranslate2 export does not name its corpus; "
            "give --ckpt the attnmt run or checkpoint it was exported from"
        )
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


ROOT = Path(__file__).resolve().parents[1]
PROBE_LINE = " ".join("abcdef"[i % 6] for i in range(150))  # 299 characters
PROBE = {"text": [PROBE_LINE] * 64, "beam": 16, "n_best": 16, "attention": True}


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def rss_mb(pid: int, field: str = "VmHWM") -> float | None:
    """Process ``pid``'s resident memory in MB: VmHWM its peak, VmRSS now (Linux; else
    None)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return None


class ServeProcess:
    """``python serve.py ckpt=... port=<free>`` in its own process; Ctrl-C at the end."""

    def __init__(self, ckpt: str, log: Path, *settings: str) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        args = [sys.executable, "serve.py", f"ckpt={ckpt}", f"port={self.port}", *settings]
        with log.open("wb") as out:
            self.proc = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while not self._ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"serve.py did not start; its log:\n{log.read_text()}")
            time.sleep(0.2)
        self.idle_rss_mb = rss_mb(self.proc.pid, "VmRSS")

    def _ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/info", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> dict[str, Any]:
        """Ctrl-C; how the server ended (status, seconds, tracebacks in its log)."""
        peak = rss_mb(self.proc.pid)
        start = time.perf_counter()
        self.proc.send_signal(signal.SIGINT)
        try:
            status = self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = self.proc.wait()
        text = self.log.read_text(errors="replace")
        return {
            "idle_rss_mb": self.idle_rss_mb,
            "peak_rss_mb": peak,
            "exit_status": status,
            "stop_seconds": time.perf_counter() - start,
            "tracebacks": text.count("Traceback"),
        }


def load_client(url: str, bodies: list[dict[str, Any]], record: list[dict[str, Any]]) -> None:
    """Send ``bodies`` one after another; record each answer's status and latency."""
    with httpx.Client(base_url=url, timeout=600) as client:
        for body in bodies:
            kind = "probe" if body is PROBE else "sentence"
            start = time.perf_counter()
            try:
                status: int | str = client.post("/translate", json=body).status_code
            except httpx.HTTPError as err:
                status = type(err).__name__
            record.append({"kind": kind, "status": status, "seconds": time.perf_counter() - start})


def load(args: argparse.Namespace) -> None:
    """``--load``: see the module docstring."""
    model = load_model("ckpt", args.ckpt, "attnmt", "cpu", DecodeConfig())
    lines = test_sentences(model, max(args.requests * args.clients, 1))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = f"{datetime.now():%Y%m%d-%H%M%S}"
    server = ServeProcess(args.ckpt, out / f"load-{stamp}.log")
    record: list[dict[str, Any]] = []
    plans = []
    for c in range(args.clients):
        if c < args.heavy:
            plans.append([PROBE])
        else:
            own = [lines[(c * args.requests + r) % len(lines)] for r in range(args.requests)]
            plans.append([{"text": t, "attention": True} for t in own])
    threads = [
        threading.Thread(target=load_client, args=(server.url, plan, record)) for plan in plans
    ]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    ended = server.stop()
    rows: list[dict[str, Any]] = []
    for kind in ("sentence", "probe"):
        mine = [r for r in record if r["kind"] == kind]
        if not mine:
            continue
        statuses: dict[str, int] = {}
        for r in mine:
            statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + 1
        ok = [r["seconds"] for r in mine if r["status"] == 200]
        every = [r["seconds"] for r in mine]
        rows.append(
            {
                "kind": kind,
                "requests": len(mine),
                "statuses": statuses,
                "errors": len(mine) - len(ok),
                "p50_s": percentile(every, 50),
                "p99_s": percentile(every, 99),
                "p50_ok_s": percentile(ok, 50),
                "p99_ok_s": percentile(ok, 99),
            }
        )
    machine = this_machine().short()
    result = {
        "ckpt": args.ckpt,
        "clients": args.clients,
        "heavy": args.heavy,
        "requests_per_client": args.requests,
        "machine": machine,
        "date": datetime.now().isoformat(timespec="seconds"),
        "seconds": seconds,
        "rows": rows,
        **ended,
    }
    path = out / f"load-{stamp}.json"
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"{args.clients} clients ({args.heavy} sending the probe), {machine}\n")
    print("| requests | n | answers | errors | p50 s | p99 s | p99 s of 200s |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for row in rows:
        answers = ", ".join(f"{k}: {v}" for k, v in sorted(row["statuses"].items()))
        p99_ok = "-" if row["p99_ok_s"] is None else f"{row['p99_ok_s']:.2f}"
        print(
            f"| {row['kind']} | {row['requests']} | {answers} | {row['errors']} | "
            f"{row['p50_s']:.2f} | {row['p99_s']:.2f} | {p99_ok} |"
        )
    print(
        f"\nserver memory {ended['idle_rss_mb']:.0f} MB idle, {ended['peak_rss_mb']:.0f} MB "
        f"at its peak; Ctrl-C: exit status "
        f"{ended['exit_status']} after {ended['stop_seconds']:.1f} s, "
        f"{ended['tracebacks']} tracebacks\nwritten {path}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", required=True, help="a run directory or .pt file")
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--out", default="outputs/serve_throughput")
    parser.add_argument("--load", action="store_true", help="the load test (module docstring)")
    parser.add_argument("--clients", type=int, default=100, help="--load: clients at once")
    parser.add_argument("--heavy", type=int, default=4, help="--load: clients sending the probe")
    parser.add_argument("--requests", type=int, default=3, help="--load: requests per client")
    args = parser.parse_args()
    if args.load:
        load(args)
        return

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
