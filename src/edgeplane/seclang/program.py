"""The compiled form of SecLang rules: what compiling makes (:mod:`edgeplane.seclang.compiler`), optimising marks
(:mod:`edgeplane.seclang.optimiser`) and running walks (:mod:`edgeplane.seclang.runner`), and what an evaluation
gives back (:class:`Evaluation`, :class:`RuleMatch`).

A phase (:class:`Phase`) holds its rules in order, each a chain of :class:`Rule` links with its targets, pipeline,
operator and actions; the walk follows a :class:`Program` (the phase's rules, or those of one paranoia level, made
on first use), and passes over a :class:`Segment` (a run of rules whose evaluation is a function of the few
variables it reads) in one step when it has walked it with the same values before. A :class:`Read` names such a
variable, and :class:`Relevance` says which members of TX, IP... the segments read, so that a request's state is
numbered by those alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from edgeplane.seclang.actions import Macro, RuleActions
from edgeplane.seclang.operators import Operator
from edgeplane.seclang.pipeline import Pipeline
from edgeplane.seclang.prefilter import Prefilter, PrefilterRule
from edgeplane.seclang.selectors import Selector

EngineMode = Literal["On", "DetectionOnly", "Off"]
PER_REQUEST_COLLECTIONS: Final = ("TX", "IP", "GLOBAL", "SESSION", "USER", "RESOURCE")
MATCHED: Final = frozenset({"MATCHED_VAR", "MATCHED_VAR_NAME", "MATCHED_VARS", "MATCHED_VARS_NAMES"})
_SCORE_WEIGHTS: Final = frozenset(
    {"critical_anomaly_score", "error_anomaly_score", "warning_anomaly_score", "notice_anomaly_score"}
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


@dataclass(frozen=True, slots=True)
class RuleTarget:
    collection: str
    selector: Selector | None
    counted: bool
    text: str
    exclusions: tuple[Selector | None, ...]  # the rule's "!" targets of this collection
    name: bytes  # b"ARGS"
    prefix: bytes  # b"ARGS:"


@dataclass(slots=True)
class Rule:
    """One compiled link of a chain."""

    rule_id: int | None
    source: str
    targets: tuple[RuleTarget, ...]
    pipeline: Pipeline
    operator: Operator | None
    operator_name: str
    operator_argument: str
    operator_macro: Macro | None
    negated: bool
    actions: RuleActions
    chained: Rule | None
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
    # A gate: a rule that only tests a TX variable and skips (CRS's paranoia level checks); see Phase.
    gate: bool = False
    # (collection, key, counted, variable name) of each target when every one is a single member of a collection
    # the engine keeps (TX:x, &TX:x), read without the general path; None otherwise.
    simple_targets: tuple[tuple[str, str, bool, bytes], ...] | None = None
    # Of a chain starter whose evaluation is a function of a few variables it names (see Segment): those
    # variables; None otherwise.
    pure_reads: tuple[Read, ...] | None = None
    # Whether a match of this link may write a member of TX, IP... that a segment reads (see RuleEngine._state).
    touches_state: bool = True


@dataclass(frozen=True, slots=True)
class Marker:
    name: str


@dataclass(frozen=True, slots=True)
class Program:
    """An order to walk rules in: after ``rules[i]``, the walk goes on at ``nexts[i]``, or at ``jumps[i]`` when the
    rule matched and ``jumps[i] >= 0`` (an index of ``len(rules)`` ends the phase). ``entries`` maps a gate's
    position in the phase to the index the walk goes on at when it switches to this program there. ``prefilter``
    decides for the rules whose ``prefiltered`` is set."""

    rules: tuple[Rule, ...]
    nexts: tuple[int, ...]
    jumps: tuple[int, ...]
    entries: Mapping[int, int]
    prefilter: Prefilter | None
    segments: dict[int, Segment] = field(default_factory=dict, compare=False)
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

    def segment(self, index: int) -> Segment:
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
            whole = {read[1] for read in reads if read[0] == REQUEST_PAIRS and read[3] is None}
            reads = tuple(read for read in reads if read[1] not in whole or read[3] is None or read[0] == MACRO)
            ids = frozenset(rule.rule_id for rule in rules if rule.rule_id is not None)
            tags = frozenset(tag for rule in rules for tag in rule.tags)
            prefiltered = frozenset(rule.position for rule in rules if rule.prefiltered)
            segment = self.segments[index] = Segment(reads, ids, tags, prefiltered)
        return segment


@dataclass(frozen=True, slots=True)
class _Run:
    """Prefiltered rules the walk reaches one after the other when none matches: when the prefilter lets none of
    them through (``positions``), the walk goes on at ``end`` in one step. ``last`` is the last one's position."""

    positions: frozenset[int]
    end: int
    last: int


# How a pure rule reads a variable: (TX_MEMBER, collection, key, None) a member of TX, IP...;
# (REQUEST_PAIRS, collection, None, selector) the pairs a target selects; (MACRO, collection, key, None) a macro;
# (COUNT, collection, None, selector) how many pairs a counted target (&ARGS) selects.
Read = tuple[int, str, str | None, Selector | None]
TX_MEMBER: Final = 0
REQUEST_PAIRS: Final = 1
MACRO: Final = 2
COUNT: Final = 3


@dataclass(frozen=True, slots=True)
class Outcome:
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


class Segment:
    """Consecutive rules of a program whose evaluation is a function of the variables they name (CRS's
    initialisation, its exclusion package switches, the protocol checks of single headers, the scoring): TX members
    (``TX:x``, ``&TX:x``, ``%{tx.x}``), single request values (``REQUEST_HEADERS:Content-Length``,
    ``REQUEST_LINE``, ``%{remote_addr}``); no ``ctl``. Walking them from the same values does the same, so the
    walk remembers what it did by those values (and the engine mode) and does it again in one step."""

    __slots__ = ("ids", "last_prefiltered", "outcomes", "prefiltered", "reads", "request_reads", "state_reads", "tags")

    def __init__(
        self, reads: tuple[Read, ...], ids: frozenset[int], tags: frozenset[str], prefiltered: frozenset[int]
    ) -> None:
        self.reads = reads
        # Reads of TX, IP... members, which the number of the collections' state stands for while it is known, and
        # reads of the request, the same for the whole phase.
        self.state_reads = tuple(read for read in reads if read[1] in PER_REQUEST_COLLECTIONS)
        self.request_reads = tuple(read for read in reads if read[1] not in PER_REQUEST_COLLECTIONS)
        self.ids = ids
        self.tags = tags  # of its rules: a ctl removing rules or targets by tag may concern them
        # Prefiltered rules among them, which do nothing when the prefilter passes over them: the walk of the
        # segment is remembered by those the prefilter lets through too, and ends at the first of those.
        self.prefiltered = prefiltered
        self.last_prefiltered = max(prefiltered, default=-1)
        self.outcomes: dict[tuple[object, ...], Outcome] = {}

    def remember(self, key: tuple[object, ...], outcome: Outcome) -> None:
        if len(self.outcomes) >= 1024:  # keys hold request values: bounded
            self.outcomes.clear()
        self.outcomes[key] = outcome


class Phase:
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
        rules: tuple[Rule, ...],
        candidates: Mapping[int, PrefilterRule],
        gate_variable: str | None,
        prefilter: bool,
    ) -> None:
        self.rules = rules
        self._candidates = candidates if prefilter else {}
        count = len(rules)
        self.full = Program(
            rules,
            tuple(range(1, count + 1)),
            tuple(rule.jump for rule in rules),
            {},
            Prefilter(list(self._candidates.values())) if self._candidates else None,
        )
        self.gate_variable = gate_variable if prefilter else None
        self.gate_ids = frozenset(rule.rule_id for rule in rules if rule.gate and rule.rule_id is not None)
        self.gate_tags = frozenset(tag for rule in rules if rule.gate for tag in rule.tags)
        self._specialised: dict[bytes | None, Program] = {}
        self.first_gate = next((rule.position for rule in rules if rule.gate), count)
        prologue = [candidate for position, candidate in self._candidates.items() if position < self.first_gate]
        self.prologue = Prefilter(prologue) if prologue and self.gate_variable is not None else None

    def specialised(self, value: bytes | None) -> Program:
        """The program for the gate variable's ``value`` (built on first use, then kept)."""
        program = self._specialised.get(value)
        if program is None:
            if len(self._specialised) >= 16:  # the values come from the configuration; bounded all the same
                self._specialised.clear()
            program = self._specialised[value] = self._specialise(value)
        return program

    def _specialise(self, value: bytes | None) -> Program:
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
        return Program(
            tuple(rules[position] for position in kept),
            tuple(index_of[resolve(position + 1)] for position in kept),
            tuple(index_of[resolve(rules[position].jump)] if rules[position].jump >= 0 else -1 for position in kept),
            {gate: index_of[resolve(gate)] for gate in fires},
            Prefilter(candidates) if candidates else None,
        )


NO_PHASE: Final = Phase((), {}, None, False)


class Relevance:
    """Which members of TX, IP... segments read: those named (``TX:x``, ``%{tx.x}``, a setvar adding to ``tx.x``)
    and those a key regex of theirs selects. Other members cannot change what a segment does, so the number of the
    collections' state (RuleEngine._state) leaves them out, and a rule that writes only such members keeps it."""

    def __init__(self, reads: Iterable[Read]) -> None:
        self.members: frozenset[tuple[str, str]] = frozenset(
            (collection, name) for kind, collection, name, _ in reads if kind == TX_MEMBER and name is not None
        )
        self.selectors = tuple(
            (collection, selector)
            for kind, collection, _, selector in dict.fromkeys(reads)
            if kind in (REQUEST_PAIRS, COUNT) and collection in PER_REQUEST_COLLECTIONS and selector is not None
        )

    def relevant(self, collection: str, name: str) -> bool:
        if (collection, name) in self.members:
            return True
        return any(
            selector_collection == collection and selector.regex_text is not None and selector.regex_text(name)
            for selector_collection, selector in self.selectors
        )

    def touched_by(self, link: Rule) -> bool:
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
