"""The parts of the build that ``pyproject.toml`` cannot declare on its own: one required C extension and two
optional groups of them.

- The rate limiting counters (``src/edgeplane/rate_table.c``), required: the node's counters live in memory shared
  by its edge workers and are changed with atomic instructions, which Python code cannot do (``rate_counters.py``).

- The request log's C module (``src/edgeplane/edge/row_writer.c``). Without it the request log writes every row with
  its Python code (``RequestLog.commit_in_python``).
- The SecLang engine's walk, compiled from its own Python source by mypyc (``COMPILED_MODULES``): the OWASP Core
  Ruleset runs a few hundred rules per request, and interpreted, the walk's cost is the interpreter's cost per step
  (docs/benchmarks.md, "The SecLang engine against ModSecurity"). mypyc turns the same typed modules into C, so there
  is one implementation: the interpreted source is the compiled one's test oracle (``tests/seclang/test_compiled.py``).
  The extension modules sit beside their sources and Python imports them first; without them (no C compiler, or
  ``EDGEPLANE_NO_MYPYC=1``) the same modules run interpreted.

Without a C compiler the install goes on without the optional two; it fails without the rate table.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Extension, setup

# The modules of the SecLang walk (the engine's compiled form, compiling, optimising and running it, the selectors,
# the prefilter, the reads, the request and its body processors, the actions, operators and transformations) and the
# bounded memo they look values up in; ``seclang/engine.py``, the engine's face, only imports them. The group's shared
# library is ``edgeplane_seclang__mypyc``.
COMPILED_MODULES = [
    "src/edgeplane/bounded_memo.py",
    "src/edgeplane/seclang/actions.py",
    "src/edgeplane/seclang/compiler.py",
    "src/edgeplane/seclang/operators.py",
    "src/edgeplane/seclang/optimiser.py",
    "src/edgeplane/seclang/pipeline.py",
    "src/edgeplane/seclang/prefilter.py",
    "src/edgeplane/seclang/program.py",
    "src/edgeplane/seclang/request.py",
    "src/edgeplane/seclang/request_body.py",
    "src/edgeplane/seclang/runner.py",
    "src/edgeplane/seclang/selectors.py",
    "src/edgeplane/seclang/transformations.py",
    "src/edgeplane/seclang/variables.py",
]

# mypy's view of the code for compiling it, the same wherever the build runs (in the project's environment or in an
# isolated build environment without the project's dependencies): no configuration file (the project's loads a
# pydantic plugin), imports that cannot be found typed as Any, errors reported only for the compiled modules.
MYPYC_OPTIONS = ["--config-file", os.devnull, "--ignore-missing-imports", "--follow-imports", "silent"]


def forget_stale_extensions() -> None:
    """Removes the extension module beside a source of ``seclang/`` that ``COMPILED_MODULES`` no longer lists (a
    module split, renamed or no longer compiled): Python imports an extension module before the source beside it, and
    such a one asks the group's new library for a module it does not hold, so that importing the package fails."""
    root = Path(__file__).resolve().parent
    compiled = {str(Path(module).with_suffix("")) for module in COMPILED_MODULES}
    for extension in (root / "src" / "edgeplane" / "seclang").glob("*.so"):
        source = extension.relative_to(root).parent / extension.name.split(".", 1)[0]
        if str(source) not in compiled:
            extension.unlink()


def seclang_extensions() -> list[Extension]:
    """The mypyc extensions of the SecLang walk, each optional; none when mypyc is missing or turned off."""
    forget_stale_extensions()
    if os.environ.get("EDGEPLANE_NO_MYPYC") == "1":
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        return []
    try:
        extensions = mypycify(MYPYC_OPTIONS + COMPILED_MODULES, group_name="edgeplane_seclang")
    except (Exception, SystemExit) as failure:  # mypy's errors end in SystemExit: the install goes on without them
        print(f"mypyc could not compile the SecLang walk, which runs interpreted: {failure}", file=sys.stderr)
        return []
    for extension in extensions:
        extension.optional = True
    return extensions


setup(
    ext_modules=[
        Extension(
            "edgeplane.rate_table",
            sources=["src/edgeplane/rate_table.c"],
            extra_compile_args=["-O2"],
        ),
        Extension(
            "edgeplane.edge.row_writer",
            sources=["src/edgeplane/edge/row_writer.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        *seclang_extensions(),
    ]
)
