"""A run's test outputs, kept beside its ledger record for the tables' paired bootstraps
(experiments/comparison_stats.py ``paired_bootstrap``).

- :func:`keep_hypotheses`: the run's ``hyps/test.txt``, xz-compressed at
  ``<ledger>/<stem>.test.txt.xz`` (the record's ``extra["hypotheses"]`` names it; every table's
  runs since issue 36, experiments/results_run.py ``record_extras``);
- :func:`read_hypotheses`, :func:`kept_lines`: those lines back;
- :func:`references`: the test references of a corpus, prepared as train.py prepares it.
"""

from __future__ import annotations

import lzma
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attnmt.atomic import atomic_path
from attnmt.errors import AttnmtError
from experiments.ledger import Record


class CorpusUnavailable(AttnmtError):
    """A corpus whose kept test outputs a table scores does not prepare on this machine."""


def keep_hypotheses(run: Path, target: Path) -> Path | None:
    """``run``'s hyps/test.txt, xz-compressed at ``target`` (atomically); None without one."""
    source = run / "hyps" / "test.txt"
    if not source.is_file():
        return None
    with atomic_path(target) as tmp:
        Path(tmp).write_bytes(lzma.compress(source.read_bytes()))
    return target


def read_hypotheses(path: Path) -> list[str]:
    """The lines kept by :func:`keep_hypotheses`."""
    return lzma.decompress(path.read_bytes()).decode("utf-8").splitlines()


def kept_lines(record: Record, ledger: Path, sentences: int) -> list[str] | None:
    """The test hypotheses kept for ``record`` under ``ledger``; None when it has none (records
    from before outputs were kept), the file is gone, or it does not hold ``sentences`` lines."""
    name = record.extra.get("hypotheses")
    if not isinstance(name, str) or not (ledger / name).is_file():
        return None
    lines = read_hypotheses(ledger / name)
    return lines if len(lines) == sentences else None


def references(data: Mapping[str, Any] | None, root: Path) -> list[str]:
    """The test references of the corpus the ``data`` settings name (prepared under
    ``root``/data, from the cache when it is there); [] when they name no corpus; raises
    :class:`CorpusUnavailable` when the named corpus does not prepare here."""
    return test_pairs(data, root)[1]


def test_pairs(data: Mapping[str, Any] | None, root: Path) -> tuple[list[str], list[str]]:
    """(sources, references) of the test split of the corpus the ``data`` settings name,
    as :func:`references` prepares it; ([], []) when they name none. A named corpus that does
    not prepare raises :class:`CorpusUnavailable`: a page generated without its test split
    would silently drop the bootstraps that need it."""
    from attnmt.data.corpora import prepare_corpus
    from attnmt.data.textio import read_lines

    if not isinstance(data, Mapping) or "name" not in data:
        return [], []
    try:
        corpus = prepare_corpus({**data, "root": str(root / "data")})
        src, tgt = corpus.files("test")
        return read_lines(src), read_lines(tgt)
    except (AttnmtError, OSError) as e:
        name = data["name"]
        raise CorpusUnavailable(
            f"the test split of corpus {name!r} does not prepare under {root / 'data'}: {e}\n"
            f"The tables' paired bootstraps need its references: prepare it (`python "
            f"scripts/prepare_data.py data={name}`; `make setup` installs the packages the "
            f"corpora need), then generate the page again. Nothing was written."
        ) from e
