"""serve.py's connection limits over raw sockets (issue 66, item 14): a request line and
headers must arrive within ``header_timeout_s`` (uvicorn has no such option:
:mod:`attnmt.serve.protocol`), an idle connection is closed after ``keep_alive_s``, headers
over MAX_HEADER_BYTES get 400, and past ``max_connections`` a request gets 503, while the
server goes on answering everyone else."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="serve.py needs attnmt[serve] (fastapi, uvicorn)")
pytest.importorskip("httpx", reason="FastAPI's test client needs httpx")

import httpx
import uvicorn
from helpers.serving import tiny_models, tiny_runs

from attnmt.serve.app import create_app
from attnmt.serve.backend import ServedModel
from attnmt.serve.runner import MAX_HEADER_BYTES, server_config
from attnmt.serve.settings import ServeSettings

BOUND_S = 1.0  # header_timeout_s and keep_alive_s of these tests
SLACK_S = 3.0  # what a busy 2-core machine may add to a timer


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> list[ServedModel]:
    runs: dict[str, Path] = tiny_runs(tmp_path_factory)
    return tiny_models(runs)[:1]


@contextmanager
def serving(models: list[ServedModel], **settings: Any) -> Iterator[tuple[str, int]]:
    """serve.py's uvicorn settings (:func:`server_config`) on a free loopback port, in a
    thread; yields (host, port)."""
    app = create_app(ServeSettings(ckpt="x", **settings), models)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(server_config(app, "127.0.0.1", 0, "warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        yield "127.0.0.1", sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def seconds_until_closed(conn: socket.socket, trickle: bytes = b"") -> float:
    """Seconds until the server closes ``conn`` (reading what it sends; with ``trickle``,
    sending one byte of it every 0.2 s meanwhile)."""
    start = time.monotonic()
    conn.settimeout(0.2)
    sent = 0
    while time.monotonic() - start < BOUND_S + SLACK_S + 5:
        if sent < len(trickle):
            try:
                conn.sendall(trickle[sent : sent + 1])
            except OSError:  # closed under us
                return time.monotonic() - start
            sent += 1
        try:
            if conn.recv(65536) == b"":
                return time.monotonic() - start
        except TimeoutError:
            continue
        except ConnectionResetError:
            return time.monotonic() - start
    raise AssertionError("the server kept the connection open")


def info_status(host: str, port: int) -> int:
    return httpx.get(f"http://{host}:{port}/info", timeout=10).status_code


def test_a_partial_header_is_closed_within_the_bound_and_others_are_served(
    models: list[ServedModel],
) -> None:
    with serving(models, header_timeout_s=BOUND_S) as (host, port):
        partial = socket.create_connection((host, port))
        partial.sendall(b"POST /translate HTTP/1.1\r\nHost: test\r\nContent-Type: app")
        assert info_status(host, port) == 200  # while the partial header waits
        waited = seconds_until_closed(partial)
        assert BOUND_S * 0.8 <= waited <= BOUND_S + SLACK_S
        assert info_status(host, port) == 200
        partial.close()


def test_a_silent_or_trickling_connection_is_closed_within_the_bound(
    models: list[ServedModel],
) -> None:
    """The bound is on the whole request line and headers, not on the gap between bytes."""
    head = b"GET /info HTTP/1.1\r\nHost: test\r\nX-Slow: " + b"a" * 200
    with serving(models, header_timeout_s=BOUND_S) as (host, port):
        silent = socket.create_connection((host, port))
        trickling = socket.create_connection((host, port))
        assert seconds_until_closed(silent) <= BOUND_S + SLACK_S
        assert seconds_until_closed(trickling, head) <= BOUND_S + SLACK_S
        silent.close()
        trickling.close()
        assert info_status(host, port) == 200


def test_an_idle_connection_is_closed_after_its_answer(models: list[ServedModel]) -> None:
    """keep_alive_s after an answer; a second request on the connection within it is served,
    and its headers get header_timeout_s again."""
    request = b"GET /info HTTP/1.1\r\nHost: test\r\n\r\n"
    with serving(models, header_timeout_s=30, keep_alive_s=1) as (host, port):
        conn = socket.create_connection((host, port), timeout=10)
        for _ in range(2):
            conn.sendall(request)
            answer = conn.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200")
            while b'"limits"' not in answer:
                answer += conn.recv(65536)
        assert seconds_until_closed(conn) <= 1 + SLACK_S
        conn.close()


def test_headers_over_the_limit_get_400(models: list[ServedModel]) -> None:
    with serving(models) as (host, port):
        conn = socket.create_connection((host, port), timeout=10)
        conn.sendall(b"GET /info HTTP/1.1\r\nHost: test\r\nX-Big: " + b"a" * MAX_HEADER_BYTES)
        assert conn.recv(65536).startswith(b"HTTP/1.1 400")
        conn.close()
        assert info_status(host, port) == 200


def test_past_max_connections_a_request_gets_503(models: list[ServedModel]) -> None:
    with serving(models, max_connections=2) as (host, port):
        idle = socket.create_connection((host, port))
        time.sleep(0.2)  # accepted
        assert info_status(host, port) == 503
        idle.close()
        time.sleep(0.2)
        assert info_status(host, port) == 200
