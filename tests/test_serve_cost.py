"""serve.py bounds the decode work of a request (issue 66, item 7): its cost in decoder
positions, Σ lines (beam + n_best with maps) × length limit + reference pieces, is counted
from the tokenized request and a request over ``max_decode_work`` is refused with a 413
naming the cost, the limit and what to lower, before it waits or decodes; queued requests
batch together only within the limit."""

from __future__ import annotations

import json
import math
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="serve.py needs attnmt[serve] (fastapi, uvicorn)")
pytest.importorskip("httpx", reason="FastAPI's test client needs httpx")

from helpers.serving import client, post, tiny_models, tiny_runs

from attnmt.serve.backend import Options, ServedModel
from attnmt.serve.cost import decode_work
from attnmt.serve.references import Reference
from attnmt.serve.settings import ServeSettings
from attnmt.serve.worker import DecodeWorker
from benchmarks import serve_cost
from benchmarks.serve_cost import item7_request


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> list[ServedModel]:
    runs: dict[str, Path] = tiny_runs(tmp_path_factory)
    return tiny_models(runs)


def never_decoded(model: ServedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kw: Any) -> Any:
        raise AssertionError("a refused request reached the model")

    monkeypatch.setattr(model, "search", refuse)


def limit_of(model: ServedModel, pieces: int) -> int:
    """floor(1.5·(pieces + 1) + 10) within the model's cap, by hand (the default decode)."""
    return min(math.floor(1.5 * (pieces + 1) + 10), model.translator.model.max_target_length())


def test_the_cost_is_beam_and_maps_times_length_limits_plus_references(
    models: list[ServedModel],
) -> None:
    model = models[0]
    lines = ["a b c", "", "f e d c b a a b"]
    pieces = [len(x) for x in model.translator.tokenizer.encode_src(lines)]
    limits = [limit_of(model, n) for n in pieces]
    assert limits[0] == math.floor(1.5 * (pieces[0] + 1) + 10)
    plain = decode_work(model, lines, Options(beam=4, alpha=0.6))
    assert plain.search == 4 * (limits[0] + limits[2]) and plain.maps == plain.references == 0
    assert plain.lines == 2 and plain.longest == limits[2]
    assert plain.per_line == (4 * limits[0], 0, 4 * limits[2])
    refs = [Reference("c b a"), None, None]
    ref_pieces = len(model.translator.tokenizer.encode_tgt(["c b a"])[0])
    full = decode_work(model, lines, Options(4, 0.6, n_best=3, attention=True), refs)
    assert full.search == plain.search
    assert full.maps == 3 * (limits[0] + limits[2])
    assert full.references == ref_pieces + 1
    assert full.total == full.search + full.maps + full.references
    aligned = decode_work(model, lines, Options(4, 0.6, n_best=3, alignments=True))
    assert aligned.maps == full.maps  # alignments teacher-force as attention does
    assert full.lines_within(full.per_line[0]) == 2  # the blank line costs nothing
    assert full.lines_within(full.per_line[0] - 1) == 0


def test_a_request_over_the_limit_gets_413_before_it_is_decoded(
    models: list[ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = models[0]
    lines = ["a b c d e f"] * 4
    options = Options(beam=8, alpha=0.6)
    work = decode_work(model, lines, options)
    never_decoded(model, monkeypatch)
    with client(models, max_decode_work=work.total - 1) as c:
        response = c.post("/translate", json={"text": lines, "beam": 8})
    assert response.status_code == 413
    body = response.json()
    assert body["field"] == "text"
    error = body["error"]
    assert f"decode work is {work.total:,} decoder positions" in error
    assert f"limit of {work.total - 1:,} (max_decode_work)" in error
    assert f"beam 8 × length limits up to {work.longest}" in error
    assert "its first 3 lines fit" in error
    assert "fewer or shorter lines, a smaller beam" in error


def test_a_request_at_the_limit_is_decoded(models: list[ServedModel]) -> None:
    model = models[0]
    lines = ["a b c d e f", "b a"]
    body = {"text": lines, "beam": 3, "n_best": 2, "attention": True}
    total = decode_work(model, lines, Options(3, 0.6, 2, attention=True)).total
    with client(models, max_decode_work=total) as c:
        assert len(post(c, **body)["lines"]) == 2
    with client(models, max_decode_work=total - 1) as c:
        assert c.post("/translate", json=body).status_code == 413


def test_the_issue_request_is_refused_at_once_under_the_defaults(
    models: list[ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 lines × 220 words, each with a 200-word reference and 200 gold links, beam 16,
    n_best 16, attention: inside every other limit, it held the decode thread for the whole
    timeout_s (120 s) on 0e30e32; now it never reaches the model."""
    body = item7_request(list("abcdef"))
    assert len(body["text"]) == ServeSettings().max_lines
    never_decoded(models[0], monkeypatch)
    with client(models) as c:
        response = c.post("/translate", json=body)
    assert response.status_code == 413, response.text
    assert "(max_decode_work)" in response.json()["error"]
    assert f"limit of {ServeSettings().max_decode_work:,}" in response.json()["error"]


def test_queued_requests_batch_together_only_within_the_limit(
    models: list[ServedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = models[0]
    options = Options(2, 0.6)
    cost = decode_work(model, ["a b"], options).total
    started, release = threading.Event(), threading.Event()
    real = model.search

    def held(*args: Any, **kw: Any) -> Any:
        started.set()
        assert release.wait(30)
        return real(*args, **kw)

    monkeypatch.setattr(model, "search", held)
    worker = DecodeWorker(model, queue_size=16, batch_lines=64, max_work=2 * cost)
    batches: list[list[int]] = []
    worker.on_batch = batches.append
    first = worker.submit(["b a"], options, work=cost)
    assert started.wait(30)
    queued = [worker.submit(["a b"], options, work=cost) for _ in range(5)]
    release.set()
    for job in [first, *queued]:
        assert job.result(30)
    worker.stop()
    assert batches == [[1], [1, 1], [1, 1], [1]]


@pytest.mark.slow
def test_the_cost_benchmark_runs_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """benchmarks/serve_cost.py --quick: item 7's request refused under the default limit
    and decoded under the old ones; the largest admitted requests decoded (no figures
    kept)."""
    argv = ["serve_cost", "--quick", "--threads", "1", "--out", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", argv)  # one thread: the test workers share 2 cores
    serve_cost.main()
    (written,) = tmp_path.glob("*.json")
    rows = {r["scenario"]: r for r in json.loads(written.read_text())["rows"]}
    assert rows["item7 refused"]["statuses"] == [413]
    assert "(max_decode_work)" in rows["item7 refused"]["error"]
    assert rows["item7 old limits"]["statuses"] == [200]
    limit = ServeSettings().max_decode_work
    assert rows["item7 old limits"]["work"] > limit
    for name in ("largest, item 7's shape", "largest, beam 16", "largest, beam 4"):
        assert rows[name]["statuses"] == [200] and 0 < rows[name]["work"] <= limit
        assert rows[name]["peak_mb"] >= rows[name]["idle_mb"] > 0
    assert "| item7 refused | 64 | 16 | 16 |" in capsys.readouterr().out
