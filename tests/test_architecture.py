"""The import contract of src/attnmt, read from the code with ast (function-local imports too).

Data flows one way: entry points → cli/ → serve/, train/ → decode/ → models/, data/ → leaves
(errors, schema, kernels, machine, devices, checkpoint). The rules below fail naming the importing
module, the line and the imported module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "attnmt"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, list[tuple[int, str]]]:
    """Every attnmt module → [(line, imported attnmt module)], resolved to real modules."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    found: dict[str, list[tuple[int, str]]] = {}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        edges: list[tuple[int, str]] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = name.split(".")
                    keep = len(parts) - node.level + (1 if is_pkg else 0)
                    base = ".".join(parts[:keep] + ([base] if base else []))
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and target.startswith("attnmt"):
                    edges.append((node.lineno, target))
        found[name] = edges
    return found


IMPORTS = _imports()


def _in(module: str, unit: str) -> bool:
    return module == unit or module.startswith(f"{unit}.")


def test_the_reader_sees_the_package() -> None:
    assert {"attnmt.train.loop", "attnmt.decode.translator", "attnmt.models.registry"} <= set(
        IMPORTS
    )
    assert any(t == "attnmt.decode.search" for _, t in IMPORTS["attnmt.decode.translator"])


def test_no_import_circles() -> None:
    """No module reaches itself through imports (package __init__ files hold no imports)."""
    graph = {m: {t for _, t in edges if not t.endswith("__init__")} for m, edges in IMPORTS.items()}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycle = [*path[path.index(t) :], t]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


UPPER = ("attnmt.data", "attnmt.models", "attnmt.train", "attnmt.decode", "attnmt.serve",
         "attnmt.cli")  # fmt: skip
"""The packages; the top-level modules of attnmt (the leaves) import none of them."""

RULES: list[tuple[str, tuple[str, ...], str]] = [
    ("attnmt.models", ("attnmt.data", "attnmt.train", "attnmt.decode", "attnmt.serve",
                       "attnmt.cli", "attnmt.checkpoint"), "models know no data, loop or files"),
    ("attnmt.data", ("attnmt.models", "attnmt.train", "attnmt.decode", "attnmt.serve",
                     "attnmt.cli", "attnmt.checkpoint"), "data knows no model"),
    ("attnmt.decode", ("attnmt.train", "attnmt.serve", "attnmt.cli"),
     "decoding never reaches up into training"),
    ("attnmt.train", ("attnmt.serve", "attnmt.cli"),
     "training never imports the server or the entry points' code"),
    ("attnmt.serve", ("attnmt.train", "attnmt.cli"),
     "the server decodes through decode/, never through training or the entry points"),
    ("attnmt.errors", ("attnmt.",), "errors is a leaf"),
    ("attnmt.kernels", ("attnmt.",), "kernels is a leaf"),
    ("attnmt.machine", ("attnmt.",), "the machine description is a leaf"),
    ("attnmt.batch", ("attnmt.",), "Batch is a leaf: models, data, loop and search share it"),
    ("attnmt.run_dir", ("attnmt.",), "the run folder's layout is a leaf"),
    ("attnmt.run_curves", ("attnmt.",), "the curves figure is a leaf"),
    *[(leaf, UPPER, f"{leaf} is a leaf: it imports none of the packages")
      for leaf in ("attnmt.schema", "attnmt.devices", "attnmt.checkpoint", "attnmt.atomic",
                   "attnmt.run_record")],
]  # fmt: skip


def test_every_top_level_module_is_a_leaf() -> None:
    """A module directly in attnmt/ (not in a package) imports no package of attnmt: the
    upward arrow that ``attnmt.config`` importing ``train/`` was is now impossible."""
    bad = [
        f"{module}:{line} imports {target}"
        for module, edges in IMPORTS.items()
        if module.count(".") == 1
        for line, target in edges
        if any(_in(target, unit) for unit in UPPER)
    ]
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize(("unit", "banned", "why"), RULES, ids=[r[0] for r in RULES])
def test_no_upward_imports(unit: str, banned: tuple[str, ...], why: str) -> None:
    bad = [
        f"{module}:{line} imports {target}"
        for module, edges in IMPORTS.items()
        if _in(module, unit)
        for line, target in edges
        if target != "attnmt"
        and any(target.startswith(b) if b.endswith(".") else _in(target, b) for b in banned)
        and not (unit == "attnmt.errors" and target == "attnmt.errors")
    ]
    assert not bad, f"{why}: " + "; ".join(bad)


def test_only_the_trainer_loop_reads_the_run_config() -> None:
    """The run config is validated once (attnmt.train.run_config) and its typed parts are
    passed down: inside train/ only the loop (whose ``train`` takes it), setup (which
    validates it once and builds the run's parts) and reporting (which reports the whole
    run) import it."""
    readers = sorted(
        m
        for m, edges in IMPORTS.items()
        if _in(m, "attnmt.train") and any(t == "attnmt.train.run_config" for _, t in edges)
    )
    assert readers == [
        "attnmt.train.loop",
        "attnmt.train.reporting",
        "attnmt.train.setup",
    ]


# ------------------------------------------------------- experiments/ and benchmarks/

ROOT = SRC.parent
ANNEX = ("experiments", "benchmarks")
"""The folders beside the package: analysis and measurements over its public modules."""

TRAIN_INTERNALS_ALLOWED = {
    "benchmarks.ddp_exit_stress": "measures attnmt.train.distributed's exit itself",
    "benchmarks.probe_shapes": "measures attnmt.train.precision_probe itself",
}
"""The annex modules that may import attnmt.train, each with why; the list only shrinks."""


def _annex_imports() -> dict[str, list[tuple[int, str]]]:
    """Every module of experiments/ and benchmarks/ → [(line, imported module)], function-local
    imports included (absolute imports only: the annex uses none relative)."""
    found: dict[str, list[tuple[int, str]]] = {}
    for folder in ANNEX:
        for path in sorted((ROOT / folder).glob("*.py")):
            name = f"{folder}.{path.stem}"
            edges: list[tuple[int, str]] = []
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    edges += [(node.lineno, a.name) for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    edges += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
                    edges.append((node.lineno, node.module))
            found[name] = edges
    return found


ANNEX_IMPORTS = _annex_imports()


def test_the_annex_reader_sees_both_folders() -> None:
    assert "experiments.sweep" in ANNEX_IMPORTS and "benchmarks.serve_cost" in ANNEX_IMPORTS
    assert any(t == "attnmt.run_record" for _, t in ANNEX_IMPORTS["experiments.sweep"]) or any(
        t.startswith("attnmt.run_record") for _, t in ANNEX_IMPORTS["experiments.sweep"]
    )


def test_the_annex_imports_no_training_internals_but_the_listed() -> None:
    """experiments/ and benchmarks/ read run folders and decode through attnmt's public
    modules; the modules still importing attnmt.train are exactly the listed ones."""
    importing = {
        module
        for module, edges in ANNEX_IMPORTS.items()
        for _, target in edges
        if _in(target, "attnmt.train")
    }
    assert importing == set(TRAIN_INTERNALS_ALLOWED), (
        f"new: {sorted(importing - set(TRAIN_INTERNALS_ALLOWED))}; "
        f"no longer importing it (drop from the list): "
        f"{sorted(set(TRAIN_INTERNALS_ALLOWED) - importing)}"
    )


@pytest.mark.parametrize("folder", ANNEX)
def test_no_import_circles_in_the_annex(folder: str) -> None:
    """No module of experiments/ (or benchmarks/) reaches itself through the folder's modules."""
    own = {m for m in ANNEX_IMPORTS if m.startswith(f"{folder}.")}
    graph = {
        m: {
            t if t in own else t.rpartition(".")[0]
            for _, t in ANNEX_IMPORTS[m]
            if t in own or t.rpartition(".")[0] in own
        }
        - {m}
        for m in own
    }
    done: set[str] = set()

    def visit(m: str, path: list[str]) -> None:
        for t in sorted(graph[m]):
            if t in path:
                pytest.fail("import circle: " + " -> ".join([*path[path.index(t) :], t]))
            if t not in done:
                visit(t, [*path, t])
        done.add(m)

    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
