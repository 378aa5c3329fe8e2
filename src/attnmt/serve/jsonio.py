"""Compact JSON for the API, built as byte parts so that large attention maps are encoded
once, head by head, in the decode thread (never as one nested list of Python floats, never
on the event loop).

:class:`RawJSON` holds a value already encoded; :func:`json_parts` encodes a value that may
contain some, :func:`dumps` joins the parts. The output equals ``json.dumps(value,
separators=(",", ":"), ensure_ascii=False)`` of the plain value.
"""

from __future__ import annotations

import json
from typing import Any

import torch
from torch import Tensor

from attnmt.decode.attention_maps import KINDS, AttentionMaps


class RawJSON:
    """A JSON value already encoded (UTF-8 bytes)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)


def _leaf(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def json_parts(value: Any, out: list[bytes] | None = None) -> list[bytes]:
    """``value`` as JSON byte parts (their concatenation is the document); dicts, lists and
    tuples are walked for :class:`RawJSON`, anything else is encoded by :mod:`json`."""
    out = [] if out is None else out
    if isinstance(value, RawJSON):
        out.append(value.data)
    elif isinstance(value, dict):
        out.append(b"{")
        for i, (key, item) in enumerate(value.items()):
            out.append(b"," + _leaf(str(key)) + b":" if i else _leaf(str(key)) + b":")
            json_parts(item, out)
        out.append(b"}")
    elif isinstance(value, (list, tuple)):
        out.append(b"[")
        for i, item in enumerate(value):
            if i:
                out.append(b",")
            json_parts(item, out)
        out.append(b"]")
    else:
        out.append(_leaf(value))
    return out


def dumps(value: Any) -> bytes:
    """Compact JSON of ``value`` (which may hold :class:`RawJSON` parts)."""
    return b"".join(json_parts(value))


def map_json(weights: Tensor | None, digits: int = 4) -> RawJSON | None:
    """A map [L, H, R, C] as JSON nested lists rounded to ``digits`` (as
    ``AttentionMaps.to_lists`` gives them), encoded one [R, C] head at a time."""
    if weights is None:
        return None
    layers = []
    for layer in weights:
        heads = [_leaf(torch.round(head.double(), decimals=digits).tolist()) for head in layer]
        layers.append(b"[" + b",".join(heads) + b"]")
    return RawJSON(b"[" + b",".join(layers) + b"]")


def attention_json(maps: AttentionMaps) -> dict[str, Any]:
    """A hypothesis' maps as the API returns them: each kind encoded (:func:`map_json`) and
    the decoder's input pieces."""
    return {
        **{kind: map_json(getattr(maps, kind)) for kind in KINDS},
        "decoder_input_pieces": maps.decoder_input_pieces,
    }
