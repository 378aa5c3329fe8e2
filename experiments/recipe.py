"""The small-data recipe's comparisons (issue 34, item 2): the plan, the runner, the records.

    python -m experiments.recipe run --stage compare --hours 6 [--minutes 45] [--dry-run]
    python -m experiments.recipe run --stage corpora --hours 8 [--only default-bible]
    python -m experiments.recipe run --stage seeds --hours 5
    python -m experiments.recipe table [--out docs/recipe.md]    # + docs/recipe_minutes.png

Three stages, their seeds fixed here in advance (:func:`plan`):

``compare``
    ding_de_en, the valid split decides: ``experiment=small_data`` as shipped against one
    change each (:data:`CHANGES`: 2,000 pieces instead of the 4,000 that
    ``vocab_size=auto`` gives, 4+4 layers, d_model 384 with d_ff 1536, dropout 0.2,
    2,048-token batches), ``--minutes`` (45) of training each, seed 1. Subword sampling is
    compared over two hours instead (the corpora stage): off learns faster for the first
    20-odd minutes, and whether it pays later is the question. Early stopping is off
    (``trainer.early_stopping_patience=0``: every run uses its minutes) and so is the test
    decode (``trainer.test=false``: the test split plays no part in the choice).
``corpora``
    the recipe against the default (no experiment; ``trainer.early_stopping_patience=0`` so
    it trains the whole two hours) on ding_de_en, bible_en_fr and the es→en custom example
    (``scripts/make_custom_example.py``, made once under outputs/custom/es_en_nt), 120
    minutes each, seed 1; on ding_de_en also the recipe with subword sampling off
    (:data:`NO_SAMPLING`) and the recipe on the larger Ding (:data:`LOOSE`: issue 34 item 1's
    two-hour run; ``scripts/rebuild_ding.py --filter loose``, made once). Test BLEU/chrF at
    30 and 60 minutes: the best checkpoint validated by that training minute, which the
    trainer keeps (``trainer.keep_best_at_minutes=[30,60]``:
    ``RUN/checkpoints/best-at-<m>min.pt``, listed in its summary's ``best_at``; a mark it
    missed has no test) and evaluate.py decodes afterwards with the run's own ``decode``
    settings; at 120 minutes: the run's own final test.
``seeds``
    the recipe on ding_de_en at seeds 1, 2 and 3 at the two-hour mark. Seed 1 is the corpora
    stage's run (reused, not rerun): :data:`SEED_UPDATES` updates in its 120 minutes, fp32.
    Seeds 2 and 3 train exactly that many updates in fp32 (``trainer.max_steps``, no time
    budget: :attr:`PlannedRun.steps`), so a seed's run is the same on every CPU kind and a
    session on any machine can add one. Then the three seeds' best checkpoints decoded as one
    ensemble on test (``python evaluate.py ckpt=[R1,R2,R3]``): its members are fixed-update
    runs, seed 1's the corpora run's twin (the same settings and update count, recorded like
    the others), and a member recorded on another machine, whose folder is not here, is
    trained again here first (its record kept as it is; the ensemble's record names each
    member's own test: :meth:`Runner.execute_ensemble`).

One run at a time, each with ``--threads`` (2) threads: time-budgeted runs must not share
cores. A run trains in outputs/recipe/<stage>/<stem>/ (its log beside it) and gets its
record results/recipe/<stage>/<stem>.json (:func:`run_record`), written atomically once the
run and its decodes are done and never rewritten; a planned run whose record exists is
skipped, so the same command goes on where the last one stopped.

**A run folder cut off earlier is resumed with its budget.** ``trainer.time_budget_min``
is the run's own training minutes across resumes (the checkpoint carries them), so the
runner resumes with the whole budget and its marks, and the run trains what is left of
it (:func:`trained` reads how much is done, for the hours rule); one whose minutes
already reach it stops at once (final validation, averaging, test). A folder without a
readable checkpoint is moved aside and the run starts afresh.

**One CPU kind a comparison.** Runs are compared at equal minutes, and minutes buy
different numbers of updates on different CPUs (vendor, family, model, SIMD flags, torch:
:func:`cpu_kind`). So what is compared is measured on one kind: in the compare stage each
change and the recipe run it is compared with (on a kind other than the recipe record's,
the runner runs the recipe once more first, its stem ending with the kind,
``recipe-ding_de_en-seed1-45min-cpu25.1``: :func:`compare_baseline`); in the corpora stage
the runs on one corpus (the recipe against the default, ding_de_en's variants against its
recipe run). The seeds stage's fixed-update runs are held to no kind: their updates and
precision do not depend on it. The runner does not start a run whose comparison was
measured on another kind (:func:`kind_refusal`: the others still start; exit 2 when none
can), and does not resume a time-budgeted run's folder that another kind trained in (it
is moved aside, ``<stem>.other-cpu-<time>``, and the run starts afresh); the page marks a
difference between records of different kinds as not comparable rather than give it.
``--only TEXT`` runs only the entries whose stem contains TEXT (in the compare stage with
the recipe run its changes need).

**The hours rule.** ``--hours H`` (0: no limit): a run starts only if its training minutes
left plus its overhead (data preparation, validation past the budget, averaging, test
decoding, the decodes of the checkpoints kept at its marks) fit in what is left of H. The
overhead is the largest (wall minutes - training minutes) among the stage's records of runs
trained start to end by the invocation that recorded them (training minutes: the budget, or
the minute of the last validation of a run that stopped early), or :data:`OVERHEAD_MIN`
before the stage has one;
a fixed-update run's training minutes are those of its updates left at its own pace so far
(its checkpoint's minutes and step), or before it has one, those its updates took seed 1
(120 for :data:`SEED_UPDATES`), which a slower CPU exceeds.
No run starts while another process on this machine trains one of the stage's runs (a
second runner, or a train.py whose runner was killed): they would share the cores. The
runner exits 0 when the stage is done or the next run does not fit (one line says what is
left), 1 when a run failed (the others still ran), 2 when the CPU kind refuses every run
left, 130 when SIGINT/SIGTERM stopped it (passed on to train.py, which saves last.pt: the
next invocation resumes it; no child starts after the signal). Nothing is committed: commit
each record as it comes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from omegaconf import OmegaConf

from attnmt import run_curves
from attnmt.atomic import write_json
from attnmt.checkpoint import load_first_readable, resume_candidates
from attnmt.errors import AttnmtError, CheckpointError
from attnmt.machine import Machine, this_machine
from attnmt.run_dir import RunDir
from attnmt.run_record import RecordError, read_record
from attnmt.run_summary import Summary
from attnmt.train.run_lock import live_owner
from experiments import die_with_parent
from experiments.variant_runs import Variant, provenance_fields, read_all, read_one, scores_entry

ROOT = Path(__file__).resolve().parents[1]
RECORDS = Path("results") / "recipe"
RUNS = Path("outputs") / "recipe"
STAGES = ("compare", "corpora", "seeds")
THREADS = 2
COMPARE_MINUTES = 45.0
COMPARE_MARKS = (15.0, 30.0, 45.0)
"""The compare table's columns: the best valid BLEU by these training minutes."""
CORPORA_MINUTES = 120.0
CORPORA_MARKS = (30.0, 60.0)
"""Test BLEU/chrF also at these minutes (the checkpoints the trainer kept at them); at
CORPORA_MINUTES from the final test."""
SEED = 1
SEEDS = (1, 2, 3)
SEED_UPDATES = 7_336
"""The seeds stage's runs' length, fixed: the updates the corpora stage's recipe run on
ding_de_en at seed 1 made in its 120 minutes (fp32 on an AMD EPYC 25/1, 2 threads:
results/recipe/corpora/recipe-ding_de_en-seed1-120min.json)."""
SEED_PRECISION = "fp32"
"""The seeds stage's precision, fixed (seed 1's: ``auto`` chose it on its AVX2-only CPU)."""
OVERHEAD_MIN = {"compare": 5.0, "corpora": 25.0, "seeds": 15.0}
"""Minutes beyond the budget a run takes before its stage has a record that measured it:
data preparation (bible_en_fr's wheel and tokenizer the first time), the final validation
and averaging, the test decode with beam 5 (bible's 1,594 verses are the longest), and in
the corpora stage two more beam-5 decodes of the checkpoints kept at its marks."""
ENSEMBLE_MIN = 10.0
"""The seeds' ensemble: three models decoding ding_de_en's 866 test pairs with beam 5."""

RECIPE = Variant("recipe", ("experiment=small_data",), "the recipe as shipped")
DEFAULT = Variant(
    "default", ("trainer.early_stopping_patience=0",), "the default (12-minute) settings"
)
CHANGES = (
    Variant("vocab2000", ("data.tokenizer.vocab_size=2000",), "2,000 pieces (auto: 4,000)"),
    Variant("layers4", ("model.enc_layers=4", "model.dec_layers=4"), "4+4 layers (3+3)"),
    Variant("d384", ("model.d_model=384", "model.d_ff=1536"), "d_model 384, d_ff 1536 (256, 1024)"),
    Variant("dropout0.2", ("model.dropout=0.2",), "dropout 0.2 (0.3)"),
    Variant("tokens2048", ("trainer.max_tokens=2048",), "2,048-token batches (1,024)"),
    Variant(
        "dropout0.2-tokens2048",
        ("model.dropout=0.2", "trainer.max_tokens=2048"),
        "dropout 0.2 and 2,048-token batches together",
    ),
)
"""The compare stage's changes, each on top of :data:`COMPARED` (a change's keys replace
its values)."""
COMPARED = Variant(
    RECIPE.name,
    (*RECIPE.overrides, "model.dropout=0.3", "trainer.max_tokens=1024"),
    "none: the recipe as measured here (dropout 0.3, 1,024-token batches)",
)
"""The compare stage's baseline: the recipe with the values its changes were measured
against, which small_data.yaml had until it took the stage's winners; pinned, so a run on
a new CPU kind measures what the records measured."""


def with_change(base: tuple[str, ...], change: tuple[str, ...]) -> tuple[str, ...]:
    """``base``'s overrides with those of keys that ``change`` sets replaced, in place
    (a key given twice is an error in Hydra); new keys of ``change`` at the end."""
    new = {o.split("=", 1)[0]: o for o in change}
    kept = tuple(new.pop(o.split("=", 1)[0], o) for o in base)
    return (*kept, *new.values())


NO_SAMPLING = Variant(
    "recipe-no-sampling",
    (*RECIPE.overrides, "data.tokenizer.sampling.enabled=false"),
    "the recipe with subword sampling off",
)
"""The corpora stage's second run on ding_de_en: sampling against none over two hours."""
LOOSE_FILE = "data/ding_loose/ding_de_en.tsv.xz"
"""The larger Ding (``scripts/rebuild_ding.py --filter loose``): the shipped valid and test
pairs, a train split of the looser filter."""
LOOSE = Variant(
    "recipe-loose",
    (*RECIPE.overrides, f"data.path={LOOSE_FILE}"),
    "the recipe trained on the larger Ding (the same valid and test pairs)",
)
"""The corpora stage's third run on ding_de_en: whether more pairs of the same dictionary
pay once the recipe has two hours (at the main table's 1,500 updates they did not)."""
COMPARE_COMMON = ("trainer.early_stopping_patience=0", "trainer.test=false")


@dataclass(frozen=True)
class Corpus:
    """A corpus of the plan: its name in stems and tables, the train.py overrides that
    select it."""

    name: str
    overrides: tuple[str, ...]


ES_EN_DIR = "outputs/custom/es_en_nt"
DING = Corpus("ding_de_en", ("data=ding_de_en",))
BIBLE = Corpus("bible_en_fr", ("data=bible_en_fr",))
ES_EN = Corpus(
    "es_en_nt",
    ("data=custom", f"data.path={ES_EN_DIR}", "data.src_lang=es", "data.tgt_lang=en"),
)
CORPORA = (DING, BIBLE, ES_EN)


@dataclass(frozen=True)
class DataBuild:
    """A ``data.path`` that planned runs read and a script writes, once, before the first
    of them starts: ``path`` relative to the runner's root, ``script`` in scripts/, its
    arguments before ``--out PATH``."""

    path: str
    script: str
    args: tuple[str, ...] = ()

    def built(self, root: Path) -> bool:
        """Whether ``root / path`` holds the data (a corpus file, or a folder of train.*)."""
        where = root / self.path
        return where.is_file() or any(where.glob("train.*"))

    def command(
        self, python: str = "python", scripts: Path = Path("scripts"), root: Path | None = None
    ) -> list[str]:
        """The command that writes it (``--out`` under ``root``; as it is without one)."""
        out = self.path if root is None else str(root / self.path)
        return [python, str(scripts / self.script), *self.args, "--out", out]


DATA_BUILDS = (
    DataBuild(ES_EN_DIR, "make_custom_example.py"),
    DataBuild(LOOSE_FILE, "rebuild_ding.py", ("--filter", "loose")),
)
"""The data that corpora-stage runs need and the runner makes (:func:`make_data`)."""


@dataclass(frozen=True)
class PlannedRun:
    """One training run: ``python train.py <overrides> seed=S trainer.time_budget_min=M``,
    or with ``steps``, ``... seed=S trainer.time_budget_min=0 trainer.max_steps=N
    trainer.precision=fp32`` (M: the minutes N updates took on seed 1's CPU).

    ``stage`` names the folders of its run and record (the corpora stage's for the seeds
    stage's reused seed-1 run); ``marks``: training minutes at which the trainer keeps the
    best checkpoint (``trainer.keep_best_at_minutes``), decoded on test as well (empty:
    none).
    """

    stage: str
    variant: str
    corpus: str
    seed: int
    minutes: float
    overrides: tuple[str, ...]
    marks: tuple[float, ...] = ()
    tag: str = ""
    """A CPU kind's (:func:`kind_tag`), which the stem ends with: set on the compare stage's
    recipe run on a second kind (the same settings, another run)."""
    steps: int = 0
    """Updates to train, on any CPU kind, in :data:`SEED_PRECISION` (0: ``minutes`` of
    training instead): the seeds stage's runs (:func:`seeds_run`)."""

    @property
    def length(self) -> str:
        """How long it trains, as its stem says it: ``120min`` or ``7336updates``."""
        return f"{self.steps}updates" if self.steps else f"{self.minutes:g}min"

    @property
    def stem(self) -> str:
        stem = f"{self.variant}-{self.corpus}-seed{self.seed}-{self.length}"
        return f"{stem}-{self.tag}" if self.tag else stem

    @property
    def test(self) -> bool:
        return "trainer.test=false" not in self.overrides

    def train_args(self) -> tuple[str, ...]:
        if self.steps:
            length = (
                "trainer.time_budget_min=0",
                f"trainer.max_steps={self.steps}",
                f"trainer.precision={SEED_PRECISION}",
            )
            return (*self.overrides, f"seed={self.seed}", *length)
        return (*self.overrides, *self.mark_args(), f"seed={self.seed}", self.budget_arg())

    def budget_arg(self) -> str:
        """``trainer.time_budget_min=M``: the run's training minutes in all, across resumes."""
        return f"trainer.time_budget_min={self.minutes:g}"

    def mark_args(self) -> tuple[str, ...]:
        """``trainer.keep_best_at_minutes=[m,...]`` when it has marks."""
        if not self.marks:
            return ()
        return ("trainer.keep_best_at_minutes=[" + ",".join(f"{m:g}" for m in self.marks) + "]",)

    def record_path(self, root: Path) -> Path:
        return root / RECORDS / self.stage / f"{self.stem}.json"

    def run_dir(self, root: Path) -> Path:
        return root / RUNS / self.stage / self.stem

    def command(self, root: Path = ROOT) -> str:
        """The train.py command line of a fresh start, as the docs show it."""
        where = shown(self.run_dir(root), root)
        return " ".join(["python train.py", *self.train_args(), f"hydra.run.dir={where}"])


@dataclass(frozen=True)
class PlannedEnsemble:
    """The members decoded on test as one ensemble (evaluate.py ckpt=[R1,R2,R3]: each run's
    first checkpoint in best.json, the one its own test used)."""

    stage: str
    members: tuple[PlannedRun, ...]

    @property
    def stem(self) -> str:
        first = self.members[0]
        seeds = "-".join(str(m.seed) for m in self.members)
        stem = f"ensemble-{first.variant}-{first.corpus}-seeds{seeds}-{first.length}"
        return f"{stem}-{first.tag}" if first.tag else stem

    def record_path(self, root: Path) -> Path:
        return root / RECORDS / self.stage / f"{self.stem}.json"

    def out_dir(self, root: Path) -> Path:
        return root / RUNS / self.stage / self.stem

    def command(self, root: Path = ROOT, decode: dict[str, Any] | None = None) -> str:
        """The evaluate.py command line (``decode``: the members' decode settings, which
        the runner reads from the first member's config)."""
        ckpts = ",".join(shown(m.run_dir(root), root) for m in self.members)
        out = shown(self.out_dir(root), root)
        settings = "".join(f" {k}={v}" for k, v in (decode or {}).items())
        return f"python evaluate.py ckpt=[{ckpts}] split=test{settings} out_dir={out}"


Entry = PlannedRun | PlannedEnsemble


def shown(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` where it lies inside it (records and docs stay
    machine-independent), else as given."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def settings(variant: Variant, corpus: Corpus, *more: str) -> tuple[str, ...]:
    """train.py's overrides: the experiment, the corpus, the variant's other keys, then
    ``device=cpu`` (the comparisons are of 2 CPU cores, also on a machine with a GPU)."""
    first = tuple(o for o in variant.overrides if o.startswith("experiment="))
    rest = tuple(o for o in variant.overrides if o not in first)
    return (*first, *corpus.overrides, *rest, *more, "device=cpu")


def corpora_run(variant: Variant, corpus: Corpus, seed: int = SEED) -> PlannedRun:
    """The corpora stage's run of ``variant`` on ``corpus``."""
    args = settings(variant, corpus)
    return PlannedRun(
        "corpora", variant.name, corpus.name, seed, CORPORA_MINUTES, args, CORPORA_MARKS
    )


def corpora_variants(corpus: Corpus) -> tuple[Variant, ...]:
    """The corpora stage's settings on ``corpus``: the recipe and the default, and on
    ding_de_en the recipe without subword sampling and on the larger Ding."""
    return (RECIPE, NO_SAMPLING, LOOSE, DEFAULT) if corpus == DING else (RECIPE, DEFAULT)


def corpora_runs() -> list[PlannedRun]:
    """The corpora stage's runs in the order they run."""
    return [corpora_run(v, c) for c in CORPORA for v in corpora_variants(c)]


def plan(stage: str, minutes: float = COMPARE_MINUTES) -> list[Entry]:
    """The stage's runs in the order they run (``minutes``: the compare stage's budget)."""
    if stage == "compare":
        return [
            PlannedRun(
                "compare",
                v.name,
                DING.name,
                SEED,
                minutes,
                settings(
                    Variant(v.name, with_change(COMPARED.overrides, v.overrides)),
                    DING,
                    *COMPARE_COMMON,
                ),
            )
            for v in (Variant(RECIPE.name, ()), *CHANGES)
        ]
    if stage == "corpora":
        return list(corpora_runs())
    if stage == "seeds":
        return seeds_plan().entries()
    raise ValueError(f"unknown stage {stage!r}; one of {', '.join(STAGES)}")


def seeds_run(seed: int) -> PlannedRun:
    """The seeds stage's run at ``seed``: the corpora stage's recipe run on ding_de_en, for
    :data:`SEED_UPDATES` updates instead of its minutes."""
    first = corpora_run(RECIPE, DING)
    return replace(first, stage="seeds", seed=seed, marks=(), steps=SEED_UPDATES)


@dataclass(frozen=True)
class SeedsPlan:
    """The seeds stage: seed 1 (the corpora stage's recipe run on ding_de_en, recorded
    there) and the ensemble of the fixed-update runs of every seed, seed 1's twin among them."""

    first: PlannedRun
    ensemble: PlannedEnsemble

    @property
    def others(self) -> list[PlannedRun]:
        """The fixed-update runs of the seeds other than the first's."""
        return [m for m in self.ensemble.members if m.seed != self.first.seed]

    @property
    def twins(self) -> list[PlannedRun]:
        """The first seed's fixed-update twin, trained for the ensemble."""
        return [m for m in self.ensemble.members if m.seed == self.first.seed]

    def entries(self) -> list[Entry]:
        """In the order they run: seed 1, the other seeds, seed 1's twin, the ensemble."""
        return [self.first, *self.others, *self.twins, self.ensemble]


def seeds_plan() -> SeedsPlan:
    """The seeds stage: seeds 2 and 3 (and seed 1's twin) train as many updates as seed 1's
    corpora-stage run made (:func:`seeds_run`)."""
    members = tuple(seeds_run(s) for s in SEEDS)
    return SeedsPlan(corpora_run(RECIPE, DING), PlannedEnsemble("seeds", members))


# --- the CPU kind of a comparison ----------------------------------------------------------


def cpu_kind(machine: Mapping[str, Any]) -> str:
    """What sets a CPU run's speed, from a record's ``machine`` (attnmt.machine's
    ``to_dict``): vendor, family/model, SIMD flags and torch (the threads are the runner's);
    ``Machine.describe("kind")``."""
    return Machine.from_dict(machine).describe("kind")


def machines_of(rec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The record and each of its train.py processes that names its machine."""
    return [rec, *(p for p in rec.get("processes") or [] if p.get("machine"))]


def record_kinds(rec: Mapping[str, Any]) -> set[str]:
    """The CPU kinds a run record's minutes were measured on (two or more: a run resumed on
    another kind, its minutes mixed); empty for a record that names no machine."""
    return {cpu_kind(m["machine"]) for m in machines_of(rec) if m.get("machine")}


def folder_kinds(folder: Path) -> set[str]:
    """The CPU kinds of the train.py processes that trained in run ``folder`` (its run
    record's start events); empty when it has none that reads."""
    try:
        starts = read_record(folder).of("start")
    except RecordError:
        return set()
    return {cpu_kind(e["machine"]) for e in starts if isinstance(e.get("machine"), dict)}


def kind_tag(machine: Mapping[str, Any]) -> str:
    """A CPU kind's short name in a stem, ``cpu<family>.<model>`` (e.g. ``cpu25.1``; x where
    the CPU does not say; ``Machine.describe("tag")``). Two kinds of one family and model
    (other flags or torch) share it: the second is refused rather than given a run of its
    own (:func:`kind_refusal`)."""
    return Machine.from_dict(machine).describe("tag")


def compare_baseline(root: Path, here: str, tag: str, minutes: float) -> PlannedRun:
    """The recipe run that the compare stage's changes measured on CPU kind ``here`` are
    compared with: the stage's own (plan("compare")[0]) unless its record was measured on
    another kind; then the recipe once more on this kind, its stem ending ``-<tag>``."""
    first = plan("compare", minutes)[0]
    assert isinstance(first, PlannedRun)
    path = first.record_path(root)
    if not path.is_file() or record_kinds(read_one(path)) <= {here}:  # none named: unknown
        return first
    return replace(first, tag=tag)


def stem_tag(stem: str) -> str:
    """The CPU kind's tag a planned stem ends with (:attr:`PlannedRun.tag`), "" for none."""
    last = stem.rsplit("-", 1)[-1]
    return last if last.startswith("cpu") else ""


def tagged_runs(tag: str) -> str:
    """How the page and the runner name a comparison group's runs: "runs" or "<tag>-tagged runs"."""
    return f"{tag}-tagged runs" if tag else "runs"


def comparison_group(rec: Mapping[str, Any]) -> tuple[str, str]:
    """The runs a corpora-stage record is compared with at equal minutes: those on its corpus
    with its tag."""
    return str(rec.get("corpus")), stem_tag(str(rec.get("stem")))


def stage_entries(
    stage: str, root: Path, here: str, tag: str, minutes: float = COMPARE_MINUTES
) -> list[Entry]:
    """What ``stage`` runs on a CPU of kind ``here`` (``tag``: :func:`kind_tag`): its plan,
    and in the compare stage, where a change is still to be measured and the recipe's record
    is of another kind, the recipe once more on this one (:func:`compare_baseline`) first."""
    entries = plan(stage, minutes)
    if stage != "compare":
        return entries
    base = compare_baseline(root, here, tag, minutes)
    changes = entries[1:]
    if not base.tag or all(c.record_path(root).is_file() for c in changes):
        return entries
    return [entries[0], base, *changes]


def kind_refusal(run: PlannedRun, root: Path, here: str, tag: str) -> str | None:
    """Why ``run`` must not start on a CPU of kind ``here``: the records it is compared with
    at equal minutes were measured on another kind (module docstring); None when they were
    not. A compare-stage change is compared with :func:`compare_baseline`'s run; a
    corpora-stage run with the other runs on its corpus that carry its tag; a fixed-update
    run (the seeds stage's) with none at equal minutes."""
    if run.steps:
        return None
    if run.stage == "compare":
        base = compare_baseline(root, here, tag, run.minutes)
        path = base.record_path(root)
        records = [read_one(path)] if path.is_file() else []
        what, where = f"the recipe run {base.stem} was", shown(path, root)
    else:
        records = [
            r
            for r in read_all(root / RECORDS / "corpora")
            if r.get("kind") == "run" and comparison_group(r) == (run.corpus, run.tag)
        ]
        what = f"the corpora stage's {tagged_runs(run.tag)} on {run.corpus} were"
        where = f"their records in {shown(root / RECORDS / 'corpora', root)}"
    others = sorted({k for r in records for k in record_kinds(r)} - {here})
    if not others:
        return None
    return (
        f"{what} measured on {'; '.join(others)}, and this machine is {here}: minutes do "
        f"not compare across CPU kinds. Run it on that kind, or move {where} aside (keeping "
        "them in git) to measure afresh here."
    )


# --- where a run stands --------------------------------------------------------------------


def trained(folder: Path) -> tuple[float, int] | None:
    """(training minutes, step) of the checkpoint that ``resume=folder`` continues from
    (last.pt, else the newest best-<step>.pt that reads), None when there is none."""
    candidates = resume_candidates(folder) if folder.is_dir() else []
    if not candidates:
        return None
    try:
        _, ckpt = load_first_readable(candidates)
    except CheckpointError:
        return None
    state = ckpt.training.trainer if ckpt.training is not None else {}
    return float(state.get("wall_s", 0.0)) / 60.0, int(ckpt.step)


def finished(folder: Path) -> bool:
    """Whether the run in ``folder`` ended normally (its summary says ``finished``)."""
    try:
        return read_record(folder).status == "finished"
    except RecordError:
        return False


@dataclass(frozen=True)
class Todo:
    """A planned entry without a record: what is done of it and what it will take."""

    entry: Entry
    state: str  # new | resume | finished (only its record and decodes are missing) | busy | waiting
    done_min: float  # training minutes its folder holds
    estimate_min: float  # minutes left to train + overhead
    owner: str = ""  # busy: the process that holds its folder ("pid P on HOST")
    done_step: int = 0  # the step its folder's checkpoint holds
    retrain: tuple[str, ...] = ()  # an ensemble's members to train again here first

    def describe(self) -> str:
        e = self.entry
        where = ""
        if self.state == "resume" and isinstance(e, PlannedRun):
            where = (
                f" at step {self.done_step} of {e.steps}"
                if e.steps
                else f" at {self.done_min:.1f} of {e.minutes:g} min"
            )
        if self.retrain:
            where = f" (after training {', '.join(self.retrain)} again here)"
        if self.state == "busy":
            where = f" (held by {self.owner}; if nothing trains there any more, delete its .lock)"
        return f"{self.state:<8} {e.stem}{where}  ~{self.estimate_min:.0f} min"

    @property
    def beside(self) -> bool:
        """Busy on this machine: a run started now would share its cores."""
        return self.state == "busy" and self.owner.endswith(f" on {socket.gethostname()}")


def overhead(stage: str, root: Path) -> tuple[float, str]:
    """Minutes a run of ``stage`` takes beyond its budget, and where that figure comes from."""
    measured = []
    for rec in read_all(root / RECORDS / stage):
        if rec.get("kind") == "run" and not rec.get("resumed"):
            budget = float(rec.get("budget_minutes") or rec["train_minutes"])  # fixed updates
            curve = rec.get("curve") or []
            trained_min = min(budget, float(curve[-1][1])) if curve else budget  # stopped early
            measured.append(float(rec["minutes"]) - trained_min)
    if measured:
        return max(max(measured), 1.0), f"the most of {len(measured)} record(s)"
    return OVERHEAD_MIN.get(stage, OVERHEAD_MIN["compare"]), "assumed: no record yet"


def status(entry: Entry, root: Path, extra: float | None = None) -> Todo | None:
    """None when ``entry`` has its record; else where it stands (``extra``: its stage's
    :func:`overhead`, read from the records when not given)."""
    if entry.record_path(root).is_file():
        return None
    extra = overhead(entry.stage, root)[0] if extra is None else extra
    if isinstance(entry, PlannedEnsemble):
        if any(not m.record_path(root).is_file() for m in entry.members):
            return Todo(entry, "waiting", 0.0, ENSEMBLE_MIN)
        # a member recorded on another machine: its folder is trained again here first
        again = [(m, run_status(m, root, extra)) for m in entry.members]
        again = [(m, t) for m, t in again if t.state != "finished"]
        busy = next((t for _, t in again if t.state == "busy"), None)
        if busy is not None:
            return replace(busy, entry=entry)
        need = ENSEMBLE_MIN + sum(t.estimate_min for _, t in again)
        return Todo(entry, "new", 0.0, need, retrain=tuple(m.stem for m, _ in again))
    return run_status(entry, root, extra)


def run_status(run: PlannedRun, root: Path, extra: float) -> Todo:
    """Where ``run``'s folder stands (its record aside): busy, finished, new or resume, and
    the minutes it needs (``extra``: its stage's :func:`overhead`); a fixed-update run's
    minutes are its updates left at its own pace so far (seed 1's before it has one)."""
    folder = run.run_dir(root)
    owner = live_owner(folder) if folder.is_dir() else None
    if owner is not None:
        return Todo(run, "busy", 0.0, 0.0, owner)
    if folder.is_dir() and finished(folder):
        return Todo(run, "finished", run.minutes, extra)
    done = trained(folder)
    if done is None:
        return Todo(run, "new", 0.0, run.minutes + extra)
    if run.steps:
        minutes, step = done if done[0] > 0 and done[1] > 0 else (run.minutes, run.steps)
        left = minutes / step * max(run.steps - done[1], 0)
    else:
        left = max(run.minutes - done[0], 0.0)
    return Todo(run, "resume", done[0], left + extra, done_step=done[1])


def todos(entries: Sequence[Entry], root: Path) -> list[Todo]:
    """The entries without a record, each stage's overhead read from its records once."""
    extra = {stage: overhead(stage, root)[0] for stage in {e.stage for e in entries}}
    return [t for t in (status(e, root, extra[e.stage]) for e in entries) if t is not None]


# --- records -------------------------------------------------------------------------------


def best_by(
    curve: Sequence[Sequence[float]], mark: float, budget_stop: float | None = None
) -> float | None:
    """The best validation BLEU by training minute ``mark`` of a curve of (step, minutes,
    NLL, BLEU, chrF); ``budget_stop``: the budget that stopped the run, whose final
    validation counts at its mark (:func:`attnmt.run_curves.best_by`)."""
    return run_curves.best_by(((p[1], p[3]) for p in curve), mark, budget_stop)


def best_of_run(
    curve: Sequence[Sequence[float]], mark: float, stop_reason: str | None, budget: float
) -> float | None:
    """:func:`best_by` for a run that stopped for ``stop_reason`` with a budget of
    ``budget`` minutes: its final validation counts at the budget's mark when the budget
    stopped it (:func:`attnmt.run_curves.budget_stop`)."""
    return best_by(curve, mark, run_curves.budget_stop(stop_reason, budget))


def compare_marks(minutes: float) -> tuple[float, ...]:
    return tuple(sorted({m for m in COMPARE_MARKS if m <= minutes} | {minutes}))


TEST_KEYS = ("bleu", "chrf", "bleu_signature", "chrf_signature", "beam", "checkpoint")


def run_record(
    run: PlannedRun,
    root: Path,
    tests: dict[str, dict[str, Any] | None],
    started: float,
    threads: int,
    resumed: bool,
) -> dict[str, Any]:
    """The record of a finished run, from its run record (attnmt.run_record) and the test
    results by minute (``tests``: {"30": scores or None, ...}; the budget's own entry is the
    run's final test)."""
    rec = read_record(run.run_dir(root))
    summary = rec.summary or Summary()
    curve = [[e["step"], e["minutes"], e["nll"], e["bleu"], e.get("chrf")] for e in rec.valid]
    average = rec.of("average")
    if run.steps:  # trained for its updates, not minutes: no minute marks
        marks: tuple[float, ...] = ()
    elif run.stage == "compare":
        marks = compare_marks(run.minutes)
    else:
        marks = (*run.marks, run.minutes)
    prov = provenance_fields(started, threads)
    return {
        "kind": "run",
        "stage": run.stage,
        "stem": run.stem,
        "variant": run.variant,
        "corpus": run.corpus,
        "seed": run.seed,
        "budget_minutes": None if run.steps else run.minutes,
        "budget_updates": run.steps or None,
        "overrides": list(run.train_args()),
        "command": run.command(root),
        "run_dir": shown(run.run_dir(root), root),
        "status": summary.status,
        "stop_reason": summary.reason,
        "updates": summary.step,
        "epochs": summary.epoch,
        "params": summary.params,
        "precision": summary.precision,
        "device": summary.device,
        "train_minutes": summary.minutes,
        "curve": curve,
        "best_by": {f"{m:g}": best_of_run(curve, m, summary.reason, run.minutes) for m in marks},
        "average": {k: average[-1].get(k) for k in ("bleu", "chrf", "nll", "kept")}
        if average
        else None,
        "test": {k: rec.test[k] for k in TEST_KEYS if k in rec.test} if rec.test else None,
        "test_at": tests,
        "resumed": resumed,
        "processes": [process_of(e) for e in rec.of("start")],
        "train_commit": summary.commit,
        **prov,
        "machine": summary.machine.to_dict() if summary.machine else prov["machine"],
    }


def process_of(start: dict[str, Any]) -> dict[str, Any]:
    """One train.py process of a run, from its ``start`` event: the step it started at,
    when, and its precision (``auto`` decides per machine), device, machine and commit
    (None where its trainer did not record them)."""
    return {
        "step": start.get("step"),
        "started": datetime.fromtimestamp(float(start["time"])).isoformat(timespec="seconds"),
        **{k: start.get(k) for k in ("precision", "device", "machine", "commit")},
    }


def scores_of(out_dir: Path) -> dict[str, Any] | None:
    """The one entry of an evaluate.py folder's scores.json, its score fields only."""
    entry = scores_entry(out_dir / "scores.json")
    if entry is None:
        return None
    keys = ("bleu", "chrf", "bleu_signature", "chrf_signature", "beam")
    return {k: entry[k] for k in keys if k in entry} | {
        "checkpoints": entry.get("ensemble") or [entry.get("checkpoint")]
    }


def decode_settings(folder: Path) -> dict[str, Any]:
    """The run's own ``decode`` settings (its .hydra/config.yaml), as evaluate.py takes them."""
    cfg = OmegaConf.load(RunDir(folder).config_yaml)
    decode = OmegaConf.to_container(cfg.decode, resolve=True)
    assert isinstance(decode, dict)
    return {str(k): v for k, v in decode.items()}


# --- the runner ----------------------------------------------------------------------------


def set_aside(folder: Path, tag: str, why: str) -> Path:
    """Move run ``folder`` aside to ``<name>.<tag>-<time>`` (kept, not resumed), saying why."""
    aside = folder.with_name(f"{folder.name}.{tag}-{int(time.time())}")
    folder.rename(aside)
    print(f"{folder.name}: {why}; moved to {aside.name}, starting afresh")
    return aside


@dataclass
class Runner:
    """Runs planned entries one at a time (subprocesses with ``threads`` threads each)."""

    root: Path = ROOT
    threads: int = THREADS
    stopping: bool = False
    child: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    kind: str = field(default_factory=lambda: this_machine().describe("kind"))
    """This machine's CPU kind (:func:`cpu_kind`)."""
    tag: str = field(default_factory=lambda: this_machine().describe("tag"))
    """Its short name in a stem (:func:`kind_tag`)."""

    def env(self) -> dict[str, str]:
        n = str(self.threads)
        return {**os.environ, "OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n}

    def call(self, cmd: list[str], log: TextIO) -> int:
        """Run ``cmd`` in its own session (a signal to the runner is passed on by
        :meth:`stop`; the runner's death sends it SIGTERM: experiments/die_with_parent.py),
        output to ``log``; its exit status."""
        log.write(f"$ {' '.join(cmd)}\n")
        if self.stopping:  # a signal came between two children: start no more
            log.write("not started: the runner was stopped\n")
            log.flush()
            return 128 + signal.SIGTERM
        log.flush()
        self.child = subprocess.Popen(  # stops with this runner, also if it is killed outright
            die_with_parent.command(cmd),
            cwd=ROOT,
            env=self.env(),
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        if self.stopping:  # the signal came while it was being started
            self.child.send_signal(signal.SIGTERM)
        try:
            return self.child.wait()
        finally:
            self.child = None

    def stop(self, signum: int, frame: FrameType | None = None) -> None:
        """SIGINT/SIGTERM: no further run starts; the running one gets SIGTERM once (train.py
        saves last.pt and exits; later signals are not passed on)."""
        if self.stopping:  # a second SIGTERM would abort train.py mid-update, unsaved
            return
        self.stopping = True
        if self.child is not None:
            self.child.send_signal(signal.SIGTERM)

    def set_aside_foreign(self, run: PlannedRun) -> bool:
        """Move ``run``'s folder aside when another CPU kind trained in it
        (:func:`folder_kinds`): its minutes are not this kind's. Whether it did; never for a
        fixed-update run, whose updates are the same on every kind."""
        if run.steps:
            return False
        folder = run.run_dir(self.root)
        others = folder_kinds(folder) - {self.kind}
        if others:
            set_aside(
                folder, "other-cpu", f"trained on another CPU kind ({'; '.join(sorted(others))})"
            )
        return bool(others)

    def train(self, run: PlannedRun, log: TextIO) -> tuple[bool, bool]:
        """Train ``run`` (resumed where its folder holds a checkpoint, with its whole budget
        and its marks: see the module's docstring): (succeeded, resumed)."""
        folder = run.run_dir(self.root)
        done = trained(folder)
        if done is not None and self.set_aside_foreign(run):
            done = None
        elif done is None and folder.exists():
            set_aside(folder, "abandoned", "no readable checkpoint in its folder")
        py = [sys.executable, str(ROOT / "train.py")]
        if done is None:
            cmd = [*py, *run.train_args(), f"hydra.run.dir={folder}"]
        elif run.steps:  # its max_steps is in the checkpoint's config, kept on resuming
            cmd = [*py, f"resume={folder}", f"hydra.run.dir={folder}"]
        else:  # the whole budget: a folder an older runner resumed holds what was left of it
            again = [*run.mark_args(), run.budget_arg()]
            cmd = [*py, f"resume={folder}", f"hydra.run.dir={folder}", *again]
        code = self.call(cmd, log)
        return code == 0, done is not None

    def evaluate(
        self, ckpts: Sequence[Path], out_dir: Path, decode: dict[str, Any], log: TextIO
    ) -> dict[str, Any] | None:
        """``python evaluate.py ckpt=... split=test <decode> out_dir=OUT``: its scores, or
        None when it failed. A decode that finished there before (the runner was cut off
        before the record) is taken as it is; one cut off is cleared first, since evaluate.py
        refuses a folder whose hyps.txt another evaluation wrote, and a run folder carried to
        another machine or path makes the same decode another evaluation to it."""
        if scores_of(out_dir) is not None:
            return self.shown_scores(out_dir)
        if out_dir.is_dir():
            shutil.rmtree(out_dir)
        ckpt = str(ckpts[0]) if len(ckpts) == 1 else "[" + ",".join(map(str, ckpts)) + "]"
        settings = [f"{k}={v}" for k, v in decode.items()]
        cmd = [
            sys.executable,
            str(ROOT / "evaluate.py"),
            f"ckpt={ckpt}",
            "split=test",
            *settings,
            f"out_dir={out_dir}",
        ]
        if self.call(cmd, log) != 0:
            return None
        return self.shown_scores(out_dir)

    def shown_scores(self, out_dir: Path) -> dict[str, Any] | None:
        """:func:`scores_of` with the checkpoints' paths relative to the root."""
        scores = scores_of(out_dir)
        if scores is not None:
            scores["checkpoints"] = [shown(Path(c), self.root) for c in scores["checkpoints"]]
        return scores

    def tests(self, run: PlannedRun, log: TextIO) -> dict[str, dict[str, Any] | None] | None:
        """Test scores by minute: each mark's kept checkpoint decoded, the budget's the run's
        own final test; a mark the run ended before (early stopping) gets the final test too.
        None when a decode failed (no record: the next invocation decodes again)."""
        folder = run.run_dir(self.root)
        rec = read_record(folder)
        final = rec.test
        final_scores = (
            {k: final[k] for k in TEST_KEYS if k in final} | {"source": "final test"}
            if final
            else None
        )
        ended = (rec.summary.minutes if rec.summary else None) or 0.0
        kept = {b.minutes: b for b in (rec.summary.best_at if rec.summary else None) or ()}
        out: dict[str, dict[str, Any] | None] = {}
        for mark in run.marks:
            shot = kept.get(mark)
            ckpt = folder / "checkpoints" / shot.file if shot and shot.file else None
            if shot is not None and ckpt is not None and ckpt.is_file():
                where = RunDir(folder).eval / f"test-best-at-{mark:g}min"
                scores = self.evaluate([ckpt], where, decode_settings(folder), log)
                if scores is None:
                    return None
                out[f"{mark:g}"] = scores | {
                    "source": "snapshot",
                    "step": shot.step,
                    "val_bleu": shot.val_bleu,
                }
            elif ended < mark and final_scores is not None:
                out[f"{mark:g}"] = final_scores | {
                    "source": f"final test (ended at {ended:.1f} min)"
                }
            else:
                out[f"{mark:g}"] = None
                print(f"{run.stem}: no checkpoint kept at minute {mark:g}; its test is missing")
        if run.test and not run.steps:  # a fixed-update run's final test is its record's "test"
            out[f"{run.minutes:g}"] = final_scores
        return out

    def execute(self, run: PlannedRun) -> Path | None:
        """Train ``run`` (or go on with it), decode its marks' checkpoints, write its record; the
        record's path, None when something failed or a signal stopped it."""
        record = run.record_path(self.root)
        if record.is_file():
            return record
        folder = run.run_dir(self.root)
        folder.parent.mkdir(parents=True, exist_ok=True)
        # resumed: not trained start to end here, so this record's minutes do not measure it
        started, resumed = time.time(), True
        with (folder.parent / f"{run.stem}.log").open("a") as log:
            if finished(folder):  # of another kind: its record would compare its minutes here
                self.set_aside_foreign(run)
            if not finished(folder):
                ok, resumed = self.train(run, log)
                if not ok or self.stopping or not finished(folder):
                    return None
            tests = self.tests(run, log)
            if tests is None or self.stopping:
                return None
        if record.is_file():  # another runner wrote it meanwhile: never rewritten
            return record
        write_json(record, run_record(run, self.root, tests, started, self.threads, resumed), 1)
        return record

    def execute_ensemble(self, ens: PlannedEnsemble) -> Path | None:
        """Decode the members' tested checkpoints as one ensemble, write its record. A member
        whose run folder has not finished here (recorded on another machine: run folders
        are not kept in git) is trained again here first, into its folder, its record kept
        as it is; the record names the test of each member folder it decoded."""
        record = ens.record_path(self.root)
        if record.is_file():
            return record
        started = time.time()
        folders = [m.run_dir(self.root) for m in ens.members]
        out_dir = ens.out_dir(self.root)
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        again = []
        with (out_dir.parent / f"{ens.stem}.log").open("a") as log:
            for member, folder in zip(ens.members, folders, strict=True):
                if finished(folder):
                    continue
                again.append(member.stem)
                print(f"{ens.stem}: training {member.stem} again here", flush=True)
                ok, _ = self.train(member, log)
                if not ok or self.stopping or not finished(folder):
                    return None
            decode = decode_settings(folders[0])
            scores = self.evaluate(folders, out_dir, decode, log)
        if scores is None or self.stopping:
            return None
        write_json(
            record,
            {
                "kind": "ensemble",
                "stage": ens.stage,
                "stem": ens.stem,
                "corpus": ens.members[0].corpus,
                "seeds": [m.seed for m in ens.members],
                "members": [m.stem for m in ens.members],
                "member_tests": [member_test(f, self.root) for f in folders],
                "retrained": again,
                "command": ens.command(self.root, decode),
                "decode": decode,
                "test": scores,
                **provenance_fields(started, self.threads),
            },
            indent=1,
        )
        return record


def member_test(folder: Path, root: Path) -> dict[str, Any]:
    """An ensemble member's run folder as decoded: its own final test, updates, CPU kind and
    commit (its record may be of an earlier folder on another machine)."""
    rec = read_record(folder)
    summary = rec.summary or Summary()
    test = rec.test or {}
    return {
        "run_dir": shown(folder, root),
        "bleu": test.get("bleu"),
        "chrf": test.get("chrf"),
        "updates": summary.step,
        "kinds": sorted(folder_kinds(folder)),
        "train_commit": summary.commit,
    }


def builds_of(run: PlannedRun) -> list[DataBuild]:
    """The data builds whose ``data.path`` ``run`` reads."""
    paths = {o.split("=", 1)[1] for o in run.overrides if o.startswith("data.path=")}
    return [b for b in DATA_BUILDS if b.path in paths]


def make_data(run: PlannedRun, root: Path, runner: Runner) -> bool:
    """Write the data ``run`` reads and lacks (:data:`DATA_BUILDS`); False when that failed,
    with the log named."""
    for build in builds_of(run):
        if build.built(root):
            continue
        (root / RUNS).mkdir(parents=True, exist_ok=True)
        log_path = root / RUNS / f"{Path(build.script).stem}.log"
        cmd = build.command(sys.executable, ROOT / "scripts", root)
        with log_path.open("a") as log:
            if runner.call(cmd, log) != 0 or not build.built(root):
                print(f"could not write {root / build.path}: see {log_path}")
                return False
    return True


def show_plan(
    title: str,
    todo: Sequence[Todo],
    total: int,
    hours: float,
    note: str,
    root: Path,
    refused: frozenset[str] = frozenset(),
) -> None:
    """The plan: each entry without a record, what it needs, and what fits in ``hours``
    (``refused``: stems that do not start on this CPU kind, listed apart, not counted)."""
    shut = [t.entry.stem for t in todo if t.entry.stem in refused]
    todo = [t for t in todo if t.entry.stem not in refused]
    need = sum(t.estimate_min for t in todo)
    print(
        f"{title}: {total} planned, {total - len(todo) - len(shut)} recorded, "
        f"{len(todo)} left here, ~{need:.0f} min ({note})"
        + (f"; {len(shut)} not on this CPU kind" if shut else "")
    )
    for stem in shut:
        print(f"  {'refused':<8} {stem}")
    for t in todo:
        command = t.entry.command(root) if t.state in ("new", "waiting") else ""
        print(f"  {t.describe()}" + (f"\n           {command}" if command else ""))
    if hours > 0:
        fits, used = 0, 0.0
        for t in todo:
            if used + t.estimate_min > hours * 60:
                break
            fits, used = fits + 1, used + t.estimate_min
        print(f"  --hours {hours:g}: {fits} of {len(todo)} would start (~{used:.0f} min)")


def run_entries(
    entries: Sequence[Entry],
    runner: Runner,
    hours: float = 0.0,
    title: str = "recipe",
    dry_run: bool = False,
    clock: Callable[[], float] = time.time,
) -> int:
    """Run what ``entries`` lack, in order, while it fits in ``hours`` (0: no limit), but
    not a run whose comparison was measured on a CPU kind other than the runner's
    (:func:`kind_refusal`, its reason printed): exit 2 when that leaves nothing to start."""
    root = runner.root
    stages = sorted({e.stage for e in entries if isinstance(e, PlannedRun)})
    notes = []
    for stage in stages:
        minutes, how = overhead(stage, root)
        notes.append(f"{stage} runs' overhead {minutes:.0f} min: {how}")
    refused: dict[str, list[str]] = {}  # reason: the stems it keeps from starting
    for e in entries:
        if isinstance(e, PlannedRun) and not e.record_path(root).is_file():
            why = kind_refusal(e, root, runner.kind, runner.tag)
            if why is not None:
                refused.setdefault(why, []).append(e.stem)
    tried = {stem for stems in refused.values() for stem in stems}
    show_plan(
        title, todos(entries, root), len(entries), hours, "; ".join(notes), root, frozenset(tried)
    )
    for why, stems in refused.items():
        print(
            f"{title}: {', '.join(stems)}: {'would not start' if dry_run else 'not started'}: {why}"
        )
    if dry_run:
        return 0
    startable = [t for t in todos(entries, root) if t.entry.stem not in tried]
    if refused and all(t.state == "waiting" for t in startable):  # an ensemble of refused runs
        return 2
    deadline = clock() + hours * 3600.0 if hours > 0 else None
    failed: list[str] = []
    recorded: list[str] = []
    end = ""
    while not runner.stopping:
        todo = [t for t in todos(entries, root) if t.entry.stem not in tried]
        beside = [t for t in todo if t.beside]
        if beside:
            end = (
                f"{beside[0].entry.stem} is being trained by {beside[0].owner}: "
                "no run starts beside it"
            )
            break
        ready = [t for t in todo if t.state not in ("busy", "waiting")]
        if not ready:
            end = "nothing left that can run" if todo else "all recorded"
            break
        t = ready[0]
        left = (deadline - clock()) / 60.0 if deadline is not None else float("inf")
        if t.estimate_min > left:
            end = (
                f"next {t.entry.stem} needs ~{t.estimate_min:.0f} min, "
                f"{max(left, 0):.0f} min of --hours left"
            )
            break
        tried.add(t.entry.stem)
        if isinstance(t.entry, PlannedRun) and not make_data(t.entry, root, runner):
            failed.append(t.entry.stem)
            continue
        print(f"starting {t.describe()}", flush=True)
        entry = t.entry
        path = (
            runner.execute(entry)
            if isinstance(entry, PlannedRun)
            else runner.execute_ensemble(entry)
        )
        if path is not None:
            recorded.append(entry.stem)
            print(f"recorded {shown(path, root)}", flush=True)
        elif not runner.stopping:
            failed.append(entry.stem)
            print(f"FAILED {entry.stem}: see its log under {shown(root / RUNS, root)}", flush=True)
    if runner.stopping:
        end = "stopped by a signal; the same command resumes it"
    rest = todos(entries, root)
    failures = f", failed: {', '.join(failed)}" if failed else ""
    if refused:
        failures += f", not on this CPU kind: {sum(map(len, refused.values()))}"
    print(
        f"{title}: {len(recorded)} recorded now, {len(rest)} left "
        f"(~{sum(t.estimate_min for t in rest):.0f} min){failures}; {end}"
    )
    if runner.stopping:
        return 130
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    run = sub.add_parser("run", help="run what a stage's records lack")
    run.add_argument("--stage", choices=STAGES, required=True)
    run.add_argument("--hours", type=float, default=0.0, help="time to spend; 0: no limit")
    run.add_argument(
        "--minutes", type=float, help=f"compare only: minutes a run (default {COMPARE_MINUTES:g})"
    )
    run.add_argument("--threads", type=int, default=THREADS)
    run.add_argument(
        "--only",
        metavar="TEXT",
        help="only the planned entries whose stem contains TEXT (and in the compare stage the "
        "recipe run its changes are compared with)",
    )
    run.add_argument("--dry-run", action="store_true", help="print the plan, start nothing")
    table = sub.add_parser("table", help="write the page (and its figure) from the records")
    table.add_argument("--out", type=Path, default=ROOT / "docs" / "recipe.md")
    args = parser.parse_args(argv)
    try:
        return command(args, parser)
    except AttnmtError as err:  # a record that does not read: named, no traceback
        print(f"error: {err}", file=sys.stderr)
        return 2


def command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``table`` or ``run``, as parsed by :func:`main`."""
    if args.what == "table":
        from experiments.recipe_page import write_page

        for path in write_page(args.out, ROOT):
            print(f"wrote {shown(path, ROOT)}")
        return 0
    if args.minutes is not None and args.stage != "compare":
        parser.error(
            f"--minutes is the compare stage's; corpora runs train {CORPORA_MINUTES:g} minutes, "
            f"seeds runs {SEED_UPDATES} updates"
        )
    if args.minutes is not None and args.minutes <= 0:
        parser.error("--minutes must be positive")
    runner = Runner(ROOT, args.threads)
    entries = stage_entries(
        args.stage, ROOT, runner.kind, runner.tag, args.minutes or COMPARE_MINUTES
    )
    if args.only is not None:
        chosen = [e for e in entries if args.only in e.stem]
        if not chosen:
            stems = ", ".join(e.stem for e in entries)
            parser.error(f"--only {args.only!r} is in no stem of the {args.stage} stage: {stems}")
        if args.stage == "compare":  # a change is measured against the recipe on its kind
            entries = [e for e in entries if e.stem not in {c.stem for c in chosen}]
            needed = [e for e in entries if isinstance(e, PlannedRun) and e.variant == RECIPE.name]
            chosen = [*needed, *chosen]
        entries = chosen
    title = f"recipe {args.stage} ({args.threads} threads a run)"
    if not args.dry_run:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, runner.stop)
    return run_entries(entries, runner, args.hours, title, args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
