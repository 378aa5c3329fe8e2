"""serve.py under hostile or unlucky use, over real HTTP (FastAPI's test client, uvicorn on
a free loopback port, or serve.py itself): a bounded response volume, text that is not
Unicode, a request that fails inside a batch, clients that hang up, bodies that never end,
a busy decode thread, and Ctrl-C with requests in flight."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="serve.py needs attnmt[serve] (fastapi, uvicorn)")
pytest.importorskip("httpx", reason="FastAPI's test client needs httpx")

import httpx
import uvicorn
from helpers.serving import attention_values, client, post, tiny_models, tiny_runs
from helpers.tiny_checkpoint import ROOT, shared_run

from attnmt.serve.app import create_app
from attnmt.serve.backend import Options, ServedModel
from attnmt.serve.settings import ServeSettings
from attnmt.serve.worker import DecodeWorker, Stopping

LINES = ["a b c", "d e f a", "b", "f e d c b a"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_runs(tmp_path_factory)


@pytest.fixture(scope="module")
def models(runs: dict[str, Path]) -> list[ServedModel]:
    return tiny_models(runs)


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


class Gate:
    """Holds a model's search until opened; records the lines of every search."""

    def __init__(self, model: ServedModel, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started, self.open = threading.Event(), threading.Event()
        self.searched: list[list[str]] = []
        real = model.search

        def held(lines: list[str], *args: Any, **kw: Any) -> Any:
            self.searched.append(list(lines))
            self.started.set()
            assert self.open.wait(30)
            return real(lines, *args, **kw)

        monkeypatch.setattr(model, "search", held)


@contextmanager
def live_server(app: Any) -> Iterator[str]:
    """uvicorn serving ``app`` on a free loopback port, in a thread; yields its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, "uvicorn started")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def raw_post(url: str, body: bytes, length: int | None = None) -> socket.socket:
    """A connection that has sent ``POST /translate`` with ``body`` (and a Content-Length
    of ``length``, default its size)."""
    host, port = url.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)), timeout=30)
    head = (
        "POST /translate HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body) if length is None else length}\r\n\r\n"
    )
    conn.sendall(head.encode() + body)
    return conn


# ---------------------------------------------------------------- the response's volume


def test_attention_maps_stay_within_max_attention_values(models: list[ServedModel]) -> None:
    """Best translations get their maps first; the rest are left out, named in the line's
    warnings; the count is exact (what the budget charges is what is sent)."""
    model = models[0]
    body = {"text": LINES, "beam": 3, "n_best": 3, "attention": True, "alignments": True}
    with client(models) as c:
        full = post(c, **body)
    firsts = 0
    for line in full["lines"]:
        s = len(line["source_pieces"])
        for t in line["translations"]:
            assert attention_values(t["attention"]) == model.map_values(len(t["target_pieces"]), s)
        firsts += attention_values(line["translations"][0]["attention"])
    with client(models, max_attention_values=firsts) as c:
        cut = post(c, **body)
    sent = 0
    for before, after in zip(full["lines"], cut["lines"]):
        first, *rest = after["translations"]
        assert first == before["translations"][0]  # maps, text, score, alignment
        assert all(t["attention"] is None for t in rest)
        assert [t["alignment"] for t in rest] == [
            t["alignment"] for t in before["translations"][1:]
        ]
        (warning,) = after["warnings"]
        assert "no attention maps for translation 2-3" in warning
        assert f"max_attention_values={firsts}" in warning
        sent += sum(attention_values(t["attention"]) for t in after["translations"])
    assert sent == firsts


def test_a_probe_sized_request_stays_within_the_stated_volume(models: list[ServedModel]) -> None:
    """64 lines of 300 characters, beam 16, n_best 16, attention: within the default bound
    (4,000,000 values, about 7 bytes of JSON each); best translations get their maps
    first; every line left without some says so. (The default max_decode_work refuses
    this request before decoding: tests/test_serve_cost.py; lifted here.)"""
    line = " ".join("abcdef"[i % 6] for i in range(150))
    with client(models, max_decode_work=10**9) as c:
        response = c.post(
            "/translate",
            json={"text": [line] * 64, "beam": 16, "n_best": 16, "attention": True},
        )
    assert response.status_code == 200, response.text
    limit = ServeSettings().max_attention_values
    assert len(response.content) < 8 * limit + 2_000_000
    data = response.json()
    sent = [attention_values(t["attention"]) for ln in data["lines"] for t in ln["translations"]]
    assert 0 < sum(sent) <= limit and len(sent) == 64 * 16
    firsts = [bool(ln["translations"][0]["attention"]) for ln in data["lines"]]
    assert sum(firsts) > 32
    assert sum(sent) == sum(
        attention_values(ln["translations"][0]["attention"]) for ln in data["lines"]
    )
    for ln in data["lines"]:
        (warning,) = ln["warnings"]
        assert "max_attention_values=4000000" in warning


# ---------------------------------------------------------------- bad text, bad lines


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"text": "x \\ud800 y"}', "text"),
        (b'{"text": ["a b", "c \\udfff"]}', "text[1]"),
        (b'{"text": "a", "\\ud800": 1}', None),
    ],
)
def test_text_that_is_not_unicode_is_a_422_for_that_request(
    models: list[ServedModel], body: bytes, field: str | None
) -> None:
    with client(models) as c:
        response = c.post("/translate", content=body, headers={"content-type": "application/json"})
        assert response.status_code == 422, response.text
        error = response.json()
        if field is not None:
            assert error["field"] == field and "lone surrogate" in error["error"]
        assert post(c, text="a b")["lines"]


def test_a_request_that_fails_to_decode_fails_alone_in_its_batch(
    models: list[ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = models[0]
    real = model.search

    def fragile(lines: list[str], *args: Any, **kw: Any) -> Any:
        if any("boom" in line for line in lines):
            raise RuntimeError("cannot decode boom (simulated)")
        return real(lines, *args, **kw)

    monkeypatch.setattr(model, "search", fragile)
    gate = Gate(model, monkeypatch)
    with client(models) as c:
        answers: dict[str, Any] = {}

        def ask(text: str) -> None:
            answers[text] = c.post("/translate", json={"text": text, "beam": 2})

        first = threading.Thread(target=ask, args=("a b",))
        first.start()
        assert gate.started.wait(30)  # the worker holds "a b"; the rest queue up
        worker = c.app.state.workers[0]  # type: ignore[attr-defined]
        others = [threading.Thread(target=ask, args=(t,)) for t in ("b c", "boom", "c d e")]
        for k, t in enumerate(others, 1):
            t.start()
            wait_until(lambda k=k: worker.pending() == k, f"{k} requests queued")
        gate.open.set()
        for t in [first, *others]:
            t.join(30)
        assert ["b c", "boom", "c d e"] in gate.searched  # decoded as one batch first
        for text in ("a b", "b c", "c d e"):
            assert answers[text].status_code == 200, answers[text].text
            alone = post(c, text=text, beam=2)["lines"]
            assert answers[text].json()["lines"] == alone
        assert answers["boom"].status_code == 500
        assert "simulated" in answers["boom"].json()["error"]


# ---------------------------------------------------------------- clients that leave


def test_a_request_whose_client_hung_up_is_never_decoded(
    models: list[ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(models[0], monkeypatch)
    app = create_app(ServeSettings(ckpt="x"), models)
    worker = app.state.workers[0]
    with live_server(app) as url:
        held: dict[str, Any] = {}
        first = threading.Thread(
            target=lambda: held.update(r=httpx.post(f"{url}/translate", json={"text": "a b"}))
        )
        first.start()
        assert gate.started.wait(30)
        gone = raw_post(url, json.dumps({"text": "c c c"}).encode())
        wait_until(lambda: worker.pending() == 1, "the second request queued")
        gone.close()
        wait_until(lambda: worker.pending() == 0, "the hung-up request left the queue")
        gate.open.set()
        first.join(30)
        assert held["r"].status_code == 200
        after = httpx.post(f"{url}/translate", json={"text": "d d"}, timeout=30)
        assert after.status_code == 200
    assert gate.searched == [["a b"], ["d d"]]


def test_a_decode_whose_clients_all_left_stops_at_its_next_step(
    models: list[ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's stop check reaches the search (between decoder steps): a request that
    timed out stops its decode, and the next request is decoded."""
    model = models[0]
    real, stopped = model.search, threading.Event()

    def steps(lines: list[str], options: Options, n: int, should_stop: Any = None) -> Any:
        if lines == ["a b"]:  # decodes until told to stop, as beam search checks each step
            while not should_stop():
                time.sleep(0.01)
            stopped.set()
            raise KeyboardInterrupt
        return real(lines, options, n, should_stop)

    monkeypatch.setattr(model, "search", steps)
    with client(models, timeout_s=0.5) as c:
        late = c.post("/translate", json={"text": "a b"})
        assert late.status_code == 503 and "timeout_s" in late.json()["error"]
        assert stopped.wait(30)
        assert post(c, text="b a")["lines"]


# ---------------------------------------------------------------- slow bodies, busy threads


def test_a_body_that_never_ends_gets_408_and_its_connection_closed(
    models: list[ServedModel],
) -> None:
    app = create_app(ServeSettings(ckpt="x", body_timeout_s=0.5), models)
    with live_server(app) as url:
        conn = raw_post(url, b'{"text": ', length=100)
        answer = b""
        while chunk := conn.recv(65536):  # until the server closes the connection
            answer += chunk
        conn.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), answer
        error = json.loads(body)
        assert error["field"] == "body" and "body_timeout_s" in error["error"]
        assert httpx.post(f"{url}/translate", json={"text": "a b"}, timeout=30).status_code == 200


def test_the_server_answers_while_a_large_response_is_encoded(
    models: list[ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Encoding a response happens in the decode thread: meanwhile /info answers and a full
    queue's 503 comes at once."""
    model = models[0]
    real = model.results
    encoding, release = threading.Event(), threading.Event()

    class SlowToEncode(dict):  # type: ignore[type-arg]
        def items(self) -> Any:
            encoding.set()
            assert release.wait(30)
            return super().items()

    def slow(*args: Any, **kw: Any) -> Any:
        return [SlowToEncode(line) for line in real(*args, **kw)]

    monkeypatch.setattr(model, "results", slow)
    answers: list[int] = []
    with client(models, queue_size=1) as c:
        try:
            big = threading.Thread(
                target=lambda: answers.append(c.post("/translate", json={"text": "a"}).status_code)
            )
            big.start()
            assert encoding.wait(30)
            waiting = threading.Thread(
                target=lambda: answers.append(c.post("/translate", json={"text": "b"}).status_code)
            )
            waiting.start()
            worker = c.app.state.workers[0]  # type: ignore[attr-defined]
            wait_until(lambda: worker.pending() == 1, "a request waiting", 10)
            quick: dict[str, Any] = {}

            def others() -> None:
                quick["info"] = c.get("/info").status_code
                quick["full"] = c.post("/translate", json={"text": "c"})

            asker = threading.Thread(target=others)
            asker.start()
            asker.join(10)
            assert quick.get("info") == 200, "GET /info waited for the encoding"
            assert quick["full"].status_code == 503 and "queue_size" in quick["full"].text
        finally:
            release.set()
        big.join(30)
        waiting.join(30)
    assert answers == [200, 200]


# ---------------------------------------------------------------- routes


def test_head_docs_and_info_paths(models: list[ServedModel], runs: dict[str, Path]) -> None:
    with client(models) as c:
        assert c.head("/").status_code == 200 and c.head("/info").status_code == 200
        for path in ("/docs", "/redoc"):  # Swagger UI and ReDoc load scripts from a CDN
            response = c.get(path)
            assert response.status_code == 404 and response.json()["error"]
        assert "/translate" in c.get("/openapi.json").json()["paths"]
        info = c.get("/info").text
    for run in runs.values():
        assert str(run) not in info and str(run.resolve()) not in info
    models_info = json.loads(info)["models"]
    assert [m["given"] for m in models_info] == ["run", "run"]
    assert models_info[0]["checkpoint"] == "checkpoints/best-60.pt"
    with client(models, docs=True) as c:
        assert c.get("/docs").status_code == 200


# ---------------------------------------------------------------- Ctrl-C


def test_stop_fails_waiting_and_running_requests_at_once(
    models: list[ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(models[0], monkeypatch)
    worker = DecodeWorker(models[0], queue_size=4, batch_lines=1)
    running = worker.submit(["a b"], Options(1, 0.6))
    assert gate.started.wait(30)
    waiting = worker.submit(["b a"], Options(1, 0.6))
    worker.close()
    for job in (running, waiting):
        with pytest.raises(Stopping):
            job.result(1)
    with pytest.raises(Stopping):
        worker.submit(["c"], Options(1, 0.6))
    gate.open.set()
    assert worker.join(30)


def test_ctrl_c_stops_within_seconds_answering_503(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """serve.py with heavy requests in flight: one SIGINT ends it within seconds, with
    status 0; every client gets JSON (200 or 503); no traceback, no abort."""
    run = shared_run(tmp_path_factory)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    # the heavy requests are over the default max_decode_work: lifted, so that they decode
    args = [f"ckpt={run}", f"port={port}", "batch_lines=1", "timeout_s=600"]
    args.append("max_decode_work=100000000")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "serve.py", *args], cwd=ROOT, stdout=stdout, stderr=stderr, env=env
        )
        try:
            wait_until(lambda: _answers(f"{url}/info"), "serve.py listening", 120)
            line = " ".join("abcdef"[i % 6] for i in range(150))
            heavy = {"text": [line] * 16, "beam": 16, "n_best": 16, "attention": True}
            answers: list[httpx.Response | Exception] = []

            def ask() -> None:
                try:
                    answers.append(httpx.post(f"{url}/translate", json=heavy, timeout=300))
                except Exception as exc:  # reported by the assert below
                    answers.append(exc)

            clients = [threading.Thread(target=ask) for _ in range(8)]
            for t in clients:
                t.start()
            time.sleep(2)  # the first request decodes, the others wait
            proc.send_signal(signal.SIGINT)
            sent = time.monotonic()
            code = proc.wait(60)
            took = time.monotonic() - sent
            for t in clients:
                t.join(30)
        finally:
            if proc.poll() is None:
                proc.kill()
    log = err.read_text()
    assert code == 0, log
    assert took < 10, f"serve.py took {took:.1f} s to stop\n{log}"
    assert "Traceback" not in log and "terminate called" not in log, log
    statuses = [a.status_code if isinstance(a, httpx.Response) else repr(a) for a in answers]
    assert len(statuses) == 8 and set(statuses) <= {200, 503}, statuses
    assert 503 in statuses
    for a in answers:
        assert isinstance(a, httpx.Response)
        if a.status_code == 503:
            assert "stopping" in a.json()["error"]


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.HTTPError:
        time.sleep(0.2)
        return False


@pytest.mark.slow
def test_the_load_benchmark_runs_on_a_tiny_model(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """benchmarks/serve_throughput.py --load: concurrent clients against serve.py in its own
    process; answers by status, latencies, peak memory, a clean Ctrl-C (no figures kept).
    The probe is over the default max_decode_work: refused at once (413)."""
    import argparse

    from benchmarks import serve_throughput

    run = shared_run(tmp_path_factory)
    args = argparse.Namespace(ckpt=str(run), clients=12, heavy=1, requests=2, out=str(tmp_path))
    serve_throughput.load(args)
    (written,) = tmp_path.glob("load-*.json")
    record = json.loads(written.read_text())
    kinds = {row["kind"]: row for row in record["rows"]}
    assert kinds["sentence"]["requests"] == 22 and kinds["probe"]["requests"] == 1
    assert kinds["probe"]["statuses"] == {"413": 1}
    for row in kinds.values():
        assert sum(row["statuses"].values()) == row["requests"]
        assert set(row["statuses"]) <= {"200", "413", "503"}
        assert row["p50_s"] <= row["p99_s"]
    assert record["peak_rss_mb"] >= record["idle_rss_mb"] > 0
    assert record["exit_status"] == 0 and record["tracebacks"] == 0
