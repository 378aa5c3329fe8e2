"""What every recipe returns, and the split rule shared by the real corpora."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from attnmt.data.config import SplitConfig

Pair = tuple[str, str]
SPLITS = ("train", "valid", "test")


@dataclass
class Built:
    """A recipe's output.

    splits:  split name -> pairs, each pair in the recipe's language order
    removed: filter description -> number of pairs (or entries) it removed
    gold:    split name -> one gold alignment line per pair of that split, in order
             (Pharaoh, source first: attnmt.data.gold); empty for corpora without gold
    """

    splits: dict[str, list[Pair]]
    removed: Counter[str] = field(default_factory=Counter)
    gold: dict[str, list[str]] = field(default_factory=dict)


def hash_fraction(text: str) -> float:
    """A stable number in [0, 1) from sha256(text): the same on every machine and run."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") / 2.0**64


def split_by_hash(pairs: Iterable[Pair], key_side: int, fractions: SplitConfig) -> dict:
    """Assign each pair to valid/test/train by ``hash_fraction(pair[key_side])``.

    u < valid -> valid; u < valid + test -> test; else train. Keying on one side (the
    English one) keeps every pair with the same English sentence in one split, and
    makes the split identical for both translation directions.
    """
    out: dict[str, list[Pair]] = {name: [] for name in SPLITS}
    for pair in pairs:
        u = hash_fraction(pair[key_side])
        if u < fractions.valid:
            out["valid"].append(pair)
        elif u < fractions.valid + fractions.test:
            out["test"].append(pair)
        else:
            out["train"].append(pair)
    return out


def dedupe(pairs: Iterable[Pair], removed: Counter[str]) -> list[Pair]:
    """Keep the first occurrence of each pair, in order; count the duplicates."""
    seen: set[Pair] = set()
    out: list[Pair] = []
    for pair in pairs:
        if pair in seen:
            removed["duplicate pairs"] += 1
        else:
            seen.add(pair)
            out.append(pair)
    return out
