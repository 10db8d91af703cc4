"""Which pattern rules of a phase can match a request at all, found with one RE2 set instead of a regex per rule.

Most of CRS's rules are a pattern (``@rx``, ``@pm``, ``@pmFromFile``) searched in request values after a
transformation pipeline, and on nearly every request nearly none of them matches. A :class:`Prefilter` is built for
the rules of a phase that start with such an operator (not negated) and read only the request: for every rule a
*superset pattern* (:func:`superset_pattern`, an RE2 pattern that matches at least every value the rule's operator
matches), all of them in one RE2 set. For a request, every value the rules read goes through the pipelines of the
rules that read it, and each distinct transformed value through the set once: the rules whose pattern hit, among
those that read the value with the pipeline that produced it, are the only ones of the prefiltered rules that can
match. The engine evaluates those with their real operators and passes over the others, which cannot match and so
would do nothing. Removing a rule's targets (``ctl:ruleRemoveTargetById``) only shrinks what the rule reads, so a
prefilter computed on every value stays a superset.

Requests repeat their values (header values, the path, argument names, JSON-RPC's ``"2.0"``), so both steps are
remembered across requests, bounded (:class:`~edgeplane.bounded_memo.BoundedMemo`): which rules read a value of a
source by its key (``ARGS`` / ``foo``), and which rules a value hits for a given set of readers.

Written here because RE2 gives the set (``re2.Set``) but nothing that knows SecLang's targets and pipelines.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import re2

from edgeplane.bounded_memo import BoundedMemo
from edgeplane.seclang.errors import OperatorArgumentError
from edgeplane.seclang.operators import byte_range, pm_file_phrases, pm_phrases
from edgeplane.seclang.pcre import translate
from edgeplane.seclang.pipeline import Pipeline

__all__ = ["PatternSet", "Prefilter", "PrefilterRule", "superset_pattern"]

Source = Hashable  # what the engine reads values from: a collection name, or ("XML", xpath)
Pairs = Callable[[Source], Iterable[tuple[bytes, bytes]]]

_MEMO_MAX_LENGTH: Final = 4096  # values longer than this (a request body) are searched every time
_MEMO_MAX_ENTRIES: Final = 8192
_SET_MAX_MEM: Final = 128 << 20  # the lazily built DFA of a set of every CRS pattern grows beyond RE2's default


def superset_pattern(operator: str, argument: str, *, data_dir: Path) -> bytes | None:
    """An RE2 pattern (Latin-1, case-sensitive, searched unanchored) that matches every value the operator
    ``operator`` (name without ``@``, not negated) with ``argument`` matches, or None when there is none to give
    (an operator this does not know, an argument that does not compile or is empty, an operator that matches
    every value or none). Never raises.

    ``@rx``: the pattern's RE2 translation without groups, which the operator itself searches first (a translation
    of what RE2 cannot express is a superset, confirmed by Python's ``re`` in the operator). ``@pm``: any of the
    phrases, ignoring case, which holds whenever ModSecurity's automaton reports one (it reports only where a whole
    phrase ends). ``@validateByteRange``: a byte outside the ranges; ``@validateUrlEncoding``: a ``%``;
    ``@validateUtf8Encoding``: a byte above 0x7F; ``@contains``, ``@containsWord``, ``@beginsWith``,
    ``@endsWith``, ``@streq``: the argument, where the operator wants it."""
    name = operator.lower()
    data = argument.encode("utf-8", "surrogateescape")
    literal = _literal(data)
    if name in ("contains", "containsword"):
        return literal or None
    if name == "beginswith":
        return b"\\A" + literal if literal else None
    if name == "endswith":
        return literal + b"\\z" if literal else None
    if name == "streq":
        return b"\\A" + literal + b"\\z"
    if name == "validatebyterange":
        allowed = frozenset(byte_range(data))
        forbidden = bytes(byte for byte in range(256) if byte not in allowed)
        return b"[" + _literal(forbidden, everything=True) + b"]" if forbidden else None
    if name == "validateurlencoding":
        return b"%"
    if name == "validateutf8encoding":
        return b"[\\x80-\\xff]"
    try:
        if name == "rx":
            return translate(data).re2_test if data else None
        if name == "pm":
            return _any_phrase(pm_phrases(data))
        if name in ("pmfromfile", "pmf"):
            phrases: list[bytes] = []
            for file_name in data.split():
                if file_name.startswith((b"https://", b"http://")):
                    return None
                path = Path(file_name.decode("utf-8", "surrogateescape"))
                phrases.extend(pm_file_phrases(path if path.is_absolute() else data_dir / path))
            return _any_phrase(phrases)
    except OperatorArgumentError:
        return None
    return None


def _any_phrase(phrases: Iterable[bytes]) -> bytes | None:
    alternatives = sorted({_literal(phrase.lower()) for phrase in phrases if phrase})
    if not alternatives:
        return None
    return b"(?i:" + b"|".join(alternatives) + b")"


def _literal(phrase: bytes, *, everything: bool = False) -> bytes:
    """``phrase`` as RE2 pattern text matching it literally (``everything``: every byte escaped)."""
    return b"".join(
        bytes([byte]) if byte < 0x80 and chr(byte).isalnum() and not everything else b"\\x%02x" % byte
        for byte in phrase
    )


class PatternSet:
    """RE2 patterns searched together: :meth:`hits` gives the indexes (in the order given) of those that match a
    value, remembered for the values it has seen. Raises ``ValueError`` when RE2 refuses a pattern."""

    __slots__ = ("_all", "_memo", "_set")

    def __init__(self, patterns: Sequence[bytes]) -> None:
        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1
        options.log_errors = False
        options.max_mem = _SET_MAX_MEM
        self._set = re2.Set.SearchSet(options)
        # Pattern 0 matches every text: an empty answer then means RE2 gave up (its DFA ran out of memory), not
        # that nothing matched, and every pattern is reported rather than none.
        self._set.Add(b"")
        for pattern in patterns:
            try:
                self._set.Add(pattern)
            except re2.error as error:
                raise ValueError(f"RE2 refuses {pattern[:80]!r} in a set: {error}") from None
        self._set.Compile()
        self._all = tuple(range(len(patterns)))
        self._memo: BoundedMemo[bytes, tuple[int, ...]] = BoundedMemo(
            self._search, max_entries=_MEMO_MAX_ENTRIES, max_length=_MEMO_MAX_LENGTH
        )

    def hits(self, value: bytes) -> tuple[int, ...]:
        """The indexes of the patterns that match somewhere in ``value``."""
        return self._memo(value)

    def _search(self, value: bytes) -> tuple[int, ...]:
        found = self._set.Match(value)
        if not found:
            return self._all
        return tuple(index - 1 for index in found if index)


@dataclass(frozen=True, slots=True, eq=False)
class PrefilterRule:
    """A rule as the prefilter sees it: ``slot``, the engine's handle for it; ``pattern``, its superset pattern;
    ``pipeline``; ``sources``, where it reads values; ``reads(source, key)``, whether it reads the member ``key``
    of ``source`` (its key selectors and ``!`` exclusions); ``reads_all``, the sources of which it reads every
    member (``reads`` is not asked about those)."""

    slot: int
    pattern: bytes
    pipeline: Pipeline
    sources: tuple[Source, ...]
    reads: Callable[[Source, bytes], bool]
    reads_all: frozenset[Source] = frozenset()


class _PipelineSet:
    """The patterns of the rules that share a pipeline, searched together in what the pipeline makes of a value."""

    __slots__ = ("patterns", "pipeline", "rules")

    def __init__(self, pipeline: Pipeline, rules: Sequence[tuple[int, PrefilterRule]]) -> None:
        self.pipeline = pipeline
        self.rules = tuple(rules)  # (index in the prefilter, rule)
        self.patterns = PatternSet([rule.pattern for _, rule in self.rules])


class _Readers:
    """The rules that read one kind of value (a source's member) and what a value hits among them."""

    __slots__ = ("_combined", "_memo", "_other_sets", "_word_groups", "indexes", "sets")

    def __init__(
        self,
        indexes: frozenset[int],
        sets: Sequence[_PipelineSet],
        combined: dict[tuple[_PipelineSet, ...], _PipelineSet],
    ) -> None:
        self.indexes = indexes
        self.sets = tuple(
            pattern_set for pattern_set in sets if any(index in indexes for index, _ in pattern_set.rules)
        )
        # For a word (ASCII letters and digits), the pipelines that only keep or change its case, by what they give
        # (one pipeline of each kind stands for its kind), and the others, which run.
        by_forms: dict[tuple[str, ...], tuple[Pipeline, list[_PipelineSet]]] = {}
        self._other_sets: list[_PipelineSet] = []
        for pattern_set in self.sets:
            forms = pattern_set.pipeline.word_forms
            if forms is None:
                self._other_sets.append(pattern_set)
            else:
                by_forms.setdefault(forms, (pattern_set.pipeline, []))[1].append(pattern_set)
        self._word_groups = tuple(by_forms.values())
        # The patterns of every set, searched together, by the sets: shared by the readers that read with the same
        # pipelines (hits are filtered by ``indexes``), so that each is compiled once.
        self._combined = combined
        self._memo: BoundedMemo[bytes, frozenset[int]] = BoundedMemo(
            self._slots, max_entries=_MEMO_MAX_ENTRIES, max_length=_MEMO_MAX_LENGTH
        )

    def hits(self, value: bytes) -> frozenset[int]:
        return self._memo(value)

    def _slots(self, value: bytes) -> frozenset[int]:
        produced_by: dict[bytes, list[_PipelineSet]] = {}
        if value.isalnum():
            for pipeline, sets in self._word_groups:
                for output in pipeline.on_word(value):
                    produced_by.setdefault(output, []).extend(sets)
            running: Sequence[_PipelineSet] = self._other_sets
        else:
            running = self.sets
        for pattern_set in running:
            for output in pattern_set.pipeline(value):
                produced_by.setdefault(output, []).append(pattern_set)
        slots: set[int] = set()
        indexes = self.indexes
        for output, sets in produced_by.items():
            # A plain value (hex, a method name) comes out of every pipeline as it went in: the patterns of all of
            # them are searched in one pass of one set. Other outputs go through their pipelines' own sets, whose
            # automata stay small for texts never seen before.
            searched = [self._every_pattern()] if len(sets) == len(self.sets) > 1 else sets
            for pattern_set in searched:
                rules = pattern_set.rules
                for hit in pattern_set.patterns.hits(output):
                    index, rule = rules[hit]
                    if index in indexes:
                        slots.add(rule.slot)
        return frozenset(slots)

    def _every_pattern(self) -> _PipelineSet:
        every = self._combined.get(self.sets)
        if every is None:
            every = _PipelineSet(self.sets[0].pipeline, [rule for each in self.sets for rule in each.rules])
            self._combined[self.sets] = every
        return every


class Prefilter:
    """The prefiltered rules of a phase (see the module docstring). Raises ``ValueError`` when RE2 refuses a
    pattern."""

    __slots__ = (
        "_by_pairs",
        "_by_source",
        "_combined",
        "_interned",
        "_readers",
        "_reading_all",
        "_sets",
        "rules",
        "slots",
        "sources",
    )

    def __init__(self, rules: Sequence[PrefilterRule]) -> None:
        self.rules = tuple(rules)
        self.slots = frozenset(rule.slot for rule in self.rules)
        self.sources: tuple[Source, ...] = tuple(
            dict.fromkeys(source for rule in self.rules for source in rule.sources)
        )
        by_pipeline: dict[Pipeline, list[tuple[int, PrefilterRule]]] = {}
        for index, rule in enumerate(self.rules):
            by_pipeline.setdefault(rule.pipeline, []).append((index, rule))
        # One set per pipeline: RE2 builds a set's automaton as texts explore it, and a state of a set of every
        # pattern costs far more to build than the states of a few small sets.
        self._sets = [_PipelineSet(pipeline, rules) for pipeline, rules in by_pipeline.items()]
        self._reading_all = {
            source: frozenset(index for index, rule in enumerate(self.rules) if source in rule.reads_all)
            for source in self.sources
        }
        self._by_source = {
            source: tuple(
                index
                for index, rule in enumerate(self.rules)
                if source in rule.sources and source not in rule.reads_all
            )
            for source in self.sources
        }
        self._interned: dict[frozenset[int], _Readers] = {}
        self._combined: dict[tuple[_PipelineSet, ...], _PipelineSet] = {}
        self._readers: BoundedMemo[tuple[Source, bytes], _Readers | None] = BoundedMemo(
            self._readers_of, max_entries=_MEMO_MAX_ENTRIES
        )
        # What a source's pairs hit, by all of them: a request's headers come again with the next request.
        self._by_pairs: dict[tuple[Source, tuple[tuple[bytes, bytes], ...]], frozenset[int]] = {}

    def hits(self, pairs: Pairs) -> set[int]:
        """The slots of the rules that can match, given each source's (key, value) pairs as the rules would read
        them now (``pairs(source)``)."""
        found: set[int] = set()
        readers_of = self._readers
        by_pairs = self._by_pairs
        for source in self.sources:
            members = tuple(pairs(source))
            if not members:
                continue
            remembered = by_pairs.get((source, members))
            if remembered is None:
                slots: set[int] = set()
                for key, value in members:
                    readers = readers_of((source, key))
                    if readers is not None:
                        slots.update(readers.hits(value))
                remembered = frozenset(slots)
                if sum(len(value) for _, value in members) <= _MEMO_MAX_LENGTH:
                    if len(by_pairs) >= _MEMO_MAX_ENTRIES:
                        by_pairs.clear()
                    by_pairs[(source, members)] = remembered
            found.update(remembered)
        return found

    def _readers_of(self, member: tuple[Source, bytes]) -> _Readers | None:
        source, key = member
        indexes = self._reading_all[source].union(
            index for index in self._by_source[source] if self.rules[index].reads(source, key)
        )
        if not indexes:
            return None
        readers = self._interned.get(indexes)
        if readers is None:
            readers = self._interned[indexes] = _Readers(indexes, self._sets, self._combined)
        return readers
