"""Point the ding_de_en recipe at a tiny shipped pair file made here from Ding-format text."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from attnmt.data import pairfile
from attnmt.data.recipes import ding


def ship_ding(path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Clean ``text`` (dictionary lines) as the rebuild does, write the pair file at ``path``
    and make the recipe read it (its sha256 pinned) instead of the real shipped file."""
    removed: Counter[str] = Counter()
    data = pairfile.dumps(ding.parse_ding(text.splitlines(), removed), removed, ["test"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    monkeypatch.setattr(ding, "SHIPPED", path)
    monkeypatch.setattr(ding, "SHIPPED_SHA256", pairfile.sha256_bytes(data))
    return path
