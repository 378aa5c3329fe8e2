"""Running train figures between two log lines: token-weighted loss, perplexity, tokens/s,
and guided alignment's loss (row-weighted) apart from the translation loss."""

from __future__ import annotations

import math


class TrainMeter:
    """Accumulates per-update figures {"loss", "nll", "tokens", "seconds", "lr", "grad_norm"}
    and, with guided alignment, {"align", "align_rows"}."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.loss = self.nll = self.tokens = self.seconds = 0.0
        self.align = self.align_rows = 0.0
        self.guided = False
        self.last: dict[str, float] = {}

    def add(self, fig: dict[str, float]) -> None:
        self.loss += fig["loss"] * fig["tokens"]
        self.nll += fig["nll"] * fig["tokens"]
        self.tokens += fig["tokens"]
        self.seconds += fig["seconds"]
        if "align" in fig:
            self.guided = True
            self.align += fig["align"] * fig["align_rows"]
            self.align_rows += fig["align_rows"]
        self.last = fig

    @property
    def tokens_per_sec(self) -> float:
        return self.tokens / max(self.seconds, 1e-9)

    def scalars(self) -> dict[str, float]:
        """Means since the last reset: ``train/nll`` (plain cross-entropy per token, on the
        scale of ``val/nll``), ``train/loss_smoothed`` (what is minimised: label-smoothed,
        so higher), ``train/ppl`` = exp(nll), lr, grad_norm, tokens_per_sec; with guided
        alignment ``train/align`` (L_align per row with a link; not part of the others)."""
        tokens = max(self.tokens, 1.0)
        scalars = {
            "train/nll": self.nll / tokens,
            "train/loss_smoothed": self.loss / tokens,
            "train/ppl": math.exp(min(self.nll / tokens, 50.0)),
            "train/lr": self.last["lr"],
            "train/grad_norm": self.last["grad_norm"],
            "train/tokens_per_sec": self.tokens_per_sec,
        }
        if self.guided:
            scalars["train/align"] = self.align / max(self.align_rows, 1.0)
        return scalars

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
        align = f"align {sc['train/align']:.3f} | " if "train/align" in sc else ""
        return (
            f"step {step} | epoch {epoch} | nll {sc['train/nll']:.3f} "
            f"(smoothed {sc['train/loss_smoothed']:.3f}) | {align}"
            f"ppl {sc['train/ppl']:.2f} | lr {sc['train/lr']:.2e} | "
            f"gnorm {sc['train/grad_norm']:.2f} | {sc['train/tokens_per_sec']:.0f} tok/s"
        )
