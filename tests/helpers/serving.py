"""serve.py's test models and client: a tiny Transformer run and a tiny Bahdanau run (shared
by the serve test files), an app over them, and a POST that must succeed. Import after the
``pytest.importorskip("fastapi")`` of the test file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from attnmt.decode.config import DecodeConfig
from attnmt.serve.app import create_app
from attnmt.serve.backend import ServedModel, load_model
from attnmt.serve.settings import ServeSettings
from helpers.tiny_checkpoint import make_run, shared_run


def tiny_runs(factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"transformer": run, "rnn": run} (built once per session)."""
    rnn = factory.getbasetemp() / "tiny-rnn-serve"
    if not (rnn / "run").is_dir():
        make_run(rnn, "rnn_bahdanau")
    return {"transformer": shared_run(factory), "rnn": rnn / "run"}


def tiny_models(runs: dict[str, Path]) -> list[ServedModel]:
    """The two runs served as "ckpt" (Transformer) and "ckpt2" (RNN), on the CPU."""
    decode = DecodeConfig()
    return [
        load_model("ckpt", str(runs["transformer"]), "auto", "cpu", decode),
        load_model("ckpt2", str(runs["rnn"]), "auto", "cpu", decode),
    ]


def client(models: list[ServedModel], **settings: Any) -> TestClient:
    """A test client of the app over ``models`` with these ServeSettings."""
    return TestClient(create_app(ServeSettings(ckpt="x", **settings), models))


def post(c: TestClient, **body: Any) -> Any:
    """``POST /translate`` with ``body``; its JSON (the status must be 200)."""
    response = c.post("/translate", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def attention_values(attention: dict[str, Any] | None) -> int:
    """How many attention weights a translation's (or a reference's) maps hold."""

    def count(x: Any) -> int:
        return sum(count(v) for v in x) if isinstance(x, list) else 1

    if attention is None:
        return 0
    kinds = ("cross", "encoder_self", "decoder_self")
    return sum(count(attention[k]) for k in kinds if attention[k])
