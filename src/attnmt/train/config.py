"""Schema of the ``trainer`` config group (``configs/trainer/default.yaml``).

:class:`TrainerConfig` is a plain dataclass, parsed by
:func:`attnmt.train.run_config.validate_config` (through :func:`attnmt.schema.parse`)
before any data work; :meth:`TrainerConfig.check` holds the value checks; the registry
choices (optimizer, schedule, precision) are checked in
:data:`attnmt.train.run_config.CHOICES`. Decoding settings live in the ``decode`` group
(:class:`attnmt.decode.config.DecodeConfig`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from attnmt.decode.config import check_beam
from attnmt.errors import ConfigError
from attnmt.schema import within

PRECISION_PROBE_MODES = ("cache", "refresh")
"""``trainer.precision_probe``: ``cache`` uses a cached verdict (re-checked by one cheap timed
pair), ``refresh`` times afresh and overwrites it (see attnmt.train.precision_probe)."""


MAX_LR = 10.0
"""The largest (peak or minimum) learning rate: Adam's steps are about ``lr`` per weight, so
anything near it already diverges; larger values overflowed (``lr=1e308``)."""

MINUTES_PER_YEAR = 525_600
"""The longest ``time_budget_min`` (a year; 0 is "no limit")."""


@dataclass
class GuidedAlignmentConfig:
    """``trainer.guided_alignment``: train one cross-attention map towards word links
    (attnmt.train.guided_alignment has the loss; docs/alignment.md the how-to)."""

    # λ in L = L_translation + λ · L_align; 0 = off (no attention returned)
    weight: float = field(default=0.0, metadata=within(0, 100))
    # Transformer decoder layer whose cross-attention is trained (Python index, -1 = the last:
    # the map the searches and heatmaps read); RNNs have one map (-1 or 0)
    layer: int = -1
    heads: list[int] | None = None  # null = the mean of all heads; [0, 2]: the mean of these
    # Pharaoh links of the train split (i-j, one line per pair; .xz read too); null = its
    # silver links: the kept copy for a shipped corpus, else cached beside the prepared
    # corpus (made with eflomal on first use when installed: scripts/silver_alignments.py)
    links: str | None = None

    def check(self, prefix: str = "trainer.guided_alignment") -> None:
        """Heads distinct and >= 0 (λ's range: ``within`` above; the model's sizes:
        attnmt.train.guided_alignment.check_guide)."""
        heads = self.heads
        if heads is not None and (not heads or min(heads) < 0 or len(set(heads)) != len(heads)):
            raise ConfigError(
                f"{prefix}.heads must be null (all heads) or distinct head indices >= 0, "
                f"got {heads}"
            )


@dataclass
class TrainerConfig:
    """Every training knob (defaults = configs/trainer/default.yaml)."""

    # optimisation
    optimizer: str = "adam"  # adam | adamw  (attnmt.train.optim.OPTIMIZERS)
    # peak learning rate (after warmup)
    lr: float = field(default=3e-3, metadata=within(0, MAX_LR, lo_open=True))
    betas: list[float] = field(
        default_factory=lambda: [0.9, 0.98], metadata=within(0, 1, hi_open=True)
    )
    eps: float = field(default=1e-9, metadata=within(0, 1, lo_open=True))
    weight_decay: float = field(default=0.0, metadata=within(0, 1))
    schedule: str = "noam"  # noam | plateau | constant  (attnmt.train.optim.SCHEDULES)
    warmup_steps: int = 200
    # lr *= factor after `plateau_patience` validations w/o gain
    plateau_factor: float = field(default=0.5, metadata=within(0, 1, lo_open=True, hi_open=True))
    plateau_patience: int = 2
    min_lr: float = field(default=1e-5, metadata=within(0, MAX_LR))
    label_smoothing: float = field(default=0.1, metadata=within(0, 1, hi_open=True))
    # source pieces replaced by <unk> with this probability
    src_word_dropout: float = field(default=0.0, metadata=within(0, 1, hi_open=True))
    # decoder-input pieces replaced by <unk> (labels intact)
    tgt_word_dropout: float = field(default=0.0, metadata=within(0, 1, hi_open=True))
    # 0 disables clipping (the norm is still logged)
    clip_grad_norm: float = field(default=1.0, metadata=within(0, 1e6))
    accum_steps: int = 1  # batches per optimizer update
    max_tokens: int = 2048  # padded tokens per training batch (token buckets)
    bucket_size: int = 4096  # pairs shuffled together, then sorted by length; 0 = all
    precision: str = "auto"  # fp32 | bf16 | fp16 | auto  (attnmt.train.precision)
    precision_probe: str = "cache"  # cache | refresh: auto's CPU timing (precision_probe)
    max_bad_updates: int = 5  # stop after this many non-finite updates in a row (each skipped)
    # stopping
    max_steps: int = 0  # optimizer updates; 0 = no limit
    max_epochs: int = 0  # 0 = no limit
    # wall-clock training budget; 0 = no limit
    time_budget_min: float = field(default=12.0, metadata=within(0, MINUTES_PER_YEAR))
    early_stopping_patience: int = 5  # validations without a BLEU gain; 0 disables
    # validation
    val_every_steps: int = 200  # 0 = only at the end of each epoch
    val_every_epoch: bool = False  # also validate at the end of each epoch
    val_subset: int = 0  # first N valid pairs; 0 = the whole split
    val_max_tokens: int = 8192  # padded source+target tokens per batch of the validation loss
    val_beam_size: int = 1  # validation decoding: decode.* with this beam (1 = greedy, fast)
    # word links of the valid split for the AER at each validation (attnmt.train.valid_links):
    # auto (the corpus' gold, else its cached silver links, else none) | none | a Pharaoh file
    valid_alignments: str = "auto"
    num_heatmaps: int = 2  # fixed validation sentences drawn as attention heatmaps
    heatmaps_every: int = 5  # draw them at the 1st, (1+n)th, ... validation; 0 = never
    num_samples: int = 3  # source / reference / hypothesis text samples
    # checkpoints and logging
    keep_best: int = 3  # k best checkpoints by validation BLEU
    # the best checkpoint as of each of these training minutes, kept (attnmt.train.best_at)
    keep_best_at_minutes: list[float] = field(
        default_factory=list, metadata=within(0, MINUTES_PER_YEAR, lo_open=True)
    )
    average_best: bool = False  # at the end: average the k best, keep it if it validates better
    log_every_steps: int = 50
    progress_bar: bool = True  # shown only on a TTY and on rank 0
    # final test decoding with the best checkpoint, as the decode group says
    test: bool = True
    test_ensemble: int = (
        1  # k > 1: decode the test split with the k best (best.json) as one ensemble
    )
    # guided alignment: attention trained towards word links (off by default)
    guided_alignment: GuidedAlignmentConfig = field(default_factory=GuidedAlignmentConfig)

    def check_best_at(self, prefix: str = "trainer") -> None:
        """``keep_best_at_minutes``: marks > 0, and a best checkpoint to keep at them."""
        bad = [m for m in self.keep_best_at_minutes if not 0 < m < math.inf]
        if bad:
            raise ConfigError(
                f"{prefix}.keep_best_at_minutes: each mark is a minute of training > 0, "
                f"got {bad[0]}"
            )
        if self.keep_best_at_minutes and self.keep_best < 1:
            raise ConfigError(
                f"{prefix}.keep_best_at_minutes needs best checkpoints to keep: set "
                f"{prefix}.keep_best >= 1 (now {self.keep_best}) or keep_best_at_minutes=[]"
            )

    def check(self, prefix: str = "trainer") -> None:
        """Value checks that types cannot express."""
        self.guided_alignment.check(f"{prefix}.guided_alignment")
        # the float settings' ranges (within(...) above) are checked by attnmt.schema.parse
        positive = (
            "max_tokens",
            "accum_steps",
            "val_max_tokens",
            "val_beam_size",
            "log_every_steps",
            "plateau_patience",
            "max_bad_updates",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"{prefix}.{name} must be > 0, got {getattr(self, name)}")
        non_negative = (
            "warmup_steps",
            "max_steps",
            "max_epochs",
            "bucket_size",
            "early_stopping_patience",
            "val_every_steps",
            "val_subset",
            "num_heatmaps",
            "heatmaps_every",
            "num_samples",
            "keep_best",
        )
        check_beam(f"{prefix}.val_beam_size", self.val_beam_size)
        if self.test_ensemble < 1:
            raise ConfigError(
                f"{prefix}.test_ensemble must be >= 1 (1: the best checkpoint alone), "
                f"got {self.test_ensemble}"
            )
        if self.test_ensemble > max(self.keep_best, 1):
            raise ConfigError(
                f"{prefix}.test_ensemble={self.test_ensemble} needs as many kept checkpoints; "
                f"raise {prefix}.keep_best (now {self.keep_best}) to at least {self.test_ensemble}"
            )
        self.check_best_at(prefix)
        for name in non_negative:
            if getattr(self, name) < 0:
                raise ConfigError(f"{prefix}.{name} must be >= 0, got {getattr(self, name)}")
        if self.precision_probe not in PRECISION_PROBE_MODES:
            raise ConfigError(
                f"{prefix}.precision_probe must be one of {' | '.join(PRECISION_PROBE_MODES)}, "
                f"got {self.precision_probe!r}"
            )
        if len(self.betas) != 2:
            raise ConfigError(f"{prefix}.betas must be two numbers in [0, 1), got {self.betas}")
