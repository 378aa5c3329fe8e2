"""Run the app under uvicorn until Ctrl-C (or SIGTERM), which stops it within seconds.

uvicorn alone, on Ctrl-C, waits for every request in flight to finish (each up to
``timeout_s``), and a second Ctrl-C abandons them mid-way. Here the first Ctrl-C also calls
``app.state.stop()`` in the event loop: the decode threads stop at their next decoder step
(CTranslate2: before its next batch) and every request waiting or decoding is answered 503
(JSON) at once; responses already
being sent get ``STOP_GRACE_S`` seconds. The decode threads are then joined, so the process
ends with status 0, no traceback and no thread left inside the model.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn

from attnmt.serve.protocol import header_timeout_protocol
from attnmt.serve.settings import ServeSettings

log = logging.getLogger(__name__)

STOP_GRACE_S = 3  # seconds a stopping server gives responses still being sent
JOIN_S = 10.0  # seconds it waits for a decode thread to leave the model
#: the largest request line and headers (h11's own default, stated): more gets 400 and the
#: connection closed
MAX_HEADER_BYTES = 16 * 1024


class StoppingServer(uvicorn.Server):
    """uvicorn's server that calls ``on_stop`` in its event loop at the first exit signal."""

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_stop = on_stop
        self._loop: asyncio.AbstractEventLoop | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets=sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        first = not self.should_exit
        super().handle_exit(sig, frame)
        if first and self._loop is not None:
            self._loop.call_soon_threadsafe(self._on_stop)


def server_config(app: Any, host: str, port: int, log_level: str) -> uvicorn.Config:
    """uvicorn's settings for ``app`` within the connection limits of its ServeSettings
    (``app.state.settings``): request line and headers within ``header_timeout_s``
    (:mod:`attnmt.serve.protocol`; uvicorn has no option for it) and MAX_HEADER_BYTES, an
    idle connection closed after ``keep_alive_s``, at most ``max_connections`` open
    connections (uvicorn's ``limit_concurrency``: past it, requests get its 503)."""
    s: ServeSettings = app.state.settings
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=header_timeout_protocol(s.header_timeout_s),
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        timeout_keep_alive=s.keep_alive_s,
        limit_concurrency=s.max_connections,
        timeout_graceful_shutdown=STOP_GRACE_S,
    )


def serve(app: Any, host: str, port: int, log_level: str) -> None:
    """Serve ``app`` (from :func:`attnmt.serve.app.create_app`) on ``host:port`` until an
    exit signal (:func:`server_config`'s limits); returns once its decode threads have
    ended (or after JOIN_S each)."""
    server = StoppingServer(server_config(app, host, port, log_level), app.state.stop)
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn raises again the Ctrl-C it handled, once stopped
        pass
    finally:
        app.state.stop()
        for worker in app.state.workers:
            if not worker.join(JOIN_S):
                log.warning("%s: its decode did not stop within %g s", worker.model.label, JOIN_S)
    log.info("stopped")
