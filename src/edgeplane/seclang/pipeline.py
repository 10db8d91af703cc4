"""A rule's transformation pipeline (``t:urlDecodeUni,t:lowercase``), compiled once and remembered across requests.

CRS applies a few dozen distinct pipelines, each to the same request values in rule after rule (the same headers, the
same path, the same argument names arrive in request after request), so a :class:`Pipeline` is shared by every rule
that lists the same transformations (with or without ``multiMatch``) and answers a value it has seen from a
:class:`~edgeplane.bounded_memo.BoundedMemo`. Transformations are pure functions of bytes, so a remembered result is
the result.
"""

from __future__ import annotations

from edgeplane.bounded_memo import BoundedMemo
from edgeplane.seclang.transformations import transformation

__all__ = ["Pipeline"]

# Values longer than this are transformed every time (a request body), shorter ones are remembered.
MEMO_MAX_LENGTH = 4096
MEMO_MAX_ENTRIES = 8192


class Pipeline:
    """The transformations ``names`` (as SecLang writes them after ``t:``, ``none`` already applied), called on a
    value: the values the operator runs on, which is the last step's output or, with ``multi_match``, the value and
    every step's output that differs from the one before. Raises ``UnknownTransformation`` for a name that is not
    implemented."""

    __slots__ = ("_memo", "functions", "key", "multi_match")

    def __init__(self, names: tuple[str, ...], *, multi_match: bool = False) -> None:
        self.functions = tuple(transformation(name) for name in names)
        self.multi_match = multi_match
        self.key = tuple(name.lower() for name in names) + (("+multi",) if multi_match else ())
        self._memo: BoundedMemo[bytes, tuple[bytes, ...]] = BoundedMemo(
            self._run, max_entries=MEMO_MAX_ENTRIES, max_length=MEMO_MAX_LENGTH
        )

    def __call__(self, value: bytes) -> tuple[bytes, ...]:
        if not self.functions:
            return (value,)
        return self._memo(value)

    def _run(self, value: bytes) -> tuple[bytes, ...]:
        if not self.multi_match:
            for function in self.functions:
                value = function(value)
            return (value,)
        steps = [value]
        for function in self.functions:
            value = function(value)
            if value != steps[-1]:
                steps.append(value)
        return tuple(steps)

    def __repr__(self) -> str:
        return f"Pipeline({'|'.join(self.key) or 'none'})"
