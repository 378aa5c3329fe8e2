"""What the trainer reports: running train figures, validation artefacts, the final test.

* :class:`TrainMeter`: token-weighted loss / perplexity and tokens per second of the
  updates since the last log line (validation time excluded).
* :func:`report_validation`: TensorBoard scalars, attention heatmaps and text samples,
  and the hypotheses written to ``<run>/hyps/valid-<step>.txt``.
* :func:`test_checkpoint`: decode the test split with a checkpoint's weights (the same
  translator path as ``evaluate.py``).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from attnmt.checkpoint import load_checkpoint
from attnmt.data.textio import write_lines
from attnmt.decode.metrics import corpus_scores
from attnmt.decode.translator import Translator
from attnmt.train.config import TrainerConfig
from attnmt.train.tensorboard import TBLogger
from attnmt.train.validate import EvalSet, ValResult, attention_images, sample_text

log = logging.getLogger(__name__)


class TrainMeter:
    """Accumulates per-update figures {"loss", "nll", "tokens", "seconds", "lr", "grad_norm"}."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.loss = self.nll = self.tokens = self.seconds = 0.0
        self.last: dict[str, float] = {}

    def add(self, fig: dict[str, float]) -> None:
        self.loss += fig["loss"] * fig["tokens"]
        self.nll += fig["nll"] * fig["tokens"]
        self.tokens += fig["tokens"]
        self.seconds += fig["seconds"]
        self.last = fig

    @property
    def tokens_per_sec(self) -> float:
        return self.tokens / max(self.seconds, 1e-9)

    def scalars(self) -> dict[str, float]:
        """Means since the last reset: ``train/nll`` (plain cross-entropy per token, on the
        scale of ``val/nll``), ``train/loss_smoothed`` (what is minimised: label-smoothed,
        so higher), ``train/ppl`` = exp(nll), lr, grad_norm, tokens_per_sec."""
        tokens = max(self.tokens, 1.0)
        return {
            "train/nll": self.nll / tokens,
            "train/loss_smoothed": self.loss / tokens,
            "train/ppl": math.exp(min(self.nll / tokens, 50.0)),
            "train/lr": self.last["lr"],
            "train/grad_norm": self.last["grad_norm"],
            "train/tokens_per_sec": self.tokens_per_sec,
        }

    def postfix(self) -> dict[str, str]:
        """Progress-bar fields: nll, lr, tok/s of the latest update / window."""
        fig = self.last
        return {
            "nll": f"{fig['nll']:.3f}",
            "lr": f"{fig['lr']:.2e}",
            "tok_s": f"{self.tokens_per_sec:.0f}",
        }

    def line(self, step: int, epoch: int) -> str:
        """The concise train.log line for the window."""
        sc = self.scalars()
        return (
            f"step {step} | epoch {epoch} | nll {sc['train/nll']:.3f} "
            f"(smoothed {sc['train/loss_smoothed']:.3f}) | "
            f"ppl {sc['train/ppl']:.2f} | lr {sc['train/lr']:.2e} | "
            f"gnorm {sc['train/grad_norm']:.2f} | {sc['train/tokens_per_sec']:.0f} tok/s"
        )


def report_validation(
    tb: TBLogger,
    run_dir: Path,
    translator: Translator,
    valid: EvalSet,
    res: ValResult,
    step: int,
    tcfg: TrainerConfig,
    heatmaps: bool = True,
) -> None:
    """Scalars, samples, hypotheses file, and (if ``heatmaps``) heatmaps of the first
    ``num_heatmaps`` pairs: drawing them costs several times the validation itself."""
    tb.scalars(res.scalars(), step)
    (run_dir / "hyps").mkdir(parents=True, exist_ok=True)
    write_lines(run_dir / "hyps" / f"valid-{step}.txt", res.hyps)
    for i in range(min(tcfg.num_heatmaps, len(valid)) if heatmaps else 0):
        for name, image in attention_images(translator, valid, i, step):
            tb.image(f"valid_attention/{i}/{name}", image, step)
    for i in range(min(tcfg.num_samples, len(valid))):
        tb.text(f"samples/valid{i}", sample_text(valid, res.hyps, i), step)
    tb.flush()


def test_checkpoint(
    translator: Translator, checkpoint: Path, src: list[str], ref: list[str], run_dir: Path
) -> dict[str, Any]:
    """Load ``checkpoint``'s weights into the translator's model and decode the test split
    exactly as ``evaluate.py ckpt=<checkpoint> split=test`` does with the same decode
    settings; write ``<run>/hyps/test.txt``; BLEU/chrF and the BLEU signature."""
    payload = load_checkpoint(checkpoint, map_location=translator.device)
    translator.model.load_state_dict(payload["model"])
    hyps = translator.translate(src)
    write_lines(run_dir / "hyps" / "test.txt", hyps)
    scores = corpus_scores(hyps, ref, metrics=("bleu", "chrf"))
    beam = translator.decode.beam
    log.info("test (%s, beam %d): %s", checkpoint.name, beam, scores["bleu"].text)
    log.info("test (%s, beam %d): %s", checkpoint.name, beam, scores["chrf"].text)
    return {
        "test_bleu": scores["bleu"].score,
        "test_chrf": scores["chrf"].score,
        "test_signature": scores["bleu"].signature,
    }
