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

from dataclasses import dataclass

from attnmt.errors import ConfigError

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


@dataclass
class DecodeConfig:
    """How hypotheses are searched for (defaults = configs/decode/default.yaml)."""

    beam: int = 1  # beam size; 1 = greedy search (beam 5 scored lower on Ding valid)
    alpha: float = 0.6  # GNMT length penalty ((5 + |Y|) / 6)^alpha (beam search only)
    # a hypothesis holds at most a·|x| + b pieces, and never more than the model's hard cap
    # (Seq2Seq.max_target_length: Transformer max_positions - 1, RNNs 1024; warned)
    max_len_a: float = 1.5
    max_len_b: int = 10
    max_src_len: int = 250  # source pieces decoded per line; longer lines are cut (warned)
    batch_tokens: int = 4000  # padded source pieces per batch (beams multiply the rows)

    def check(self, prefix: str = "decode") -> None:
        """Value checks that types cannot express; ConfigError naming the key."""
        p = f"{prefix}." if prefix else ""
        check_beam(f"{p}beam", self.beam)
        for name in ("batch_tokens", "max_src_len"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{p}{name} must be >= 1, got {getattr(self, name)}")
        for name in ("alpha", "max_len_a", "max_len_b"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{p}{name} must be >= 0, got {getattr(self, name)}")
        if self.max_len_a == 0 and self.max_len_b == 0:
            raise ConfigError(
                f"{p}max_len_a and {p}max_len_b are both 0: hypotheses could hold no piece; "
                f"set {p}max_len_b >= 1 or {p}max_len_a > 0"
            )
