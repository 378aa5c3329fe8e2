"""The tree stays ruff-clean and mypy-clean (CI runs only ``make test``, so lint lives here
too; mypy's settings are pyproject.toml's ``[tool.mypy]``).

This also keeps the model registry honest: a name repeated in the ``MODELS`` dict
literal is ruff's F601 (repeated dictionary key), a failure here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> list[str]:
    """The venv's ``name`` executable (or the one on PATH); skip the test if neither exists."""
    exe = Path(sys.executable).parent / name
    if exe.is_file():
        return [str(exe)]
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e .[dev])")
    return [found]


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]])
def test_ruff_is_clean(args: list[str]) -> None:
    done = subprocess.run(
        _tool("ruff") + args, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_is_clean() -> None:
    """Every annotation under src/attnmt holds (``files`` and overrides in pyproject.toml)."""
    done = subprocess.run(_tool("mypy"), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Success"), done.stdout
