"""Multi-pattern matching: many rules' regular expressions searched in one pass per input.

Most signatures are a ``matches`` (or ``contains``) on one normalised field, and the Rules language compiler
exposes that as the expression's *prefilter*: a key naming the input (such as
``lower(url_decode(http.request.uri))``), an RE2 pattern, and the input's value(s) for a request. Its promise: when
the expression is true, the pattern matches one of the values. So the rules are grouped by key, each group's
patterns go into one ``re2.Set``, and per request each input is searched once for all of its patterns; only the
rules whose pattern was found (the *candidates*) have their expression evaluated. A request that matches nothing
costs one RE2 pass per input instead of one regular expression per rule.

Inputs repeat from request to request (the same user agents, paths, header lines), so each input remembers what
its set found, twice over: by the value of the field the input reads (the input is a pure function of that one
field, see ``edgeplane.rules.prefilter``), which spares both the input's functions (``lower(url_decode(...))``)
and the search; and by each value searched, which spares the search when a field's value is new but its
normalised value is not. A dictionary look-up costs far less than running the functions, encoding the value and
running RE2 over it. Fields that are strings or lists of strings are remembered by value; an input of a map field
(``http.request.headers["x-a"][0]``, a cookie, a query argument) only by its normalised values. The memories are
bounded (field values longer than ``MEMO_MAX_VALUE_LENGTH`` characters, lists of more than ``MEMO_MAX_LIST_ITEMS``
values or ``MEMO_MAX_LIST_CHARACTERS`` characters in all, and searched values longer than
``MEMO_MAX_VALUE_LENGTH``, are not remembered; a full memory of ``MEMO_ENTRIES`` starts again empty: an
``edgeplane.bounded_memo.BoundedMemo``) and belong to the compiled index, so a configuration change starts them
afresh.

A pattern ``re2.Set`` refuses (it accepts less than a standalone RE2 does in rare cases), or a group whose set cannot
be compiled within the memory budget, leaves its rules unindexed: they are evaluated on every request, as rules
without a prefilter are.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import re2

from edgeplane.bounded_memo import BoundedMemo

# Memory for one group's compiled set; RE2's default (8 MiB) is too small for a hundred signatures on one input.
SET_MAX_MEMORY = 64 << 20
# What each group remembers of the values it searched (see the module docstring).
MEMO_ENTRIES = 512
MEMO_MAX_VALUE_LENGTH = 512
# A list field (the header lines' values, say) is remembered when it has at most this many values, and this many
# characters in all.
MEMO_MAX_LIST_ITEMS = 64
MEMO_MAX_LIST_CHARACTERS = 4096


class Prefilter(Protocol):
    """What the index needs of an expression's prefilter (``edgeplane.rules.Prefilter``)."""

    @property
    def key(self) -> str: ...

    @property
    def pattern(self) -> str: ...

    @property
    def field(self) -> str: ...

    def values_of(self, field_value: Any, /) -> Sequence[str]: ...


class _Input:
    """One input of the index: the field it reads, its set's search, and what the search found, remembered by the
    field's value."""

    __slots__ = ("read", "remembered", "search", "skip_empty", "values_of")

    def __init__(self, prefilter: Prefilter, skip_empty: bool, search: Callable[[str], tuple[int, ...]]) -> None:
        self.read = operator.attrgetter(prefilter.field)
        self.values_of = prefilter.values_of
        self.skip_empty = skip_empty  # absent inputs (no cookie, no Referer) are empty strings
        self.search = search
        self.remembered: BoundedMemo[str | tuple[str, ...], tuple[int, ...]] = BoundedMemo(
            self._found_in_remembered, max_entries=MEMO_ENTRIES, max_length=MEMO_MAX_VALUE_LENGTH
        )  # keys are checked against the bounds before they are looked up (``found``)

    def found(self, request: Any) -> tuple[int, ...]:
        """The serials of the set's patterns found in this input of ``request``."""
        try:
            field_value = self.read(request)
        except Exception:  # as the input itself reads a field that cannot be read: no values
            return ()
        kind = type(field_value)
        if kind is str:
            if len(field_value) <= MEMO_MAX_VALUE_LENGTH:
                return self.remembered(field_value)
        elif kind is list and len(field_value) <= MEMO_MAX_LIST_ITEMS:
            try:
                if sum(map(len, field_value)) <= MEMO_MAX_LIST_CHARACTERS:
                    return self.remembered(tuple(field_value))
            except TypeError:  # values that are not strings (no field of the scheme has them)
                pass
        return self._found_in(field_value)

    def _found_in_remembered(self, field_value: str | tuple[str, ...]) -> tuple[int, ...]:
        return self._found_in(list(field_value) if type(field_value) is tuple else field_value)

    def _found_in(self, field_value: Any) -> tuple[int, ...]:
        found: list[int] = []
        for value in self.values_of(field_value):
            if self.skip_empty and not value:
                continue
            found.extend(self.search(value))
        return tuple(found)


class PatternIndex:
    """The prefilters of a set of rules, each rule known by an integer serial; see the module docstring."""

    def __init__(self, prefilters: Iterable[tuple[int, Prefilter]]) -> None:
        groups: dict[str, list[tuple[int, Prefilter]]] = {}
        for serial, prefilter in prefilters:
            groups.setdefault(prefilter.key, []).append((serial, prefilter))
        self._inputs: list[_Input] = []
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
            search = BoundedMemo(
                functools.partial(_search, pattern_set, tuple(serials)),
                max_entries=MEMO_ENTRIES,
                max_length=MEMO_MAX_VALUE_LENGTH,
            )
            # An empty value is searched only when a pattern can match one.
            self._inputs.append(_Input(members[0][1], not pattern_set.Match(""), search))
            indexed.update(serials)
        self.indexed: frozenset[int] = frozenset(indexed)

    @property
    def inputs(self) -> int:
        """How many inputs (distinct keys) a request is searched in."""
        return len(self._inputs)

    def candidates(self, request: Any) -> set[int]:
        """The serials of the indexed rules whose pattern matches the request's input. An indexed rule that is
        not a candidate cannot match. A field that cannot be read gives its inputs no values, as it gives the
        inputs' own expressions none."""
        found: set[int] = set()
        for each in self._inputs:
            hits = each.found(request)
            if hits:
                found.update(hits)
        return found


def _search(pattern_set: Any, serials: tuple[int, ...], value: str) -> tuple[int, ...]:
    """The serials of the set's patterns found in ``value``."""
    # Values hold a request's invalid UTF-8 as lone surrogates (surrogateescape): encoded back to its bytes, which
    # RE2 searches as they are; re2's own str encoding would raise on them.
    matched = pattern_set.Match(value.encode("utf-8", "surrogateescape"))  # None when nothing matches
    return tuple(serials[position] for position in matched) if matched else ()
