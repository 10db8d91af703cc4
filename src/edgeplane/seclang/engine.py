"""The SecLang engine: rules compiled once, then evaluated on requests with ModSecurity v3's semantics.

:func:`compile_rules` turns directives (from :mod:`edgeplane.seclang.rule_files`) into a :class:`RuleEngine`: each
rule's targets resolved to collection lookups, its transformation pipeline to a tuple of functions, its operator
compiled once (or, when its argument holds a macro, compiled per distinct expansion and cached), its actions read
(:mod:`edgeplane.seclang.actions`), and the rules split into one program per phase with the ``SecMarker`` s that
``skipAfter`` resumes after. :meth:`RuleEngine.evaluate` runs phase 1 then phase 2 on one request and returns an
:class:`Evaluation`: the rules that fired and logged, the final TX collection and the anomaly scores.

Semantics follow libmodsecurity 3.0.9 (what CRS 3.3.4 is tested against):

- a rule evaluates every value of every target (after ``!`` exclusions and ``ctl`` target removals), each through
  the transformation pipeline (``multiMatch``: the operator also runs on the value before and after each step);
- on each matching value: captures go to ``TX:0``-``TX:9`` (with ``capture``), ``MATCHED_VAR(S)(_NAME(S))`` are
  updated and the link's ``setvar`` s run (so a rule matching two arguments adds its score twice, as v3 does);
- a chain matches when every link matches; then each link's ``ctl`` run, the starter's flow actions
  (``skipAfter``, ``skip``) apply, and the starter is logged unless ``nolog`` (``log`` is the default, as in CRS's
  ``SecDefaultAction``);
- ``block`` means the default disruptive action, ``pass`` in CRS's anomaly scoring mode; ``deny``/``drop`` stop
  the evaluation (and are reported as ``interrupted_by``), ``allow`` stops it without blocking, only when the
  engine mode is ``On`` (CRS's regression suite runs ``DetectionOnly``);
- in phase 1 the body is not read yet: ``ARGS`` / ``ARGS_NAMES`` hold the query's arguments only and body
  collections are empty; ``IP``/``GLOBAL``/``SESSION``/``USER``/``RESOURCE`` start empty for each request (nothing
  persists between requests, so CRS's DoS rules never fire).

The request body processor is chosen from the Content-Type by :class:`~edgeplane.seclang.variables.RequestVariables`
the way modsecurity.conf-recommended's rules 200000/200001 do (XML, JSON), so those rules are not needed here; a
body that fails to parse sets ``REQBODY_ERROR`` (rule 200002 of that file is not loaded: CRS's regression suite
expects no id of it). One point follows ModSecurity v2, which CRS's regression suite was written against, rather
than v3: when the XML, JSON or multipart processor parsed the body, ``REQUEST_BODY`` is empty unless
``ctl:forceRequestBodyVariable=On`` (v3 keeps the raw body there, so the Java rules fire on XML element names the
suite expects them to ignore). Operators that need a GeoIP database or DNS (``@geoLookup``, ``@rbl``) never
match: CRS gates them behind settings that are off by default.

How the walk is kept cheap without changing what it does (``compile_rules(..., prefilter=False)`` keeps the plain
walk, which the tests hold the fast one to):

- a :class:`~edgeplane.seclang.prefilter.Prefilter` per phase passes over the pattern rules whose superset pattern
  matches none of the values they read (a run of such rules in one step); ahead of the first paranoia level gate a
  prefilter of the rules there only decides, so that a request's values are searched for the patterns of the level
  it runs at rather than of every level;
- at the first paranoia level gate of a phase the walk switches to a program built for the value of
  ``TX:executing_paranoia_level`` (no gates, no rules they skip), back to the full one when a ``ctl`` removes a
  gate (or a target of one);
- runs of rules whose evaluation is a function of a few named variables (CRS's initialisation, its exclusion package
  switches, header checks, scoring) are remembered as segments by those values, and replayed in one step, unless a
  ``ctl`` of this request removed one of their rules or targets (an exclusion package's removals touch a few rules:
  the other segments still replay);
- transformations, costly operators and key regexes remember their answers across requests (bounded).

Written by hand: no Python library evaluates SecLang; libmodsecurity is C++ and Coraza is Go.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import re2

from edgeplane.bounded_memo import BoundedMemo
from edgeplane.seclang.actions import Control, Macro, RuleActions, SetVar, compile_actions
from edgeplane.seclang.errors import OperatorArgumentError, RuleFileError, UnsupportedOperator
from edgeplane.seclang.operators import Captures, Operator, compile_operator
from edgeplane.seclang.pipeline import Pipeline
from edgeplane.seclang.prefilter import Prefilter, PrefilterRule, Source, superset_pattern
from edgeplane.seclang.request import HttpRequest
from edgeplane.seclang.rule_files import Directive, SecMarker, SecRule, Target, load_rule_files
from edgeplane.seclang.variables import RequestVariables

__all__ = [
    "Evaluation",
    "RuleEngine",
    "RuleMatch",
    "compile_rules",
    "load_crs",
]

EngineMode = Literal["On", "DetectionOnly", "Off"]
_UNANCHORED: Final = re2._Anchor.UNANCHORED

# Operators whose data this engine cannot reach at request time (a GeoIP database, DNS blocklists).
NEVER_MATCHING_OPERATORS: Final = frozenset({"geolookup", "rbl"})
_PER_REQUEST_COLLECTIONS: Final = ("TX", "IP", "GLOBAL", "SESSION", "USER", "RESOURCE")
_MATCHED: Final = frozenset({"MATCHED_VAR", "MATCHED_VAR_NAME", "MATCHED_VARS", "MATCHED_VARS_NAMES"})
# Collections that come from the body, empty until phase 2; ARGS and ARGS_NAMES fall back to the query's.
_BODY_COLLECTIONS: Final = frozenset(
    {
        "ARGS_POST",
        "ARGS_POST_NAMES",
        "REQUEST_BODY",
        "FILES",
        "FILES_NAMES",
        "FILES_SIZES",
        "FILES_COMBINED_SIZE",
        "FILES_TMPNAMES",
        "FILES_TMP_CONTENT",
        "MULTIPART_PART_HEADERS",
        "MULTIPART_FILENAME",
        "MULTIPART_NAME",
        "MULTIPART_STRICT_ERROR",
        "MULTIPART_UNMATCHED_BOUNDARY",
        "REQBODY_ERROR",
        "REQBODY_ERROR_MSG",
        "XML",
    }
)
_STRUCTURED_PROCESSORS: Final = frozenset({b"XML", b"JSON", b"MULTIPART"})
_SCORE_WEIGHTS: Final = frozenset(
    {"critical_anomaly_score", "error_anomaly_score", "warning_anomaly_score", "notice_anomaly_score"}
)
# Variables whose value is new in every request.
_NEW_IN_EVERY_REQUEST: Final = frozenset({"UNIQUE_ID", "DURATION"})
_PHASE1_FALLBACK: Final = {"ARGS": "ARGS_GET", "ARGS_NAMES": "ARGS_GET_NAMES"}
# Operators that cost less than remembering their answer; the others (patterns, libinjection, validations, IP
# networks) remember it for the values they have seen: operators are pure functions of the value.
_CHEAP_OPERATORS: Final = frozenset(
    {"eq", "ge", "gt", "lt", "le", "streq", "beginswith", "endswith", "contains", "within", "nomatch"}
)


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """A rule that fired and logged: its id, its expanded ``msg`` and ``logdata``, ``severity``, ``tags``, and the
    variable that matched last (``ARGS:foo``) with its value after transformation."""

    rule_id: int
    msg: str
    logdata: str
    severity: str | None
    tags: tuple[str, ...]
    matched_var_name: str
    matched_var: bytes
    disruptive: str | None = None


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The outcome of one request: rules that fired and logged in order, the final TX collection (lower-case
    names) and, when the engine mode is ``On``, the id of the rule whose ``deny``/``drop`` stopped evaluation."""

    matches: tuple[RuleMatch, ...]
    tx: Mapping[str, bytes]
    interrupted_by: int | None = None

    @property
    def fired_ids(self) -> frozenset[int]:
        """The ids of the rules that fired and logged."""
        return frozenset(match.rule_id for match in self.matches)

    def tx_integer(self, name: str) -> int:
        """A TX variable read as an integer (0 when absent or not a number)."""
        try:
            return int(self.tx.get(name.lower(), b"0"))
        except ValueError:
            return 0

    @property
    def anomaly_score(self) -> int:
        """CRS's inbound anomaly score (``tx.anomaly_score``)."""
        return self.tx_integer("anomaly_score")

    @property
    def anomaly_scores(self) -> dict[str, int]:
        """CRS's scores as integers: ``anomaly_score``, ``anomaly_score_pl1``..``4``, ``inbound_anomaly_score`` and
        the per-family ``*_score`` (``sql_injection_score``, ``xss_score``, ``rce_score``...); not the weights
        (``critical_anomaly_score``...) nor the thresholds."""
        return {
            name: self.tx_integer(name)
            for name in self.tx
            if (name.endswith("_score") or "_score_pl" in name) and name not in _SCORE_WEIGHTS
        }


@dataclass(frozen=True, slots=True, eq=False)  # hashed by identity: segment keys hold selectors
class _Selector:
    """A key selector of a target: a literal (compared case-insensitively) or a regex (searched, case-insensitive)."""

    literal: bytes | None
    regex: Callable[[bytes], bool] | None  # whether the regex is found in a key (remembered: keys repeat)
    text: str
    # The same for the str keys of TX, IP... (remembered as well), so that those are not encoded to be selected.
    regex_text: Callable[[str], bool] | None = None

    def matches(self, key: bytes) -> bool:
        if self.literal is not None:
            return key.lower() == self.literal
        assert self.regex is not None
        return self.regex(key)


@dataclass(frozen=True, slots=True)
class _Target:
    collection: str
    selector: _Selector | None
    counted: bool
    text: str
    exclusions: tuple[_Selector | None, ...]  # the rule's "!" targets of this collection
    name: bytes  # b"ARGS"
    prefix: bytes  # b"ARGS:"


@dataclass(slots=True)
class _Rule:
    """One compiled link of a chain."""

    rule_id: int | None
    source: str
    targets: tuple[_Target, ...]
    pipeline: Pipeline
    operator: Operator | None
    operator_name: str
    operator_argument: str
    operator_macro: Macro | None
    negated: bool
    actions: RuleActions
    chained: _Rule | None
    # Of the chain starter, shared by its links (ctl by id/tag, logging):
    tags: tuple[str, ...] = ()
    unconditional: bool = False
    # Same number for rules with the same targets when those read only the request (not TX, IP... nor MATCHED_*),
    # whose values then stay the same for a whole phase; None otherwise.
    targets_key: int | None = None
    # Of a chain starter, set when its phase is compiled: its index in the phase's rules; where the walk goes on
    # after it matched when it has skipAfter or skip (-1: the next rule); whether the phase's prefilter decides if
    # it can match.
    position: int = -1
    jump: int = -1
    prefiltered: bool = False
    # A gate: a rule that only tests a TX variable and skips (CRS's paranoia level checks); see _Phase.
    gate: bool = False
    # (collection, key, counted, variable name) of each target when every one is a single member of a collection
    # the engine keeps (TX:x, &TX:x), read without the general path; None otherwise.
    simple_targets: tuple[tuple[str, str, bool, bytes], ...] | None = None
    # Of a chain starter whose evaluation is a function of a few variables it names (see _Segment): those
    # variables; None otherwise.
    pure_reads: tuple[_Read, ...] | None = None
    # Whether a match of this link may write a member of TX, IP... that a segment reads (see RuleEngine._state).
    touches_state: bool = True


@dataclass(frozen=True, slots=True)
class _Marker:
    name: str


@dataclass(frozen=True, slots=True)
class _Program:
    """An order to walk rules in: after ``rules[i]``, the walk goes on at ``nexts[i]``, or at ``jumps[i]`` when the
    rule matched and ``jumps[i] >= 0`` (an index of ``len(rules)`` ends the phase). ``entries`` maps a gate's
    position in the phase to the index the walk goes on at when it switches to this program there. ``prefilter``
    decides for the rules whose ``prefiltered`` is set."""

    rules: tuple[_Rule, ...]
    nexts: tuple[int, ...]
    jumps: tuple[int, ...]
    entries: Mapping[int, int]
    prefilter: Prefilter | None
    segments: dict[int, _Segment] = field(default_factory=dict, compare=False)
    runs: dict[int, _Run] = field(default_factory=dict, compare=False)

    def run(self, index: int) -> _Run:
        """The run of prefiltered rules that starts at ``index`` (a prefiltered rule), found on first use."""
        run = self.runs.get(index)
        if run is None:
            positions: list[int] = []
            at = index
            while at < len(self.rules) and self.rules[at].prefiltered:
                positions.append(self.rules[at].position)
                at = self.nexts[at]
            run = self.runs[index] = _Run(frozenset(positions), at, positions[-1])
        return run

    def segment(self, index: int) -> _Segment:
        """The segment that starts at ``index`` (a rule with ``pure_reads``), found on first use."""
        segment = self.segments.get(index)
        if segment is None:
            region: set[int] = set()
            pending = [index]
            while pending:
                at = pending.pop()
                if at >= len(self.rules) or at in region:
                    continue
                if self.rules[at].pure_reads is None and not self.rules[at].prefiltered:
                    continue
                region.add(at)
                pending.append(self.nexts[at])
                if self.jumps[at] >= 0:
                    pending.append(self.jumps[at])
            rules = [self.rules[at] for at in sorted(region)]
            reads = tuple(dict.fromkeys(read for rule in rules for read in rule.pure_reads or ()))
            # A collection read whole determines what its selectors read.
            whole = {read[1] for read in reads if read[0] == _REQUEST_PAIRS and read[3] is None}
            reads = tuple(read for read in reads if read[1] not in whole or read[3] is None or read[0] == _MACRO)
            ids = frozenset(rule.rule_id for rule in rules if rule.rule_id is not None)
            tags = frozenset(tag for rule in rules for tag in rule.tags)
            prefiltered = frozenset(rule.position for rule in rules if rule.prefiltered)
            segment = self.segments[index] = _Segment(reads, ids, tags, prefiltered)
        return segment


@dataclass(frozen=True, slots=True)
class _Run:
    """Prefiltered rules the walk reaches one after the other when none matches: when the prefilter lets none of
    them through (``positions``), the walk goes on at ``end`` in one step. ``last`` is the last one's position."""

    positions: frozenset[int]
    end: int
    last: int


# How a pure rule reads a variable: (_TX_MEMBER, collection, key, None) a member of TX, IP...;
# (_REQUEST_PAIRS, collection, None, selector) the pairs a target selects; (_MACRO, collection, key, None) a macro;
# (_COUNT, collection, None, selector) how many pairs a counted target (&ARGS) selects.
_Read = tuple[int, str, str | None, "_Selector | None"]
_TX_MEMBER: Final = 0
_REQUEST_PAIRS: Final = 1
_MACRO: Final = 2
_COUNT: Final = 3
_UNREAD: Final = object()


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What walking a segment did: collection members written, rules logged, whether a disruptive action stopped
    the evaluation, and the index the walk left the segment at."""

    # The writes as their effect: each collection's members set last to a value, and those deleted last.
    sets: tuple[tuple[str, dict[str, bytes]], ...]
    deletes: tuple[tuple[str, tuple[str, ...]], ...]
    matches: tuple[RuleMatch, ...]
    stopped: bool
    interrupted_by: int | None
    exit: int
    effect: int  # the number of what it wrote (the same writes, the same number): the state after it follows


class _WriteLog(dict[str, bytes]):
    """A collection that logs every write in order (value None: deleted), while a segment is recorded."""

    def __init__(self, store: dict[str, bytes]) -> None:
        super().__init__(store)
        self.log: list[tuple[str, bytes | None]] = []

    def __setitem__(self, member: str, value: bytes) -> None:
        self.log.append((member, value))
        super().__setitem__(member, value)

    def __delitem__(self, member: str) -> None:
        self.log.append((member, None))
        super().__delitem__(member)

    def pop(self, member: str, *default: object) -> object:  # type: ignore[override]
        self.log.append((member, None))
        if default and member not in self:
            return default[0]
        return super().pop(member)

    def setdefault(self, member: str, value: bytes) -> bytes:
        if member not in self:
            self[member] = value
        return self[member]

    def update(self, *args: object, **kwargs: object) -> None:
        raise NotImplementedError("a recorded collection is written member by member")


class _Segment:
    """Consecutive rules of a program whose evaluation is a function of the variables they name (CRS's
    initialisation, its exclusion package switches, the protocol checks of single headers, the scoring): TX members
    (``TX:x``, ``&TX:x``, ``%{tx.x}``), single request values (``REQUEST_HEADERS:Content-Length``,
    ``REQUEST_LINE``, ``%{remote_addr}``); no ``ctl``. Walking them from the same values does the same, so the
    walk remembers what it did by those values (and the engine mode) and does it again in one step."""

    __slots__ = ("ids", "last_prefiltered", "outcomes", "prefiltered", "reads", "request_reads", "state_reads", "tags")

    def __init__(
        self, reads: tuple[_Read, ...], ids: frozenset[int], tags: frozenset[str], prefiltered: frozenset[int]
    ) -> None:
        self.reads = reads
        # Reads of TX, IP... members, which the number of the collections' state stands for while it is known, and
        # reads of the request, the same for the whole phase.
        self.state_reads = tuple(read for read in reads if read[1] in _PER_REQUEST_COLLECTIONS)
        self.request_reads = tuple(read for read in reads if read[1] not in _PER_REQUEST_COLLECTIONS)
        self.ids = ids
        self.tags = tags  # of its rules: a ctl removing rules or targets by tag may concern them
        # Prefiltered rules among them, which do nothing when the prefilter passes over them: the walk of the
        # segment is remembered by those the prefilter lets through too, and ends at the first of those.
        self.prefiltered = prefiltered
        self.last_prefiltered = max(prefiltered, default=-1)
        self.outcomes: dict[tuple[object, ...], _Outcome] = {}

    def remember(self, key: tuple[object, ...], outcome: _Outcome) -> None:
        if len(self.outcomes) >= 1024:  # keys hold request values: bounded
            self.outcomes.clear()
        self.outcomes[key] = outcome


class _Phase:
    """A phase's rules in order (``SecMarker`` s resolved into each rule's ``jump``): the program that walks all of
    them, and programs specialised on the value of the TX variable the phase's gates test.

    CRS gates each paranoia level's rules behind rules such as ``SecRule TX:EXECUTING_PARANOIA_LEVEL "@lt 2"
    "nolog,skipAfter:END-..."``. When no rule from the first gate on can write that variable, its value at the first
    gate is its value at every gate, so the gates' outcomes are known there: the walk switches to a program built
    for that value, without the gates and without the rules they skip, whose prefilter holds only the rules it can
    reach. It stays on the full program while a rule is removed (``ctl``, ``disabled``) that may be a gate.

    Before the walk switches, only the rules ahead of the first gate (CRS's initialisation and exclusion packages)
    are reached: their own prefilter (``prologue``) decides for them, so that the request's values are not searched
    for the patterns of every paranoia level but only for those of the rules the walk can reach."""

    __slots__ = (
        "_candidates",
        "_specialised",
        "first_gate",
        "full",
        "gate_ids",
        "gate_tags",
        "gate_variable",
        "prologue",
        "rules",
    )

    def __init__(
        self,
        rules: tuple[_Rule, ...],
        candidates: Mapping[int, PrefilterRule],
        gate_variable: str | None,
        prefilter: bool,
    ) -> None:
        self.rules = rules
        self._candidates = candidates if prefilter else {}
        count = len(rules)
        self.full = _Program(
            rules,
            tuple(range(1, count + 1)),
            tuple(rule.jump for rule in rules),
            {},
            Prefilter(list(self._candidates.values())) if self._candidates else None,
        )
        self.gate_variable = gate_variable if prefilter else None
        self.gate_ids = frozenset(rule.rule_id for rule in rules if rule.gate and rule.rule_id is not None)
        self.gate_tags = frozenset(tag for rule in rules if rule.gate for tag in rule.tags)
        self._specialised: dict[bytes | None, _Program] = {}
        self.first_gate = next((rule.position for rule in rules if rule.gate), count)
        prologue = [candidate for position, candidate in self._candidates.items() if position < self.first_gate]
        self.prologue = Prefilter(prologue) if prologue and self.gate_variable is not None else None

    def specialised(self, value: bytes | None) -> _Program:
        """The program for the gate variable's ``value`` (built on first use, then kept)."""
        program = self._specialised.get(value)
        if program is None:
            if len(self._specialised) >= 16:  # the values come from the configuration; bounded all the same
                self._specialised.clear()
            program = self._specialised[value] = self._specialise(value)
        return program

    def _specialise(self, value: bytes | None) -> _Program:
        rules = self.rules
        count = len(rules)
        fires = {
            rule.position: value is not None and rule.operator is not None and rule.operator(value) is not None
            for rule in rules
            if rule.gate
        }

        def resolve(position: int) -> int:
            while position < count and rules[position].gate:
                rule = rules[position]
                position = rule.jump if fires[position] else position + 1
            return position

        reachable: set[int] = set()
        pending = [resolve(gate) for gate in fires]
        while pending:
            position = pending.pop()
            if position >= count or position in reachable:
                continue
            reachable.add(position)
            pending.append(resolve(position + 1))
            if rules[position].jump >= 0:
                pending.append(resolve(rules[position].jump))
        kept = sorted(reachable)
        index_of = {position: index for index, position in enumerate(kept)}
        index_of[count] = len(kept)
        candidates = [self._candidates[position] for position in kept if position in self._candidates]
        return _Program(
            tuple(rules[position] for position in kept),
            tuple(index_of[resolve(position + 1)] for position in kept),
            tuple(index_of[resolve(rules[position].jump)] if rules[position].jump >= 0 else -1 for position in kept),
            {gate: index_of[resolve(gate)] for gate in fires},
            Prefilter(candidates) if candidates else None,
        )


_NO_PHASE: Final = _Phase((), {}, None, False)


class _Relevance:
    """Which members of TX, IP... segments read: those named (``TX:x``, ``%{tx.x}``, a setvar adding to ``tx.x``)
    and those a key regex of theirs selects. Other members cannot change what a segment does, so the number of the
    collections' state (RuleEngine._state) leaves them out, and a rule that writes only such members keeps it."""

    def __init__(self, reads: Iterable[_Read]) -> None:
        self.members: frozenset[tuple[str, str]] = frozenset(
            (collection, name) for kind, collection, name, _ in reads if kind == _TX_MEMBER and name is not None
        )
        self.selectors = tuple(
            (collection, selector)
            for kind, collection, _, selector in dict.fromkeys(reads)
            if kind in (_REQUEST_PAIRS, _COUNT) and collection in _PER_REQUEST_COLLECTIONS and selector is not None
        )

    def relevant(self, collection: str, name: str) -> bool:
        if (collection, name) in self.members:
            return True
        return any(
            selector_collection == collection and selector.regex_text is not None and selector.regex_text(name)
            for selector_collection, selector in self.selectors
        )

    def touched_by(self, link: _Rule) -> bool:
        """Whether a match of ``link`` may write a relevant member: a capture (TX:0-9), or a setvar whose name is
        built at run time or is a relevant member."""
        actions = link.actions
        if actions.capture and any(self.relevant("TX", str(digit)) for digit in range(10)):
            return True
        for setvar in actions.setvars:
            if not setvar.name.is_constant:
                return True
            name = b"".join(part for part in setvar.name.parts if isinstance(part, bytes)).decode("latin-1").lower()
            if self.relevant(setvar.collection, name):
                return True
        return False


class RuleEngine:
    """Compiled rules, ready to evaluate requests; safe to share. Its only state after :func:`compile_rules` is a
    bounded cache of operators compiled for the expansions of macro arguments (``@within %{tx.allowed_methods}``)."""

    def __init__(self, phases: Mapping[int, _Phase], data_dir: Path) -> None:
        self._phases = dict(phases)
        _walk_rules_reading_distinct_values([rule for phase in self._phases.values() for rule in phase.rules])
        self._relevance = _Relevance(
            [read for phase in self._phases.values() for rule in phase.rules for read in rule.pure_reads or ()]
        )
        for phase in self._phases.values():
            for rule in phase.rules:
                link: _Rule | None = rule
                while link is not None:
                    link.touches_state = self._relevance.touched_by(link)
                    link = link.chained
        self._data_dir = data_dir
        self._dynamic_operators: dict[tuple[str, str], Operator] = {}
        # States of the TX, IP... collections, numbered: by the TX a request starts with, then by (state, what a
        # segment wrote) as segments are walked (and the writes themselves, numbered the same way). Numbers are
        # never reused, so forgetting the table only costs speed.
        self._states: dict[object, int] = {}
        self._serials = itertools.count(1)

    def _state(self, origin: object) -> int:
        state = self._states.get(origin)
        if state is None:
            if len(self._states) >= 65536:
                self._states.clear()
            state = self._states[origin] = next(self._serials)
        return state

    @property
    def rule_ids(self) -> frozenset[int]:
        """The ids of every rule of phases 1 and 2."""
        return frozenset(
            rule.rule_id for phase in self._phases.values() for rule in phase.rules if rule.rule_id is not None
        )

    def evaluate(
        self,
        request: HttpRequest,
        *,
        tx: Mapping[str, str | bytes] | None = None,
        mode: EngineMode = "On",
        body_limit: int = 131072,
        disabled: frozenset[int] = frozenset(),
    ) -> Evaluation:
        """Evaluate phases 1 and 2 on ``request``. ``tx`` seeds the TX collection before any rule runs, as
        crs-setup.conf's ``SecAction`` s do (``paranoia_level``, thresholds, ``crs_setup_version``...). ``mode`` is
        SecRuleEngine: ``DetectionOnly`` never stops at a ``deny``; ``Off`` evaluates nothing. ``disabled``: ids of
        rules that do not run at all, as if ``ctl:ruleRemoveById`` had removed them before the first rule. Never
        raises for a request's content."""
        transaction = _Transaction(self, RequestVariables(request, body_limit=body_limit), mode)
        transaction.disabled = disabled
        for name, value in (tx or {}).items():
            transaction.collections["TX"][name.lower()] = value.encode("utf-8") if isinstance(value, str) else value
        relevant = self._relevance.relevant
        transaction.state = self._state(
            tuple(
                sorted((name, value) for name, value in transaction.collections["TX"].items() if relevant("TX", name))
            )
        )
        for phase in (1, 2):
            if transaction.mode == "Off" or transaction.stopped:
                break
            transaction.run_phase(phase, self._phases.get(phase, _NO_PHASE))
        return Evaluation(tuple(transaction.matches), dict(transaction.collections["TX"]), transaction.interrupted_by)

    def _operator_for(self, rule: _Rule, argument: bytes) -> Operator:
        """The operator of a rule whose argument held a macro, compiled for this expansion (cached)."""
        text = argument.decode("utf-8", "surrogateescape")
        key = (rule.operator_name, text)
        operator = self._dynamic_operators.get(key)
        if operator is None:
            operator = compile_operator(rule.operator_name, text, data_dir=self._data_dir)
            if len(self._dynamic_operators) < 4096:  # expansions come from TX, which requests can influence
                self._dynamic_operators[key] = operator
        return operator


def load_crs(rules_dir: Path) -> RuleEngine:
    """Compile the request rule files of a CRS installation (``REQUEST-9*.conf`` of ``rules_dir``, in name order;
    data files are read from the same directory). Raises :class:`RuleFileError` when there are none or one fails
    to load, and the errors of :func:`compile_rules`."""
    paths = sorted(rules_dir.glob("REQUEST-9*.conf"))
    if not paths:
        raise RuleFileError(f"{rules_dir}: no REQUEST-9*.conf rule files")
    return compile_rules(load_rule_files(paths), data_dir=rules_dir)


def compile_rules(directives: Iterable[Directive], *, data_dir: Path, prefilter: bool = True) -> RuleEngine:
    """Compile directives into an engine: rules of phases 1 and 2 (others are dropped), markers in every phase.
    ``prefilter=False`` evaluates every rule on every request (the plain walk the prefiltered one must equal).
    Raises :class:`RuleFileError` (bad actions, a rule without id), ``UnknownTransformation``,
    ``UnsupportedOperator`` and ``OperatorArgumentError``."""
    programs: dict[int, list[_Rule | _Marker]] = {1: [], 2: []}
    targets_keys: dict[tuple[str, ...], int] = {}
    pipelines: dict[tuple[str, ...], Pipeline] = {}
    for directive in directives:
        if isinstance(directive, SecMarker):
            for program in programs.values():
                program.append(_Marker(directive.name))
            continue
        rule = _compile_chain(directive, data_dir, pipelines)
        link: _Rule | None = rule
        while link is not None:
            if link.targets and all(_reads_only_the_request(target) for target in link.targets):
                signature = tuple(
                    target.text + "".join(f"|!{sel.text if sel else ''}" for sel in target.exclusions)
                    for target in link.targets
                )
                link.targets_key = targets_keys.setdefault(signature, len(targets_keys))
            link = link.chained
        phase = rule.actions.phase or 2
        if phase in programs:
            programs[phase].append(rule)
    return RuleEngine(
        {phase: _compile_phase(program, data_dir, prefilter) for phase, program in programs.items()}, data_dir
    )


def _compile_phase(program: Sequence[_Rule | _Marker], data_dir: Path, prefilter: bool) -> _Phase:
    """The phase's rules with each ``skipAfter`` / ``skip`` resolved to the index the walk goes on at (the rule
    after the first marker of that name that follows; the end of the phase when there is none; ``skip`` counts
    markers as ModSecurity v3 does), and the prefilter of its pattern rules."""
    rules = [item for item in program if isinstance(item, _Rule)]
    for position, rule in enumerate(rules):
        rule.position = position
    # For each index of the program, the position of the first rule at or after it.
    next_rule = [len(rules)] * (len(program) + 1)
    for index in range(len(program) - 1, -1, -1):
        item = program[index]
        next_rule[index] = item.position if isinstance(item, _Rule) else next_rule[index + 1]
    for index, item in enumerate(program):
        if not isinstance(item, _Rule):
            continue
        if item.actions.skip_after is not None:
            marker = next(
                (
                    later
                    for later in range(index + 1, len(program))
                    if isinstance(program[later], _Marker) and program[later].name == item.actions.skip_after  # type: ignore[union-attr]
                ),
                None,
            )
            item.jump = len(rules) if marker is None else next_rule[marker + 1]
        elif item.actions.skip:
            item.jump = next_rule[min(index + 1 + item.actions.skip, len(program))]
    for rule in rules:
        link: _Rule | None = rule
        while link is not None:
            link.simple_targets = _simple_targets(link)
            link = link.chained
    gate_variable = _mark_gates(rules) if prefilter else None
    if prefilter:
        for rule in rules:
            rule.pure_reads = None if rule.gate else _pure_reads(rule)
    candidates = {
        rule.position: candidate
        for rule in rules
        if rule.pure_reads is None and (candidate := _prefilter_rule(rule, data_dir))
    }
    if prefilter:
        for position in candidates:
            rules[position].prefiltered = True
    return _Phase(tuple(rules), candidates, gate_variable, prefilter)


# Request variables with one value, which a pure rule may read whole.
_SCALARS: Final = frozenset(
    {
        "REQUEST_LINE",
        "REQUEST_METHOD",
        "REQUEST_PROTOCOL",
        "REQUEST_URI",
        "REQUEST_URI_RAW",
        "REQUEST_FILENAME",
        "REQUEST_BASENAME",
        "QUERY_STRING",
        "REQBODY_PROCESSOR",
        "REQBODY_ERROR",
        "REQUEST_BODY_LENGTH",
        "ARGS_COMBINED_SIZE",
        "FILES_COMBINED_SIZE",
    }
)


# Request collections whose members recur from request to request (header names, cookies, argument names), which a
# pure rule may read whole: a segment keyed by them is found again. Argument values and bodies are not, nor all the
# headers (Content-Length changes with the body).
_RECURRING: Final = frozenset(
    {
        "REQUEST_HEADERS_NAMES",
        "REQUEST_COOKIES",
        "REQUEST_COOKIES_NAMES",
        "ARGS_NAMES",
        "ARGS_GET_NAMES",
        "ARGS_POST_NAMES",
    }
)


_MEMBERS: Final[dict[bytes, _Selector]] = {}


def _member(literal: bytes) -> _Selector:
    """One selector object per literal key, so that segments reading the same member share its read."""
    selector = _MEMBERS.get(literal)
    if selector is None:
        selector = _MEMBERS[literal] = _Selector(literal, None, literal.decode("latin-1"))
    return selector


_NAMED: Final[dict[tuple[str, bool], _Selector]] = {}


def _named(text: str, *, literal: bool) -> _Selector:
    """The selector of a macro's key (``literal``: compared without case) or of an XPath (not compared: the path
    selects), one object per text: rules name the same ones in request after request."""
    selector = _NAMED.get((text, literal))
    if selector is None:
        selector = _Selector(text.lower().encode("utf-8") if literal else None, None, text)
        if len(_NAMED) < 4096:  # the texts come from rules; bounded all the same
            _NAMED[(text, literal)] = selector
    return selector


# Request values that differ from client to client or request to request: a segment keyed by one would seldom be
# found again, so rules reading them are walked.
_DISTINCT: Final = frozenset({"REMOTE_ADDR", "UNIQUE_ID", "DURATION", "REQUEST_BODY_LENGTH"})
_DISTINCT_MEMBERS: Final = frozenset({("REQUEST_HEADERS", b"content-length")})


def _walk_rules_reading_distinct_values(rules: Sequence[_Rule]) -> None:
    """Take the segments' reads away from rules that read a TX, IP... member set from a distinct value
    (``setvar:tx.real_ip=%{remote_addr}``), directly or through other members: those are walked."""
    tainted: set[tuple[str, str]] = set()
    links: list[_Rule] = []
    for rule in rules:
        link: _Rule | None = rule
        while link is not None:
            links.append(link)
            link = link.chained
    changed = True
    while changed:
        changed = False
        for link in links:
            for setvar in link.actions.setvars:
                if not setvar.name.is_constant:
                    continue
                name = b"".join(part for part in setvar.name.parts if isinstance(part, bytes)).decode("latin-1")
                member = (setvar.collection, name.lower())
                if member in tainted:
                    continue
                for part in setvar.value.parts:
                    if isinstance(part, bytes):
                        continue
                    collection, key = part
                    if collection in _DISTINCT or (collection, (key or "").lower()) in tainted:
                        tainted.add(member)
                        changed = True
                        break
    for rule in rules:
        reads = rule.pure_reads
        if reads and any(kind == _TX_MEMBER and (collection, name) in tainted for kind, collection, name, _ in reads):
            rule.pure_reads = None


def _pure_reads(rule: _Rule) -> tuple[_Read, ...] | None:
    """The variables a chain's evaluation depends on when they can be named before it runs; None when they
    cannot (whole collections, key regexes, exclusions, MATCHED_VARS as a target, a setvar adding to a variable
    whose name is built at run time) or the chain has a ``ctl``."""
    reads: list[_Read] = []
    link: _Rule | None = rule
    while link is not None:
        actions = link.actions
        if actions.controls:
            return None
        for target in link.targets:
            selector = target.selector
            if target.collection in _MATCHED or target.collection == "XML":
                return None
            if target.exclusions:
                if target.collection not in _RECURRING:
                    return None
                # What the exclusions leave of the collection is a function of all of it.
                reads.append((_REQUEST_PAIRS, target.collection, None, None))
                continue
            if target.counted and target.collection not in _PER_REQUEST_COLLECTIONS:
                literal = selector.literal if selector is not None else None
                reads.append((_COUNT, target.collection, None, _member(literal) if literal is not None else selector))
            elif target.collection in _PER_REQUEST_COLLECTIONS:
                if selector is None:
                    return None
                if selector.literal is not None:
                    reads.append((_TX_MEMBER, target.collection, selector.literal.decode("latin-1"), None))
                else:  # the members a key regex selects when the segment starts
                    reads.append((_REQUEST_PAIRS, target.collection, None, selector))
            elif selector is not None and selector.literal is not None:
                if (target.collection, selector.literal) in _DISTINCT_MEMBERS:
                    return None
                reads.append((_REQUEST_PAIRS, target.collection, None, _member(selector.literal)))
            elif target.collection in _SCALARS | _RECURRING:
                reads.append((_REQUEST_PAIRS, target.collection, None, selector))
            else:
                return None
        macros = [setvar.name for setvar in actions.setvars] + [setvar.value for setvar in actions.setvars]
        macros += [macro for macro in (link.operator_macro, actions.msg, actions.logdata) if macro is not None]
        for macro in macros:
            for part in macro.parts:
                if isinstance(part, bytes) or part[0] in _MATCHED or part[0] == "RULE":
                    continue
                collection, key = part
                if collection in _PER_REQUEST_COLLECTIONS:
                    if key is None:
                        return None
                    reads.append((_TX_MEMBER, collection, key.lower(), None))
                elif collection in _DISTINCT:
                    return None
                elif key is not None or collection in _SCALARS:
                    reads.append((_MACRO, collection, key, None))
                else:
                    return None
        for setvar in actions.setvars:
            if setvar.operation in ("add", "subtract"):
                if not setvar.name.is_constant:
                    return None
                name = b"".join(part for part in setvar.name.parts if isinstance(part, bytes))
                reads.append((_TX_MEMBER, setvar.collection, name.decode("latin-1").lower(), None))
        link = link.chained
    return tuple(dict.fromkeys(reads))


def _simple_targets(rule: _Rule) -> tuple[tuple[str, str, bool, bytes], ...] | None:
    simple = []
    for target in rule.targets:
        selector = target.selector
        if (
            target.collection not in _PER_REQUEST_COLLECTIONS
            or selector is None
            or selector.literal is None
            or target.exclusions
        ):
            return None
        key = selector.literal.decode("latin-1")
        name = target.text.encode("utf-8") if target.counted else target.prefix + selector.literal
        simple.append((target.collection, key, target.counted, name))
    return tuple(simple) if simple else None


_GATE_OPERATORS: Final = frozenset({"lt", "le", "gt", "ge", "eq"})


def _gate_variable(rule: _Rule) -> str | None:
    """The TX variable a rule tests when it is a gate: one literal TX target, a numeric comparison with a constant,
    no transformation, nothing done on a match but a skip (no log, setvar, ctl, capture or chain)."""
    actions = rule.actions
    if (
        rule.jump < 0
        or rule.chained is not None
        or len(rule.targets) != 1
        or rule.operator is None
        or rule.operator_name.lower() not in _GATE_OPERATORS
        or rule.negated
        or rule.pipeline.functions
        or actions.setvars
        or actions.controls
        or actions.capture
        or actions.log is not False
        or actions.disruptive not in (None, "pass")
    ):
        return None
    target = rule.targets[0]
    selector = target.selector
    if target.collection != "TX" or target.counted or target.exclusions or selector is None or not selector.literal:
        return None
    return selector.literal.decode("latin-1")


def _mark_gates(rules: Sequence[_Rule]) -> str | None:
    """Mark the phase's gates on the variable most of its gate-shaped rules test, and return that variable; None
    (and no gate) when there is none or a rule from the first gate on may write it."""
    variables = [variable for rule in rules if (variable := _gate_variable(rule)) is not None]
    if not variables:
        return None
    variable = max(set(variables), key=variables.count)
    first = next(rule.position for rule in rules if _gate_variable(rule) == variable)
    for rule in rules[first:]:
        link: _Rule | None = rule
        while link is not None:
            if any(_may_write(setvar, "TX", variable) for setvar in link.actions.setvars):
                return None
            if link.actions.capture and variable.isdigit():
                return None
            link = link.chained
    for rule in rules:
        rule.gate = _gate_variable(rule) == variable
    return variable


def _may_write(setvar: SetVar, collection: str, name: str) -> bool:
    """Whether ``setvar`` may write ``collection``'s variable ``name`` (lower-case): its name is that one, or
    holds a macro after a literal start that ``name`` begins with."""
    if setvar.collection != collection:
        return False
    head = setvar.name.parts[0] if setvar.name.parts else b""
    if setvar.name.is_constant:
        return b"".join(part for part in setvar.name.parts if isinstance(part, bytes)).decode("latin-1").lower() == name
    if not isinstance(head, bytes):
        return True
    return name.startswith(head.decode("latin-1").lower())


def _prefilter_rule(rule: _Rule, data_dir: Path) -> PrefilterRule | None:
    """The rule as the prefilter sees it, when its first link is a pattern (not negated, argument without macros)
    on targets that read only the request, count nothing and are not new in every request (``UNIQUE_ID``,
    ``DURATION``: searching them ahead is work no memory saves, for rules a request seldom reaches, such as CRS's
    sampling rules)."""
    if (
        rule.operator is None
        or rule.negated
        or rule.unconditional
        or rule.targets_key is None
        or any(target.counted or target.collection in _NEW_IN_EVERY_REQUEST for target in rule.targets)
    ):
        return None
    pattern = superset_pattern(rule.operator_name, rule.operator_argument, data_dir=data_dir)
    if pattern is None:
        return None
    sources = tuple(dict.fromkeys(_source(target) for target in rule.targets))
    targets = rule.targets

    def reads(source: Source, key: bytes) -> bool:
        if isinstance(source, tuple):  # ("XML", xpath): the xpath selected the values
            return True
        for target in targets:
            if target.collection != source:
                continue
            if target.selector is not None and not target.selector.matches(key):
                continue
            if any(selector is None or selector.matches(key) for selector in target.exclusions):
                continue
            return True
        return False

    reads_all = frozenset(
        _source(target)
        for target in targets
        if target.selector is None
        and not target.exclusions
        and not any(other.collection == target.collection and other.exclusions for other in targets)
    )
    return PrefilterRule(rule.position, pattern, rule.pipeline, sources, reads, reads_all)


def _source(target: _Target) -> Source:
    if target.collection == "XML":
        return ("XML", target.selector.text if target.selector is not None else "/*")
    return target.collection


def _compile_chain(rule: SecRule, data_dir: Path, pipelines: dict[tuple[str, ...], Pipeline]) -> _Rule:
    starter_actions = compile_actions(rule.actions, source=rule.source)
    if starter_actions.rule_id is None:
        raise RuleFileError(f"{rule.source}: a rule without id")
    links: list[SecRule] = []
    link: SecRule | None = rule
    while link is not None:
        links.append(link)
        link = link.chained_rule
    compiled: _Rule | None = None
    for index in range(len(links) - 1, -1, -1):
        compiled = _compile_link(
            links[index],
            starter_actions if index == 0 else compile_actions(links[index].actions, source=links[index].source),
            compiled,
            starter_actions,
            data_dir,
            pipelines,
        )
    assert compiled is not None
    return compiled


def _compile_link(
    rule: SecRule,
    actions: RuleActions,
    chained: _Rule | None,
    starter: RuleActions,
    data_dir: Path,
    pipelines: dict[tuple[str, ...], Pipeline],
) -> _Rule:
    exclusions = tuple(
        (target.collection, _compile_selector(target, rule.source)) for target in rule.targets if target.excluded
    )
    targets = tuple(
        _compile_target(target, rule.source, tuple(sel for coll, sel in exclusions if coll == target.collection))
        for target in rule.targets
        if not target.excluded
    )
    pipeline = Pipeline(actions.transformations, multi_match=actions.multi_match)
    pipeline = pipelines.setdefault(pipeline.key, pipeline)
    operator: Operator | None = None
    operator_macro: Macro | None = None
    name_lower = rule.operator.lower()
    if name_lower in NEVER_MATCHING_OPERATORS:
        operator = _never_matches
    elif name_lower == "unconditionalmatch":
        operator = _always_matches
    else:
        macro = Macro.parse(rule.operator_argument)
        if macro.is_constant:
            operator = compile_operator(rule.operator, rule.operator_argument, data_dir=data_dir)
            if name_lower not in _CHEAP_OPERATORS:
                operator = BoundedMemo(operator, max_entries=4096, max_length=4096)
        else:
            operator_macro = macro
    return _Rule(
        rule_id=starter.rule_id,
        source=rule.source,
        targets=targets,
        pipeline=pipeline,
        operator=operator,
        operator_name=rule.operator,
        operator_argument=rule.operator_argument,
        operator_macro=operator_macro,
        negated=rule.operator_negated,
        actions=actions,
        chained=chained,
        tags=starter.tags,
        unconditional=not rule.targets,
    )


def _reads_only_the_request(target: _Target) -> bool:
    return target.collection not in _PER_REQUEST_COLLECTIONS and target.collection not in _MATCHED


def _never_matches(value: bytes) -> Captures | None:
    return None


def _always_matches(value: bytes) -> Captures | None:
    return (value,)


def _compile_target(target: Target, source: str, exclusions: tuple[_Selector | None, ...]) -> _Target:
    name = target.collection.encode("ascii")
    return _Target(
        target.collection, _compile_selector(target, source), target.counted, str(target), exclusions, name, name + b":"
    )


def _compile_selector(target: Target, source: str) -> _Selector | None:
    if target.selector is None:
        return None
    if target.selector_is_regex:
        regex = _key_regex(target.selector, source)
        regex_text: BoundedMemo[str, bool] = BoundedMemo(
            lambda key: regex(key.encode("latin-1")), max_entries=4096, max_length=256
        )
        return _Selector(None, regex, target.selector, regex_text)
    return _Selector(target.selector.lower().encode("utf-8"), None, target.selector)


def _key_regex(pattern: str, source: str) -> Callable[[bytes], bool]:
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = False  # ModSecurity v3 matches key selectors without case
    options.encoding = re2.Options.Encoding.LATIN1
    try:
        match = re2.compile(pattern.encode("utf-8"), options)._regexp.Match
    except re2.error as error:
        raise RuleFileError(f"{source}: bad key selector /{pattern}/: {error}") from error

    def found(key: bytes) -> bool:
        return bool(match(_UNANCHORED, key, 0, len(key))[0][0] >= 0)

    return BoundedMemo(found, max_entries=4096, max_length=256)


@functools.lru_cache(maxsize=1024)
def _target_spec(text: str) -> tuple[str, _Selector | None]:
    """A ``ctl`` target (``ARGS``, ``ARGS:foo``, ``ARGS:/^id_/``) as collection and selector; remembered, since an
    exclusion package's ``ctl`` s name the same targets in request after request (and a key regex is compiled)."""
    collection, colon, selector = text.partition(":")
    if not colon or not selector:
        return collection.strip().upper(), None
    target = Target(collection.strip().upper(), selector, False)
    if len(selector) >= 2 and selector.startswith("/") and selector.endswith("/"):
        target = Target(target.collection, selector[1:-1], True)
    try:
        return target.collection, _compile_selector(target, "ctl")
    except RuleFileError:
        return target.collection, _Selector(selector.lower().encode("utf-8"), None, selector)


class _Transaction:
    """The state of one request's evaluation: collections, matched variables, ctl effects, transformation memo.

    A plain class rather than a dataclass: compiled, its ``__init__`` is then compiled too (a dataclass's is made
    when the module is imported), and one is built for every request."""

    def __init__(self, engine: RuleEngine, variables: RequestVariables, mode: EngineMode) -> None:
        self.engine = engine
        self.variables = variables
        self.mode: EngineMode = mode
        self.phase = 1
        self.collections: dict[str, dict[str, bytes]] = {name: {} for name in _PER_REQUEST_COLLECTIONS}
        self.matches: list[RuleMatch] = []
        self.interrupted_by: int | None = None
        self.stopped = False  # a deny, drop or allow ended the evaluation (engine mode On)
        self.matched_var: tuple[bytes, bytes] | None = None
        self.matched_vars: list[tuple[bytes, bytes]] = []
        self.removed_ids: set[int] = set()
        self.removed_ranges: list[tuple[int, int]] = []
        self.removed_tags: set[str] = set()
        self.removed_targets_by_id: dict[int, list[tuple[str, _Selector | None]]] = {}
        self.removed_targets_by_tag: list[tuple[str, str, _Selector | None]] = []
        # The number of the TX, IP... collections' state (RuleEngine._state) while it is known: from the start, as
        # long as only segments changed them; None once a rule that matched may have written them.
        self.state: int | None = None
        self.removals = False  # whether a ctl removed any rule or target
        self.disabled: frozenset[int] = frozenset()
        self.current: _Rule | None = None
        self.force_request_body = False
        # Request collections and their key indexes, valid until the body processor changes (ctl).
        self.collection_cache: dict[str, Sequence[tuple[bytes, bytes]]] = {}
        self.index_cache: dict[str, tuple[Sequence[tuple[bytes, bytes]], dict[bytes, list[tuple[bytes, bytes]]]]] = {}
        # A rule's (name, transformed values) when its targets read only the request, by (targets, pipeline): CRS
        # repeats the same targets and pipeline across dozens of rules.
        self.entries_cache: dict[tuple[int, Pipeline], list[tuple[bytes, Sequence[bytes]]]] = {}
        # Request values read for segment keys, by read; valid as long as the request collections are.
        self.read_cache: dict[_Read, object] = {}
        # Request collections read whole (no selector) as rules see them in this phase; valid as long as the
        # request collections are.
        self.whole_cache: dict[str, Sequence[tuple[bytes, bytes]]] = {}
        # The slots of the prefiltered rules that can match, computed when the first one is reached; valid as long
        # as the request collections are.
        self.prefilter_hits: set[int] | None = None
        # Whether those are the prologue's (_Phase), which decides only for the rules ahead of the first gate.
        self.prefilter_prologue = False

    # -- the phase loop --------------------------------------------------------------------------------------------

    def run_phase(self, phase: int, compiled: _Phase) -> None:
        self.phase = phase
        self._forget_request_values(collections=False)
        program = compiled.full
        rules, nexts, jumps = program.rules, program.nexts, program.jumps
        count = len(rules)
        specialised = False
        gate_variable = compiled.gate_variable
        disabled = self.disabled
        if gate_variable is not None and disabled and not compiled.gate_ids.isdisjoint(disabled):
            gate_variable = None
        # Whether the walk may still switch to a specialised program (then the prologue's prefilter serves).
        switching = gate_variable is not None
        index = 0
        # While a segment is walked for the first time with its values (the collections then log their writes):
        # the segment, its key and how many matches there were before it.
        recording: tuple[_Segment, tuple[object, ...], int, int | None] | None = None
        while index < count:
            rule = rules[index]
            if (
                recording is not None
                and rule.pure_reads is None
                and (not rule.prefiltered or rule.position in (self.prefilter_hits or ()))
            ):
                self._remember(recording, index)
                recording = None
            elif rule.pure_reads is not None and recording is None:
                segment = program.segment(index)
                passing: frozenset[int] = frozenset()
                if segment.prefiltered:
                    hits = self._prefilter_hits(program, compiled if switching else None, segment.last_prefiltered)
                    passing = segment.prefiltered.intersection(hits)
                if (not disabled or segment.ids.isdisjoint(disabled)) and not self._removals_touch(
                    segment.ids, segment.tags
                ):
                    key = (passing, *self._segment_key(segment))
                    outcome = segment.outcomes.get(key)
                    if outcome is not None:
                        self._replay(outcome)
                        if outcome.stopped:
                            return
                        index = outcome.exit
                        continue
                    recording = (segment, key, len(self.matches), self.state)
                    for name, store in self.collections.items():
                        self.collections[name] = _WriteLog(store)
            following = nexts[index]
            if (
                rule.gate
                and gate_variable is not None
                and not specialised
                and not self._removals_touch(compiled.gate_ids, compiled.gate_tags)
            ):
                program = compiled.specialised(self.collections["TX"].get(gate_variable))
                rules, nexts, jumps = program.rules, program.nexts, program.jumps
                count = len(rules)
                specialised = True
                switching = False
                if self.prefilter_prologue:
                    self.prefilter_hits = None
                index = program.entries[rule.position]
                continue
            if rule.prefiltered:
                run = program.run(index)
                known = self.prefilter_hits
                if known is not None and not self.prefilter_prologue:
                    hits = known
                else:
                    hits = self._prefilter_hits(program, compiled if switching else None, run.last)
                if hits.isdisjoint(run.positions):
                    index = run.end
                    continue  # their operators match none of the values they read: they would do nothing
                if rule.position not in hits:
                    index = following
                    continue
            if disabled and rule.rule_id in disabled:
                index = following
                continue
            if self.removals and self._removed(rule):
                index = following
                continue
            self.current = rule
            self.matched_var = None
            self.matched_vars = []
            if not self._evaluate(rule):
                index = following
                continue
            self._record(rule)
            if self.stopped:
                if recording is not None:
                    self._remember(recording, index)
                return
            if jumps[index] >= 0:
                following = jumps[index]
            if specialised and self._removals_touch(compiled.gate_ids, compiled.gate_tags):
                # A ctl removed rules, which may be gates: back to the program that walks every rule.
                program = compiled.full
                rules, nexts, jumps = program.rules, program.nexts, program.jumps
                count = len(rules)
                specialised = False
                switching = False
                self.prefilter_hits = None
                following = rule.jump if rule.jump >= 0 else rule.position + 1
            index = following
        if recording is not None:
            self._remember(recording, count)

    def _prefilter_hits(self, program: _Program, before_switch: _Phase | None, last: int) -> set[int]:
        """The slots of the prefiltered rules that can match, for the rules up to position ``last``: from the
        prologue's prefilter while the walk is ahead of the first gate of ``before_switch`` (the phase, when the walk
        may still switch), else from the program's."""
        hits = self.prefilter_hits
        if hits is not None and not (
            self.prefilter_prologue and (before_switch is None or last >= before_switch.first_gate)
        ):
            return hits
        if before_switch is not None and before_switch.prologue is not None and last < before_switch.first_gate:
            hits = before_switch.prologue.hits(self._source_pairs)
            self.prefilter_prologue = True
        else:
            assert program.prefilter is not None
            hits = program.prefilter.hits(self._source_pairs)
            self.prefilter_prologue = False
        self.prefilter_hits = hits
        return hits

    def _segment_key(self, segment: _Segment) -> tuple[object, ...]:
        """The values a segment reads; TX, IP... members stand in by the number of their state when it is known."""
        state = self.state
        key: list[object] = [self.mode, state]
        if state is None:
            key.extend(self._read(read) for read in segment.state_reads)
        request_reads = self.read_cache
        for read in segment.request_reads:
            value = request_reads.get(read, _UNREAD)
            if value is _UNREAD:
                value = request_reads[read] = self._read(read)  # the same for the phase
            key.append(value)
        return tuple(key)

    def _read(self, read: _Read) -> object:
        """The value of one variable a segment reads, as its key holds it."""
        kind, collection, name, selector = read
        if kind == _TX_MEMBER:
            return self.collections[collection].get(name)  # type: ignore[arg-type]
        if kind == _REQUEST_PAIRS:
            return tuple(self._pairs(collection, selector))
        if kind == _COUNT:
            return len(self._pairs(collection, selector))
        return self.macro_value(collection, name)

    def _remember(self, recording: tuple[_Segment, tuple[object, ...], int, int | None], leave_at: int) -> None:
        segment, key, matched, state = recording
        writes: list[tuple[str, str, bytes | None]] = []
        for name, store in self.collections.items():
            if isinstance(store, _WriteLog):
                writes.extend((name, member, value) for member, value in store.log)
                self.collections[name] = dict(store)
        final: dict[str, dict[str, bytes | None]] = {}
        for name, member, value in writes:
            final.setdefault(name, {})[member] = value
        relevant = self.engine._relevance.relevant
        effect = tuple(
            sorted(
                (name, member, value)
                for name, members in final.items()
                for member, value in members.items()
                if relevant(name, member)
            )
        )
        outcome = _Outcome(
            tuple(
                (name, {member: value for member, value in members.items() if value is not None})
                for name, members in final.items()
            ),
            tuple(
                (name, tuple(member for member, value in members.items() if value is None))
                for name, members in final.items()
            ),
            tuple(self.matches[matched:]),
            self.stopped,
            self.interrupted_by,
            leave_at,
            self.engine._state(("effect", effect)),
        )
        segment.remember(key, outcome)
        self.state = self.engine._state((state, outcome.effect)) if state is not None else None

    def _replay(self, outcome: _Outcome) -> None:
        collections = self.collections
        for name, values in outcome.sets:
            collections[name].update(values)
        for name, members in outcome.deletes:
            store = collections[name]
            for member in members:
                store.pop(member, None)
        self.matches.extend(outcome.matches)
        if self.state is not None:
            self.state = self.engine._state((self.state, outcome.effect))
        if outcome.stopped:
            self.stopped = True
            self.interrupted_by = outcome.interrupted_by

    def _source_pairs(self, source: Source) -> Sequence[tuple[bytes, bytes]]:
        """The (key, value) pairs of a prefilter source, as a rule reading the whole collection sees them now."""
        if isinstance(source, tuple):
            return self._pairs("XML", _named(source[1], literal=False))
        assert isinstance(source, str)
        return self._pairs(source, None)

    def _removals_touch(self, ids: frozenset[int], tags: frozenset[str]) -> bool:
        """Whether the ``ctl`` removals so far remove any of the rules ``ids`` (tagged ``tags``) or targets of them:
        a segment they do not touch does what it did without them, and gates they do not touch stay known."""
        if not self.removals:
            return False
        if not ids.isdisjoint(self.removed_ids) or not ids.isdisjoint(self.removed_targets_by_id):
            return True
        if any(low <= rule_id <= high for low, high in self.removed_ranges for rule_id in ids):
            return True
        if not tags.isdisjoint(self.removed_tags):
            return True
        return any(tag in tags for tag, _collection, _selector in self.removed_targets_by_tag)

    def _removed(self, rule: _Rule) -> bool:
        rule_id = rule.rule_id
        if rule_id is not None:
            if rule_id in self.removed_ids:
                return True
            if any(low <= rule_id <= high for low, high in self.removed_ranges):
                return True
        return bool(self.removed_tags) and any(tag in self.removed_tags for tag in rule.tags)

    def _record(self, rule: _Rule) -> None:
        actions = rule.actions
        disruptive = actions.disruptive
        if actions.log is not False and rule.rule_id is not None:
            name, value = self.matched_var or (b"", b"")
            self.matches.append(
                RuleMatch(
                    rule_id=rule.rule_id,
                    msg=_text(actions.msg.expand(self)) if actions.msg else "",
                    logdata=_text(actions.logdata.expand(self)) if actions.logdata else "",
                    severity=actions.severity,
                    tags=actions.tags,
                    matched_var_name=_text(name),
                    matched_var=value,
                    disruptive=disruptive,
                )
            )
        if self.mode == "On" and disruptive in ("deny", "drop") and rule.rule_id is not None:
            self.interrupted_by = rule.rule_id
            self.stopped = True
        elif self.mode == "On" and disruptive == "allow":
            self.stopped = True

    # -- one rule --------------------------------------------------------------------------------------------------

    def _evaluate(self, rule: _Rule) -> bool:
        """Evaluate a link and, when it matched, the rest of its chain; run the post-match actions on success."""
        if rule.unconditional:
            if rule.actions.setvars and rule.touches_state:
                self.state = None
            for setvar in rule.actions.setvars:
                setvar.apply(self.collections, self)
            matched = True
        else:
            matched = self._match_values(rule)
        if not matched:
            self.matched_var = None
            self.matched_vars = []
            return False
        if rule.chained is not None and not self._evaluate(rule.chained):
            return False
        for control in rule.actions.controls:
            self._control(control)
        return True

    def _match_values(self, rule: _Rule) -> bool:
        operator = rule.operator
        if operator is None:
            assert rule.operator_macro is not None
            try:
                operator = self.engine._operator_for(rule, rule.operator_macro.expand(self))
            except (OperatorArgumentError, UnsupportedOperator):
                return False
        negated = rule.negated
        capture = rule.actions.capture
        matched = False
        for name, candidates in self._entries(rule):
            for candidate in candidates:
                captures = operator(candidate)
                if (captures is not None) == negated:
                    continue
                matched = True
                if rule.touches_state:
                    self.state = None  # its captures or setvars write what segments read: the state is unknown
                if capture and captures is not None and not negated:
                    tx = self.collections["TX"]
                    for index, captured in enumerate(captures[:10]):
                        tx[str(index)] = captured
                self.matched_var = (name, candidate)
                self.matched_vars.append((name, candidate))
                for setvar in rule.actions.setvars:
                    setvar.apply(self.collections, self)
        return matched

    def _entries(self, rule: _Rule) -> list[tuple[bytes, Sequence[bytes]]]:
        """Each value of the rule's targets by variable name, transformed by its pipeline."""
        removed = self._removed_targets(rule) if self.removed_targets_by_id or self.removed_targets_by_tag else ()
        simple = rule.simple_targets
        if simple is not None and not removed:
            collections = self.collections
            pipeline = rule.pipeline
            read: list[tuple[bytes, Sequence[bytes]]] = []
            for collection, member, counted, name in simple:
                store = collections[collection]
                if counted:
                    read.append((name, pipeline(b"1" if member in store else b"0")))
                    continue
                value = store.get(member)
                if value is not None:
                    read.append((name, pipeline(value)))
            return read
        if rule.targets_key is None or removed:
            return [(name, rule.pipeline(value)) for name, value in self._values(rule, removed)]
        key = (rule.targets_key, rule.pipeline)
        entries = self.entries_cache.get(key)
        if entries is None:
            entries = [(name, rule.pipeline(value)) for name, value in self._values(rule, ())]
            self.entries_cache[key] = entries
        return entries

    def _forget_request_values(self, *, collections: bool = True) -> None:
        """Drop what was read from the request: a new phase changes what rules see of it (the body is hidden in
        phase 1), a new body processor its collections themselves."""
        if collections:
            self.collection_cache.clear()
            self.index_cache.clear()
        self.entries_cache.clear()
        self.read_cache.clear()
        self.whole_cache.clear()
        self.prefilter_hits = None

    # -- variables -------------------------------------------------------------------------------------------------

    def _values(self, rule: _Rule, removed: Sequence[tuple[str, _Selector | None]]) -> list[tuple[bytes, bytes]]:
        values: list[tuple[bytes, bytes]] = []
        for target in rule.targets:
            exclusions = target.exclusions
            if removed:
                if any(coll == target.collection and sel is None for coll, sel in removed):
                    continue
                exclusions = exclusions + tuple(sel for coll, sel in removed if coll == target.collection)
            pairs = self._pairs(target.collection, target.selector)
            if exclusions and pairs:
                pairs = [
                    (key, value)
                    for key, value in pairs
                    if not any(sel is None or sel.matches(key) for sel in exclusions)
                ]
            if target.counted:
                values.append((target.text.encode("utf-8"), str(len(pairs)).encode("ascii")))
                continue
            for key, value in pairs:
                values.append((target.prefix + key if key else target.name, value))
        return values

    def _removed_targets(self, rule: _Rule) -> list[tuple[str, _Selector | None]]:
        removed: list[tuple[str, _Selector | None]] = []
        if rule.rule_id is not None:
            removed.extend(self.removed_targets_by_id.get(rule.rule_id, ()))
        for tag, collection, selector in self.removed_targets_by_tag:
            if tag in rule.tags:
                removed.append((collection, selector))
        return removed

    def _pairs(self, collection: str, selector: _Selector | None) -> Sequence[tuple[bytes, bytes]]:
        """The (key, value) pairs of ``collection`` that ``selector`` selects (all of them without one), as a rule
        reads them now."""
        pairs = self.whole_cache.get(collection)
        if pairs is None:
            if collection in self.collections or collection in _MATCHED or collection == "XML":
                return self._written_pairs(collection, selector)
            pairs = self.whole_cache[collection] = self._request_pairs(collection)
        if selector is None or not pairs:
            return pairs
        literal = selector.literal
        if literal is not None:
            return self._index(collection, pairs).get(literal, ())
        return [(key, value) for key, value in pairs if selector.matches(key)]

    def _written_pairs(self, collection: str, selector: _Selector | None) -> Sequence[tuple[bytes, bytes]]:
        """The pairs of TX, IP..., MATCHED_* and XML, which rules write or which a selector computes."""
        literal = selector.literal if selector is not None else None
        if collection in self.collections:
            store = self.collections[collection]
            if literal is not None:
                value = store.get(literal.decode("latin-1"))
                return ((literal, value),) if value is not None else ()
            if selector is not None and selector.regex_text is not None:
                selected = selector.regex_text
                return [(key.encode("latin-1"), value) for key, value in store.items() if selected(key)]
            pairs: Sequence[tuple[bytes, bytes]] = [(key.encode("latin-1"), value) for key, value in store.items()]
        elif collection in _MATCHED:
            pairs = self._matched_pairs(collection)
        else:  # XML
            if self.phase == 1:
                return ()
            return self.variables.xml(selector.text.encode("utf-8") if selector else b"/*")
        if selector is None:
            return pairs
        return [(key, value) for key, value in pairs if selector.matches(key)]

    def _request_pairs(self, collection: str) -> Sequence[tuple[bytes, bytes]]:
        """A request collection whole, as this phase shows it (body collections hidden in phase 1, where ARGS is the
        query's)."""
        if self._hidden(collection):
            return ()
        if self.phase == 1:
            collection = _PHASE1_FALLBACK.get(collection, collection)
        pairs = self.collection_cache.get(collection)
        if pairs is None:
            pairs = self.collection_cache[collection] = self.variables.collection(collection)
        return pairs

    def _index(self, collection: str, pairs: Sequence[tuple[bytes, bytes]]) -> dict[bytes, list[tuple[bytes, bytes]]]:
        """The members of ``pairs`` (the collection as this phase shows it) by lower-case key, built once for them."""
        indexed = self.index_cache.get(collection)
        if indexed is not None and indexed[0] is pairs:
            return indexed[1]
        index: dict[bytes, list[tuple[bytes, bytes]]] = {}
        for key, value in pairs:
            index.setdefault(key.lower(), []).append((key, value))
        self.index_cache[collection] = (pairs, index)
        return index

    def _hidden(self, collection: str) -> bool:
        """Whether a collection is empty at this point: body collections before phase 2, and REQUEST_BODY when a
        structured processor (XML, JSON, multipart) parsed the body (ModSecurity v2), unless it was forced."""
        if self.phase == 1 and collection in _BODY_COLLECTIONS:
            return True
        if collection != "REQUEST_BODY" or self.force_request_body:
            return False
        processor = self.variables.collection("REQBODY_PROCESSOR")
        return bool(processor) and processor[0][1] in _STRUCTURED_PROCESSORS

    def _matched_pairs(self, collection: str) -> list[tuple[bytes, bytes]]:
        if collection == "MATCHED_VAR":
            return [(b"", self.matched_var[1])] if self.matched_var else []
        if collection == "MATCHED_VAR_NAME":
            return [(b"", self.matched_var[0])] if self.matched_var else []
        if collection == "MATCHED_VARS":
            return list(self.matched_vars)
        return [(name, name) for name, _ in self.matched_vars]

    def macro_value(self, collection: str, key: str | None) -> bytes:
        """The value a ``%{collection.key}`` macro expands to now (``b""`` when absent)."""
        if collection in self.collections:
            return self.collections[collection].get(key.lower(), b"") if key else b""
        if collection == "RULE":
            return self._rule_property((key or "").lower())
        selector = _named(key, literal=True) if key else None
        pairs = self._pairs(collection, selector)
        return pairs[0][1] if pairs else b""

    def _rule_property(self, name: str) -> bytes:
        rule = self.current
        if rule is None:
            return b""
        if name == "id":
            return str(rule.rule_id).encode("ascii")
        if name == "msg" and rule.actions.msg is not None:
            return rule.actions.msg.expand(self)
        if name == "logdata" and rule.actions.logdata is not None:
            return rule.actions.logdata.expand(self)
        if name == "severity" and rule.actions.severity is not None:
            return rule.actions.severity.encode("ascii")
        return b""

    # -- ctl -------------------------------------------------------------------------------------------------------

    def _control(self, control: Control) -> None:
        option = control.option.lower()
        value = control.value
        if option.startswith("ruleremove"):
            self.removals = True
        if option == "ruleremovebyid":
            for part in value.replace(",", " ").split():
                low, dash, high = part.partition("-")
                try:
                    if dash:
                        self.removed_ranges.append((int(low), int(high)))
                    else:
                        self.removed_ids.add(int(part))
                except ValueError:
                    continue
        elif option == "ruleremovebytag":
            self.removed_tags.add(value)
        elif option == "ruleremovetargetbyid" and control.target:
            try:
                rule_id = int(value)
            except ValueError:
                return
            self.removed_targets_by_id.setdefault(rule_id, []).append(_target_spec(control.target))
        elif option == "ruleremovetargetbytag" and control.target:
            collection, selector = _target_spec(control.target)
            self.removed_targets_by_tag.append((value, collection, selector))
        elif option == "requestbodyprocessor":
            self.variables.set_body_processor(value.upper())
            self._forget_request_values()
        elif option == "forcerequestbodyvariable":
            self.force_request_body = value.lower() == "on"
            self._forget_request_values()
        elif option == "ruleengine":
            mode = value.lower()
            if mode == "off":
                self.mode = "Off"
            elif mode == "detectiononly":
                self.mode = "DetectionOnly"
            elif mode == "on":
                self.mode = "On"
        # auditEngine, auditLogParts, forceRequestBodyVariable, requestBodyAccess...: nothing to evaluate.


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")
