"""The SecLang walk compiled by mypyc (``setup.py``) against the same source interpreted, its oracle: the compiled
modules are in use and built from the sources beside them (else the library is stale: a failure), and on CRS's
regression corpus both do exactly the same (every match with its message, log data and matched value, the
interruption, the final TX collection)."""

from __future__ import annotations

import ast
import hashlib
import importlib
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.seclang.interpreted_walk import walk_outcomes
from tests.seclang.test_crs_regression import CRS_RULES
from tests.support import crs_corpus

REPO_ROOT = Path(__file__).resolve().parents[2]


def _compiled_modules() -> tuple[str, ...]:
    """The module names of ``setup.py``'s ``COMPILED_MODULES`` (read from its text: importing it would run the
    build), so that the list lives in one place."""
    tree = ast.parse((REPO_ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "COMPILED_MODULES" for target in node.targets
        ):
            paths: list[str] = ast.literal_eval(node.value)
            return tuple(".".join(Path(path).relative_to("src").with_suffix("").parts) for path in paths)
    raise AssertionError("setup.py has no COMPILED_MODULES")


COMPILED_MODULES = _compiled_modules()
COMPILED_GROUP = "edgeplane_seclang__mypyc"  # setup.py: the shared library of the compiled modules
compiled_build = pytest.mark.skipif(
    os.environ.get("EDGEPLANE_NO_MYPYC") == "1", reason="built without mypyc (EDGEPLANE_NO_MYPYC=1)"
)


def _origin(name: str) -> Path:
    module = importlib.import_module(name)
    assert module.__file__ is not None
    return Path(module.__file__)


@compiled_build
@pytest.mark.parametrize("name", COMPILED_MODULES)
def test_the_module_runs_compiled(name: str) -> None:
    assert _origin(name).suffix == ".so", f"{name} runs interpreted: run scripts/bootstrap dev to compile it"


@pytest.mark.parametrize("name", COMPILED_MODULES)
def test_a_compiled_module_was_built_from_its_source(name: str) -> None:
    """By content, not by time (a checkout gives an unchanged file a new time): ``scripts/bootstrap`` records each
    source's sha256 beside the tree once it built the group's shared library, and builds again when one changed."""
    if _origin(name).suffix != ".so":
        pytest.skip(f"{name} runs interpreted")
    # The module's own extension is a shim that the build leaves alone when it is current; the compiled code is in
    # the group's shared library, built again with any change. The record and the source are those of its tree.
    tree = _origin(COMPILED_GROUP).parents[1]
    record = tree / ".cache" / "seclang-compiled-from.sha256"
    assert record.is_file(), f"no record of what {COMPILED_GROUP} was built from: run scripts/bootstrap dev"
    built_from = {path: digest for digest, path in (line.split(maxsplit=1) for line in record.read_text().splitlines())}
    source = Path("src", *name.split(".")).with_suffix(".py")
    digest = hashlib.sha256((tree / source).read_bytes()).hexdigest()
    assert built_from.get(str(source)) == digest, (
        f"{COMPILED_GROUP} was built from another {source} (stale): run scripts/bootstrap dev"
    )


@pytest.mark.skipif(not crs_corpus.available(), reason="CRS's regression corpus is not beside the repository")
@pytest.mark.skipif(not CRS_RULES.is_dir(), reason="modsecurity-crs is not installed")
def test_the_compiled_walk_does_what_the_interpreted_walk_does() -> None:
    interpreted = subprocess.run(
        [sys.executable, "-m", "tests.seclang.interpreted_walk"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
        timeout=600,
    )
    oracle = orjson.loads(interpreted.stdout)
    assert all(file.endswith(".py") for file in oracle["files"]), "the oracle ran compiled modules"
    expected = oracle["outcomes"]
    actual = orjson.loads(orjson.dumps(walk_outcomes()))
    assert len(actual) == len(expected) > 2000
    differing = [case[0] for case, oracle in zip(actual, expected, strict=True) if case != oracle]
    assert not differing, f"{len(differing)} cases differ, e.g. {differing[:5]}"
