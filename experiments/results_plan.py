"""The whole set of results runs, in priority order, against what the ledger holds.

The grids are ``hydra.sweeper.params`` of configs/experiment/results_main.yaml,
results_attention.yaml and results_attention_preset.yaml (seeds, then the axes; an axis with
one value is a setting of every cell, not a label, except the scorer and the mode, which
always label an attention cell). The attention table adds its reference rows:
:data:`REFERENCE` in every alignment mode at the table's size, and :data:`TRANSFORMER_ROW`,
the Transformer preset at its own size (none of the grid's ``model.*`` axes). The table
``attention_preset`` is the attention table's check at the preset's size: two of its cells
with rnn_luong at configs/model/rnn_luong.yaml's size, the rest of the settings the table's.
Each cell's settings are composed with Hydra exactly as ``python train.py experiment=...
<cell> <extra>`` would, and keyed (:func:`experiments.ledger.settings_key`).

Every cell gets every seed of its grid, fixed in advance (never allocated by earlier
results). Priority: seed 1 of every row of every table before any seed 2, seed 2 before
seed 3; within a seed the tables in :data:`TABLES`' order, rows in grid order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, ListConfig, OmegaConf

from attnmt.train.run_config import setting_defaults
from experiments.ledger import Record, defining_settings, done, settings_key, split_current

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
TABLES = {
    "main": "results_main",
    "attention": "results_attention",
    "attention_preset": "results_attention_preset",
}
"""Table -> its experiment config, in priority order."""
PRESET_CHECK = "attention_preset"
"""The attention table's check at the preset's size (docs/results.md, "At the preset's
size"): its runs get the attention table's measures."""
ATTENTION_TABLES = ("attention", PRESET_CHECK)
"""Tables of attention cells: model, score and mode labels; entropy and silver AER measured."""
REFERENCE = {"model": "rnn_bahdanau", "model.attention.score": "additive"}
"""The attention table's reference row (over its grid's model): one cell per mode."""
TRANSFORMER_ROW = {"model": "transformer"}
TRANSFORMER_LABELS = {"score": "scaled_dot, 4 heads", "mode": "global"}
"""The attention table's Transformer reference: the preset, its cross-attention's labels."""
FIRST_GUESS_MIN = {"main": 40.0, "attention": 22.0, PRESET_CHECK: 65.0}
"""Minutes a run is assumed to take, end to end, before the ledger has timed its settings
(2-core CPU: 1,500 updates of the slowest preset on bible_en_fr; the attention table's 5,500
RNN updates at 200 ms each on one thread, its validations, test decoding and silver AER). The
preset-size check's is a guess, not timed: its 5,500 updates at 256 units were never run;
the 400-update rnn_luong runs at 256 units of an earlier protocol (stale records now) took
690 ms an update on one thread of a 2-core AMD EPYC, validations included, about 63 minutes
for 5,500."""
SAFETY = 1.25
"""A timed run's estimate: the slowest recorded wall time of its settings × this."""
LABELS = {"model.attention.score": "score", "model.attention.mode": "mode"}


@dataclass(frozen=True)
class Cell:
    """One row (main table) or cell (attention table): what the overrides name."""

    table: str
    labels: tuple[tuple[str, str], ...]  # ("data", "ding_de_en"), ("model", "transformer")
    overrides: tuple[str, ...]  # experiment=..., then the cell's own

    @property
    def label(self) -> dict[str, str]:
        return dict(self.labels)

    def text(self) -> str:
        return " ".join(v for _, v in self.labels)


@dataclass
class PlannedRun:
    """A cell at one seed; ``estimate_min`` is set by :func:`make_plan`."""

    cell: Cell
    seed: int
    key: str
    settings: dict[str, Any] = field(repr=False)
    extra: tuple[str, ...] = ()
    estimate_min: float = 0.0

    @property
    def overrides(self) -> list[str]:
        """train.py's command line (the run directory aside)."""
        return [*self.cell.overrides, *self.extra, f"seed={self.seed}"]

    def describe(self) -> str:
        return f"{self.cell.table}: {self.cell.text()}, seed {self.seed} [{self.key}]"


@dataclass
class Plan:
    """Every run the tables want; what the ledger holds; what is left, in order."""

    cells: list[Cell]
    keys: dict[Cell, str]
    seeds: dict[str, list[int]]
    todo: list[PlannedRun]
    waiting: list[str]  # why some runs are not planned yet
    current: list[Record]
    stale: list[Record]
    settings: dict[Cell, dict[str, Any]] = field(repr=False, default_factory=dict)

    def summary(self) -> str:
        wanted = sum(len(self.seeds[c.table]) for c in self.cells)
        lines = [
            f"results plan: {len(self.cells)} cells, {len(self.current)} runs in the ledger, "
            f"{len(self.todo)} to run now ({sum(r.estimate_min for r in self.todo):.0f} min "
            f"estimated), at most {wanted} in all",
        ]
        lines += [f"  waiting: {w}" for w in self.waiting]
        if self.stale:
            lines.append(f"  {len(self.stale)} stale record(s) (settings changed since): left out")
        return "\n".join(lines)


def _plain(node: Any) -> Any:
    if isinstance(node, DictConfig | ListConfig):
        return OmegaConf.to_container(node, resolve=False)
    return node


def _values(text: Any) -> list[str]:
    return [v.strip() for v in str(text).split(",") if v.strip()]


def grid(table: str, experiment: DictConfig) -> tuple[list[int], list[Cell]]:
    """(seeds, cells) of one table from its experiment's ``hydra.sweeper.params``."""
    params = _plain(OmegaConf.select(experiment, "hydra.sweeper.params", default={})) or {}
    seeds = [int(s) for s in _values(params.get("seed", "1"))]
    axes = {k: _values(v) for k, v in params.items() if k != "seed"}
    fixed = {k: v[0] for k, v in axes.items() if len(v) == 1}  # settings, not labels
    base = (f"experiment={TABLES[table]}",)
    combos: list[dict[str, str]] = [{}]
    for key, values in axes.items():
        combos = [{**c, key: v} for c in combos for v in values]
    given: list[dict[str, str]] = [{} for _ in combos]  # labels that no override gives
    if table == "attention":
        modes = axes.get("model.attention.mode", ["global"])
        combos += [{**fixed, **REFERENCE, "model.attention.mode": m} for m in modes]
        plain = {k: v for k, v in fixed.items() if not k.startswith("model.")}
        combos.append({**plain, **TRANSFORMER_ROW})
        given += [{} for _ in modes] + [TRANSFORMER_LABELS]
    cells = []
    for combo, own in zip(combos, given):
        model = combo.get("model", _default_model(experiment))
        labels = {"model": model} if table in ATTENTION_TABLES else {}
        labels.update(
            {
                LABELS.get(k, k): v
                for k, v in combo.items()
                if k != "model" and (k not in fixed or (k in LABELS and table in ATTENTION_TABLES))
            }
        )
        labels.update(own)
        if table == "main":
            labels = {"data": combo.get("data", "?"), "model": model}
        overrides = base + tuple(f"{k}={v}" for k, v in combo.items())
        cells.append(Cell(table, tuple(labels.items()), overrides))
    return seeds, cells


def _default_model(experiment: DictConfig) -> str:
    """The model its defaults list names, else the one an experiment it includes names."""
    items = _plain(experiment.get("defaults", [])) or []
    for item in items:
        if isinstance(item, dict):
            for k, v in item.items():
                if str(k).endswith("/model"):
                    return str(v)
    for item in items:
        if isinstance(item, str) and item != "_self_":  # another experiment config
            name = item.removeprefix("/experiment/")
            included = OmegaConf.load(CONFIGS / "experiment" / f"{name}.yaml")
            assert isinstance(included, DictConfig)
            found = _default_model(included)
            if found != "?":
                return found
    return "?"


def load_experiment(table: str) -> DictConfig:
    cfg = OmegaConf.load(CONFIGS / "experiment" / f"{TABLES[table]}.yaml")
    assert isinstance(cfg, DictConfig)
    return cfg


def compose_settings(overrides_list: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """The defining settings of ``python train.py <overrides>`` for each overrides list."""
    out = []
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        for overrides in overrides_list:
            cfg = compose(config_name="train", overrides=list(overrides))
            out.append(defining_settings(_plain(cfg)))
    return out


def estimate(key: str, table: str, records: Iterable[Record]) -> float:
    """Minutes to allow for a run: :data:`SAFETY` × the slowest recorded run of the same
    settings, else :data:`FIRST_GUESS_MIN` (never less than a minute)."""
    timed = [r.wall_minutes for r in records if r.key == key and r.wall_minutes > 0]
    if timed:
        return max(1.0, SAFETY * max(timed))
    return FIRST_GUESS_MIN[table]


def make_plan(
    records: list[Record],
    extra: Sequence[str] = (),
    tables: Sequence[str] = tuple(TABLES),
    seeds_limit: Sequence[int] | None = None,
    only: Sequence[str] = (),
    experiments: dict[str, DictConfig] | None = None,
    settings_of: Any = compose_settings,
) -> Plan:
    """The plan (see the module docstring); ``extra`` overrides go after each cell's own
    (RESULTS_QUICK's toy sizes); ``seeds_limit`` keeps only those seeds; ``only`` keeps the
    runs of cells whose labels hold every one of those values (``("ding_de_en",)``)."""
    records = [r for r in records if r.table in tables]  # other tables' records: not stale
    cells: list[Cell] = []
    seeds: dict[str, list[int]] = {}
    for table in tables:
        cfg = (experiments or {}).get(table) or load_experiment(table)
        table_seeds, table_cells = grid(table, cfg)
        seeds[table] = table_seeds
        cells += table_cells
    settings = dict(zip(cells, settings_of([[*c.overrides, *extra] for c in cells])))
    keys = {c: settings_key(s) for c, s in settings.items()}
    wanted = {keys[c]: settings[c] for c in cells}
    current, stale = split_current(records, wanted, setting_defaults)
    have = done(current)
    todo: list[tuple[tuple[int, int, int], PlannedRun]] = []
    waiting: list[str] = []
    order = list(tables)
    for table in tables:
        table_cells = [c for c in cells if c.table == table]
        for rank, seed in enumerate(seeds[table]):
            if seeds_limit is not None and seed not in seeds_limit:
                continue
            for index, cell in enumerate(table_cells):
                if not set(only) <= set(cell.label.values()) or (keys[cell], seed) in have:
                    continue
                run = PlannedRun(cell, seed, keys[cell], settings[cell], tuple(extra))
                run.estimate_min = estimate(run.key, table, current)
                todo.append(((rank, order.index(table), index), run))
    todo.sort(key=lambda item: item[0])
    return Plan(cells, keys, seeds, [r for _, r in todo], waiting, current, stale, settings)
