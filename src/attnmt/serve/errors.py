"""Every refusal as one JSON shape, ``{"error": "<field>: <what is wrong>", "field": ...}``,
and the request body's limits: its size (413 before the body is parsed) and the time it
may take to arrive (408)."""

from __future__ import annotations

import asyncio
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
#: the names pydantic gives the members of a union in an error's location
UNION_MEMBERS = ("str", "list[str]", "list[nullable[str]]", "int", "float", "bool")
#: fields that take one string or a list of them, one per line (``reference`` and
#: ``gold`` allow null entries)
LINE_FIELDS = ("text", "reference", "gold")


def error_response(status: int, field: str | None, message: str, **headers: str) -> JSONResponse:
    """The JSON error; text that UTF-8 cannot encode (a lone surrogate echoed from the
    request) is written as a ``\\udxxx`` escape instead of failing the answer."""
    content = {"error": _encodable(message), "field": None if field is None else _encodable(field)}
    return JSONResponse(content, status_code=status, headers=headers)


def _encodable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _field(loc: tuple[Any, ...]) -> str:
    """``("body", "text", 3)`` -> ``text[3]``; the union member names pydantic adds
    (``str``, ``list[str]``) are dropped."""
    parts = [p for p in loc[1:] if p not in UNION_MEMBERS]
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
    if loc[1] in LINE_FIELDS:
        null = "" if loc[1] == "text" else " or null"
        item = next((e for e in errors if any(isinstance(p, int) for p in e["loc"])), None)
        if item is not None:  # a list with a non-string line
            field = _field(tuple(item["loc"]))
            return 422, field, f"{field}: expected a string{null}, got {item.get('input')!r}"
        got = type(first.get("input")).__name__
        field = str(loc[1])
        entries = "strings" if loc[1] == "text" else "strings and nulls"
        return 422, field, f"{field}: expected a string or a list of {entries}, got {got}"
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
    no further (a Content-Length over it is refused before a byte is read); a body not
    received in full within ``timeout_s`` seconds gets 408 and its connection is closed.
    A client that hangs up while sending is left without an answer."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float) -> None:
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(scope, receive, send)
            return
        try:  # asyncio.timeout() would need Python 3.11; attnmt supports 3.10
            body = await asyncio.wait_for(self._read(receive), self.timeout_s)
        except asyncio.TimeoutError:  # TimeoutError itself from 3.11 on
            message = (
                f"body: not received in full within {self.timeout_s:g} s (body_timeout_s); "
                "send the whole request at once"
            )
            response = error_response(408, "body", message, connection="close")
            await response(scope, receive, send)
            return
        if body is None:  # the client hung up
            return
        if len(body) > self.max_bytes:
            await self._too_large(scope, receive, send)
            return
        replay: list[Message] = [{"type": "http.request", "body": body}]

        async def receive_again() -> Message:
            return replay.pop() if replay else await receive()

        await self.app(scope, receive_again, send)

    async def _read(self, receive: Receive) -> bytes | None:
        """The body, or None when the client hung up; reading stops at one byte over
        ``max_bytes``."""
        body, size, more = [], 0, True
        while more and size <= self.max_bytes:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            body.append(chunk)
            more = message.get("more_body", False)
        return b"".join(body)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        kb = self.max_bytes // 1024
        response = error_response(
            413,
            "body",
            f"body: larger than this server's limit of {kb} KB (max_body_kb)",
            connection="close",
        )
        await response(scope, receive, send)
