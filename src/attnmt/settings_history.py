"""Settings written by earlier attnmt versions, read as today's keys with their old meaning.

A key added to a schema keeps the old behaviour at its default, so settings written before
it (a checkpoint's config, a migrated run record's settings) need no rewriting: the default applies.
Where a change gave existing keys a new meaning, the old settings are rewritten here into
today's keys, so that they still describe the model they built:

* ``model.enc_hidden_size`` (issue 33). Before it, an RNN encoder had ``hidden_size`` units
  in each direction, so a bidirectional one wrote annotations of ``2 · hidden_size``, and
  dot, scaled_dot and cosine reached them through a learned key adapter. Today
  ``hidden_size`` is also the annotation size (each direction gets half). Old RNN settings
  get ``enc_hidden_size = directions · hidden_size``, the layout they were trained with.

A leaf: it reads plain dicts and imports nothing from attnmt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RNN_MODELS = ("rnn_bahdanau", "rnn_luong")
"""The registry names of the RNN models (attnmt.models.registry.MODELS)."""
OLD_RNN_DEFAULTS = {"hidden_size": 256, "bidirectional": True}
"""What an RNN model setting left out meant before ``enc_hidden_size``."""


def upgrade_model_settings(model: Mapping[str, Any], name: str = "") -> dict[str, Any]:
    """A copy of ``model`` (a model config section; its registry name is ``model["name"]``,
    else ``name``) in today's keys with the meaning it was written with."""
    upgraded = dict(model)
    if str(model.get("name") or name) in RNN_MODELS and "enc_hidden_size" not in model:
        hidden = model.get("hidden_size", OLD_RNN_DEFAULTS["hidden_size"])
        directions = 2 if model.get("bidirectional", OLD_RNN_DEFAULTS["bidirectional"]) else 1
        upgraded["enc_hidden_size"] = directions * hidden
    return upgraded
