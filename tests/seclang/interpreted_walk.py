"""The SecLang engine run from its Python source even where its modules are compiled (``setup.py``: mypyc): the
compiled walk's test oracle. ``python -m tests.seclang.interpreted_walk`` prints, as one JSON document, the files the
engine's modules were loaded from and what the engine does with every request of CRS's regression corpus under CRS's
regression setup (``tests/seclang/test_crs_regression.py``), in the form :func:`walk_outcomes` gives.

Python imports an extension module before the source beside it; this script puts a finder ahead of the standard one
that gives every ``edgeplane`` module from its source only, before anything of ``edgeplane`` is imported."""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Sequence
from typing import Any

import orjson


class SourceOnlyFinder(importlib.machinery.PathFinder):
    """Finds ``edgeplane`` and its modules as the standard finder does, but from ``.py`` files only."""

    @classmethod
    def find_spec(cls, fullname: str, path: Sequence[str] | None = None, target: Any = None) -> Any:
        if fullname != "edgeplane" and not fullname.startswith("edgeplane."):
            return None
        loader = (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES)
        for entry in path if path is not None else sys.path:
            spec = importlib.machinery.FileFinder(entry or ".", loader).find_spec(fullname, target)
            if spec is not None:
                return spec
        return None


def walk_outcomes() -> list[list[Any]]:
    """For each corpus case: its id and every match (rule id, msg, logdata, matched variable and value), the rule
    that interrupted (None in DetectionOnly) and the final TX collection, as JSON-ready lists."""
    from edgeplane.seclang.engine import compile_rules
    from edgeplane.seclang.rule_files import load_rule_files, parse_rules
    from tests.seclang.test_crs_regression import CRS_RULES, SETUP, _request
    from tests.support import crs_corpus

    directives = parse_rules(SETUP, source="regression-setup") + load_rule_files(
        sorted(CRS_RULES.glob("REQUEST-9*.conf"))
    )
    engine = compile_rules(directives, data_dir=CRS_RULES)
    outcomes: list[list[Any]] = []
    for case in crs_corpus.load_cases():
        request = _request(case)
        if request is None:
            continue
        evaluation = engine.evaluate(request)
        matches = [
            [m.rule_id, m.msg, m.logdata, m.matched_var_name, m.matched_var.decode("latin-1"), m.disruptive]
            for m in evaluation.matches
        ]
        tx = sorted((name, value.decode("latin-1")) for name, value in evaluation.tx.items())
        outcomes.append([case["id"], matches, evaluation.interrupted_by, tx])
    return outcomes


if __name__ == "__main__":
    sys.meta_path.insert(0, SourceOnlyFinder)
    outcomes = walk_outcomes()
    files = sorted(module.__file__ or "" for name, module in sys.modules.items() if name.startswith("edgeplane."))
    sys.stdout.buffer.write(orjson.dumps({"files": files, "outcomes": outcomes}))
