"""The test contracts (``TraceTarget.sol``), compiled ahead of time into ``compiled.json`` by ``compile.sh``."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

COMPILED = Path(__file__).with_name("compiled.json")


@cache
def _compiled() -> dict[str, dict[str, Any]]:
    compiled: dict[str, dict[str, Any]] = json.loads(COMPILED.read_text(encoding="utf-8"))
    return compiled


def load_contract(name: str) -> tuple[list[dict[str, Any]], str]:
    """The ABI and the ``0x`` creation bytecode of contract ``name``; KeyError names the contracts there are."""
    try:
        entry = _compiled()[name]
    except KeyError:
        raise KeyError(f"no contract {name!r} in {COMPILED.name}; there are {sorted(_compiled())}") from None
    return entry["abi"], entry["bytecode"]
