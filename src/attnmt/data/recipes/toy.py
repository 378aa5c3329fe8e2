"""toy_reverse / toy_copy: seeded synthetic tasks for smoke tests and quick runs.

A source sentence is ``L`` space-separated symbols from the first ``n_symbols``
lowercase letters, ``L`` uniform in [min_symbols, max_symbols]; the target is the
same symbols reversed (toy_reverse) or unchanged (toy_copy). Every source sentence is
unique across train/valid/test, so valid and test measure generalisation.
"""

from __future__ import annotations

import logging
import random
import string
from collections.abc import Callable
from pathlib import Path

from attnmt.data.config import DataConfig, ToyConfig
from attnmt.data.recipes.common import SPLITS, Built, Pair
from attnmt.errors import ConfigError

Task = Callable[[list[str]], list[str]]


def _capacity(toy: ToyConfig) -> int:
    return sum(toy.n_symbols**n for n in range(toy.min_symbols, toy.max_symbols + 1))


def generate(toy: ToyConfig, task: Task) -> dict[str, list[Pair]]:
    """Split name -> (source, task(source)) pairs, deterministic in ``toy.seed``."""
    sizes = {name: getattr(toy, name) for name in SPLITS}
    total = sum(sizes.values())
    if total > _capacity(toy):
        raise ConfigError(
            f"data.toy asks for {total} distinct sentences but only {_capacity(toy)} exist "
            f"with {toy.n_symbols} symbols and lengths {toy.min_symbols}..{toy.max_symbols}; "
            f"raise data.toy.n_symbols or data.toy.max_symbols"
        )
    rng = random.Random(toy.seed)
    alphabet = list(string.ascii_lowercase[: toy.n_symbols])
    seen: set[tuple[str, ...]] = set()
    out: dict[str, list[Pair]] = {}
    for name in SPLITS:
        pairs: list[Pair] = []
        attempts = 0
        while len(pairs) < sizes[name]:
            attempts += 1
            if attempts > 200 * max(total, 1):
                raise ConfigError(
                    f"data.toy: could not draw {total} distinct sentences; "
                    f"raise data.toy.n_symbols or data.toy.max_symbols"
                )
            length = rng.randint(toy.min_symbols, toy.max_symbols)
            symbols = tuple(rng.choice(alphabet) for _ in range(length))
            if symbols in seen:
                continue
            seen.add(symbols)
            pairs.append((" ".join(symbols), " ".join(task(list(symbols)))))
        out[name] = pairs
    return out


TASKS: dict[str, Task] = {
    "toy_reverse": lambda symbols: symbols[::-1],
    "toy_copy": lambda symbols: symbols,
}


def make_builder(task_name: str) -> Callable[[DataConfig, Path, logging.Logger], Built]:
    """The recipe builder of one toy task (no raw files, nothing to download)."""
    task = TASKS[task_name]

    def build(cfg: DataConfig, raw: Path, log: logging.Logger) -> Built:
        return Built(generate(cfg.toy, task))

    build.__doc__ = f"Generate the {task_name} task from data.toy."
    return build
