"""The ASGI app, built by :func:`create_app` from settings and loaded models (no globals).

Routes: ``GET /`` the page (static/, no build step, nothing from the network), ``GET /info``,
``POST /translate``, ``/openapi.json`` (FastAPI's OpenAPI description) and, with
``docs=true``, ``/docs`` (Swagger UI, whose scripts come from a CDN).

``app.state.stop()`` (Ctrl-C, see :mod:`attnmt.serve.runner`, or the end of the lifespan)
closes every worker: the requests waiting or decoding get 503 at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

from attnmt.serve.api import ApiError, TranslateRequest, lines_of, options_of, references_of
from attnmt.serve.backend import ServedModel
from attnmt.serve.cost import check_work, decode_work
from attnmt.serve.errors import BodyLimit, install_error_handlers
from attnmt.serve.info import NO_ATTENTION
from attnmt.serve.jsonio import dumps
from attnmt.serve.settings import ServeSettings
from attnmt.serve.worker import DecodeWorker, Job, QueueFull, Stopping

log = logging.getLogger(__name__)

STATIC = files("attnmt.serve") / "static"


def json_response(content: Any, status: int = 200) -> Response:
    return Response(dumps(content), status_code=status, media_type="application/json")


STOPPING = "the server is stopping (Ctrl-C); retry when it is back"
JOIN_S = 5.0  # seconds a stopping server waits for each decode thread to end


def create_app(settings: ServeSettings, models: list[ServedModel]) -> FastAPI:
    """The app serving ``models`` (the first is ``ckpt=``, a second ``ckpt2=``) within the
    limits of ``settings``; one :class:`DecodeWorker` per model, stopped at shutdown."""
    workers = [
        DecodeWorker(
            m,
            settings.queue_size,
            settings.batch_lines,
            settings.max_attention_values,
            settings.max_decode_work,
        )
        for m in models
    ]

    def stop() -> None:
        for worker in workers:
            worker.close()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        stop()
        for worker in workers:
            await asyncio.to_thread(worker.join, JOIN_S)

    app = FastAPI(
        title="attnmt",
        summary="Translations, scores, pieces, attention maps and word alignments",
        version="0.1.0",
        lifespan=lifespan,
        docs_url="/docs" if settings.docs else None,
        redoc_url=None,
    )
    app.state.workers = workers
    app.state.settings = settings
    app.state.stop = stop
    install_error_handlers(app)
    app.add_middleware(
        BodyLimit, max_bytes=settings.max_body_kb * 1024, timeout_s=settings.body_timeout_s
    )
    static = str(STATIC)
    app.mount("/static", StaticFiles(directory=static), name="static")

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(f"{static}/index.html", media_type="text/html")

    @app.head("/info", include_in_schema=False)
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
                    "max_attention_values": settings.max_attention_values,
                    "max_decode_work": settings.max_decode_work,
                    "body_timeout_s": settings.body_timeout_s,
                    "header_timeout_s": settings.header_timeout_s,
                    "keep_alive_s": settings.keep_alive_s,
                    "max_connections": settings.max_connections,
                },
            }
        )

    @app.post(
        "/translate",
        summary="Translate one text or a list of lines",
        responses={
            200: {
                "description": "per line: translations, scores, pieces, attention; with "
                "reference (and gold) its forced alignment (and AER)"
            },
            400: {"description": "invalid JSON"},
            408: {"description": "the body did not arrive within body_timeout_s"},
            413: {
                "description": "body, line count or decode work (max_decode_work) over the limit"
            },
            422: {"description": "a field with a wrong type or value (named in `field`)"},
            503: {"description": "the queue is full, decoding took too long, or stopping"},
        },
    )
    async def translate(req: TranslateRequest, request: Request) -> Response:
        lines = lines_of(req.text, settings.max_lines)
        model, options = options_of(req, settings, models)
        references = references_of(req, lines, model)
        # refused before it waits or decodes; tokenizing 256 KB is done off the event loop
        work = await asyncio.to_thread(decode_work, model, lines, options, references)
        check_work(work, settings.max_decode_work, options)
        note = NO_ATTENTION if req.attention and not model.has_attention else None
        worker = workers[req.model]
        try:
            job = worker.submit(lines, options, references, work.total)
        except QueueFull:
            raise ApiError(
                503,
                None,
                f"busy: {settings.queue_size} requests are waiting for model {req.model} "
                "(queue_size); retry shortly",
            ) from None
        except Stopping:
            raise ApiError(503, None, STOPPING) from None
        lines_json = await outcome(job, worker, request, settings.timeout_s)
        head = dumps(
            {
                "model": req.model,
                "backend": model.info.get("backend"),
                "decode": {"beam": options.beam, "alpha": options.alpha, "n_best": options.n_best},
                "attention_note": note,
            }
        )
        body = b"".join([head[:-1], b',"lines":', *lines_json, b"}"])
        return Response(body, media_type="application/json")

    return app


async def outcome(job: Job, worker: DecodeWorker, request: Request, timeout: float) -> list[bytes]:
    """``job``'s encoded lines once decoded; ApiError when it failed (500), the server
    stops (503), ``timeout`` s pass (503) or the client hangs up (499, sent to no one).
    A job nobody waits for any more is abandoned: it leaves the queue, or its decode stops."""
    result = asyncio.wrap_future(job)
    gone = asyncio.ensure_future(hung_up(request))
    try:
        done, _ = await asyncio.wait(
            {result, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        gone.cancel()
    if result in done:
        error = result.exception()
        if error is None:
            return result.result()
        if isinstance(error, Stopping):
            raise ApiError(503, None, STOPPING)
        # the decode failed (logged by the worker); the server goes on
        raise ApiError(500, None, f"decoding failed: {type(error).__name__}: {error}")
    result.cancel()  # so a result or error set later is dropped, not logged as unread
    worker.abandon(job)
    if gone in done:
        raise ApiError(499, None, "client closed the connection before its translation")
    raise ApiError(503, None, f"decoding took longer than {timeout:g} s (timeout_s)")


async def hung_up(request: Request) -> None:
    """Return when the client of ``request`` (whose body has been read) disconnects."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
