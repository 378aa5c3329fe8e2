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

Same settings are not the same data: ``data=custom`` files edited between the runs give a
new prepared cache under the same settings. A checkpoint therefore records the train and
valid files it was trained on (:meth:`attnmt.data.corpora.PreparedCorpus.fingerprint`), and
:func:`check_same_corpus` refuses to resume on other pairs.

A finished run is not resumed as it is: with the limit that stopped it still reached, it
would train nothing and only decode the test again (:func:`check_unfinished`). Raising
that limit (``trainer.max_steps``, ``max_epochs``, ``time_budget_min``,
``early_stopping_patience``) continues it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnmt.checkpoint_format import Checkpoint
from attnmt.errors import ConfigError
from attnmt.run_dir import RunDir
from attnmt.run_record import RecordError, read_summary
from attnmt.train.config import TrainerConfig

log = logging.getLogger(__name__)

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
        "trainer.test_ensemble",
        "trainer.keep_best",
        "trainer.keep_best_at_minutes",
        "trainer.max_bad_updates",
        "trainer.precision_probe",
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


def _known(key: str, known: Collection[str]) -> bool:
    """``key`` or one of its parents is a setting of today's schema (a checkpoint may hold
    keys that have been removed since: those are left out)."""
    parts = key.split(".")
    return any(".".join(parts[:n]) in known for n in range(len(parts), 0, -1))


def _merge(
    raw: Mapping[str, Any],
    saved: Mapping[str, Any],
    explicit: Collection[str] | None,
    inherited: str,
    allowed: Callable[[str], bool],
    known: Callable[[str], Collection[str]],
) -> tuple[dict[str, Any], list[str]]:
    """(merged settings, differing keys that are not allowed): keys under the ``inherited``
    prefix come from ``saved`` unless given explicitly, and then must be ``allowed``.

    A model section not given on the command line is the checkpoint's whole (another
    preset's keys are not mixed in); ``known(model_name)`` lists today's setting keys, and
    a checkpoint's keys that have been removed since are left out.
    """
    now, then = flatten(raw), flatten(saved)
    if not any(_given(k, explicit) for k in now if k.startswith("model.")):
        now = {k: v for k, v in now.items() if not k.startswith("model.")}
    merged, refused = dict(now), []
    for key, value in then.items():
        if key in NOT_COMPARED or not key.startswith(inherited):
            continue
        if key not in now or now[key] == value or not _given(key, explicit):
            merged[key] = value
        elif not allowed(key):
            refused.append(f"{key} (checkpoint: {value!r}, now: {now[key]!r})")
    keys = known(str(merged.get("model.name")))
    merged = {k: v for k, v in merged.items() if k in now or _known(k, keys)}
    return unflatten(merged), refused


def resumed_settings(
    raw: Mapping[str, Any],
    saved: Mapping[str, Any],
    explicit: Collection[str] | None,
    source: str,
    known: Callable[[str], Collection[str]],
) -> dict[str, Any]:
    """The settings that continue the checkpointed run ``saved`` (see the module docstring):
    ``raw`` (the composed, unvalidated config) with every key it does not set explicitly
    taken from ``saved``. ``explicit``: the keys given on the command line (None: every key
    counts as given). ``known(model_name)``: today's setting keys. ``source`` names the
    checkpoint."""
    merged, refused = _merge(raw, saved, explicit, "", _may_change, known)
    if refused:
        raise ConfigError(
            f"resume={raw.get('resume')} continues {run_of(source)} with its own "
            f"settings, but these differ from it: {'; '.join(refused)}. Drop those overrides to "
            "continue the run as it was, or start a new run from its weights with "
            f"finetune={source}"
        )
    return merged


def run_of(checkpoint: str | Path) -> str:
    """The run a checkpoint continues, for messages: ``the run in RUN (from its
    checkpoints/last.pt)``, or ``the run of checkpoint FILE`` outside a run folder."""
    run = RunDir.of_checkpoint(checkpoint)
    if run is None:
        return f"the run of checkpoint {checkpoint}"
    return f"the run in {run.path} (from its checkpoints/{Path(checkpoint).name})"


def finetuned_settings(
    raw: Mapping[str, Any],
    saved: Mapping[str, Any],
    explicit: Collection[str] | None,
    source: str,
    known: Callable[[str], Collection[str]],
) -> dict[str, Any]:
    """The settings of a new run that starts from the weights of ``saved``'s run: its model
    (and, by the caller, its tokenizer); an explicit model key that differs fails."""
    merged, refused = _merge(raw, saved, explicit, "model.", lambda key: False, known)
    if refused:
        raise ConfigError(
            f"finetune={source} keeps the checkpoint's model, but these model settings "
            f"differ from it: {'; '.join(refused)}; drop those overrides"
        )
    return merged


def _file_change(name: str, then: Mapping[str, Any], now: Mapping[str, Any] | None) -> str:
    """``"train.de (1000 pairs then, 999 now)"``-style words for one changed file."""
    if now is None:
        return f"{name} (gone)"
    if now["pairs"] != then["pairs"]:
        return f"{name} ({then['pairs']} pairs then, {now['pairs']} now)"
    return f"{name} (other content, {now['pairs']} pairs)"


def check_same_corpus(saved: Mapping[str, Any] | None, now: Mapping[str, Any], source: str) -> None:
    """A resumed run goes on with the pairs it trained and validated on: ``saved`` (the
    checkpoint's ``corpus`` record) against ``now`` (this run's prepared corpus), both
    :meth:`~attnmt.data.corpora.PreparedCorpus.fingerprint`. ConfigError naming each file
    that differs and how to go on; a checkpoint older than that record is only logged."""
    if saved is None:
        log.info("%s records no corpus fingerprint (an older checkpoint): not compared", source)
        return
    files = now.get("files", {})
    changed = [
        _file_change(name, then, files.get(name))
        for name, then in sorted(saved.get("files", {}).items())
        if then["sha256"] != (files.get(name) or {}).get("sha256")
    ]
    if changed:
        raise ConfigError(
            f"resume: the corpus differs from the one {run_of(source)} trained on (prepared "
            f"as {saved.get('cache')}, now {now.get('cache')}): {'; '.join(changed)}. "
            "Resuming would go on training and choosing checkpoints on other pairs. Put the "
            "files back as they were to continue this run, or start a new run from its "
            f"weights on the new data with finetune={source}"
        )


@dataclass(frozen=True)
class Limit:
    """A stop rule that holds: ``reached`` says which and why (``trainer.max_steps=8 (step
    8)``), ``raised`` is an override that lifts it (``trainer.max_steps=16``)."""

    reached: str
    raised: str


def limits_reached(trainer: TrainerConfig, checkpoint: Checkpoint) -> list[Limit]:
    """The stop rules of the training loop (attnmt.train.loop) that already hold at
    ``checkpoint`` under ``trainer``: a run resumed there would stop before its first
    update."""
    state = checkpoint.training.trainer if checkpoint.training is not None else {}
    step, epoch = checkpoint.step, checkpoint.epoch
    minutes = float(state.get("wall_s", 0.0)) / 60.0
    bad_vals = int(state.get("bad_vals", 0))
    t, reached = trainer, []
    if t.max_steps and step >= t.max_steps:
        more = max(2 * t.max_steps, step + 1)
        reached.append(
            Limit(f"trainer.max_steps={t.max_steps} (step {step})", f"trainer.max_steps={more}")
        )
    if t.max_epochs and epoch >= t.max_epochs:
        more = max(2 * t.max_epochs, epoch + 1)
        reached.append(
            Limit(
                f"trainer.max_epochs={t.max_epochs} (epoch {epoch})", f"trainer.max_epochs={more}"
            )
        )
    patience = t.early_stopping_patience
    if patience and bad_vals >= patience:
        reached.append(
            Limit(
                f"trainer.early_stopping_patience={patience} ({bad_vals} validations without "
                "a gain)",
                f"trainer.early_stopping_patience={bad_vals + patience}",
            )
        )
    budget = t.time_budget_min
    if budget and step > 0 and minutes >= budget:
        reached.append(
            Limit(
                f"trainer.time_budget_min={budget:g} ({minutes:.1f} minutes trained)",
                f"trainer.time_budget_min={math.ceil(minutes + budget):g}",
            )
        )
    return reached


def check_unfinished(
    trainer: TrainerConfig, checkpoint: Checkpoint, source: str | Path, resume: str
) -> None:
    """``resume=`` of a finished run whose stop rule still holds: ConfigError saying the
    run is finished and what to do (a new decode: evaluate.py; more training: raise the
    limit; or a new run), instead of decoding the test again and appending a second
    ``test`` and ``end`` at the same step. A run that did not finish (killed, interrupted,
    failed), an older checkpoint of a finished run, or raised limits go on."""
    run = RunDir.of_checkpoint(source)
    if run is None:
        return
    try:
        summary = read_summary(run.path)
    except RecordError as err:
        log.warning("%s; resuming without knowing whether the run finished", err)
        return
    if summary is None or summary.status != "finished":
        return
    if summary.step != checkpoint.step:
        return  # a checkpoint from before the end: the run goes on from there
    reached = limits_reached(trainer, checkpoint)
    if not reached:
        return
    raise ConfigError(
        f"resume={resume}: the run in {run.path} is finished ({summary.reason} at step "
        f"{checkpoint.step}), so resuming would train nothing and only decode the test again. "
        f"To decode again: python evaluate.py ckpt={run.path} split=test; to train on, "
        f"raise what stops it: {'; '.join(r.reached for r in reached)}, e.g. "
        f"resume={resume} {' '.join(r.raised for r in reached)}; or start a new run from its "
        f"weights with finetune={source}"
    )
