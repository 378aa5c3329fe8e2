"""What a run tells its user: validation reports, the curves, the HParams, the last words.

* :func:`report_validation`: TensorBoard scalars (the attention entropy among them),
  attention heatmaps and text samples, and the hypotheses written to
  ``<run>/hyps/valid-<step>.txt``;
* :func:`results_figure`: ``<run>/results.png`` (also in TensorBoard): train and validation
  NLL, validation BLEU and chrF, each against step and against minutes;
* :func:`hparams`: the handful of settings that tell runs apart in TensorBoard's HParams;
* :func:`end_block`: the lines printed when a run ends: where it is, which checkpoint is
  best, the test score with its signature, and the commands to look at, score and use it.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import imsave

from attnmt.atomic import atomic_path
from attnmt.data.textio import write_lines
from attnmt.decode.plots import drawn_rgba
from attnmt.decode.translator import Translator
from attnmt.run_dir import RunDir
from attnmt.train.config import TrainerConfig
from attnmt.train.evaluation import EvalSet, ValResult, attention_images
from attnmt.train.run_config import RunConfig
from attnmt.train.state import History, TrainState
from attnmt.train.tensorboard import TBLogger


def results_figure(history: History, title: str) -> Figure:
    """2×2 panels: NLL (train, valid) and BLEU/chrF (valid) against step and minutes."""
    fig = Figure(figsize=(10, 7), dpi=100)
    FigureCanvasAgg(fig)
    train, valid = history.train, history.valid
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


def save_figure(fig: Figure, path: Path) -> np.ndarray:
    """Draw ``fig`` once, write that drawing as PNG atomically (temporary name, then
    rename) and return its pixels, RGB uint8 [H, W, 3] (for TensorBoard): the same file as
    ``fig.savefig(path)`` and the same array as :func:`attnmt.decode.plots.figure_to_array`,
    for one drawing instead of two (a drawing costs about 0.2 s of CPU)."""
    rgba = drawn_rgba(fig)
    with atomic_path(path, fsync=False) as tmp:
        imsave(tmp, rgba, format="png", dpi=fig.dpi)
    return rgba[..., :3].copy()


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
        "guided_alignment": t.guided_alignment.weight,  # λ; 0 = unguided
    }


def end_block(
    result: dict[str, Any],
    state: TrainState,
    best: Path | None,
    samples: Sequence[tuple[str, str, str]] = (),
) -> str:
    """The lines a finished run prints: where, best, test, a few test translations
    (source, reference, hypothesis), and what to type next (paths quoted for a shell)."""
    run = Path(result["run_dir"])
    minutes = state.minutes
    lines = [
        f"run finished ({result['stop_reason']}) at step {result['step']}, "
        f"epoch {result['epoch']}, {minutes:.1f} min",
        f"  run directory    {run}",
    ]
    if best is not None and state.best_step is not None:
        lines.append(
            f"  best checkpoint  {best} (step {state.best_step}: valid BLEU "
            f"{state.best_bleu:.2f}, chrF {state.best_chrf:.2f})"
        )
    if "test_bleu" in result:
        lines.append(
            f"  test             BLEU {result['test_bleu']:.2f}, chrF {result['test_chrf']:.2f}"
            f"  ({result['test_signature']})"
        )
        if result.get("test_ensemble"):
            lines.append(f"  test ensemble    {', '.join(result['test_ensemble'])}")
    for i, (src, ref, hyp) in enumerate(samples):
        lines += [
            f"  test #{i + 1}          source     {src}",
            f"                   reference  {ref}",
            f"                   model      {hyp}",
        ]
    quoted = shlex.quote(str(run))
    members = result.get("test_ensemble") or []
    ensemble = f" ensemble={len(members)}" if len(members) > 1 else ""
    lines += [
        f"  curves           {run / 'results.png'}",
        "  look at it       make tensorboard",
        f"  score it         python evaluate.py ckpt={quoted} split=test{ensemble}",
        f'  use it           echo "..." | python translate.py ckpt={quoted}',
    ]
    return "\n".join(lines)


def sample_text(data: EvalSet, hyps: Sequence[str], index: int) -> str:
    """Markdown for TensorBoard's text plugin: source / reference / hypothesis."""
    return (
        f"**source:** {data.src_text[index]}  \n"
        f"**reference:** {data.ref_text[index]}  \n"
        f"**hypothesis:** {hyps[index]}"
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
    tb.scalars({**res.scalars(), **res.entropy_scalars()}, step)
    hyps = RunDir(run_dir).hyps
    hyps.mkdir(parents=True, exist_ok=True)
    write_lines(hyps / f"valid-{step}.txt", res.hyps)
    for i in range(min(tcfg.num_heatmaps, len(valid)) if heatmaps else 0):
        for name, image in attention_images(translator, valid, i, step):
            tb.image(f"valid_attention/{i}/{name}", image, step)
    for i in range(min(tcfg.num_samples, len(valid))):
        tb.text(f"samples/valid{i}", sample_text(valid, res.hyps, i), step)
    tb.flush()
