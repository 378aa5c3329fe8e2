"""serve.py's JSON API through FastAPI's test client: shapes, equality with translate.py,
every refusal as a JSON error naming the field, the bounded queue and batching."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="serve.py needs attnmt[serve] (fastapi, uvicorn)")
pytest.importorskip("httpx", reason="FastAPI's test client needs httpx")

from fastapi.testclient import TestClient
from helpers.serving import client, post, tiny_models, tiny_runs

from attnmt.cli.serve import run as serve_run
from attnmt.cli.translate import run as translate_run
from attnmt.decode.config import DecodeConfig
from attnmt.errors import ConfigError
from attnmt.serve.app import STATIC
from attnmt.serve.backend import Options, ServedModel, load_model
from attnmt.serve.jsonio import dumps
from attnmt.serve.worker import DecodeWorker

LINES = ["a b c", "d e f a", "", "b", "f e d c b a"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_runs(tmp_path_factory)


@pytest.fixture(scope="module")
def models(runs: dict[str, Path]) -> list[ServedModel]:
    return tiny_models(runs)


def translate_py(ckpt: Path, lines: list[str], **settings: Any) -> list[str]:
    out = io.BytesIO()
    stdin = io.BytesIO("".join(f"{line}\n" for line in lines).encode())
    translate_run({"ckpt": str(ckpt), "interactive": False, **settings}, stdin, out)
    return out.getvalue().decode().split("\n")[:-1]


# ---------------------------------------------------------------- what comes back


def test_info_names_model_corpus_step_and_bleu(models: list[ServedModel]) -> None:
    with client(models) as c:
        info = c.get("/info").json()
    first, second = info["models"]
    assert first["model"] == "transformer" and second["model"] == "rnn_bahdanau"
    assert first["corpus"] == "toy_reverse" and first["direction"] == "src→tgt"
    assert first["step"] == 60 and first["valid_bleu"] == 0.0
    assert first["parameters"] > 0 and first["vocabulary"]["src_size"] == 16
    assert first["attention"]["kinds"] == ["cross", "encoder_self", "decoder_self"]
    assert second["attention"]["kinds"] == ["cross"]
    assert info["limits"]["max_lines"] == 64


def test_transformer_attention_shapes_match_the_pieces(models: list[ServedModel]) -> None:
    with client(models) as c:
        data = post(c, text=LINES, beam=3, n_best=2, attention=True, alignments=True)
    assert [len(line["translations"]) for line in data["lines"]] == [2, 2, 0, 2, 2]
    for line in data["lines"]:
        s = len(line["source_pieces"])
        for t in line["translations"]:
            attn, n = t["attention"], len(t["target_pieces"])
            assert len(attn["decoder_input_pieces"]) == n
            assert attn["decoder_input_pieces"][0] == "<s>"
            for kind, rows, cols in (
                ("cross", n, s),
                ("encoder_self", s, s),
                ("decoder_self", n, n),
            ):
                layers = attn[kind]
                assert len(layers) == 1 and len(layers[0]) == 2  # 1 layer, 2 heads
                for head in layers[0]:
                    assert len(head) == rows and all(len(r) == cols for r in head)
                    assert all(abs(sum(r) - 1) < 2e-3 for r in head)
            assert all(
                0 <= int(i) < s - 1 and 0 <= int(j) < len(t["text"].split())
                for pair in t["alignment"].split()
                for i, j in [pair.split("-")]
            )


def test_rnn_alignment_weights_are_one_layer_one_head(models: list[ServedModel]) -> None:
    with client(models) as c:
        data = post(c, text="a b c", attention=True, model=1)
    (t,) = data["lines"][0]["translations"]
    cross = t["attention"]["cross"]
    assert len(cross) == 1 and len(cross[0]) == 1
    assert len(cross[0][0]) == len(t["target_pieces"])
    assert len(cross[0][0][0]) == len(data["lines"][0]["source_pieces"])
    assert t["attention"]["encoder_self"] is None and t["attention"]["decoder_self"] is None


@pytest.mark.parametrize("beam", [1, 3])
def test_same_output_as_translate_py(
    models: list[ServedModel], runs: dict[str, Path], beam: int
) -> None:
    """Texts, scores and alignments equal translate.py's for the same settings."""
    n = 2 if beam > 1 else 1
    with client(models) as c:
        data = post(c, text=LINES, beam=beam, n_best=n, alignments=True)
    got = [
        "\t".join(f"{t['text']}\t{t['score']:.4f}\t{t['alignment']}" for t in line["translations"])
        for line in data["lines"]
    ]
    want = translate_py(
        runs["transformer"], LINES, beam=beam, n_best=n, scores=True, alignments=True
    )
    assert got == want
    plain = [
        line["translations"][0]["text"] if line["translations"] else "" for line in data["lines"]
    ]
    assert plain == translate_py(runs["transformer"], LINES, beam=beam)


def test_a_line_over_max_src_len_is_cut_with_a_warning(runs: dict[str, Path]) -> None:
    model = load_model("ckpt", str(runs["transformer"]), "auto", "cpu", DecodeConfig(max_src_len=3))
    with client([model]) as c:
        data = post(c, text=["a b c d e f", "a"], attention=True)
    long, short = data["lines"]
    assert "translated from its first 3" in long["warnings"][0] and short["warnings"] == []
    assert len(long["source_pieces"]) == 4  # 3 pieces + </s>
    cross = long["translations"][0]["attention"]["cross"]
    assert len(cross[0][0][0]) == 4
    assert (
        long["translations"][0]["text"]
        == translate_py(runs["transformer"], ["a b c d e f"], max_src_len=3)[0]
    )


def test_openapi_and_the_page_are_served(models: list[ServedModel]) -> None:
    with client(models) as c:
        spec = c.get("/openapi.json").json()
        page = c.get("/")
        script = c.get("/static/app.js")
    assert {"/translate", "/info"} <= set(spec["paths"])
    assert "TranslateRequest" in spec["components"]["schemas"]
    assert page.status_code == 200 and "/static/app.js" in page.text
    assert script.status_code == 200


def test_the_page_loads_nothing_from_the_network() -> None:
    for path in STATIC.iterdir():
        text = path.read_text(encoding="utf-8")
        urls = [w for w in text.split() if "http://" in w or "https://" in w]
        assert all("www.w3.org/2000/svg" in u for u in urls), (path.name, urls)


# ---------------------------------------------------------------- refusals

BAD: list[tuple[bytes, int, str]] = [
    (b'{"text": ', 400, "body"),
    (b"not json", 400, "body"),
    (b"[1, 2]", 422, "body"),
    (b"{}", 422, "text"),
    (b'{"txt": "a b"}', 422, "txt"),
    (b'{"text": ""}', 422, "text"),
    (b'{"text": "  \\t "}', 422, "text"),
    (b'{"text": []}', 422, "text"),
    (b'{"text": ["", "  "]}', 422, "text"),
    (b'{"text": 5}', 422, "text"),
    (b'{"text": ["a", 3]}', 422, "text[1]"),
    (b'{"text": "a", "beam": "5"}', 422, "beam"),
    (b'{"text": "a", "beam": 2.5}', 422, "beam"),
    (b'{"text": "a", "beam": 0}', 422, "beam"),
    (b'{"text": "a", "beam": 1000}', 422, "beam"),
    (b'{"text": "a", "beam": 2, "n_best": 3}', 422, "n_best"),
    (b'{"text": "a", "n_best": 0}', 422, "n_best"),
    (b'{"text": "a", "alpha": -1}', 422, "alpha"),
    (b'{"text": "a", "attention": "yes"}', 422, "attention"),
    (b'{"text": "a", "model": 2}', 422, "model"),
]


@pytest.mark.parametrize(("body", "status", "field"), BAD, ids=[b[0].decode() for b in BAD])
def test_bad_requests_get_a_json_error_naming_the_field(
    models: list[ServedModel], body: bytes, status: int, field: str
) -> None:
    with client(models) as c:
        response = c.post("/translate", content=body, headers={"content-type": "application/json"})
        assert response.status_code == status, response.text
        error = response.json()
        assert error["field"] == field and error["error"].startswith(f"{field}:")
        assert post(c, text="a b")["lines"]  # still serving


def test_a_body_over_the_limit_and_too_many_lines_get_413(models: list[ServedModel]) -> None:
    with client(models, max_body_kb=1, max_lines=3) as c:
        big = c.post("/translate", json={"text": "a " * 1000})
        assert big.status_code == 413 and big.json()["field"] == "body"
        declared = c.post(
            "/translate",
            content=b"x" * 2048,
            headers={"content-type": "application/json", "content-length": "2048"},
        )
        assert declared.status_code == 413
        many = c.post("/translate", json={"text": ["a"] * 4})
        assert many.status_code == 413 and many.json()["field"] == "text"
        assert "max_lines" in many.json()["error"]
        assert post(c, text=["a"] * 3)["lines"]


def test_unknown_routes_and_methods_are_json(models: list[ServedModel]) -> None:
    with client(models) as c:
        assert c.get("/nothing").json()["error"].startswith("GET /nothing")
        assert c.get("/translate").status_code == 405


# ---------------------------------------------------------------- load


class Gate:
    """Holds a model's search until opened; tells when a search has started."""

    def __init__(self, model: ServedModel, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started, self.open = threading.Event(), threading.Event()
        real = model.search

        def held(*args: Any, **kw: Any) -> Any:
            self.started.set()
            assert self.open.wait(30)
            return real(*args, **kw)

        monkeypatch.setattr(model, "search", held)


def test_a_full_queue_gets_503_and_the_rest_are_served(
    models: list[ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(models[0], monkeypatch)
    with client(models, queue_size=2) as c:
        answers: list[int] = []

        def ask() -> None:
            answers.append(c.post("/translate", json={"text": "a b"}).status_code)

        threads = [threading.Thread(target=ask)]
        threads[0].start()
        assert gate.started.wait(30)  # the worker holds request 1
        for _ in range(2):  # two wait in the queue
            threads.append(threading.Thread(target=ask))
            threads[-1].start()
        worker = c.app.state.workers[0]  # type: ignore[attr-defined]
        deadline = time.monotonic() + 30
        while worker.pending() < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        refused = c.post("/translate", json={"text": "a b"})
        assert refused.status_code == 503 and "queue_size" in refused.json()["error"]
        gate.open.set()
        for t in threads:
            t.join(30)
        assert answers == [200, 200, 200]


def test_a_decode_that_takes_too_long_gets_503(
    models: list[ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(models[0], monkeypatch)
    with client(models, timeout_s=0.3) as c:
        response = c.post("/translate", json={"text": "a b"})
        assert response.status_code == 503 and "timeout_s" in response.json()["error"]
        gate.open.set()


def test_a_failing_decode_is_a_500_and_the_server_goes_on(
    models: list[ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = models[0].search
    calls = []

    def flaky(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("out of memory (simulated)")
        return real(*args, **kw)

    monkeypatch.setattr(models[0], "search", flaky)
    with client(models) as c:
        response = c.post("/translate", json={"text": "a b"})
        assert response.status_code == 500 and "simulated" in response.json()["error"]
        assert post(c, text="a b")["lines"]


def test_queued_requests_decode_as_one_batch_with_the_same_output(
    models: list[ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = models[0]
    alone = [model.results([line], model.search([line], Options(2, 0.6, 2), 2), Options(2, 0.6, 2))
             for line in LINES if line]  # fmt: skip
    gate = Gate(model, monkeypatch)
    worker = DecodeWorker(model, queue_size=16, batch_lines=64)
    batches: list[list[int]] = []
    worker.on_batch = batches.append
    first = worker.submit(["b a"], Options(2, 0.6, 1))
    assert gate.started.wait(30)
    futures = [worker.submit([line], Options(2, 0.6, 2)) for line in LINES if line]
    other = worker.submit(["c"], Options(1, 0.6, 1))  # another beam: its own batch
    gate.open.set()
    got = [json.loads(b"".join(f.result(30))) for f in futures]  # the encoded lines
    assert first.result(30) and other.result(30)
    worker.stop()
    assert batches == [[1], [1, 1, 1, 1], [1]]

    def rounded(results: list[Any]) -> list[Any]:  # padding moves scores in the 7th digit
        for line in results:
            for t in line["translations"]:
                t["score"] = round(t["score"], 4)
        return results

    assert [rounded(r) for r in got] == [rounded(json.loads(dumps(r))) for r in alone]


# ---------------------------------------------------------------- the command line


def test_serve_py_settings_are_checked_before_loading(runs: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match="prot: unknown key; did you mean port"):
        serve_run({"ckpt": "x", "prot": 1})
    with pytest.raises(ConfigError, match="port=70000"):
        serve_run({"ckpt": "x", "port": 70000})
    with pytest.raises(ConfigError, match="ckpt: no checkpoint given"):
        serve_run({"port": 8000})
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError, match=f"port={port}: cannot listen"):
            serve_run({"ckpt": str(runs["transformer"]), "port": port})


def test_serve_py_builds_the_app_and_starts_on_loopback(runs: dict[str, Path]) -> None:
    started: dict[str, Any] = {}

    def start(app: Any, **kw: Any) -> None:
        started.update(kw, app=app)

    serve_run(
        {"ckpt": str(runs["transformer"]), "ckpt2": str(runs["rnn"]), "port": 0, "beam": 2},
        start=start,
    )
    assert started["host"] == "127.0.0.1" and started["port"] == 0
    with TestClient(started["app"]) as c:
        info = c.get("/info").json()
        assert [m["label"] for m in info["models"]] == ["ckpt", "ckpt2"]
        assert post(c, text="a b")["decode"]["beam"] == 2  # decode keys set the defaults


def test_a_ctranslate2_export_serves_without_attention(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ctranslate2", reason="needs attnmt[ct2]")
    from attnmt.decode import ct2

    # the guard against exporting into a run (tests/test_nothing_lost.py) would refuse any
    # tmp_path when a stray train.log sits in the system's temporary folder
    monkeypatch.setattr(ct2, "refuse_run_output", lambda out: None)
    export = ct2.export
    out = tmp_path / "ct2"
    export(runs["transformer"], out)
    model = load_model("ckpt", str(out), "auto", "cpu", DecodeConfig())
    with client([model]) as c:
        info = c.get("/info").json()["models"][0]
        assert info["backend"] == "ctranslate2" and info["attention"] is None
        assert info["step"] == 60 and info["corpus"] == "toy_reverse"
        data = post(c, text=LINES, attention=True)
        assert "no attention" in data["attention_note"]
        texts = [
            line["translations"][0]["text"] if line["translations"] else ""
            for line in data["lines"]
        ]
        assert texts == translate_py(out, LINES, backend="ctranslate2")
        assert all("attention" not in t for line in data["lines"] for t in line["translations"])
        for field, body in (
            ("n_best", {"beam": 2, "n_best": 2}),
            ("alignments", {"alignments": True}),
            ("reference", {"reference": "b a", "gold": "0-1 1-0"}),
        ):
            response = c.post("/translate", json={"text": "a b", **body})
            assert response.status_code == 422 and response.json()["field"] == field
