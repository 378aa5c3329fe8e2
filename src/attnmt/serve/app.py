"""The ASGI app, built by :func:`create_app` from settings and loaded models (no globals).

Routes: ``GET /`` the page (static/, no build step, nothing from the network), ``GET /info``,
``POST /translate``, ``GET /docs`` and ``/openapi.json`` (FastAPI's OpenAPI description).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

from attnmt.serve.api import ApiError, TranslateRequest, lines_of, options_of
from attnmt.serve.backend import NO_ATTENTION, ServedModel
from attnmt.serve.errors import BodyLimit, dumps, install_error_handlers
from attnmt.serve.settings import ServeSettings
from attnmt.serve.worker import DecodeWorker, QueueFull

log = logging.getLogger(__name__)

STATIC = files("attnmt.serve") / "static"


def json_response(content: Any, status: int = 200) -> Response:
    return Response(dumps(content), status_code=status, media_type="application/json")


def create_app(settings: ServeSettings, models: list[ServedModel]) -> FastAPI:
    """The app serving ``models`` (the first is ``ckpt=``, a second ``ckpt2=``) within the
    limits of ``settings``; one :class:`DecodeWorker` per model, stopped at shutdown."""
    workers = [DecodeWorker(m, settings.queue_size, settings.batch_lines) for m in models]

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        for worker in workers:
            worker.stop()

    app = FastAPI(
        title="attnmt",
        summary="Translations, scores, pieces, attention maps and word alignments",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.workers = workers
    app.state.settings = settings
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_kb * 1024)
    static = str(STATIC)
    app.mount("/static", StaticFiles(directory=static), name="static")

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(f"{static}/index.html", media_type="text/html")

    @app.get("/info", summary="The models served and the server's limits")
    async def info() -> Response:
        return json_response(
            {
                "models": [{"index": i, "label": m.label, **m.info} for i, m in enumerate(models)],
                "limits": {
                    "max_lines": settings.max_lines,
                    "max_body_kb": settings.max_body_kb,
                    "max_beam": settings.max_beam,
                    "queue_size": settings.queue_size,
                    "batch_lines": settings.batch_lines,
                    "timeout_s": settings.timeout_s,
                },
            }
        )

    @app.post(
        "/translate",
        summary="Translate one text or a list of lines",
        responses={
            200: {"description": "per line: translations, scores, pieces, attention"},
            400: {"description": "invalid JSON"},
            413: {"description": "body or line count over the limit"},
            422: {"description": "a field with a wrong type or value (named in `field`)"},
            503: {"description": "the queue is full or decoding took too long"},
        },
    )
    async def translate(req: TranslateRequest) -> Response:
        lines = lines_of(req.text, settings.max_lines)
        model, options = options_of(req, settings, models)
        note = NO_ATTENTION if req.attention and not model.has_attention else None
        worker = workers[req.model]
        try:
            future = worker.submit(lines, options)
        except QueueFull:
            raise ApiError(
                503,
                None,
                f"busy: {settings.queue_size} requests are waiting for model {req.model} "
                "(queue_size); retry shortly",
            ) from None
        try:
            results = await asyncio.wait_for(asyncio.wrap_future(future), settings.timeout_s)
        except TimeoutError:
            raise ApiError(
                503, None, f"decoding took longer than {settings.timeout_s:g} s (timeout_s)"
            ) from None
        except Exception as err:  # the decode failed (logged by the worker); the server goes on
            raise ApiError(500, None, f"decoding failed: {type(err).__name__}: {err}") from None
        return json_response(
            {
                "model": req.model,
                "backend": model.info.get("backend"),
                "decode": {"beam": options.beam, "alpha": options.alpha, "n_best": options.n_best},
                "attention_note": note,
                "lines": results,
            }
        )

    return app
