"""The import graph points one way (``docs/architecture-layers.md``): the contracts of ``[tool.importlinter]`` in
``pyproject.toml`` hold for the source tree the tests import, and the linter counts an import made inside a function
as an import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import edgeplane

REPOSITORY = Path(__file__).resolve().parents[1]
# The tree the tests import (a worktree's src on PYTHONPATH, or the editable install's): the one the linter reads.
SOURCE = Path(edgeplane.__file__).resolve().parents[1]


def lint_imports(config: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` of ``config`` over ``SOURCE``, without a cache (nothing is written into the repository)."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--no-cache",
            "--no-logo",
            str(config),
        ],
        cwd=REPOSITORY,
        env={**os.environ, "PYTHONPATH": str(SOURCE), "COLUMNS": "200", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_import_contracts_hold() -> None:
    result = lint_imports(REPOSITORY / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_import_inside_a_function_counts(tmp_path: Path) -> None:
    # The command line imports the supervisor only inside ``serve``, so a contract forbidding it must break.
    config = tmp_path / "contract.toml"
    config.write_text(
        '[tool.importlinter]\nroot_package = "edgeplane"\n\n'
        "[[tool.importlinter.contracts]]\n"
        'id = "cli-without-app"\nname = "cli does not import app"\ntype = "forbidden"\n'
        'source_modules = ["edgeplane.cli"]\nforbidden_modules = ["edgeplane.app"]\n',
        encoding="utf-8",
    )
    result = lint_imports(config)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "edgeplane.cli -> edgeplane.app" in result.stdout
