"""A bounded memo of a pure function of one short value: for what recurs from request to request.

Requests repeat themselves: the same methods, targets, hosts and user agents arrive again and again, and turning
their bytes into text (decoding, splitting, lower-casing) is work done again for every request. A memo answers a
value it has seen with a dictionary look-up, and it gives every request of that value the same object. That second
effect matters to the request log: it turns a few hundred rows into columns at once (``edgeplane.edge.request_log``),
and a column whose values are one object is recognised by identity and stored as one repeated value, without
reading each value's memory again (rows made over 50 ms are no longer in the processor's cache).

Bounded twice: values longer than ``max_length`` are not remembered, and a memo that holds ``max_entries`` values
starts again empty (a client that sends ever-new values costs a little more, never more memory).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sized
from typing import Final, Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
Result = TypeVar("Result")
_MISSING: Final = object()


class BoundedMemo(Generic[Key, Result]):
    """``function``'s results for the last values it was asked (see the module docstring)."""

    __slots__ = ("_function", "_results", "max_entries", "max_length")

    def __init__(self, function: Callable[[Key], Result], *, max_entries: int = 1024, max_length: int = 512) -> None:
        self._function = function
        self._results: dict[Key, Result] = {}
        self.max_entries = max_entries
        self.max_length = max_length  # of a value that is remembered (its ``len``)

    def __call__(self, value: Key) -> Result:
        results = self._results
        found = results.get(value, _MISSING)
        if found is not _MISSING:
            return found  # type: ignore[return-value]  # a Result: only results are stored
        result = self._function(value)
        if not isinstance(value, Sized) or len(value) <= self.max_length:
            if len(results) >= self.max_entries:
                results.clear()
            results[value] = result
        return result

    def __len__(self) -> int:
        return len(self._results)
