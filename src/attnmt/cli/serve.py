"""``python serve.py ckpt=PATH [ckpt2=PATH2] [host=127.0.0.1 port=8000]``: the page and the
JSON API of :mod:`attnmt.serve` under uvicorn (``pip install 'attnmt[serve]'``)."""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable, Mapping
from typing import Any

from omegaconf import DictConfig

from attnmt.cli.common import parse_settings
from attnmt.errors import ConfigError
from attnmt.serve.settings import ServeSettings

log = logging.getLogger(__name__)


def require_serve_extra() -> None:
    """ConfigError saying how to install FastAPI and uvicorn when either is missing."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as err:
        raise ConfigError(
            f"serve.py needs FastAPI and uvicorn ({err}); pip install 'attnmt[serve]'"
        ) from None


def check_port_free(host: str, port: int) -> None:
    """ConfigError naming ``port`` when ``host:port`` cannot be bound (in use, no such
    address), before any model is loaded."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        raise ConfigError(f"host={host}: not an address of this machine ({err})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as err:
            raise ConfigError(
                f"port={port}: cannot listen on {host}:{port} ({err.strerror or err}); "
                "choose another port (port=0: any free one)"
            ) from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(cfg: DictConfig | Mapping[str, Any], start: Callable[..., Any] | None = None) -> None:
    """Load the model(s) of configs/serve.yaml and serve them; ``start(app, host, port,
    log_level)`` runs the server (default :func:`attnmt.serve.runner.serve`: uvicorn until
    Ctrl-C; tests pass their own)."""
    s, decode = parse_settings(cfg, ServeSettings)
    require_serve_extra()
    check_port_free(s.host, s.port)
    from attnmt.serve.app import create_app
    from attnmt.serve.backend import load_model

    models = [load_model("ckpt", s.ckpt, s.backend, s.device, decode)]
    if s.ckpt2:
        models.append(load_model("ckpt2", s.ckpt2, s.backend, s.device, decode))
    app = create_app(s, models)
    if not is_loopback(s.host):
        log.warning("host=%s: the server is reachable from other machines (no login)", s.host)
    log.info(
        "serving %s on http://%s:%d (Ctrl-C stops)",
        ", ".join(m.label for m in models),
        s.host,
        s.port,
    )
    if start is None:
        from attnmt.serve.runner import serve

        start = serve
    start(app, host=s.host, port=s.port, log_level=s.log_level)
