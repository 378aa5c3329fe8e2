"""The JSON API's request: its types (pydantic, strict: ``"5"`` is not a beam) and the
checks against the server's limits, each failing with an :class:`ApiError` naming the
field."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from attnmt.data.gold import Alignment, parse_links
from attnmt.decode.config import DecodeConfig
from attnmt.decode.search import length_cap
from attnmt.decode.translator import Translator
from attnmt.errors import ConfigError, DataError
from attnmt.schema import check_number, range_of
from attnmt.serve.backend import Options, ServedModel
from attnmt.serve.references import Reference
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
    reference: str | list[str | None] | None = Field(
        None,
        description="the reference translation of each line (a list: one per line of text, "
        "null for none): forced through the model, its word alignment comes back",
        examples=["This is a test."],
    )
    gold: str | list[str | None] | None = Field(
        None,
        description="the gold word alignment of each line and its reference, in Pharaoh: "
        "i-j sure, i?j possible links, 0-based words, source first; its AER, precision and "
        "recall come back (needs reference)",
        examples=["0-0 1-1 2-2 3-3"],
    )


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
    try:  # the command line's range (decode.alpha), in one place
        check_number("alpha", alpha, range_of(DecodeConfig, "alpha"))
    except ConfigError as err:
        raise ApiError(422, "alpha", str(err)) from None
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


def references_of(
    req: TranslateRequest, lines: list[str], model: ServedModel
) -> list[Reference | None] | None:
    """The reference and gold of each line (None: the request has none), checked: one
    entry per line, a gold only with its reference, every link well formed and within its
    pair, every reference within the model's target length; ApiError naming the field."""
    if req.reference is None:
        if req.gold is not None:
            raise ApiError(
                422,
                "gold",
                "gold: needs reference, the translation its links align with; send both, "
                "one per line of text",
            )
        return None
    if not model.has_attention:
        raise ApiError(
            422, "reference", "reference: the CTranslate2 backend gives no attention to align"
        )
    refs = _per_line(req.reference, "reference", len(lines))
    golds = [None] * len(lines) if req.gold is None else _per_line(req.gold, "gold", len(lines))
    out = []
    for i, (line, ref, gold) in enumerate(zip(lines, refs, golds)):
        names = (_name(field, getattr(req, field), i) for field in ("text", "reference", "gold"))
        out.append(_reference(line, ref, gold, *names))
    _check_lengths(out, model, req.reference)
    return out


def _name(field: str, value: object, i: int) -> str:
    """``field`` for a one-string value, ``field[i]`` for a list's entry ``i``."""
    return f"{field}[{i}]" if isinstance(value, list) else field


def _per_line(value: str | list[str | None], field: str, n: int) -> list[str | None]:
    """``value`` as one entry per line of text; ApiError naming ``field`` otherwise."""
    entries = [value] if isinstance(value, str) else value
    if len(entries) != n:
        given = "one string" if isinstance(value, str) else _count(len(entries), "entry", "entries")
        lines = _count(n, "line", "lines")
        raise ApiError(
            422,
            field,
            f"{field}: {given} for {lines} of text; give a list with one entry per line (null "
            "for a line without one)",
        )
    return list(entries)


def _count(n: int, one: str, many: str) -> str:
    """``1 word``, ``2 words``."""
    return f"{n} {one if n == 1 else many}"


def _reference(
    line: str, ref: str | None, gold: str | None, text: str, reference: str, field: str
) -> Reference | None:
    """One line's Reference (None without one), its fields named ``text``, ``reference``
    and ``field`` (the gold's) in errors."""
    if ref is None:
        if gold is not None:
            raise ApiError(
                422,
                field,
                f"{field}: {reference} is null; a gold alignment needs the reference its "
                "links align with",
            )
        return None
    if not line.strip():
        raise ApiError(
            422, reference, f"{reference}: {text} is blank (no translation); give null for it"
        )
    if not ref.strip():
        raise ApiError(
            422,
            reference,
            f"{reference}: empty or only whitespace; give the reference translation, or null",
        )
    check_encodable(ref, reference)
    if gold is None:
        return Reference(ref)
    check_encodable(gold, field)
    try:
        links = parse_links(gold, field)
    except DataError as err:
        raise ApiError(422, field, str(err)) from None
    _check_bounds(links, len(line.split()), len(ref.split()), field, text, reference)
    return Reference(ref, links)


def _check_bounds(
    gold: Alignment, n_src: int, n_tgt: int, field: str, text: str, reference: str
) -> None:
    """ApiError naming ``field`` and the first link beyond the pair's words."""
    for i, j in sorted(gold.possible):
        if i >= n_src or j >= n_tgt:
            mark = "-" if (i, j) in gold.sure else "?"
            src, tgt = _count(n_src, "word", "words"), _count(n_tgt, "word", "words")
            raise ApiError(
                422,
                field,
                f"{field}: link {i}{mark}{j} lies outside the pair: {text} has {src} and "
                f"{reference} {tgt}; words are split on whitespace and counted from 0, source "
                "first",
            )


def _check_lengths(
    refs: list[Reference | None], model: ServedModel, value: str | list[str | None]
) -> None:
    """ApiError naming the reference whose pieces pass the model's target length."""
    assert isinstance(model.translator, Translator)  # references_of refused CTranslate2
    cap = length_cap(model.translator.model)
    if cap is None:
        return
    given = [(i, r.text) for i, r in enumerate(refs) if r is not None]
    ids = model.translator.tokenizer.encode_tgt([text for _, text in given])
    for (i, _), pieces in zip(given, ids):
        if len(pieces) > cap:
            field = _name("reference", value, i)
            raise ApiError(
                422,
                field,
                f"{field}: {len(pieces)} target pieces, more than the {cap} this model "
                "reads (its max_target_length); shorten the reference",
            )
