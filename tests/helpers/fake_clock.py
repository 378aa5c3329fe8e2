"""A clock the test moves, for the trainer's ``clock=`` (its training minutes)."""

from __future__ import annotations


class FakeClock:
    """Monotonic seconds that stand still until :meth:`advance` moves them: a run reading
    it trains exactly the minutes the test says (validation, checkpoints: no time)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += 60.0 * minutes
