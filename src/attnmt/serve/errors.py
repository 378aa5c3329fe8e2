"""Every refusal as one JSON shape, ``{"error": "<field>: <what is wrong>", "field": ...}``,
and the request body size limit (413 before the body is parsed)."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from attnmt.serve.api import ApiError, TranslateRequest

log = logging.getLogger(__name__)

KNOWN_FIELDS = tuple(TranslateRequest.model_fields)


def error_response(status: int, field: str | None, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message, "field": field}, status_code=status, headers=headers)


def _field(loc: tuple[Any, ...]) -> str:
    """``("body", "text", 3)`` -> ``text[3]``; the union member names pydantic adds
    (``str``, ``list[str]``) are dropped."""
    parts = [p for p in loc[1:] if p not in ("str", "list[str]", "int", "float", "bool")]
    name = ""
    for p in parts:
        name += f"[{p}]" if isinstance(p, int) else (f".{p}" if name else str(p))
    return name or "body"


def validation_message(errors: list[dict[str, Any]]) -> tuple[int, str, str]:
    """(status, field, message) of pydantic's errors: invalid JSON first, then an unknown
    field (likely a misspelling), then the first error."""
    if any(e.get("type") == "json_invalid" for e in errors):
        first = next(e for e in errors if e.get("type") == "json_invalid")
        detail = first.get("ctx", {}).get("error", "")
        return 400, "body", f"body: invalid JSON ({detail})".replace(" ()", "")
    first = next((e for e in errors if e.get("type") == "extra_forbidden"), errors[0])
    loc = tuple(first.get("loc", ("body",)))
    field = _field(loc)
    kind = first.get("type", "")
    if kind == "missing":
        return 422, field, f"{field}: missing (required)"
    if kind == "extra_forbidden":
        return 422, field, f"{field}: unknown field; known: {', '.join(KNOWN_FIELDS)}"
    if field == "body":
        return 422, "body", f"body: {first.get('msg')}; send a JSON object"
    if loc[1:2] == ("text",):
        item = next((e for e in errors if any(isinstance(p, int) for p in e["loc"])), None)
        if item is not None:  # a list with a non-string line
            field = _field(tuple(item["loc"]))
            return 422, field, f"{field}: expected a string, got {item.get('input')!r}"
        got = type(first.get("input")).__name__
        return 422, "text", f"text: expected a string or a list of strings, got {got}"
    return 422, field, f"{field}: {first.get('msg')} (got {first.get('input')!r})"


def install_error_handlers(app: FastAPI) -> None:
    """ApiError, validation errors, HTTP errors and anything unexpected, all as JSON."""

    @app.exception_handler(ApiError)
    async def _api(_: Request, err: ApiError) -> JSONResponse:
        return error_response(err.status, err.field, err.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        status, field, message = validation_message(list(err.errors()))
        return error_response(status, field, message)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, err: HTTPException) -> JSONResponse:
        message = f"{request.method} {request.url.path}: {err.detail}"
        return error_response(err.status_code, None, message)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, err: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return error_response(500, None, f"internal error: {type(err).__name__}: {err}")


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` gets 413 naming ``body``, read
    no further (a Content-Length over it is refused before a byte is read)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        body, more = [], True
        size = 0
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            body.append(chunk)
            more = message.get("more_body", False)
        replay: list[Message] = [{"type": "http.request", "body": b"".join(body)}]

        async def receive_again() -> Message:
            return replay.pop() if replay else await receive()

        await self.app(scope, receive_again, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        kb = self.max_bytes // 1024
        response = error_response(
            413, "body", f"body: larger than this server's limit of {kb} KB (max_body_kb)"
        )
        await response(scope, receive, send)


def dumps(content: Any) -> bytes:
    """Compact JSON (attention arrays are large)."""
    return json.dumps(content, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
