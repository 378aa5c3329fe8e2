"""Schema of configs/serve.yaml (besides the decode group's keys, which sit at the top level
there, as for translate.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from attnmt.errors import ConfigError
from attnmt.schema import check_choice, within

BACKENDS = ("auto", "attnmt", "ctranslate2")


@dataclass
class ServeSettings:
    """What ``python serve.py`` serves, where, and the limits that keep it responsive."""

    ckpt: str = "???"  # a run directory, a .pt file, or a CTranslate2 export directory
    ckpt2: str | None = None  # a second model, shown beside the first on the page
    host: str = "127.0.0.1"  # 0.0.0.0 makes the server reachable from other machines
    port: int = 8000  # 0: any free port
    device: str = "auto"
    backend: str = "auto"  # auto (an export directory: ctranslate2) | attnmt | ctranslate2
    max_lines: int = 64  # lines per request (more: 413)
    max_body_kb: int = 256  # request body size (more: 413)
    max_beam: int = 16  # the largest beam a request may ask for
    queue_size: int = 16  # requests waiting per model (more: 503)
    batch_lines: int = 64  # lines of queued requests decoded together as one batch
    # a request waiting longer for its decode gets 503
    timeout_s: float = field(default=120.0, metadata=within(0, 3600, lo_open=True))
    max_attention_values: int = 4_000_000  # attention weights per response (more: left out)
    # decoder positions a request may cost (more: 413), counted before decoding:
    # Σ lines (beam + n_best with attention/alignments) × length limit + reference pieces
    max_decode_work: int = 10_000
    # a request body not received in full by then gets 408
    body_timeout_s: float = field(default=10.0, metadata=within(0, 3600, lo_open=True))
    # a connection whose request line and headers are not in full by then is closed
    # (once opened, and again after each answer)
    header_timeout_s: float = field(default=10.0, metadata=within(0, 3600, lo_open=True))
    keep_alive_s: int = 5  # an idle connection is closed this long after its last answer
    max_connections: int = 128  # open connections; past it, a request gets uvicorn's 503
    docs: bool = False  # /docs: FastAPI's Swagger UI, which loads its scripts from a CDN
    log_level: str = "info"  # uvicorn's: critical | error | warning | info | debug

    def check(self, prefix: str = "") -> None:
        """Value checks that types cannot express; ConfigError naming the key."""
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port={self.port} must be between 0 and 65535")
        if not self.host.strip():
            raise ConfigError("host: empty; give an address such as 127.0.0.1")
        for name in (
            "max_lines",
            "max_body_kb",
            "max_beam",
            "queue_size",
            "batch_lines",
            "max_attention_values",
            "max_decode_work",
            "keep_alive_s",
            "max_connections",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        check_choice("backend", self.backend, BACKENDS)
        check_choice("log_level", self.log_level, ("critical", "error", "warning", "info", "debug"))
