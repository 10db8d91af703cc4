"""Optimising compiled SecLang rules: what the rules are found to be, so that the walk passes over work without
changing what it does. Nothing here runs per request; :mod:`edgeplane.seclang.compiler` and
:class:`~edgeplane.seclang.runner.RuleEngine` call it once, on the compiled rules, and the walk
(:mod:`edgeplane.seclang.runner`) reads the marks it leaves (``gate``, ``pure_reads``, ``simple_targets``,
``prefiltered``, ``touches_state``).

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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from edgeplane.seclang.actions import SetVar
from edgeplane.seclang.prefilter import PrefilterRule, Source, superset_pattern
from edgeplane.seclang.program import (
    COUNT,
    MACRO,
    MATCHED,
    PER_REQUEST_COLLECTIONS,
    REQUEST_PAIRS,
    TX_MEMBER,
    Phase,
    Read,
    Relevance,
    Rule,
    RuleTarget,
)
from edgeplane.seclang.selectors import member_selector

# Variables whose value is new in every request.
_NEW_IN_EVERY_REQUEST: Final = frozenset({"UNIQUE_ID", "DURATION"})


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


# Request values that differ from client to client or request to request: a segment keyed by one would seldom be
# found again, so rules reading them are walked.
_DISTINCT: Final = frozenset({"REMOTE_ADDR", "UNIQUE_ID", "DURATION", "REQUEST_BODY_LENGTH"})
_DISTINCT_MEMBERS: Final = frozenset({("REQUEST_HEADERS", b"content-length")})


def find_relevance(phases: Iterable[Phase]) -> Relevance:
    """What an engine of ``phases`` keeps of a request's TX, IP... collections to number their state by: the
    members segments read (``Relevance``); marks each link whose match may write one (``touches_state``), and the
    rules that read values distinct in every request (``walk_rules_reading_distinct_values``)."""
    phases = list(phases)
    walk_rules_reading_distinct_values([rule for phase in phases for rule in phase.rules])
    relevance = Relevance([read for phase in phases for rule in phase.rules for read in rule.pure_reads or ()])
    for phase in phases:
        for rule in phase.rules:
            link: Rule | None = rule
            while link is not None:
                link.touches_state = relevance.touched_by(link)
                link = link.chained
    return relevance


def walk_rules_reading_distinct_values(rules: Sequence[Rule]) -> None:
    """Take the segments' reads away from rules that read a TX, IP... member set from a distinct value
    (``setvar:tx.real_ip=%{remote_addr}``), directly or through other members: those are walked."""
    tainted: set[tuple[str, str]] = set()
    links: list[Rule] = []
    for rule in rules:
        link: Rule | None = rule
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
        if reads and any(kind == TX_MEMBER and (collection, name) in tainted for kind, collection, name, _ in reads):
            rule.pure_reads = None


def find_pure_reads(rule: Rule) -> tuple[Read, ...] | None:
    """The variables a chain's evaluation depends on when they can be named before it runs; None when they
    cannot (whole collections, key regexes, exclusions, MATCHED_VARS as a target, a setvar adding to a variable
    whose name is built at run time) or the chain has a ``ctl``."""
    reads: list[Read] = []
    link: Rule | None = rule
    while link is not None:
        actions = link.actions
        if actions.controls:
            return None
        for target in link.targets:
            selector = target.selector
            if target.collection in MATCHED or target.collection == "XML":
                return None
            if target.exclusions:
                if target.collection not in _RECURRING:
                    return None
                # What the exclusions leave of the collection is a function of all of it.
                reads.append((REQUEST_PAIRS, target.collection, None, None))
                continue
            if target.counted and target.collection not in PER_REQUEST_COLLECTIONS:
                literal = selector.literal if selector is not None else None
                reads.append(
                    (COUNT, target.collection, None, member_selector(literal) if literal is not None else selector)
                )
            elif target.collection in PER_REQUEST_COLLECTIONS:
                if selector is None:
                    return None
                if selector.literal is not None:
                    reads.append((TX_MEMBER, target.collection, selector.literal.decode("latin-1"), None))
                else:  # the members a key regex selects when the segment starts
                    reads.append((REQUEST_PAIRS, target.collection, None, selector))
            elif selector is not None and selector.literal is not None:
                if (target.collection, selector.literal) in _DISTINCT_MEMBERS:
                    return None
                reads.append((REQUEST_PAIRS, target.collection, None, member_selector(selector.literal)))
            elif target.collection in _SCALARS | _RECURRING:
                reads.append((REQUEST_PAIRS, target.collection, None, selector))
            else:
                return None
        macros = [setvar.name for setvar in actions.setvars] + [setvar.value for setvar in actions.setvars]
        macros += [macro for macro in (link.operator_macro, actions.msg, actions.logdata) if macro is not None]
        for macro in macros:
            for part in macro.parts:
                if isinstance(part, bytes) or part[0] in MATCHED or part[0] == "RULE":
                    continue
                collection, key = part
                if collection in PER_REQUEST_COLLECTIONS:
                    if key is None:
                        return None
                    reads.append((TX_MEMBER, collection, key.lower(), None))
                elif collection in _DISTINCT:
                    return None
                elif key is not None or collection in _SCALARS:
                    reads.append((MACRO, collection, key, None))
                else:
                    return None
        for setvar in actions.setvars:
            if setvar.operation in ("add", "subtract"):
                if not setvar.name.is_constant:
                    return None
                name = b"".join(part for part in setvar.name.parts if isinstance(part, bytes))
                reads.append((TX_MEMBER, setvar.collection, name.decode("latin-1").lower(), None))
        link = link.chained
    return tuple(dict.fromkeys(reads))


def find_simple_targets(rule: Rule) -> tuple[tuple[str, str, bool, bytes], ...] | None:
    simple = []
    for target in rule.targets:
        selector = target.selector
        if (
            target.collection not in PER_REQUEST_COLLECTIONS
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


def _gate_variable(rule: Rule) -> str | None:
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


def mark_gates(rules: Sequence[Rule]) -> str | None:
    """Mark the phase's gates on the variable most of its gate-shaped rules test, and return that variable; None
    (and no gate) when there is none or a rule from the first gate on may write it."""
    variables = [variable for rule in rules if (variable := _gate_variable(rule)) is not None]
    if not variables:
        return None
    variable = max(set(variables), key=variables.count)
    first = next(rule.position for rule in rules if _gate_variable(rule) == variable)
    for rule in rules[first:]:
        link: Rule | None = rule
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


def prefilter_rule(rule: Rule, data_dir: Path) -> PrefilterRule | None:
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


def _source(target: RuleTarget) -> Source:
    if target.collection == "XML":
        return ("XML", target.selector.text if target.selector is not None else "/*")
    return target.collection
