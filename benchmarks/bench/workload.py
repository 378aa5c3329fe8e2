"""What the benches run on: the composed config, real batches and test sentences.

The config is composed from configs/ with Hydra's compose API (as train.py composes it),
so the benchmark uses the real defaults; command-line overrides (``trainer.max_tokens=4096``)
apply on top. The data comes through the trainer's own path,
:func:`attnmt.train.data.build_data` (prepared corpus, SentencePiece model, token-bucketed
:class:`~attnmt.data.sampler.TokenBatchSampler` batches, collate), with downloads refused:
when the corpus is not prepared under ``data.root`` and would have to be fetched, the
toy_reverse task (generated in code) is prepared in a temporary directory instead, and
every figure carries that note.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from attnmt.batch import Batch
from attnmt.data import download
from attnmt.models.base import Seq2Seq
from attnmt.models.registry import build_model
from attnmt.schema import plain
from attnmt.train.data import TrainingData, build_data
from attnmt.train.distributed import DistInfo
from attnmt.train.run_config import RunConfig, validate_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
FALLBACK = ["data=toy_reverse"]
"""Overrides of the stand-in corpus when the configured one is not prepared."""
log = logging.getLogger(__name__)


class DownloadRefused(RuntimeError):
    """Preparing the corpus would download it; the benchmark never does."""


def compose_config(overrides: Sequence[str]) -> DictConfig:
    """configs/train.yaml composed with ``overrides``, as train.py would compose it (with
    the ``hydra`` node, whose ``runtime.choices`` name the groups' chosen files)."""
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose(config_name="train", overrides=list(overrides), return_hydra_config=True)


def run_config(overrides: Sequence[str]) -> tuple[RunConfig, str]:
    """The validated (typed) run config of :func:`compose_config` and its model preset."""
    cfg = compose_config(overrides)
    return validate_config(cfg), str(cfg.hydra.runtime.choices.model)


@contextlib.contextmanager
def no_downloads() -> Iterator[None]:
    """Every downloader of attnmt.data.download raises :class:`DownloadRefused`."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise DownloadRefused("preparing it would download")

    with contextlib.ExitStack() as stack:
        for name in ("fetch", "apt_download", "pip_download"):
            stack.enter_context(mock.patch.object(download, name, refuse))
        yield


def padding(batches: Sequence[Batch]) -> dict[str, float]:
    """Padded positions / all positions of the source and target tensors of ``batches``."""
    src = sum(b.src.numel() for b in batches)
    tgt = sum(b.tgt_out.numel() for b in batches if b.tgt_out is not None)
    src_pad = sum(int(b.src_pad_mask.sum()) for b in batches)
    tgt_pad = sum(int(b.tgt_pad_mask.sum()) for b in batches if b.tgt_pad_mask is not None)
    return {
        "padding": (src_pad + tgt_pad) / max(src + tgt, 1),
        "padding_src": src_pad / max(src, 1),
        "padding_tgt": tgt_pad / max(tgt, 1),
    }


@dataclass
class Workload:
    """The run config, the trainer's data and the batches every training bench times."""

    run: RunConfig
    preset: str  # the configured model preset (configs/model/<preset>.yaml)
    overrides: list[str]
    data: TrainingData
    batches: list[Batch]
    note: str = ""  # why the figures are not those of the configured corpus ("" if they are)
    tmp: tempfile.TemporaryDirectory | None = field(default=None, repr=False)

    @property
    def corpus(self) -> str:
        """The corpus' name and where it was prepared."""
        return f"{self.data.corpus.name} ({self.data.corpus.directory})"

    def test_sources(self, n: int) -> list[str]:
        """The first ``n`` source sentences of the test split (0: all of them)."""
        sources = self.data.test_split()[0]
        return sources[:n] if n > 0 else sources

    def model_config(self, preset: str) -> Any:
        """The validated config of model preset ``preset`` (configs/model/<preset>.yaml)."""
        kept = [o for o in self.overrides if not o.lstrip("+~").startswith("model=")]
        return run_config([*kept, f"model={preset}"])[0].model

    def model(self, preset: str, device: torch.device, seed: int = 0, **changes: Any) -> Seq2Seq:
        """A freshly initialised ``preset`` for this tokenizer, on ``device``; ``changes``
        replace keys of the preset (e.g. ``input_feeding=False``)."""
        tok = self.data.tokenizer
        torch.manual_seed(seed)
        cfg = {**plain(self.model_config(preset)), **changes}
        return build_model(cfg, tok.src_vocab_size, tok.tgt_vocab_size, tok.joint).to(device)

    def summary(self) -> dict[str, Any]:
        """What the JSON and the table's header say about the data."""
        tokens = sum(b.n_tokens for b in self.batches)
        return {
            "corpus": self.corpus,
            "note": self.note,
            "preset": self.preset,
            "max_tokens": self.run.trainer.max_tokens,
            "batches": len(self.batches),
            "pairs": sum(len(b) for b in self.batches),
            "target_tokens": tokens,
            "vocab": self.data.tokenizer.tgt_vocab_size,
            **padding(self.batches),
        }

    def close(self) -> None:
        """Remove the stand-in corpus' temporary directory, if any."""
        if self.tmp is not None:
            self.tmp.cleanup()


def load_workload(overrides: Sequence[str], n_batches: int) -> Workload:
    """The configured corpus through :func:`build_data`, or the toy stand-in (with a note)."""
    run, preset = run_config(overrides)
    try:
        with no_downloads():
            data = build_data(run.data, run.trainer, run.seed, DistInfo())
        return Workload(run, preset, list(overrides), data, _first(data, n_batches))
    except DownloadRefused as err:
        why = f"{run.data.name} is not prepared under {run.data.root} ({err})"
    tmp = tempfile.TemporaryDirectory(prefix="bench-data-")
    kept = [o for o in overrides if not o.lstrip("+~").startswith(("data=", "data."))]
    stand_in = [*kept, *FALLBACK, f"data.root={tmp.name}"]
    run, preset = run_config(stand_in)
    data = build_data(run.data, run.trainer, run.seed, DistInfo())
    note = f"{why}: toy_reverse instead, generated in a temporary directory"
    log.warning("%s", note)
    return Workload(run, preset, stand_in, data, _first(data, n_batches), note, tmp)


def is_transformer(model_cfg: Any) -> bool:
    """Whether a model config is attnmt's Transformer (not an RNN)."""
    return plain(model_cfg).get("name") == "transformer"


def _first(data: TrainingData, n: int) -> list[Batch]:
    """The first ``n`` batches the training loader yields (fewer if the epoch is shorter)."""
    return list(itertools.islice(iter(data.loader), n))
