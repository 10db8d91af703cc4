"""Running compiled SecLang rules on a request: :class:`RuleEngine` (the compiled phases, safe to share) and the walk of
one request's evaluation (``_Transaction``: its collections, matched variables, ``ctl`` effects and memos), with the
semantics of :mod:`edgeplane.seclang.engine`. The walk follows what :mod:`edgeplane.seclang.optimiser` marked:
gates switch it to a paranoia level's program, prefiltered runs and remembered segments are passed over in one step.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from edgeplane.seclang.actions import Control
from edgeplane.seclang.errors import OperatorArgumentError, UnsupportedOperator
from edgeplane.seclang.operators import Operator, compile_operator
from edgeplane.seclang.pipeline import Pipeline
from edgeplane.seclang.prefilter import Source
from edgeplane.seclang.program import (
    COUNT,
    MATCHED,
    NO_PHASE,
    PER_REQUEST_COLLECTIONS,
    REQUEST_PAIRS,
    TX_MEMBER,
    EngineMode,
    Evaluation,
    Outcome,
    Phase,
    Program,
    Read,
    Relevance,
    Rule,
    RuleMatch,
    Segment,
)
from edgeplane.seclang.request import HttpRequest
from edgeplane.seclang.selectors import Selector, named_selector, target_spec
from edgeplane.seclang.variables import RequestVariables

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
_PHASE1_FALLBACK: Final = {"ARGS": "ARGS_GET", "ARGS_NAMES": "ARGS_GET_NAMES"}
_UNREAD: Final = object()


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


class RuleEngine:
    """Compiled rules, ready to evaluate requests; safe to share. Its only state after :func:`compile_rules` is a
    bounded cache of operators compiled for the expansions of macro arguments (``@within %{tx.allowed_methods}``)."""

    def __init__(self, phases: Mapping[int, Phase], relevance: Relevance, data_dir: Path) -> None:
        """``phases`` compiled and optimised, ``relevance`` what their segments read of TX, IP... (both made by
        :func:`~edgeplane.seclang.compiler.compile_rules`)."""
        self._phases = dict(phases)
        self._relevance = relevance
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
            transaction.run_phase(phase, self._phases.get(phase, NO_PHASE))
        return Evaluation(tuple(transaction.matches), dict(transaction.collections["TX"]), transaction.interrupted_by)

    def _operator_for(self, rule: Rule, argument: bytes) -> Operator:
        """The operator of a rule whose argument held a macro, compiled for this expansion (cached)."""
        text = argument.decode("utf-8", "surrogateescape")
        key = (rule.operator_name, text)
        operator = self._dynamic_operators.get(key)
        if operator is None:
            operator = compile_operator(rule.operator_name, text, data_dir=self._data_dir)
            if len(self._dynamic_operators) < 4096:  # expansions come from TX, which requests can influence
                self._dynamic_operators[key] = operator
        return operator


class _Transaction:
    """The state of one request's evaluation: collections, matched variables, ctl effects, transformation memo.

    A plain class rather than a dataclass: compiled, its ``__init__`` is then compiled too (a dataclass's is made
    when the module is imported), and one is built for every request."""

    def __init__(self, engine: RuleEngine, variables: RequestVariables, mode: EngineMode) -> None:
        self.engine = engine
        self.variables = variables
        self.mode: EngineMode = mode
        self.phase = 1
        self.collections: dict[str, dict[str, bytes]] = {name: {} for name in PER_REQUEST_COLLECTIONS}
        self.matches: list[RuleMatch] = []
        self.interrupted_by: int | None = None
        self.stopped = False  # a deny, drop or allow ended the evaluation (engine mode On)
        self.matched_var: tuple[bytes, bytes] | None = None
        self.matched_vars: list[tuple[bytes, bytes]] = []
        self.removed_ids: set[int] = set()
        self.removed_ranges: list[tuple[int, int]] = []
        self.removed_tags: set[str] = set()
        self.removed_targets_by_id: dict[int, list[tuple[str, Selector | None]]] = {}
        self.removed_targets_by_tag: list[tuple[str, str, Selector | None]] = []
        # The number of the TX, IP... collections' state (RuleEngine._state) while it is known: from the start, as
        # long as only segments changed them; None once a rule that matched may have written them.
        self.state: int | None = None
        self.removals = False  # whether a ctl removed any rule or target
        self.disabled: frozenset[int] = frozenset()
        self.current: Rule | None = None
        self.force_request_body = False
        # Request collections and their key indexes, valid until the body processor changes (ctl).
        self.collection_cache: dict[str, Sequence[tuple[bytes, bytes]]] = {}
        self.index_cache: dict[str, tuple[Sequence[tuple[bytes, bytes]], dict[bytes, list[tuple[bytes, bytes]]]]] = {}
        # A rule's (name, transformed values) when its targets read only the request, by (targets, pipeline): CRS
        # repeats the same targets and pipeline across dozens of rules.
        self.entries_cache: dict[tuple[int, Pipeline], list[tuple[bytes, Sequence[bytes]]]] = {}
        # Request values read for segment keys, by read; valid as long as the request collections are.
        self.read_cache: dict[Read, object] = {}
        # Request collections read whole (no selector) as rules see them in this phase; valid as long as the
        # request collections are.
        self.whole_cache: dict[str, Sequence[tuple[bytes, bytes]]] = {}
        # The slots of the prefiltered rules that can match, computed when the first one is reached; valid as long
        # as the request collections are.
        self.prefilter_hits: set[int] | None = None
        # Whether those are the prologue's (Phase), which decides only for the rules ahead of the first gate.
        self.prefilter_prologue = False

    # -- the phase loop --------------------------------------------------------------------------------------------

    def run_phase(self, phase: int, compiled: Phase) -> None:
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
        recording: tuple[Segment, tuple[object, ...], int, int | None] | None = None
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

    def _prefilter_hits(self, program: Program, before_switch: Phase | None, last: int) -> set[int]:
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

    def _segment_key(self, segment: Segment) -> tuple[object, ...]:
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

    def _read(self, read: Read) -> object:
        """The value of one variable a segment reads, as its key holds it."""
        kind, collection, name, selector = read
        if kind == TX_MEMBER:
            return self.collections[collection].get(name)  # type: ignore[arg-type]
        if kind == REQUEST_PAIRS:
            return tuple(self._pairs(collection, selector))
        if kind == COUNT:
            return len(self._pairs(collection, selector))
        return self.macro_value(collection, name)

    def _remember(self, recording: tuple[Segment, tuple[object, ...], int, int | None], leave_at: int) -> None:
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
        outcome = Outcome(
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

    def _replay(self, outcome: Outcome) -> None:
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
            return self._pairs("XML", named_selector(source[1], literal=False))
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

    def _removed(self, rule: Rule) -> bool:
        rule_id = rule.rule_id
        if rule_id is not None:
            if rule_id in self.removed_ids:
                return True
            if any(low <= rule_id <= high for low, high in self.removed_ranges):
                return True
        return bool(self.removed_tags) and any(tag in self.removed_tags for tag in rule.tags)

    def _record(self, rule: Rule) -> None:
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

    def _evaluate(self, rule: Rule) -> bool:
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

    def _match_values(self, rule: Rule) -> bool:
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

    def _entries(self, rule: Rule) -> list[tuple[bytes, Sequence[bytes]]]:
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

    def _values(self, rule: Rule, removed: Sequence[tuple[str, Selector | None]]) -> list[tuple[bytes, bytes]]:
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

    def _removed_targets(self, rule: Rule) -> list[tuple[str, Selector | None]]:
        removed: list[tuple[str, Selector | None]] = []
        if rule.rule_id is not None:
            removed.extend(self.removed_targets_by_id.get(rule.rule_id, ()))
        for tag, collection, selector in self.removed_targets_by_tag:
            if tag in rule.tags:
                removed.append((collection, selector))
        return removed

    def _pairs(self, collection: str, selector: Selector | None) -> Sequence[tuple[bytes, bytes]]:
        """The (key, value) pairs of ``collection`` that ``selector`` selects (all of them without one), as a rule
        reads them now."""
        pairs = self.whole_cache.get(collection)
        if pairs is None:
            if collection in self.collections or collection in MATCHED or collection == "XML":
                return self._written_pairs(collection, selector)
            pairs = self.whole_cache[collection] = self._request_pairs(collection)
        if selector is None or not pairs:
            return pairs
        literal = selector.literal
        if literal is not None:
            return self._index(collection, pairs).get(literal, ())
        return [(key, value) for key, value in pairs if selector.matches(key)]

    def _written_pairs(self, collection: str, selector: Selector | None) -> Sequence[tuple[bytes, bytes]]:
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
        elif collection in MATCHED:
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
        selector = named_selector(key, literal=True) if key else None
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
            self.removed_targets_by_id.setdefault(rule_id, []).append(target_spec(control.target))
        elif option == "ruleremovetargetbytag" and control.target:
            collection, selector = target_spec(control.target)
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
