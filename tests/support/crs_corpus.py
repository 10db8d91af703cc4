"""CRS 3.3.4's regression suite as the tests read it: in place from ``../shared/waf`` (never copied into the
repository; see ``../shared/waf/README.md``), with what each case expects and the body it sends."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import orjson

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "waf" / "crs-regression-3.3.4.json"
_ID = re.compile(r"(\d{6})")


def available() -> bool:
    """Whether the corpus is beside the repository."""
    return CORPUS.is_file()


def load_cases() -> list[dict[str, Any]]:
    """Every case, in the corpus's order."""
    cases: list[dict[str, Any]] = orjson.loads(CORPUS.read_bytes())["cases"]
    return cases


def expected_ids(case: dict[str, Any]) -> frozenset[int]:
    """The rule ids the case's ``log_contains`` names: each must fire."""
    return _ids(case["expect"].get("log_contains"))


def forbidden_ids(case: dict[str, Any]) -> frozenset[int]:
    """The rule ids the case's ``no_log_contains`` names: none may fire."""
    return _ids(case["expect"].get("no_log_contains"))


def request_body(request: dict[str, Any]) -> bytes:
    """The body the case's request sends (``body_b64`` for bytes that are not text)."""
    if request.get("body_b64") is not None:
        return base64.b64decode(request["body_b64"])
    return str(request.get("body") or "").encode("utf-8")


def _ids(expectation: Any) -> frozenset[int]:
    if not expectation:
        return frozenset()
    texts = expectation if isinstance(expectation, list) else [expectation]
    return frozenset(int(match) for text in texts for match in _ID.findall(str(text)))
