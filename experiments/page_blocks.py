"""A hand-written page with generated blocks, each between ``<!-- generated: KEY -->`` and
``<!-- end -->`` (docs/results.md, docs/attention.md): :func:`fill` rewrites the blocks."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from attnmt.errors import DataError

BLOCK = re.compile(r"<!-- generated: (.+?) -->\n.*?<!-- end -->", re.DOTALL)


def fill(page: str, blocks: Mapping[str, Sequence[str]], where: Path) -> str:
    """``page`` with each block's lines replaced by ``blocks[KEY]``; DataError naming the
    blocks the page (the file ``where``) lacks, repeats or holds unknown."""
    found = BLOCK.findall(page)
    wrong = sorted(set(blocks) ^ set(found)) + sorted({k for k in found if found.count(k) > 1})
    if wrong:
        raise DataError(
            f"{where}: generated blocks missing, repeated or unknown: {', '.join(wrong)} "
            f"(it holds each of {', '.join(blocks)} once)"
        )
    body = {key: "\n".join(lines).strip("\n") for key, lines in blocks.items()}
    return BLOCK.sub(lambda m: f"<!-- generated: {m[1]} -->\n\n{body[m[1]]}\n\n<!-- end -->", page)
