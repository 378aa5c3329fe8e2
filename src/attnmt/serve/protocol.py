"""uvicorn's HTTP/1.1 protocol (h11) with a bound on the time a request's line and headers
may take to arrive.

uvicorn (0.29 … 0.55) has no such option: its ``timeout_keep_alive`` closes a connection
that stays silent after a response, but a connection that sends nothing, or part of a
request line and headers and then nothing, stays open for as long as its client likes
(slow-header clients: each holds a socket and its buffers). Here every connection, once
opened and again after each response, must deliver a whole request line and headers
within ``header_timeout_s`` seconds, or is closed without an answer. The body has its
own bound (``body_timeout_s``, :class:`attnmt.serve.errors.BodyLimit`).
"""

from __future__ import annotations

import asyncio
from typing import cast

from uvicorn.protocols.http.h11_impl import H11Protocol


class HeaderTimeoutProtocol(H11Protocol):
    """H11Protocol that closes a connection whose next request's line and headers have not
    arrived in full ``header_timeout_s`` seconds after it opened or its last response ended
    (set by :func:`header_timeout_protocol`)."""

    header_timeout_s: float = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(cast(asyncio.Transport, transport))
        self._await_headers()

    def on_response_complete(self) -> None:
        # armed first: a pipelined request handled inside the call below starts a new
        # cycle, which the timer then sees
        self._await_headers()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _await_headers(self) -> None:
        """(Re)start the clock for the next request's headers."""
        self._cancel_header_timer()
        waiting = self.cycle  # a new request replaces it once its headers are in
        self._header_timer = self.loop.call_later(
            self.header_timeout_s, self._headers_late, waiting
        )

    def _headers_late(self, waiting: object) -> None:
        self._header_timer = None
        if self.cycle is waiting and not self.transport.is_closing():
            self.transport.close()

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None


def header_timeout_protocol(seconds: float) -> type[HeaderTimeoutProtocol]:
    """The protocol class to give ``uvicorn.Config(http=...)``, bounding headers to
    ``seconds``."""

    class Protocol(HeaderTimeoutProtocol):
        header_timeout_s = seconds

    return Protocol
