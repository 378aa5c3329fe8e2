"""One guard for every output path a user names to a command (``--out``, ``--output``,
``out=``): :func:`check_output` for a file, :func:`check_output_dir` for a folder.

Before anything is computed, a path is refused, with one line naming it and what to do,
when writing it would destroy what another tool relies on:

* a run folder's files (:class:`~attnmt.run_dir.RunDir`: a folder holding ``checkpoints/``,
  ``.hydra/``, ``summary.json`` or ``metrics.jsonl``): a command whose output belongs to
  no run may not write inside one at all; one whose output may sit in a run
  (:attr:`OutputKind.in_runs`: an averaged checkpoint, snapshots) never over the run's own
  files: its record and logs, ``last.pt``, ``best.json`` and the checkpoints it lists, a
  name the trainer writes;
* a checkpoint file (``.pt``/``.pth``, or torch's zip format) of another kind of output;
* an existing file in a prepared corpus' cache (a folder holding ``counts.json`` and
  ``meta.json``, as attnmt.data.corpora writes it): its sentences and gold alignments;
* an existing file that is not the command's own kind of output (:attr:`OutputKind.own`),
  unless the command has an overwrite flag and the user passed it; with such a flag, an
  existing file of its own kind needs it too.

``--force`` never lifts the first three. The guard reads nothing but names, folder entries,
a best.json and a file's first bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from attnmt.errors import ConfigError
from attnmt.run_dir import BEST_JSON, CHECKPOINTS, HYDRA, LAST, LOCK, RunDir

CORPUS_CACHE_MARKERS = ("counts.json", "meta.json")
"""What makes a folder a prepared corpus' cache (attnmt.data.corpora writes both)."""

RUN_RECORD = ("metrics.jsonl", "summary.json")
"""Files that make a folder a run's as well as ``checkpoints/`` and ``.hydra/``."""

RUN_FILES = (*RUN_RECORD, "train.log", LOCK, "results.png")
"""The files of a run folder's top level that the run writes."""

RUN_FOLDERS = (CHECKPOINTS, HYDRA, "hyps", "eval")
"""The folders of a run that the run (or evaluate.py) writes."""

ZIP_MAGIC = b"PK\x03\x04"  # torch.save's format


def _never(path: Path) -> bool:
    return False


@dataclass(frozen=True)
class OutputKind:
    """What a command writes, as the guard needs to know it."""

    what: str  # "silver alignments", "an averaged checkpoint": said in refusals
    option: str  # how the user names the path: "--out", "--output", "out="
    example: str  # a file or folder name to suggest: "silver.align"
    own: Callable[[Path], bool] = _never  # an existing file this command wrote before
    force: str | None = None  # the command's overwrite flag, if it has one: "--force"
    in_runs: bool = False  # may lie in a run folder (never over the run's own files)


def is_checkpoint(path: Path) -> bool:
    """Whether the regular file ``path`` is (named as) a checkpoint: ``.pt``/``.pth``, or
    torch's zip format whatever its name."""
    if path.suffix in (".pt", ".pth"):
        return True
    try:
        with path.open("rb") as f:
            return f.read(4) == ZIP_MAGIC
    except OSError:
        return False


def _is_run(folder: Path) -> bool:
    return RunDir.is_run(folder) or any((folder / name).is_file() for name in RUN_RECORD)


def run_of(path: Path) -> Path | None:
    """The run folder that is ``path`` or holds it (``path`` resolved), else None."""
    real = path.resolve()
    return next((p for p in (real, *real.parents) if _is_run(p)), None)


def corpus_cache_of(path: Path) -> Path | None:
    """The prepared corpus cache that is ``path`` or holds it, else None."""
    real = path.resolve()
    return next(
        (p for p in (real, *real.parents) if all((p / m).is_file() for m in CORPUS_CACHE_MARKERS)),
        None,
    )


def _is_checkpoint_dir(folder: Path) -> bool:
    """A run's checkpoints folder, or one that looks like it (a copied one)."""
    return folder.name == CHECKPOINTS or any((folder / n).is_file() for n in (BEST_JSON, LAST))


def listed(checkpoints: Path) -> list[str]:
    """The file names ``checkpoints/best.json`` lists (all of its ``"file"`` values, even of
    a best.json that is otherwise malformed)."""
    try:
        text = (checkpoints / BEST_JSON).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    try:
        entries = json.loads(text)
        if isinstance(entries, list):
            return [str(e["file"]) for e in entries if isinstance(e, dict) and "file" in e]
    except ValueError:
        pass
    return re.findall(r'"file"\s*:\s*"([^"]+)"', text)


def _run_owns(real: Path, run: Path | None) -> str | None:
    """Why the file ``real`` belongs to the run ``run`` (or to a checkpoints folder), or
    None when the run does not use it."""
    folder = real.parent
    if _is_checkpoint_dir(folder):
        if real.name == LAST:
            return "is the run's last.pt, the training state resume= continues from"
        if real.name == BEST_JSON:
            return "is the run's best.json, its k best checkpoints"
        if real.name in listed(folder):
            return f"is listed in {folder / BEST_JSON}, which evaluate.py and ensembles read"
        if RunDir.trainer_writes(real.name):
            return "is named like the run's own checkpoints, which resume= would take it for"
    if run is None:
        return None
    rel = real.relative_to(run).parts
    if (len(rel) == 1 and (rel[0] in RUN_FILES or rel[0].startswith("events.out.tfevents"))) or (
        len(rel) > 1 and rel[0] in (HYDRA, "hyps", "eval")
    ):
        return f"is part of the record of the run {run}, which resume= and evaluate.py read"
    return None


def _refuse(kind: OutputKind, path: Path, why: str, advice: str) -> ConfigError:
    named = f"{kind.option}{path}" if kind.option.endswith("=") else f"{kind.option} {path}"
    return ConfigError(f"{named} {why}; {advice} (nothing was written)")


def check_output(path: str | Path, kind: OutputKind, force: bool = False) -> None:
    """ConfigError naming ``path`` and what to do when writing the file ``path`` as
    ``kind`` could destroy something (the module's rules); nothing is written."""
    path = Path(path)
    real = path.resolve()
    elsewhere = f"choose another name, e.g. {kind.example}"
    if path.is_dir():
        raise _refuse(kind, path, "is a directory", f"name the file, e.g. {path / kind.example}")
    if path.exists() and not real.is_file():
        raise _refuse(kind, path, "is not a regular file", elsewhere)
    run = run_of(real.parent)
    if run is not None and not kind.in_runs:
        raise _refuse(
            kind,
            path,
            f"lies inside the run directory {run}, whose checkpoints and record it could "
            f"replace; {kind.what} belong outside runs",
            f"choose a path outside it, e.g. {run.parent / kind.example}",
        )
    owned = _run_owns(real, run)
    if owned is not None:
        where = run.parent if run is not None else real.parent.parent
        raise _refuse(kind, path, owned, f"choose another name, e.g. {where / kind.example}")
    if not path.exists():
        return
    cache = corpus_cache_of(real.parent)
    own = kind.own(real)
    if cache is not None and not own:
        raise _refuse(
            kind,
            path,
            f"is a file of the prepared corpus {cache} (its sentences or gold alignments)",
            f"write {kind.what} elsewhere, e.g. {cache / kind.example}",
        )
    if is_checkpoint(real) and not own:
        raise _refuse(kind, path, f"is a checkpoint file, not {kind.what}", elsewhere)
    if kind.force is not None:
        if not force:
            raise _refuse(kind, path, "exists", f"pass {kind.force} to replace it, or {elsewhere}")
        return
    if not own:
        raise _refuse(
            kind,
            path,
            f"exists and is not {kind.what}",
            f"{elsewhere}, or remove it first if it is to be replaced",
        )


def check_output_dir(path: str | Path, kind: OutputKind, replaces_whole: bool = False) -> None:
    """ConfigError naming ``path`` when the folder ``path`` may not receive ``kind``'s
    files: a file (a checkpoint), a run folder or one of a run's own folders (any folder of
    a run unless ``kind.in_runs``), a prepared corpus' cache or a folder in it, and, when
    the command replaces the folder whole (``replaces_whole``), one holding a run or a
    checkpoint. Which files in it may be replaced is the command's to check
    (:func:`check_output` per file)."""
    path = Path(path)
    real = path.resolve()
    if path.exists() and not path.is_dir():
        why = "is a checkpoint file" if real.is_file() and is_checkpoint(real) else "is a file"
        raise _refuse(kind, path, why, f"name a new folder, e.g. {kind.example}")
    run = run_of(real)
    if run is not None:
        rel = real.relative_to(run).parts
        if not kind.in_runs or not rel or rel[0] in RUN_FOLDERS:
            raise _refuse(
                kind,
                path,
                f"is or is inside the run directory {run}, whose checkpoints and logs it "
                "could replace",
                f"choose a new folder outside it, e.g. {kind.example}",
            )
    cache = corpus_cache_of(real)
    if cache is not None:
        raise _refuse(
            kind,
            path,
            f"is or is inside the prepared corpus {cache}",
            f"choose a new folder outside it, e.g. {kind.example}",
        )
    if replaces_whole and path.is_dir():
        held = next(
            (p for p in real.rglob("*") if (p.is_file() and is_checkpoint(p)) or _is_run(p)), None
        )
        if held is not None:
            raise _refuse(
                kind,
                path,
                f"holds {held}; {kind.what} replace the folder whole and would delete it",
                f"choose a new folder, e.g. {kind.example}",
            )
