"""The ruleset engine: a zone's firewall phases compiled once into a ``Firewall`` that evaluates requests.

``compile_firewall(phases, previous=..., rulesets=...)`` takes the entrypoint rules (v4 rule objects, as the Rulesets
API stores them) of the phases ``http_request_firewall_custom``, ``http_ratelimit`` and
``http_request_firewall_managed``. A phase's value
is either one entrypoint's list of rules, or a list of ``Entrypoint`` (the account's entrypoint first, then the
zone's), which run one after the other. ``previous`` is the previous (package-based) WAF expressed as rules of the same
shape; it runs as a last stage, after the managed phase, and its events have the source ``waf``. ``rulesets`` holds
the rules of the account's custom rulesets by id, for ``execute`` rules that run them.

What ``Firewall.evaluate`` does with a request, in order: the custom phase, the rate limiting phase, the managed
phase, the previous WAF. In each entrypoint, rules run in order, and a rule whose expression is true acts:

- ``block``, ``challenge``, ``js_challenge``, ``managed_challenge``: terminating. Evaluation ends; the request is
  answered 403 (no challenge can be served here, so a challenge is answered as a block), or with the rule's custom
  ``action_parameters.response`` for ``block``.
- ``log``: recorded; evaluation continues.
- ``skip``: ``action_parameters`` ``ruleset: "current"`` ends the current entrypoint ruleset; ``rulesets: [ids]``
  keeps later ``execute`` rules from running those rulesets; ``rules: {ruleset_id: [rule ids]}`` keeps those rules
  from running; ``phases: [...]`` skips later phases; ``products: ["waf"]`` skips the previous WAF (other product
  names are accepted and have nothing to skip here). A skip is recorded unless ``logging.enabled`` is false.
- ``execute``: runs a managed ruleset (``action_parameters.id``) or an account custom ruleset, with its
  ``overrides`` (see ``overrides.py``). Inside the Core Ruleset, rules with the action ``score`` add their severity's
  anomaly score (critical 5, error 4, warning 3, notice 2) and are not recorded on their own; the score rule (the one
  with a ``score_threshold``) acts when the sum reaches its threshold, and its record lists the contributing rules.

A rate limiting rule (``edgeplane.waf.rate_limits``) whose expression is true counts the request in the node's
counters (``evaluate(..., counters=)``; without them the phase does not run) and acts only when its key is over the
rate: its ``block`` is answered 429 unless the rule has a custom response, and the verdict carries when the client may
try again (``retry_after_ms``) and the counts owed once the answer is known (``pending``).

The first terminating action wins; every recorded match is in the verdict.

The attack scores ``cf.waf.score*`` (``edgeplane.waf.attack_scores``) are computed for a request the first time
anything reads them: a rule of any phase whose expression names them, or ``evaluate(request, score=True)`` (the
edge asks when a Logpush job of the zone logs them). Before any phase runs, ``evaluate`` gives the request the
firewall's scorer when one of its rules names a score or ``score`` is set (otherwise nothing can read them); when
the firewall executes the OWASP Core Ruleset, the scorer runs the CRS (with that execution's paranoia level and
disabled rules) and keeps its evaluation on the request, which the execution then reuses, so the
CRS runs once and its family scores count wherever the scores are read. A request nothing scored pays nothing. The
verdict carries the scores when they were computed (``Verdict.scores``).

Compilation never raises on stored configuration: a rule that cannot be compiled (an invalid expression, an
unknown ruleset, an unknown action) is left out, counted in ``edgeplane_waf_broken_rules_total`` and described in
``Firewall.problems``. Evaluation never raises either: a rule whose evaluation fails is skipped and counted.

For a benchmark or a test, the Managed and Core rulesets at paranoia level ``pl`` and a score threshold::

    compile_firewall({"http_request_firewall_managed": deploy_managed_rulesets(paranoia_level=2, score_threshold=40)})

and ``firewall.evaluate(RequestFields.from_http(...))``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

import structlog
from prometheus_client import Counter

from edgeplane.rate_table import RateTable
from edgeplane.rules import Expression, RequestFields, RulesError, compile_expression
from edgeplane.seclang import Evaluation
from edgeplane.waf.attack_scores import AttackScores, attack_scorer
from edgeplane.waf.catalogue import (
    MANAGED_RULESET_ID,
    OWASP_RULESET_ID,
    OWASP_SCORE_RULE_ID,
    ManagedRuleset,
    load_catalogue,
)
from edgeplane.waf.core_ruleset import CoreRuleSet, CoreRuleSetUnavailable, core_rule_set
from edgeplane.waf.errors import UnknownPhaseError
from edgeplane.waf.multipattern import PatternIndex
from edgeplane.waf.overrides import SCORE_ACTION, Overrides
from edgeplane.waf.rate_limit_spec import RateLimitError, parse_rate_limit
from edgeplane.waf.rate_limits import DEFAULT_STATUS as RATELIMIT_STATUS
from edgeplane.waf.rate_limits import PHASE as RATELIMIT_PHASE
from edgeplane.waf.rate_limits import SOURCE as RATELIMIT_SOURCE
from edgeplane.waf.rate_limits import PendingCount, RateLimit, compile_rate_limit, now_ms

log = structlog.get_logger(__name__)

CUSTOM_PHASE: Final = "http_request_firewall_custom"
MANAGED_PHASE: Final = "http_request_firewall_managed"
PHASES: Final = (CUSTOM_PHASE, RATELIMIT_PHASE, MANAGED_PHASE)  # Cloudflare's order
PREVIOUS_STAGE: Final = "previous_waf"  # the name the previous WAF's stage has in ``Match.phase``

SOURCES: Final[Mapping[str, str]] = {
    CUSTOM_PHASE: "firewallCustom",
    RATELIMIT_PHASE: RATELIMIT_SOURCE,
    MANAGED_PHASE: "firewallManaged",
}
PREVIOUS_SOURCE: Final = "waf"
PREVIOUS_PRODUCT: Final = "waf"

TERMINATING_ACTIONS: Final = frozenset({"block", "challenge", "js_challenge", "managed_challenge"})
_KNOWN_ACTIONS: Final = TERMINATING_ACTIONS | {"log", "skip", "execute", SCORE_ACTION}
BLOCK_STATUS: Final = 403

BROKEN_RULES = Counter(
    "edgeplane_waf_broken_rules_total",
    "WAF rules left out at compilation or skipped because their evaluation failed.",
    ["stage"],
)
_BROKEN_AT_COMPILE = BROKEN_RULES.labels("compile")
_BROKEN_AT_EVALUATION = BROKEN_RULES.labels("evaluate")
_INDEX_FAILURES = Counter(
    "edgeplane_waf_index_failures_total",
    "Requests for which the WAF's multi-pattern index failed, so that every rule was evaluated.",
)


@dataclass(frozen=True, slots=True)
class Entrypoint:
    """One entrypoint ruleset of a phase: its id (for records; may be empty) and its rules."""

    rules: Sequence[Mapping[str, Any]]
    ruleset_id: str = ""


@dataclass(frozen=True, slots=True)
class Match:
    """A rule whose expression was true and whose action was taken (or recorded)."""

    rule_id: str
    ruleset_id: str
    ref: str
    description: str
    action: str  # the rule's action once overrides are applied (a challenge stays a challenge here)
    source: str  # firewallCustom, firewallManaged or waf
    phase: str
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def terminating(self) -> bool:
        """Whether the action ends evaluation."""
        return self.action in TERMINATING_ACTIONS


@dataclass(frozen=True, slots=True)
class BlockResponse:
    """A custom answer of a ``block`` rule (``action_parameters.response``)."""

    status: int
    content: bytes
    content_type: bytes


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the firewall decided for one request."""

    matches: tuple[Match, ...] = ()
    terminal: Match | None = None
    response: BlockResponse | None = None
    scores: AttackScores | None = None  # the attack scores, when they were computed for the request
    retry_after_ms: int = 0  # a rate limiting rule's refusal: when the client may try again
    pending: tuple[PendingCount, ...] = ()  # rate limiting counts owed once the answer is known

    @property
    def blocked(self) -> bool:
        """Whether the request is to be refused."""
        return self.terminal is not None

    @property
    def action(self) -> str | None:
        """The terminating action taken (``block``, or a challenge answered as a block), or None."""
        return self.terminal.action if self.terminal is not None else None

    @property
    def status(self) -> int:
        """The HTTP status of the refusal (meaningful when ``blocked``): a custom response's, 429 for a rate
        limiting rule's, else 403."""
        if self.response is not None:
            return self.response.status
        return RATELIMIT_STATUS if self.rate_limited else BLOCK_STATUS

    @property
    def rate_limited(self) -> bool:
        """Whether a rate limiting rule refused the request."""
        return self.terminal is not None and self.terminal.source == RATELIMIT_SOURCE


ALLOWED: Final = Verdict()


@dataclass(frozen=True, slots=True)
class _Skip:
    current: bool = False
    rulesets: frozenset[str] = frozenset()
    rules: Mapping[str, frozenset[str]] = field(default_factory=dict)
    phases: frozenset[str] = frozenset()
    products: frozenset[str] = frozenset()


@dataclass(slots=True)
class _Rule:
    serial: int
    id: str
    ref: str
    description: str
    action: str
    predicate: Callable[[RequestFields], bool]  # the compiled expression, without its call layer
    score: int = 0
    score_threshold: int | None = None
    logging: bool = True
    response: BlockResponse | None = None
    skip: _Skip | None = None
    execute: _Ruleset | None = None
    limit: RateLimit | None = None  # a rate limiting rule's


@dataclass(slots=True)
class _CorePlan:
    """How an execution of the OWASP Core Ruleset runs the CRS: at which paranoia level, without which CRS rules,
    and the enabled rules by CRS id (with their effective actions)."""

    crs: CoreRuleSet
    paranoia_level: int
    disabled: frozenset[int]
    rules: dict[int, _Rule]


@dataclass(slots=True)
class _Ruleset:
    id: str
    rules: list[_Rule]
    core: _CorePlan | None = None  # the OWASP Core Ruleset: its CRS rules, run by the engine at once
    # Filled once the index is built: the positions of the rules evaluated on every request, and the position of
    # each indexed rule by serial, so that a request walks only its candidates and those.
    always: tuple[int, ...] = ()
    positions: dict[int, int] = field(default_factory=dict)
    # A rate limiting entrypoint whose every rule is decided in one call at request time (the usual case): its
    # rules with their decisions, walked by ``Firewall._count`` without the general loop's steps.
    counted: tuple[tuple[_Rule, Callable[[RateTable, RequestFields, int], int]], ...] | None = None

    def index(self, indexed: frozenset[int]) -> None:
        """Records which of the rules the multi-pattern index covers."""
        self.always = tuple(position for position, rule in enumerate(self.rules) if rule.serial not in indexed)
        self.positions = {rule.serial: position for position, rule in enumerate(self.rules) if rule.serial in indexed}

    def order(self, candidates: set[int] | None) -> Sequence[int]:
        """The positions of the rules to evaluate, in order."""
        if candidates is None:
            return range(len(self.rules))
        positions = self.positions
        hits = [positions[serial] for serial in candidates if serial in positions]
        return sorted((*self.always, *hits)) if hits else self.always


@dataclass(frozen=True, slots=True)
class _Stage:
    phase: str
    source: str
    entrypoints: tuple[_Ruleset, ...]


class _Run:
    """One request's evaluation. The skip sets start as shared empty ones and are replaced by the first skip rule
    that matches (rare): a request that meets no skip makes no set of its own."""

    __slots__ = (
        "candidates",
        "counters",
        "matches",
        "now_ms",
        "pending",
        "phase",
        "request",
        "response",
        "retry_after_ms",
        "skipped_phases",
        "skipped_products",
        "skipped_rules",
        "skipped_rulesets",
        "source",
        "terminal",
    )

    def __init__(self, request: RequestFields, candidates: set[int] | None, counters: RateTable | None) -> None:
        self.request = request
        self.counters = counters  # the node's rate counters; None: rate limiting rules do not run
        self.now_ms = -1  # read once the first rate limiting rule matches
        self.pending: list[PendingCount] = []
        self.retry_after_ms = 0
        self.candidates = candidates  # None: every rule is a candidate (the index could not be read)
        self.source = ""
        self.phase = ""
        self.matches: list[Match] = []
        self.terminal: Match | None = None
        self.response: BlockResponse | None = None
        self.skipped_rulesets: frozenset[str] = _NONE
        self.skipped_rules: Mapping[str, frozenset[str]] = _NO_RULES
        self.skipped_phases: frozenset[str] = _NONE
        self.skipped_products: frozenset[str] = _NONE


_NONE: Final[frozenset[str]] = frozenset()
_NO_RULES: Final[Mapping[str, frozenset[str]]] = MappingProxyType({})


class Firewall:
    """A compiled firewall configuration; ``evaluate`` decides a request. Immutable and safe to share."""

    def __init__(
        self,
        stages: tuple[_Stage, ...],
        index: PatternIndex,
        problems: tuple[str, ...],
        size: int,
        core: _CorePlan | None = None,
        reads_scores: bool = False,
    ) -> None:
        """``core``: the Core Ruleset execution whose CRS evaluation the attack scores count (the first one);
        ``reads_scores``: whether a rule's expression names an attack score."""
        self._stages = stages
        self._index = index
        self.problems = problems
        self.rule_count = size
        self._attack_scorer = functools.partial(_attack_scores, core)
        self._reads_scores = reads_scores
        # Whether a rate limiting rule runs (the edge counts their actions in its metrics only then).
        self.rate_limits = any(stage.phase == RATELIMIT_PHASE for stage in stages)

    @property
    def empty(self) -> bool:
        """Whether no rule can ever match (nothing to evaluate)."""
        return self.rule_count == 0

    def evaluate(self, request: RequestFields, *, score: bool = False, counters: RateTable | None = None) -> Verdict:
        """Runs the phases on ``request``: the verdict (``ALLOWED`` when nothing matched, no attack score was
        computed and no count is owed). With ``score`` the attack scores are computed whether or not a rule read
        them. ``counters``: the node's rate counters, which the rate limiting rules count in (without them those
        rules do not run). Never raises."""
        reads_scores = self._reads_scores
        if score or reads_scores:  # otherwise nothing reads them: a request pays nothing for the scores
            request.attack_scorer = self._attack_scorer
        if not self._stages:
            return _scored_verdict(request) if score else ALLOWED
        try:
            candidates: set[int] | None = self._index.candidates(request)
        except Exception:
            _INDEX_FAILURES.inc()  # not logged: it would be once per request
            candidates = None
        run = _Run(request, candidates, counters)
        for stage in self._stages:
            if stage.phase in run.skipped_phases:
                continue
            if stage.phase == PREVIOUS_STAGE and PREVIOUS_PRODUCT in run.skipped_products:
                continue
            run.source, run.phase = stage.source, stage.phase
            ended = False
            for entrypoint in stage.entrypoints:  # a loop, not any(...): a generator costs each request
                if self._run(entrypoint, run):
                    ended = True
                    break
            if ended:
                break
        scores = _scores(request) if score or (reads_scores and request.attack_scores_computed) else None
        if not run.matches and scores is None and not run.pending:
            return ALLOWED
        return Verdict(
            matches=tuple(run.matches),
            terminal=run.terminal,
            response=run.response,
            scores=scores,
            retry_after_ms=run.retry_after_ms,
            pending=tuple(run.pending),
        )

    def _run(self, ruleset: _Ruleset, run: _Run) -> bool:
        """Runs one ruleset; True when a terminating action ended evaluation."""
        request = run.request
        rules = ruleset.rules
        skipped = run.skipped_rules.get(ruleset.id)
        if ruleset.counted is not None and skipped is None:
            return self._count(ruleset, ruleset.counted, run)
        score = 0
        contributors: list[str] = []
        if ruleset.core is not None:
            outcome = self._run_core(ruleset, ruleset.core, run, skipped)
            if outcome is None:
                return True
            score, contributors = outcome
        for position in ruleset.order(run.candidates):
            rule = rules[position]
            if skipped is not None and rule.id in skipped:
                continue
            threshold = rule.score_threshold
            if threshold is not None and score < threshold:
                continue
            try:
                hit = rule.predicate(request)
            except Exception:
                _BROKEN_AT_EVALUATION.inc()
                continue
            if not hit:
                continue
            action = rule.action
            if action == SCORE_ACTION:
                score += rule.score
                contributors.append(rule.id)
                continue
            if action == "execute":
                target = rule.execute
                if target is not None and target.id not in run.skipped_rulesets and self._run(target, run):
                    return True
                continue
            metadata: dict[str, str] = {}
            if threshold is not None:
                metadata = {"score": str(score), "threshold": str(threshold), "rules": " ".join(contributors)}
                if ruleset.core is not None:
                    metadata["crs_rules"] = " ".join(_crs_ids(ruleset.core, contributors))
            limit = rule.limit
            if limit is not None:
                wait = _rate_limited(limit, run)
                if not wait:
                    continue
                metadata = {"retry_after_ms": str(wait)}
            match = Match(rule.id, ruleset.id, rule.ref, rule.description, action, run.source, run.phase, metadata)
            if action == "skip":
                if rule.logging:
                    run.matches.append(match)
                skip = rule.skip
                if skip is not None:
                    _apply_skip(skip, run)
                    if skip.current:
                        return False
                    skipped = run.skipped_rules.get(ruleset.id)  # the skip may name rules of this ruleset
                continue
            run.matches.append(match)
            if action in TERMINATING_ACTIONS:
                run.terminal = match
                run.response = rule.response
                return True
        return False

    def _count(
        self,
        ruleset: _Ruleset,
        counted: tuple[tuple[_Rule, Callable[[RateTable, RequestFields, int], int]], ...],
        run: _Run,
    ) -> bool:
        """Runs a rate limiting entrypoint of rules decided at request time (``_Ruleset.counted``); True when a
        terminating action ended evaluation. The same outcome as ``_run``'s loop, in fewer steps per rule."""
        counters = run.counters
        if counters is None:
            return False
        request = run.request
        if run.now_ms < 0:
            run.now_ms = now_ms()
        now = run.now_ms
        for rule, decide in counted:
            try:
                if not rule.predicate(request):
                    continue
                wait = decide(counters, request, now)
            except Exception:
                _BROKEN_AT_EVALUATION.inc()
                continue
            if not wait:
                continue
            run.retry_after_ms = max(run.retry_after_ms, wait)
            metadata = {"retry_after_ms": str(wait)}
            match = Match(rule.id, ruleset.id, rule.ref, rule.description, rule.action, run.source, run.phase, metadata)
            run.matches.append(match)
            if rule.action in TERMINATING_ACTIONS:
                run.terminal = match
                run.response = rule.response
                return True
        return False

    def _run_core(
        self, ruleset: _Ruleset, core: _CorePlan, run: _Run, skipped: frozenset[str] | None
    ) -> tuple[int, list[str]] | None:
        """Runs the CRS once for the Core Ruleset's rules: each enabled rule that fired acts once, in the order the
        CRS fired them (``score``: adds its score). The score and its contributors, or None when a terminating
        action ended evaluation."""
        try:
            evaluation = _core_evaluation(run.request, core)
        except Exception:
            _BROKEN_AT_EVALUATION.inc()
            log.exception("the OWASP Core Rule Set failed on a request")
            return 0, []
        score = 0
        contributors: list[str] = []
        for fired in evaluation.matches:
            rule = core.rules.get(fired.rule_id)
            if rule is None or rule.id in contributors or (skipped is not None and rule.id in skipped):
                continue
            if rule.action == SCORE_ACTION:
                score += rule.score
                contributors.append(rule.id)
                continue
            metadata = {
                "crs_id": str(fired.rule_id),
                "matched_var": fired.matched_var_name,
                "matched_data": fired.matched_var[:_MATCHED_DATA_BYTES].decode("utf-8", "replace"),
            }
            match = Match(rule.id, ruleset.id, rule.ref, rule.description, rule.action, run.source, run.phase, metadata)
            run.matches.append(match)
            if rule.action in TERMINATING_ACTIONS:
                run.terminal = match
                run.response = rule.response
                return None
        return score, contributors


_MATCHED_DATA_BYTES: Final = 128
_SCORE_FIELDS: Final = frozenset({"cf.waf.score", "cf.waf.score.sqli", "cf.waf.score.xss", "cf.waf.score.rce"})


def _core_evaluation(request: RequestFields, core: _CorePlan) -> Evaluation:
    """The CRS's evaluation of ``request`` for the execution ``core``: run once, kept on the request for the
    other reader (the attack scores, the execution)."""
    kept = request.core_evaluation
    if kept is not None and kept[0] is core:
        return kept[1]  # type: ignore[no-any-return]
    evaluation = core.crs.evaluate(request, paranoia_level=core.paranoia_level, disabled=core.disabled)
    request.core_evaluation = (core, evaluation)
    return evaluation


def _attack_scores(core: _CorePlan | None, request: RequestFields) -> tuple[int, int, int, int]:
    """A firewall's ``RequestFields.attack_scorer``: the request's scores, with the CRS's family scores when the
    firewall executes the Core Ruleset (``core``); without them if the CRS fails on the request."""
    evaluation: Evaluation | None = None
    if core is not None:
        try:
            evaluation = _core_evaluation(request, core)
        except Exception:
            _BROKEN_AT_EVALUATION.inc()
            log.exception("the OWASP Core Rule Set failed on a request")
    return attack_scorer().score(request, evaluation).as_tuple()


def _scores(request: RequestFields) -> AttackScores:
    """The request's attack scores, computed now if nothing read them before."""
    return AttackScores(
        request.cf_waf_score, request.cf_waf_score_sqli, request.cf_waf_score_xss, request.cf_waf_score_rce
    )


def _scored_verdict(request: RequestFields) -> Verdict:
    return Verdict(scores=_scores(request))


def scored_verdict(request: RequestFields) -> Verdict:
    """The verdict of a request of a zone without a firewall whose attack scores are wanted (for its log record):
    no match, and the scores (without the CRS's, which no firewall runs)."""
    request.attack_scorer = _UNFIREWALLED_SCORER
    return _scored_verdict(request)


_UNFIREWALLED_SCORER: Final = functools.partial(_attack_scores, None)


def _crs_ids(core: _CorePlan, rule_ids: list[str]) -> list[str]:
    by_id = {rule.id: rule.ref for rule in core.rules.values()}
    return [by_id.get(rule_id, rule_id) for rule_id in rule_ids]


def _rate_limited(limit: RateLimit, run: _Run) -> int:
    """Counts a request a rate limiting rule's expression matched: the wait before it would be let through, 0 when it
    is under the rate (or no counters run here)."""
    counters = run.counters
    if counters is None:
        return 0
    if run.now_ms < 0:
        run.now_ms = now_ms()
    try:
        wait = limit.decide(counters, run.request, run.now_ms, run.pending)
    except Exception:
        _BROKEN_AT_EVALUATION.inc()
        return 0
    if wait:
        run.retry_after_ms = max(run.retry_after_ms, wait)
    return wait


def _apply_skip(skip: _Skip, run: _Run) -> None:
    run.skipped_rulesets |= skip.rulesets
    if skip.rules:
        rules = dict(run.skipped_rules)
        for ruleset_id, rule_ids in skip.rules.items():
            rules[ruleset_id] = rules.get(ruleset_id, _NONE) | rule_ids
        run.skipped_rules = rules
    run.skipped_phases |= skip.phases
    run.skipped_products |= skip.products


def compile_firewall(
    phases: Mapping[str, Sequence[Mapping[str, Any]] | Sequence[Entrypoint]],
    *,
    previous: Sequence[Mapping[str, Any]] | None = None,
    rulesets: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> Firewall:
    """Compiles the phases' entrypoint rules (see the module docstring) into a ``Firewall``.

    Raises ``UnknownPhaseError`` for a phase other than the custom and managed firewall phases (a caller's bug);
    any problem in the rules themselves is not raised but recorded in ``Firewall.problems``.
    """
    unknown = set(phases) - set(PHASES)
    if unknown:
        raise UnknownPhaseError(f"unknown phases {sorted(unknown)}; expected {list(PHASES)}")
    compiler = _Compiler(rulesets or {})
    stages: list[_Stage] = []
    for phase in PHASES:
        entrypoints = _entrypoints(phases.get(phase, ()))
        compiled = tuple(compiler.entrypoint(entry, phase) for entry in entrypoints)
        if any(ruleset.rules for ruleset in compiled):
            stages.append(_Stage(phase, SOURCES[phase], compiled))
    if previous:
        compiled_previous = compiler.entrypoint(Entrypoint(previous), PREVIOUS_STAGE)
        if compiled_previous.rules:
            stages.append(_Stage(PREVIOUS_STAGE, PREVIOUS_SOURCE, (compiled_previous,)))
    index = PatternIndex(compiler.prefilters)
    for ruleset in compiler.rulesets:
        ruleset.index(index.indexed)
    for problem in compiler.problems:
        log.warning("WAF rule left out", problem=problem)
    core = next((ruleset.core for ruleset in compiler.rulesets if ruleset.core is not None), None)
    return Firewall(tuple(stages), index, tuple(compiler.problems), len(compiler.rules), core, compiler.reads_scores)


def _entrypoints(value: Sequence[Mapping[str, Any]] | Sequence[Entrypoint]) -> list[Entrypoint]:
    if all(isinstance(item, Entrypoint) for item in value):
        return [item for item in value if isinstance(item, Entrypoint)]
    return [Entrypoint([item for item in value if isinstance(item, Mapping)])]


class _Compiler:
    """Compiles rules, numbering each and collecting their prefilters for the firewall's one index."""

    def __init__(self, rulesets: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        self.custom_rulesets = rulesets
        self.catalogue = load_catalogue()
        self.rules: list[_Rule] = []
        self.reads_scores = False  # whether a rule's expression names an attack score
        self.prefilters: list[tuple[int, Any]] = []
        self.problems: list[str] = []
        self.rulesets: list[_Ruleset] = []

    def entrypoint(self, entry: Entrypoint, phase: str) -> _Ruleset:
        ruleset = self._ruleset(entry.ruleset_id)
        for position, document in enumerate(entry.rules):
            if not isinstance(document, Mapping) or document.get("enabled", True) is False:
                continue
            where = f"{phase} rule {position} ({document.get('id') or 'no id'})"
            rule = self._user_rule(document, where, nested=False, phase=phase, ruleset_id=entry.ruleset_id)
            if rule is not None:
                ruleset.rules.append(rule)
        if phase == RATELIMIT_PHASE:
            counted = [(rule, rule.limit.at_once) for rule in ruleset.rules if rule.limit and rule.limit.at_once]
            if len(counted) == len(ruleset.rules):
                ruleset.counted = tuple(counted)
        return ruleset

    def _user_rule(
        self, document: Mapping[str, Any], where: str, *, nested: bool, phase: str, ruleset_id: str
    ) -> _Rule | None:
        """A rule a user wrote, in ``phase`` (its entrypoint's, or the entrypoint's that executes its ruleset) and
        the ruleset ``ruleset_id``; None (a problem) when it cannot run. Every rule of the rate limiting phase but an
        ``execute`` has its rate limit."""
        action = document.get("action")
        if action not in _KNOWN_ACTIONS or action == SCORE_ACTION:
            self._problem(f"{where}: unknown action {action!r}")
            return None
        limit = None
        if phase == RATELIMIT_PHASE and action != "execute":
            limit = self._rate_limit(document, ruleset_id, where)
            if limit is None:
                return None
        parameters = document.get("action_parameters")
        parameters = parameters if isinstance(parameters, Mapping) else {}
        execute: _Ruleset | None = None
        if action == "execute":
            if nested:
                self._problem(f"{where}: execute inside an executed ruleset is not supported")
                return None
            execute = self._execute(parameters, where, phase)
            if execute is None:
                return None
        rule_id = str(document.get("id") or "")
        rule = self._rule(
            rule_id=rule_id,
            ref=str(document.get("ref") or rule_id),
            description=str(document.get("description") or ""),
            action=action,
            expression=str(document.get("expression") or ""),
            where=where,
        )
        if rule is None:
            return None
        logging = document.get("logging")
        if isinstance(logging, Mapping) and logging.get("enabled") is False:
            rule.logging = False
        rule.execute = execute
        rule.limit = limit
        if action == "skip":
            rule.skip = _skip(parameters)
        if action == "block":
            default = RATELIMIT_STATUS if limit is not None else BLOCK_STATUS
            rule.response = _response(parameters.get("response"), default)
        return rule

    def _rate_limit(self, document: Mapping[str, Any], ruleset_id: str, where: str) -> RateLimit | None:
        """The rate limit of a rule of the rate limiting phase, or None (a problem) when its action or its
        ``ratelimit`` is not one such a rule may have."""
        action = document.get("action")
        if not isinstance(action, str) or (action not in TERMINATING_ACTIONS and action != "log"):
            self._problem(f"{where}: action {action!r} is not one of a rate limiting rule")
            return None
        try:
            spec = parse_rate_limit(document.get("ratelimit"), action)
            return compile_rate_limit(spec, ruleset_id=ruleset_id, rule_id=str(document.get("id") or ""))
        except (RateLimitError, RulesError, ValueError) as error:
            self._problem(f"{where}: {error}")
            return None

    def _execute(self, parameters: Mapping[str, Any], where: str, phase: str) -> _Ruleset | None:
        ruleset_id = parameters.get("id")
        overrides = Overrides.from_json(parameters.get("overrides"))
        if not isinstance(ruleset_id, str):
            self._problem(f"{where}: execute without a ruleset id")
            return None
        managed = self.catalogue.get(ruleset_id)
        if managed is not None:
            return self._managed(managed, overrides, where)
        custom = self.custom_rulesets.get(ruleset_id)
        if custom is None:
            self._problem(f"{where}: unknown ruleset {ruleset_id}")
            return None
        ruleset = self._ruleset(ruleset_id)
        for position, document in enumerate(custom):
            if not isinstance(document, Mapping):
                continue
            rule_id = str(document.get("id") or "")
            categories = document.get("categories")
            effective = overrides.resolve(
                rule_id,
                tuple(categories) if isinstance(categories, list) else (),
                action=str(document.get("action")),
                enabled=document.get("enabled", True) is not False,
            )
            if not effective.enabled:
                continue
            rule = self._user_rule(
                {**document, "action": effective.action},
                f"{where}: ruleset {ruleset_id} rule {position}",
                nested=True,
                phase=phase,
                ruleset_id=ruleset_id,
            )
            if rule is not None:
                ruleset.rules.append(rule)
        return ruleset

    def _managed(self, managed: ManagedRuleset, overrides: Overrides, where: str) -> _Ruleset:
        ruleset = self._ruleset(managed.id)
        core: dict[int, _Rule] = {}
        for item in managed.rules:
            effective = overrides.resolve(
                item.id,
                item.categories,
                action=item.action,
                enabled=item.enabled,
                score_threshold=item.score_threshold,
            )
            if not effective.enabled:
                continue
            if effective.action not in _KNOWN_ACTIONS or effective.action in ("execute", "skip"):
                self._problem(f"{where}: override action {effective.action!r} for rule {item.id}")
                continue
            if item.crs_id is not None:
                core[item.crs_id] = self._core_rule(item.id, item.ref, item.description, effective.action, item.score)
                continue
            rule = self._rule(
                rule_id=item.id,
                ref=item.id,
                description=item.description,
                action=effective.action,
                expression=item.expression,
                where=f"{where}: managed rule {item.id}",
            )
            if rule is None:
                continue
            rule.score = item.score
            rule.score_threshold = effective.score_threshold
            ruleset.rules.append(rule)
        if core:
            try:
                ruleset.core = _core_plan(core)
            except CoreRuleSetUnavailable as unavailable:
                self._problem(f"{where}: {unavailable}")
        return ruleset

    def _core_rule(self, rule_id: str, ref: str, description: str, action: str, score: int) -> _Rule:
        rule = _Rule(
            serial=len(self.rules), id=rule_id, ref=ref, description=description, action=action, predicate=_never
        )
        rule.score = score
        self.rules.append(rule)
        return rule

    def _ruleset(self, ruleset_id: str) -> _Ruleset:
        ruleset = _Ruleset(ruleset_id, [])
        self.rulesets.append(ruleset)
        return ruleset

    def _rule(
        self, *, rule_id: str, ref: str, description: str, action: str, expression: str, where: str
    ) -> _Rule | None:
        try:
            compiled = _compile(expression)
        except RulesError as error:
            self._problem(f"{where}: {error}")
            return None
        rule = _Rule(
            serial=len(self.rules),
            id=rule_id,
            ref=ref,
            description=description,
            action=action,
            predicate=compiled.predicate,
        )
        self.rules.append(rule)
        if compiled.prefilter is not None:
            self.prefilters.append((rule.serial, compiled.prefilter))
        if not compiled.fields.isdisjoint(_SCORE_FIELDS):
            self.reads_scores = True
        return rule

    def _problem(self, problem: str) -> None:
        _BROKEN_AT_COMPILE.inc()
        self.problems.append(problem)


def _never(request: RequestFields) -> bool:
    return False  # a core rule's match is the CRS's to tell (``Firewall._run_core``)


def _core_plan(enabled: dict[int, _Rule]) -> _CorePlan:
    """The CRS run for the enabled core rules: the highest paranoia level among them, the others removed. Compiles
    the CRS the first time (raises ``CoreRuleSetUnavailable`` when it does not compile)."""
    crs = core_rule_set()
    levels = {rule.crs_id: rule.paranoia_level for rule in crs.rules}
    level = max((levels.get(crs_id, 1) for crs_id in enabled), default=1)
    disabled = frozenset(levels) - frozenset(enabled)
    return _CorePlan(crs=crs, paranoia_level=level, disabled=disabled, rules=enabled)


@functools.lru_cache(maxsize=4096)
def _compile(expression: str) -> Expression:
    # Managed rules are the same text in every zone: each is compiled once per process.
    return compile_expression(expression)


def _skip(parameters: Mapping[str, Any]) -> _Skip:
    rules = parameters.get("rules")
    return _Skip(
        current=parameters.get("ruleset") == "current",
        rulesets=_strings(parameters.get("rulesets")),
        rules=(
            {key: _strings(value) for key, value in rules.items() if isinstance(key, str)}
            if isinstance(rules, Mapping)
            else {}
        ),
        phases=_strings(parameters.get("phases")),
        products=_strings(parameters.get("products")),
    )


def _strings(value: object) -> frozenset[str]:
    if not isinstance(value, list):
        return frozenset()
    return frozenset(item for item in value if isinstance(item, str))


def _response(value: object, default_status: int) -> BlockResponse | None:
    """A block rule's custom response (None without one); ``default_status`` when it gives no status code."""
    if not isinstance(value, Mapping):
        return None
    status = value.get("status_code")
    content = value.get("content")
    content_type = value.get("content_type")
    return BlockResponse(
        status=status if isinstance(status, int) and 400 <= status <= 499 else default_status,
        content=content.encode() if isinstance(content, str) else b"",
        content_type=content_type.encode("latin-1") if isinstance(content_type, str) else b"text/plain",
    )


def deploy_managed_rulesets(
    *, paranoia_level: int = 1, score_threshold: int = 40, core_action: str = "block", managed: bool = True
) -> list[dict[str, Any]]:
    """The ``http_request_firewall_managed`` entrypoint rules that execute the Managed Ruleset (its default
    actions; left out when ``managed`` is false) and the Core Ruleset at ``paranoia_level`` (1 to 4: the categories
    above it are disabled) with the score rule's ``score_threshold`` and action. Raises ``ValueError`` for a
    paranoia level outside 1..4."""
    if paranoia_level not in (1, 2, 3, 4):
        raise ValueError(f"paranoia level {paranoia_level} is not 1, 2, 3 or 4")
    rules: list[dict[str, Any]] = []
    if managed:
        rules.append(
            {
                "action": "execute",
                "expression": "true",
                "action_parameters": {"id": MANAGED_RULESET_ID},
                "enabled": True,
            }
        )
    categories = [{"category": f"paranoia-level-{level}", "enabled": False} for level in range(paranoia_level + 1, 5)]
    rules.append(
        {
            "action": "execute",
            "expression": "true",
            "enabled": True,
            "action_parameters": {
                "id": OWASP_RULESET_ID,
                "overrides": {
                    "categories": categories,
                    "rules": [{"id": OWASP_SCORE_RULE_ID, "score_threshold": score_threshold, "action": core_action}],
                },
            },
        }
    )
    return rules
