"""Schema of the ``decode`` config group (``configs/decode/default.yaml``).

One group for every path from sentences to hypotheses: the trainer's validation
(``trainer.val_beam_size`` replaces ``beam`` there, greedy by default for speed) and final
test decoding, ``evaluate.py`` and ``translate.py`` (where the keys sit at the top level:
``beam=5``). A new decoding setting is one field here and one line in the YAML file.

Source-length policy: a source line longer than ``max_src_len`` SentencePiece pieces is
cut to its first ``max_src_len`` pieces before decoding, with one warning per call naming
the lines cut; every line still gets exactly one translation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from attnmt.errors import ConfigError
from attnmt.schema import within

MAX_BEAM = 16
"""The largest beam any decoding path accepts (serve.py's default ``max_beam``): search
keeps ``beam × vocabulary`` candidates per step, so beam 100000 took 53 s and 4.3 GB for one
line, and beams past 5–10 rarely score better."""


def check_beam(key: str, beam: int) -> None:
    """ConfigError naming ``key`` unless 1 <= ``beam`` <= :data:`MAX_BEAM`."""
    if beam < 1:
        raise ConfigError(f"{key} must be >= 1, got {beam}")
    if beam > MAX_BEAM:
        raise ConfigError(
            f"{key}={beam} is too large: beams are at most {MAX_BEAM} (search time and memory "
            f"grow with the beam; 4 to 8 is usual), e.g. {key}=5"
        )


MAX_ALPHA = 10
"""The largest length penalty ``alpha`` (config, command line and serve's requests):
((5 + |Y|) / 6)^alpha already weighs a 100-piece hypothesis 10^12 times a 1-piece one."""

MAX_PIECES = 100_000
"""The most pieces a length setting may name (no model holds more positions)."""


@dataclass
class DecodeConfig:
    """How hypotheses are searched for (defaults = configs/decode/default.yaml)."""

    beam: int = 1  # beam size; 1 = greedy search (beam 5 scored lower on Ding valid)
    # GNMT length penalty ((5 + |Y|) / 6)^alpha (beam search only); serve's requests too
    alpha: float = field(default=0.6, metadata=within(0, MAX_ALPHA))
    # a hypothesis holds at most a·|x| + b pieces, and never more than the model's hard cap
    # (Seq2Seq.max_target_length: Transformer max_positions - 1, RNNs 1024; warned)
    max_len_a: float = field(default=1.5, metadata=within(0, 10))
    max_len_b: int = field(default=10, metadata=within(0, MAX_PIECES))
    # source pieces decoded per line; longer lines are cut (warned)
    max_src_len: int = field(default=250, metadata=within(1, MAX_PIECES))
    # padded source pieces × beam per batch: the rows beam search holds (decode_batches)
    batch_tokens: int = field(default=4000, metadata=within(1, 10_000_000))

    def check(self, prefix: str = "decode") -> None:
        """Value checks that types and ranges cannot express; ConfigError naming the key."""
        p = f"{prefix}." if prefix else ""
        check_beam(f"{p}beam", self.beam)
        # the numbers' ranges (within(...) above) are checked by attnmt.schema.parse
        if self.max_len_a == 0 and self.max_len_b == 0:
            raise ConfigError(
                f"{p}max_len_a and {p}max_len_b are both 0: hypotheses could hold no piece; "
                f"set {p}max_len_b >= 1 or {p}max_len_a > 0"
            )
