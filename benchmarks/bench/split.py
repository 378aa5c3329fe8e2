"""Where an RNN training step's time goes: encoder, decoder, output layer + loss, backward,
optimizer, from wall-clock marks taken during the timed steps themselves.

The trainer's step (:func:`.training.attnmt_step`) marks its own boundaries (the forward
call, the loss, ``backward()``, clipping + Adam + ``zero_grad``); two forward hooks on the
model split the forward pass: after ``model.encoder`` (the source embedding, the packed
bidirectional RNN) the encoder ends, and at the output layer's first module (Bahdanau's
``readout``, else the ``generator``) the decoder ends (bridge, attention keys, the loop over
target steps). The hooks touch only module attributes both the RNN models have always had,
so the split of older model code is comparable.

No synchronisation: on a CPU every op has finished when it returns, so the marks are the
sections' wall times and cost a few ``time.perf_counter`` calls per step. On an accelerator
they would be launch times, so the split is taken on CPU only.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn

from attnmt.models.rnn import RNNSeq2Seq

SECTIONS = ("prepare", "encoder", "decoder", "output_loss", "backward", "optimizer")
"""The step's sections in order; ``prepare`` is the learning-rate schedule and word dropout."""
SHORT = {
    "encoder": "enc",
    "decoder": "dec loop",
    "output_loss": "out+loss",
    "backward": "bwd",
    "optimizer": "optim",
}
"""The table's names of the sections it shows (``prepare`` is left out: it is tiny)."""


class StepMarks:
    """Section times of every training step, ``start()`` … ``end(section)`` … ``finish()``.

    ``end(section)`` charges the time since the previous mark to ``section``. The base class
    records nothing (the benchmark's steps without a split pay one no-op call per mark).
    """

    def start(self) -> None:
        """A step begins."""

    def end(self, section: str) -> None:
        """``section`` ends now."""

    def finish(self) -> None:
        """The step is over."""


NO_MARKS = StepMarks()


class WallMarks(StepMarks):
    """:class:`StepMarks` that record ``time.perf_counter`` differences (CPU only)."""

    def __init__(self) -> None:
        self.steps: list[dict[str, float]] = []
        self._current: dict[str, float] | None = None
        self._last = 0.0

    def start(self) -> None:
        self._current = {}
        self._last = time.perf_counter()

    def end(self, section: str) -> None:
        if self._current is None:  # a hooked module called outside a marked step
            return
        now = time.perf_counter()
        self._current[section] = self._current.get(section, 0.0) + now - self._last
        self._last = now

    def finish(self) -> None:
        if self._current is not None:
            self.steps.append(self._current)
        self._current = None

    def attach(self, model: nn.Module) -> bool:
        """Hook the encoder's end and the output layer's start of an RNN model; False (and
        no hooks) for any other model."""
        if not isinstance(model, RNNSeq2Seq):
            return False
        encoder = model.encoder
        output = getattr(model, "readout", None) or model.generator

        def encoder_done(*_: Any) -> None:
            self.end("encoder")

        def decoder_done(*_: Any) -> None:
            self.end("decoder")

        encoder.register_forward_hook(encoder_done)
        output.register_forward_pre_hook(decoder_done)
        return True

    def split(self, last: int) -> dict[str, float]:
        """Mean seconds of every section over the ``last`` steps (the timed ones)."""
        steps = self.steps[len(self.steps) - last :] if last else []
        if not steps:
            return {}
        return {s: sum(step.get(s, 0.0) for step in steps) / len(steps) for s in SECTIONS}


def marks_for(model: nn.Module, device: torch.device) -> WallMarks | None:
    """Marks hooked into ``model`` when its split can be taken (an RNN model on CPU)."""
    if device.type != "cpu":
        return None
    marks = WallMarks()
    return marks if marks.attach(model) else None


def split_text(split: dict[str, float]) -> str:
    """``enc 9% · dec loop 48% · …`` of a :meth:`WallMarks.split` ("" when empty)."""
    total = sum(split.values())
    if total <= 0:
        return ""
    return " · ".join(f"{SHORT[s]} {100 * split[s] / total:.0f}%" for s in SHORT if s in split)
