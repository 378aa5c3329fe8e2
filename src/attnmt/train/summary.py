"""What a run tells its user: the curves so far, the curated hyperparameters, the last words.

* :class:`History`: train and validation figures against step and wall-clock minutes, kept
  in the checkpoint's trainer state so a resumed run goes on drawing the same curves;
* :func:`results_figure`: ``<run>/results.png`` (also in TensorBoard): train and validation
  NLL, validation BLEU and chrF, each against step and against minutes;
* :func:`hparams`: the handful of settings that tell runs apart in TensorBoard's HParams;
* :func:`end_block`: the lines printed when a run ends: where it is, which checkpoint is
  best, the test score with its signature, and the commands to look at, score and use it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from attnmt.config import RunConfig


class History:
    """Rows ``[step, minutes, nll]`` (train) and ``[step, minutes, nll, bleu, chrf]`` (valid)."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.rows: dict[str, list[list[float]]] = state.setdefault(
            "history", {"train": [], "valid": []}
        )

    def add_train(self, step: int, minutes: float, nll: float) -> None:
        self.rows["train"].append([step, minutes, nll])

    def add_valid(self, step: int, minutes: float, nll: float, bleu: float, chrf: float) -> None:
        self.rows["valid"].append([step, minutes, nll, bleu, chrf])


def results_figure(history: History, title: str) -> Figure:
    """2×2 panels: NLL (train, valid) and BLEU/chrF (valid) against step and minutes."""
    fig = Figure(figsize=(10, 7), dpi=100)
    FigureCanvasAgg(fig)
    train, valid = history.rows["train"], history.rows["valid"]
    for col, (x, xlabel) in enumerate(((0, "update (step)"), (1, "wall-clock minutes"))):
        loss_ax = fig.add_subplot(2, 2, 1 + col)
        if train:
            loss_ax.plot([r[x] for r in train], [r[2] for r in train], label="train NLL")
        if valid:
            loss_ax.plot([r[x] for r in valid], [r[2] for r in valid], "o-", label="valid NLL")
        loss_ax.set_xlabel(xlabel)
        loss_ax.set_ylabel("cross-entropy per token (nats)")
        loss_ax.grid(alpha=0.3)
        loss_ax.legend(fontsize=9)
        score_ax = fig.add_subplot(2, 2, 3 + col)
        if valid:
            score_ax.plot([r[x] for r in valid], [r[3] for r in valid], "o-", label="valid BLEU")
            score_ax.plot([r[x] for r in valid], [r[4] for r in valid], "s-", label="valid chrF")
        score_ax.set_xlabel(xlabel)
        score_ax.set_ylabel("score (sacrebleu)")
        score_ax.grid(alpha=0.3)
        score_ax.legend(fontsize=9)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def save_figure(fig: Figure, path: Path) -> Path:
    """Write ``fig`` as PNG atomically (temporary name, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    fig.savefig(tmp, format="png")
    os.replace(tmp, path)
    return path


def hparams(cfg: RunConfig, n_params: int, vocab: int, precision: str) -> dict[str, Any]:
    """The settings that tell runs apart, in the order TensorBoard's HParams table shows."""
    m, t, d = cfg.model, cfg.trainer, cfg.data
    if m.name == "transformer":
        shape = f"d{m.d_model} {m.enc_layers}+{m.dec_layers} ff{m.d_ff} h{m.n_heads}"
    else:
        shape = f"{m.cell} {m.hidden_size} {m.enc_layers}+{m.dec_layers} {m.attention.score}"
        shape += f"/{m.attention.mode}"
    return {
        "model": m.name,
        "model.shape": shape,
        "model.params_M": round(n_params / 1e6, 2),
        "model.dropout": m.dropout,
        "corpus": f"{d.name} {d.src_lang}-{d.tgt_lang}",
        "vocab": vocab,
        "lr": t.lr,
        "schedule": f"{t.schedule} (warmup {t.warmup_steps})",
        "label_smoothing": t.label_smoothing,
        "batch_tokens": t.max_tokens,
        "precision": precision,
        "seed": cfg.seed,
        "beam": cfg.decode.beam,
    }


def end_block(result: dict[str, Any], state: dict[str, Any], best: Path | None) -> str:
    """The lines a finished run prints: where, best, test, and what to type next."""
    run = Path(result["run_dir"])
    minutes = state.get("history", {}).get("valid", [[0, 0.0]])[-1][1]
    lines = [
        f"run finished ({result['stop_reason']}) at step {result['step']}, "
        f"epoch {result['epoch']}, {minutes:.1f} min",
        f"  run directory    {run}",
    ]
    if best is not None and "best_step" in state:
        lines.append(
            f"  best checkpoint  {best} (step {state['best_step']}: valid BLEU "
            f"{state['best_bleu']:.2f}, chrF {state['best_chrf']:.2f})"
        )
    if "test_bleu" in result:
        lines.append(
            f"  test             BLEU {result['test_bleu']:.2f}, chrF {result['test_chrf']:.2f}"
            f"  ({result['test_signature']})"
        )
    lines += [
        f"  curves           {run / 'results.png'}",
        "  look at it       make tensorboard",
        f"  score it         python evaluate.py ckpt={run} split=test",
        f'  use it           echo "..." | python translate.py ckpt={run}',
    ]
    return "\n".join(lines)
