"""The JSON API's request: its types (pydantic, strict: ``"5"`` is not a beam) and the
checks against the server's limits, each failing with an :class:`ApiError` naming the
field."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from attnmt.serve.backend import Options, ServedModel
from attnmt.serve.settings import ServeSettings


class ApiError(Exception):
    """A request the server refuses: HTTP ``status``, the ``field`` at fault, a message."""

    def __init__(self, status: int, field: str | None, message: str) -> None:
        super().__init__(message)
        self.status, self.field, self.message = status, field, message


class TranslateRequest(BaseModel):
    """``POST /translate``: one text, or a list of lines translated one by one."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str] = Field(
        description="one sentence, or a list of lines (a blank line gets no translation)",
        examples=["Das ist ein Test."],
    )
    beam: int | None = Field(None, description="beam size (1: greedy); default: decode.beam")
    n_best: int = Field(1, description="translations per line, best first (at most beam)")
    alpha: float | None = Field(None, description="length penalty; default: decode.alpha")
    attention: bool = Field(False, description="return the attention maps of each translation")
    alignments: bool = Field(False, description="return Pharaoh word alignments (i-j pairs)")
    model: int = Field(0, description="0: the model of ckpt=, 1: that of ckpt2=")


def lines_of(text: str | list[str], max_lines: int) -> list[str]:
    """The request's lines; ApiError for empty text, only blank lines, too many lines or
    a line that is not Unicode text (:func:`check_encodable`)."""
    if isinstance(text, str):
        if not text.strip():
            raise ApiError(422, "text", "text: empty or only whitespace; give a sentence")
        check_encodable(text, "text")
        return [text]
    if not text:
        raise ApiError(422, "text", "text: an empty list; give at least one line")
    if len(text) > max_lines:
        raise ApiError(
            413,
            "text",
            f"text: {len(text)} lines, more than this server's limit of {max_lines} per "
            "request (max_lines); split the request",
        )
    if not any(line.strip() for line in text):
        raise ApiError(422, "text", "text: every line is empty or only whitespace")
    for i, line in enumerate(text):
        check_encodable(line, f"text[{i}]")
    return text


def check_encodable(line: str, field: str) -> None:
    """ApiError naming ``field`` when ``line`` holds a lone surrogate (JSON's ``\\ud800``
    escape decodes to one): it is no character, UTF-8 cannot encode it and the tokenizer
    would fail on it."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as err:
        code = ord(line[err.start])
        raise ApiError(
            422,
            field,
            f"{field}: character {err.start + 1} is a lone surrogate (\\u{code:04x}), not "
            "text; send valid Unicode (a surrogate pair for characters beyond U+FFFF)",
        ) from None


def options_of(
    req: TranslateRequest, settings: ServeSettings, models: list[ServedModel]
) -> tuple[ServedModel, Options]:
    """The model and decoding options a request asks for, checked."""
    if not 0 <= req.model < len(models):
        served = "0 (ckpt)" + (", 1 (ckpt2)" if len(models) > 1 else "")
        raise ApiError(422, "model", f"model: {req.model} is not served; choose {served}")
    model = models[req.model]
    beam = model.decode.beam if req.beam is None else req.beam
    if not 1 <= beam <= settings.max_beam:
        raise ApiError(
            422, "beam", f"beam: {beam} must be between 1 and {settings.max_beam} (max_beam)"
        )
    alpha = model.decode.alpha if req.alpha is None else req.alpha
    if not (math.isfinite(alpha) and 0 <= alpha <= 10):
        raise ApiError(422, "alpha", f"alpha: {alpha} must be between 0 and 10")
    if not 1 <= req.n_best <= beam:
        raise ApiError(
            422,
            "n_best",
            f"n_best: {req.n_best} must be between 1 and beam={beam} (raise beam for more)",
        )
    if not model.has_attention:
        if req.n_best > 1:
            raise ApiError(422, "n_best", "n_best: the CTranslate2 backend gives one translation")
        if req.alignments:
            raise ApiError(
                422, "alignments", "alignments: the CTranslate2 backend gives no attention"
            )
    options = Options(beam, float(alpha), req.n_best, req.attention, req.alignments)
    return model, options
