"""Compiling SecLang directives into a :class:`~edgeplane.seclang.runner.RuleEngine`: each rule's targets, pipeline,
operator and actions compiled once, chains linked, ``skipAfter`` / ``skip`` resolved to where the walk goes on, and
each phase's rules handed to :mod:`edgeplane.seclang.optimiser` (with ``prefilter=False``, only the plain walk the
optimised one is tested against). Errors are raised here, never at request time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from edgeplane.bounded_memo import BoundedMemo
from edgeplane.seclang.actions import Macro, RuleActions, compile_actions
from edgeplane.seclang.errors import RuleFileError
from edgeplane.seclang.operators import Captures, Operator, compile_operator
from edgeplane.seclang.optimiser import find_pure_reads, find_relevance, find_simple_targets, mark_gates, prefilter_rule
from edgeplane.seclang.pipeline import Pipeline
from edgeplane.seclang.program import MATCHED, PER_REQUEST_COLLECTIONS, Marker, Phase, Rule, RuleTarget
from edgeplane.seclang.rule_files import Directive, SecMarker, SecRule, Target, load_rule_files
from edgeplane.seclang.runner import RuleEngine
from edgeplane.seclang.selectors import Selector, compile_selector

# Operators whose data this engine cannot reach at request time (a GeoIP database, DNS blocklists).
NEVER_MATCHING_OPERATORS: Final = frozenset({"geolookup", "rbl"})
# Operators that cost less than remembering their answer; the others (patterns, libinjection, validations, IP
# networks) remember it for the values they have seen: operators are pure functions of the value.
_CHEAP_OPERATORS: Final = frozenset(
    {"eq", "ge", "gt", "lt", "le", "streq", "beginswith", "endswith", "contains", "within", "nomatch"}
)


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
    programs: dict[int, list[Rule | Marker]] = {1: [], 2: []}
    targets_keys: dict[tuple[str, ...], int] = {}
    pipelines: dict[tuple[str, ...], Pipeline] = {}
    for directive in directives:
        if isinstance(directive, SecMarker):
            for program in programs.values():
                program.append(Marker(directive.name))
            continue
        rule = _compile_chain(directive, data_dir, pipelines)
        link: Rule | None = rule
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
    phases = {phase: _compile_phase(program, data_dir, prefilter) for phase, program in programs.items()}
    return RuleEngine(phases, find_relevance(phases.values()), data_dir)


def _compile_phase(program: Sequence[Rule | Marker], data_dir: Path, prefilter: bool) -> Phase:
    """The phase's rules with each ``skipAfter`` / ``skip`` resolved to the index the walk goes on at (the rule
    after the first marker of that name that follows; the end of the phase when there is none; ``skip`` counts
    markers as ModSecurity v3 does), and the prefilter of its pattern rules."""
    rules = [item for item in program if isinstance(item, Rule)]
    for position, rule in enumerate(rules):
        rule.position = position
    # For each index of the program, the position of the first rule at or after it.
    next_rule = [len(rules)] * (len(program) + 1)
    for index in range(len(program) - 1, -1, -1):
        item = program[index]
        next_rule[index] = item.position if isinstance(item, Rule) else next_rule[index + 1]
    for index, item in enumerate(program):
        if not isinstance(item, Rule):
            continue
        if item.actions.skip_after is not None:
            marker = next(
                (
                    later
                    for later in range(index + 1, len(program))
                    if isinstance(program[later], Marker) and program[later].name == item.actions.skip_after  # type: ignore[union-attr]
                ),
                None,
            )
            item.jump = len(rules) if marker is None else next_rule[marker + 1]
        elif item.actions.skip:
            item.jump = next_rule[min(index + 1 + item.actions.skip, len(program))]
    for rule in rules:
        link: Rule | None = rule
        while link is not None:
            link.simple_targets = find_simple_targets(link)
            link = link.chained
    gate_variable = mark_gates(rules) if prefilter else None
    if prefilter:
        for rule in rules:
            rule.pure_reads = None if rule.gate else find_pure_reads(rule)
    candidates = {
        rule.position: candidate
        for rule in rules
        if rule.pure_reads is None and (candidate := prefilter_rule(rule, data_dir))
    }
    if prefilter:
        for position in candidates:
            rules[position].prefiltered = True
    return Phase(tuple(rules), candidates, gate_variable, prefilter)


def _compile_chain(rule: SecRule, data_dir: Path, pipelines: dict[tuple[str, ...], Pipeline]) -> Rule:
    starter_actions = compile_actions(rule.actions, source=rule.source)
    if starter_actions.rule_id is None:
        raise RuleFileError(f"{rule.source}: a rule without id")
    links: list[SecRule] = []
    link: SecRule | None = rule
    while link is not None:
        links.append(link)
        link = link.chained_rule
    compiled: Rule | None = None
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
    chained: Rule | None,
    starter: RuleActions,
    data_dir: Path,
    pipelines: dict[tuple[str, ...], Pipeline],
) -> Rule:
    exclusions = tuple(
        (target.collection, compile_selector(target, rule.source)) for target in rule.targets if target.excluded
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
    return Rule(
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


def _reads_only_the_request(target: RuleTarget) -> bool:
    return target.collection not in PER_REQUEST_COLLECTIONS and target.collection not in MATCHED


def _never_matches(value: bytes) -> Captures | None:
    return None


def _always_matches(value: bytes) -> Captures | None:
    return (value,)


def _compile_target(target: Target, source: str, exclusions: tuple[Selector | None, ...]) -> RuleTarget:
    name = target.collection.encode("ascii")
    return RuleTarget(
        target.collection, compile_selector(target, source), target.counted, str(target), exclusions, name, name + b":"
    )
