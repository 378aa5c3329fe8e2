"""TensorBoard writer for one run (events in the run directory), rank 0 only.

Other ranks get a writer whose methods do nothing, so the trainer calls it unconditionally.
Tags used by the trainer: ``train/{nll,loss_smoothed,ppl,lr,grad_norm,tokens_per_sec,
skipped_updates}`` (and ``train/align`` with guided alignment),
``val/{nll,ppl,accuracy,bleu,chrf,best_bleu}`` and at the end
``val/{test_bleu,test_chrf}`` (the HParams metrics), the attention entropy
``val_attention/{entropy,entropy_norm}/<map>`` (attnmt.decode.attention_entropy),
``valid_attention/<i>/<map>`` and ``valid_summary/results`` images, ``samples/valid<i>``
text, and the HParams plugin. Scalar groups sort first in TensorBoard (``train`` < ``val``
< ``val_attention`` < ``valid_*``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams as hparams_summary


class TBLogger:
    """Thin wrapper over ``SummaryWriter`` (``enabled=False``: every call is a no-op)."""

    def __init__(
        self, log_dir: str | Path, enabled: bool = True, purge_step: int | None = None
    ) -> None:
        """``purge_step``: on resume, TensorBoard hides this run's older events at steps
        >= purge_step (those logged after the checkpoint by the interrupted process)."""
        self.log_dir = Path(log_dir)
        self.writer = SummaryWriter(str(self.log_dir), purge_step=purge_step) if enabled else None

    def scalar(self, tag: str, value: float, step: int) -> None:
        if self.writer is not None:
            self.writer.add_scalar(tag, float(value), step)

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        for tag, value in values.items():
            self.scalar(tag, value, step)

    def image(self, tag: str, image_hwc: np.ndarray, step: int) -> None:
        """image_hwc: uint8 [H,W,3] (or [H,W,4]; alpha is dropped)."""
        if self.writer is not None:
            self.writer.add_image(tag, image_hwc[..., :3], step, dataformats="HWC")

    def text(self, tag: str, text: str, step: int) -> None:
        if self.writer is not None:
            self.writer.add_text(tag, text, step)

    def hparams(
        self, params: Mapping[str, Any], metrics: Mapping[str, float], step: int = 0
    ) -> None:
        """Write the hparams plugin into this run's own event file.

        ``params`` values must be bool/int/float/str (others are stringified);
        ``metrics`` keys are scalar tags (e.g. ``val/test_bleu``), written here too at
        ``step`` (the run's last), where the HParams dashboard reads their values.
        """
        if self.writer is None:
            return
        clean = {
            k: v if isinstance(v, (bool, int, float, str)) else str(v) for k, v in params.items()
        }
        exp, ssi, sei = hparams_summary(clean, dict(metrics))
        file_writer = self.writer._get_file_writer()
        for summary in (exp, ssi, sei):
            file_writer.add_summary(summary)
        for tag, value in metrics.items():
            self.writer.add_scalar(tag, float(value), step)

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
