"""Multi-pattern matching: many rules' regular expressions searched in one pass per input.

Most signatures are a ``matches`` (or ``contains``) on one normalised field, and the Rules language compiler
exposes that as the expression's *prefilter*: a key naming the input (such as
``lower(url_decode(http.request.uri))``), an RE2 pattern, and the input's value(s) for a request. Its promise: when
the expression is true, the pattern matches one of the values. So the rules are grouped by key, each group's
patterns go into one ``re2.Set``, and per request each input is searched once for all of its patterns; only the
rules whose pattern was found (the *candidates*) have their expression evaluated. A request that matches nothing
costs one RE2 pass per input instead of one regular expression per rule.

Inputs repeat from request to request (the same user agents, paths, content types), so each group remembers what
its set found in the last ``MEMO_ENTRIES`` short values it searched: a search is a pure function of the value, and a
dictionary look-up costs far less than encoding the value and running RE2 over it. The memory is bounded (values
longer than ``MEMO_MAX_VALUE_LENGTH`` are not remembered; a full memory starts again empty: an
``edgeplane.bounded_memo.BoundedMemo``) and belongs to the compiled index, so a configuration change starts it afresh.

A pattern ``re2.Set`` refuses (it accepts less than a standalone RE2 does in rare cases), or a group whose set cannot
be compiled within the memory budget, leaves its rules unindexed: they are evaluated on every request, as rules
without a prefilter are.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import re2

from edgeplane.bounded_memo import BoundedMemo

# Memory for one group's compiled set; RE2's default (8 MiB) is too small for a hundred signatures on one input.
SET_MAX_MEMORY = 64 << 20
# What each group remembers of the values it searched (see the module docstring).
MEMO_ENTRIES = 512
MEMO_MAX_VALUE_LENGTH = 512


class Prefilter(Protocol):
    """What the index needs of an expression's prefilter (``edgeplane.rules.Prefilter``)."""

    @property
    def key(self) -> str: ...

    @property
    def pattern(self) -> str: ...

    def values(self, request: Any, /) -> Sequence[str]: ...


class PatternIndex:
    """The prefilters of a set of rules, each rule known by an integer serial; see the module docstring."""

    def __init__(self, prefilters: Iterable[tuple[int, Prefilter]]) -> None:
        groups: dict[str, list[tuple[int, Prefilter]]] = {}
        for serial, prefilter in prefilters:
            groups.setdefault(prefilter.key, []).append((serial, prefilter))
        # Per input: its values, whether an empty value is skipped, and its search (remembered, bounded).
        self._groups: list[tuple[Callable[[Any], Sequence[str]], bool, BoundedMemo[str, tuple[int, ...]]]] = []
        indexed: set[int] = set()
        for members in groups.values():
            options = re2.Options()
            options.max_mem = SET_MAX_MEMORY
            pattern_set = re2.Set.SearchSet(options)
            serials: list[int] = []
            for serial, prefilter in members:
                try:
                    pattern_set.Add(prefilter.pattern)
                except re2.error:
                    continue
                serials.append(serial)
            if not serials:
                continue
            try:
                pattern_set.Compile()
            except re2.error:
                continue
            # Absent inputs (no cookie, no Referer) are empty strings: searched only when a pattern can match one.
            skip_empty = not pattern_set.Match("")
            search = BoundedMemo(
                functools.partial(_search, pattern_set, tuple(serials)),
                max_entries=MEMO_ENTRIES,
                max_length=MEMO_MAX_VALUE_LENGTH,
            )
            self._groups.append((members[0][1].values, skip_empty, search))
            indexed.update(serials)
        self.indexed: frozenset[int] = frozenset(indexed)

    @property
    def inputs(self) -> int:
        """How many inputs (distinct keys) a request is searched in."""
        return len(self._groups)

    def candidates(self, request: Any) -> set[int]:
        """The serials of the indexed rules whose pattern matches the request's input. An indexed rule that is
        not a candidate cannot match. Raises whatever reading the request's values raises (nothing, for
        ``edgeplane.rules.RequestFields``)."""
        found: set[int] = set()
        for values, skip_empty, search in self._groups:
            for value in values(request):
                if skip_empty and not value:
                    continue
                hits = search(value)
                if hits:
                    found.update(hits)
        return found


def _search(pattern_set: Any, serials: tuple[int, ...], value: str) -> tuple[int, ...]:
    """The serials of the set's patterns found in ``value``."""
    # Values hold a request's invalid UTF-8 as lone surrogates (surrogateescape): encoded back to its bytes, which
    # RE2 searches as they are; re2's own str encoding would raise on them.
    matched = pattern_set.Match(value.encode("utf-8", "surrogateescape"))  # None when nothing matches
    return tuple(serials[position] for position in matched) if matched else ()
