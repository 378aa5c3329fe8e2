"""Continuing from a checkpoint: which settings a resumed or fine-tuned run keeps.

A checkpoint remembers the whole run config. ``resume=`` continues *that* run: every
setting comes from the checkpoint, except the keys given on the command line, and of those
only the ones listed in :data:`MAY_CHANGE` may differ from the checkpoint (a longer budget,
more steps, another validation frequency, decoding settings, the device). Any other
explicit difference (another corpus, tokenizer, model, learning rate, batch size, seed,
validation subset...) fails with one error naming each key, since the old model would be
trained on new data with the old tokenizer, or the k-best list would compare BLEU from
different validation sets.

``finetune=PATH`` is the explicit way to start a *new* run from a checkpoint's weights:
the model and tokenizer come from the checkpoint (an explicit model key that differs
fails), everything else (corpus, optimiser, schedule, budget) is this run's own, and the
step, optimiser state and sampler start afresh.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from attnmt.config import RunConfig, validate_config
from attnmt.errors import ConfigError

MAY_CHANGE: frozenset[str] = frozenset(
    {
        "device",
        "data.root",
        "trainer.max_steps",
        "trainer.max_epochs",
        "trainer.time_budget_min",
        "trainer.early_stopping_patience",
        "trainer.val_every_steps",
        "trainer.val_every_epoch",
        "trainer.val_max_tokens",
        "trainer.num_heatmaps",
        "trainer.heatmaps_every",
        "trainer.average_best",
        "trainer.num_samples",
        "trainer.log_every_steps",
        "trainer.progress_bar",
        "trainer.test",
        "trainer.keep_best",
        "trainer.max_bad_updates",
        "decode.*",
    }
)
"""Keys a resumed run may set to new values (``section.*``: every key of the section)."""

NOT_COMPARED = frozenset({"resume", "finetune"})


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"trainer": {"lr": 1}} -> {"trainer.lr": 1} (lists and scalars are leaves)."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`flatten`."""
    nested: dict[str, Any] = {}
    for dotted, value in flat.items():
        node = nested
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def explicit_keys(overrides: Collection[str]) -> set[str]:
    """Dotted keys (or whole sections) set by Hydra command-line overrides.

    ``trainer.lr=0.1`` → ``trainer.lr``; ``model=rnn_luong`` → the ``model`` section;
    ``experiment=X`` → every section (an experiment file may set any of them).
    """
    keys: set[str] = set()
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if key == "experiment":
            keys |= {"data", "model", "trainer", "decode"}
        elif not key.startswith("hydra"):
            keys.add(key)
    return keys


def _given(key: str, explicit: Collection[str] | None) -> bool:
    """Was ``key`` set on the command line? (``explicit=None``: every key counts as given.)"""
    if explicit is None:
        return True
    return any(key == e or key.startswith(f"{e}.") for e in explicit)


def _may_change(key: str) -> bool:
    return key in MAY_CHANGE or f"{key.split('.', 1)[0]}.*" in MAY_CHANGE


def _merge(
    cfg: RunConfig,
    saved: Mapping[str, Any],
    explicit: Collection[str] | None,
    inherited: str,
    allowed: Any,
) -> tuple[dict[str, Any], list[str]]:
    """(merged flat config, differing keys that are not allowed): keys under ``inherited``
    prefixes come from ``saved`` unless given explicitly, and then must be ``allowed``."""
    now, then = flatten(cfg.to_dict()), flatten(saved)
    merged, refused = dict(now), []
    for key, value in now.items():
        if key in NOT_COMPARED or key not in then or not key.startswith(inherited):
            continue  # keys new since the checkpoint keep their current value
        if value == then[key] or not _given(key, explicit):
            merged[key] = then[key]
        elif not allowed(key):
            refused.append(f"{key} (checkpoint: {then[key]!r}, now: {value!r})")
    return merged, refused


def resumed_config(
    cfg: RunConfig, saved: Mapping[str, Any], explicit: Collection[str] | None, source: str
) -> RunConfig:
    """The config to continue the checkpointed run ``saved`` with (see the module docstring).

    ``explicit``: the keys given on the command line (None: compare every key, for
    programmatic calls). ``source`` names the checkpoint in the error message.
    """
    merged, refused = _merge(cfg, saved, explicit, "", _may_change)
    if refused:
        raise ConfigError(
            f"resume={cfg.resume} continues the run in {source} with its own settings, but "
            f"these differ from it: {'; '.join(refused)}. Drop those overrides to continue "
            f"the run as it was, or start a new run from its weights with finetune={source}"
        )
    return validate_config(unflatten(merged))


def finetune_config(
    cfg: RunConfig, saved: Mapping[str, Any], explicit: Collection[str] | None, source: str
) -> RunConfig:
    """The config of a new run that starts from the weights of ``saved``'s run: its model
    (and, by the caller, its tokenizer); an explicit model key that differs fails."""
    merged, refused = _merge(cfg, saved, explicit, "model.", lambda key: False)
    if refused:
        raise ConfigError(
            f"finetune={source} keeps the checkpoint's model, but these model settings "
            f"differ from it: {'; '.join(refused)}; drop those overrides"
        )
    return validate_config(unflatten(merged))
