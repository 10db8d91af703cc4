"""Rate limiting rules (the ``http_ratelimit`` phase) compiled for the edge: what a rule counts, by which key, and
how a request is decided against the node's shared counters.

A rule's ``ratelimit`` object (``edgeplane.waf.rate_limit_spec``, which the API validates with) becomes a
``RateLimit``: the counter's identity, its period and budget, and how to read the request's key from its
characteristics. ``cf.colo.id`` is in every key and is the node's own name, so it is left out of the key: the counters
are the node's (``edgeplane.rate_counters``), as Cloudflare's are a data centre's.

Keys. Each other characteristic gives one text of the key: ``ip.src`` (an IPv6 address counts by its /64, as one
client usually holds a whole /64), ``ip.src.asnum``, ``ip.src.country``, ``http.host``, ``http.request.uri.path``,
``cf.unique_visitor_id`` (edgeplane has no visitor cookie: the address and the user agent), a header, cookie or
query argument by name (its values joined), ``lookup_json_string``/``lookup_json_integer`` of the body (the member of
a JSON object body; "" otherwise), the JA3/JA4 fingerprints ("": the edge terminates no TLS), and the edgeplane
fields ``edgeplane.jsonrpc.network`` and ``edgeplane.jsonrpc.methods``. A batch has several methods: with
``edgeplane.jsonrpc.methods`` a request is counted against each of its methods' keys, once per call of that method,
so ``eth_getLogs`` is limited the same whether it comes alone or in batches.

When counting happens. A rule counts at request time, with one atomic check-and-count per key, unless what it counts
is only known from the answer: a ``counting_expression``, ``requests_to_origin``, or a score from an origin's header.
Those rules check at request time (a client over the rate is refused before its request costs anything) and count
after the answer (``count_answer``), with the request's answer fields (``http.response.code`` ...) set for the
counting expression. A rule whose ``score_response_header_name`` is the gateway's own cost header
(``GATEWAY_COST_HEADER``) needs no origin: the gateway's cost table (``edgeplane.jsonrpc.cost``) gives the score at
request time, so ``score_per_period`` is a compute-unit budget.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from edgeplane.body_document import NotJson
from edgeplane.rate_table import RateTable
from edgeplane.rules import Expression, RequestFields, compile_expression
from edgeplane.rules.addresses import IPV6_OFFSET
from edgeplane.waf.rate_limit_spec import RateLimitSpec, characteristic_field

PHASE: Final = "http_ratelimit"
SOURCE: Final = "ratelimit"
DEFAULT_STATUS: Final = 429
GATEWAY_COST_HEADER: Final = "edgeplane-rpc-cost"

KeyValues = tuple[str, ...]
KeyReader = Callable[[RequestFields], str]


@dataclass(frozen=True, slots=True)
class PendingCount:
    """A count a rule owes once the answer is known: the rule, the request (for the counting expression) and its
    keys with the amount of each."""

    limit: RateLimit
    request: RequestFields
    keys: tuple[tuple[KeyValues, int], ...]


@dataclass(frozen=True, slots=True)
class RateLimit:
    """One rule's rate limit, compiled. ``counter`` identifies its counters in the node's table: the same rule (by
    ruleset, rule id and period) keeps its counters across configuration changes and in every worker."""

    counter: int
    period_ms: int
    budget: int  # requests_per_period, or score_per_period
    timeout_ms: int  # mitigation_timeout; 0 throttles
    scored: bool  # counts a score rather than requests
    gateway_score: bool  # the score is the gateway's cost of the request, known at request time
    score_header: bytes  # an origin's score header (lower case); b"" when none is read
    counts_after_answer: bool
    counting: Expression | None  # counting_expression over request and answer; None: count what matched
    requests_to_origin: bool
    key_of: Callable[[RequestFields], KeyValues]  # the characteristics' texts (the methods' aside)
    by_method: bool  # one key per JSON-RPC method of the request
    # The decision of a rule counted at request time with one key (the common case), as one closure over the
    # rule's constants: None for the others, which ``decide`` handles.
    at_once: Callable[[RateTable, RequestFields, int], int] | None

    def keys(self, request: RequestFields) -> tuple[tuple[KeyValues, int], ...]:
        """The request's keys, each with how many requests it counts (more than one for a batch's method)."""
        values = self.key_of(request)
        if not self.by_method:
            return ((values, 1),)
        methods = request.edgeplane_jsonrpc_methods
        if len(methods) == 1:
            return (((*values, methods[0]), 1),)
        return tuple(((*values, method), count) for method, count in _calls(methods).items())

    def amount(self, request: RequestFields, calls: int) -> int:
        """What one key of the request costs at request time: its calls, or their share of the gateway's cost."""
        if not self.gateway_score:
            return calls
        cost = max(1, request.edgeplane_jsonrpc_cost)
        return _share(cost, calls, len(request.edgeplane_jsonrpc_methods)) if self.by_method else cost

    def decide(self, table: RateTable, request: RequestFields, now_ms: int, owed: list[PendingCount]) -> int:
        """The wait in milliseconds before the request would be let through (0: it is under the rate). A rule that
        counts by the answer adds what the request owes to ``owed`` when it is let through."""
        at_once = self.at_once
        if at_once is not None:  # every rule counted at request time
            return at_once(table, request, now_ms)
        keys = self.keys(request)
        wait = 0
        counter, period_ms, budget, timeout_ms = self.counter, self.period_ms, self.budget, self.timeout_ms
        for values, calls in keys:
            amount = 1 if self.scored else calls
            wait = max(wait, table.check(counter, values, period_ms, budget, amount, timeout_ms, now_ms))
        if not wait:
            owed.append(PendingCount(self, request, keys))
        return wait

    def count(self, table: RateTable, pending: PendingCount, origin_score: int, now_ms: int) -> None:
        """Counts a request once its answer is known (``pending.request`` has its answer fields set)."""
        counting = self.counting
        if counting is not None and not counting(pending.request):
            return
        for values, calls in pending.keys:
            amount = origin_score if self.score_header else self.amount(pending.request, calls)
            if amount > 0:
                table.add(self.counter, values, self.period_ms, self.budget, amount, self.timeout_ms, now_ms)


def compile_rate_limit(spec: RateLimitSpec, *, ruleset_id: str, rule_id: str) -> RateLimit:
    """The rate limit of a rule with ``spec``. Raises ``RulesError`` when its counting expression does not compile
    (the API refuses such a rule; a stored one is left out by the firewall)."""
    counting_text = spec.counting_expression.strip()
    counting = compile_expression(counting_text, response=True) if counting_text else None
    header = (spec.score_response_header_name or "").lower()
    scored = spec.score_per_period is not None
    gateway_score = scored and header == GATEWAY_COST_HEADER
    score_header = header.encode("latin-1") if scored and not gateway_score else b""
    budget = spec.score_per_period if spec.score_per_period is not None else spec.requests_per_period or 1
    readers: list[KeyReader] = []
    by_method = False
    for characteristic in spec.characteristics:
        kind, argument = characteristic_field(characteristic)
        if kind == "cf.colo.id":
            continue
        if kind == "edgeplane.jsonrpc.methods":
            by_method = True
            continue
        readers.append(key_reader(kind, argument))
    identity = f"{ruleset_id}\x00{rule_id}\x00{spec.period}".encode()
    counter = zlib.crc32(identity) & 0x7FFF_FFFF
    key_of = _key_builder(tuple(readers))
    counts_after_answer = counting is not None or spec.requests_to_origin or bool(score_header)
    at_once = None
    if not counts_after_answer:
        decider = _method_decider if by_method else _decider
        at_once = decider(counter, spec.period * 1000, budget, spec.mitigation_timeout * 1000, key_of, gateway_score)
    return RateLimit(
        counter=counter,
        period_ms=spec.period * 1000,
        budget=budget,
        timeout_ms=spec.mitigation_timeout * 1000,
        scored=scored,
        gateway_score=gateway_score,
        score_header=score_header,
        counts_after_answer=counts_after_answer,
        counting=counting,
        requests_to_origin=spec.requests_to_origin,
        key_of=key_of,
        by_method=by_method,
        at_once=at_once,
    )


def _decider(
    counter: int,
    period_ms: int,
    budget: int,
    timeout_ms: int,
    key_of: Callable[[RequestFields], KeyValues],
    gateway_score: bool,
) -> Callable[[RateTable, RequestFields, int], int]:
    """The decision of a rule counted at request time with one key: one call to the table, the rule's constants in
    the closure (the per-request path of most rules; ``RateLimit.decide`` is the general one)."""
    if gateway_score:

        def decide_cost(table: RateTable, request: RequestFields, now_ms: int) -> int:
            cost = request.edgeplane_jsonrpc_cost
            amount = cost if cost > 0 else 1
            return table.acquire(counter, key_of(request), period_ms, budget, amount, timeout_ms, now_ms)

        return decide_cost

    def decide(table: RateTable, request: RequestFields, now_ms: int) -> int:
        return table.acquire(counter, key_of(request), period_ms, budget, 1, timeout_ms, now_ms)

    return decide


def _method_decider(
    counter: int,
    period_ms: int,
    budget: int,
    timeout_ms: int,
    key_of: Callable[[RequestFields], KeyValues],
    gateway_score: bool,
) -> Callable[[RateTable, RequestFields, int], int]:
    """``_decider`` for a rule keyed by the JSON-RPC methods too: one key per method, a batch's method counted once
    per call (or charged its calls' share of the gateway's cost); one call to the table for a single call."""

    def decide(table: RateTable, request: RequestFields, now_ms: int) -> int:
        values = key_of(request)
        methods = request.edgeplane_jsonrpc_methods
        cost = max(1, request.edgeplane_jsonrpc_cost) if gateway_score else 1
        if len(methods) == 1:
            return table.acquire(counter, (*values, methods[0]), period_ms, budget, cost, timeout_ms, now_ms)
        wait = 0
        for method, count in _calls(methods).items():
            amount = _share(cost, count, len(methods)) if gateway_score else count
            wait = max(wait, table.acquire(counter, (*values, method), period_ms, budget, amount, timeout_ms, now_ms))
        return wait

    return decide


def _share(cost: int, calls: int, size: int) -> int:
    """What ``calls`` of a request's ``size`` calls are charged of its ``cost``: their part, at least 1."""
    return cost if size <= 1 else max(1, cost * calls // size)


def _calls(methods: list[str]) -> dict[str, int]:
    """How many calls of each method a request makes (a request with none: one call of the method ``""``)."""
    calls: dict[str, int] = {}
    for method in methods:
        calls[method] = calls.get(method, 0) + 1
    return calls or {"": 1}


def _key_builder(readers: tuple[KeyReader, ...]) -> Callable[[RequestFields], KeyValues]:
    """The function giving a request's key from ``readers``, without a loop for the usual one or two."""
    if not readers:
        return lambda request: ()
    if readers == (_address,):
        return _address_key
    if len(readers) == 1:
        (first,) = readers
        return lambda request: (first(request),)
    if len(readers) == 2:
        first, second = readers
        return lambda request: (first(request), second(request))
    return lambda request: tuple([reader(request) for reader in readers])


def origin_score(limit: RateLimit, headers: Sequence[tuple[bytes, bytes]]) -> int:
    """The score an origin's answer gives the request in ``limit``'s header: an integer 1..1,000,000; 0 when the
    header is missing or malformed (nothing is counted, as Cloudflare does)."""
    name = limit.score_header
    for header, value in headers:
        if header.lower() == name:
            try:
                score = int(value.strip())
            except ValueError:
                return 0
            return score if 1 <= score <= 1_000_000 else 0
    return 0


MACHINE_CLOCK: Final = (
    2**63 - 1
)  # as a time given to the counter table: the machine's monotonic clock, read by the table


def now_ms() -> int:
    """The time the counters are given: ``MACHINE_CLOCK``, so the table reads the machine's monotonic clock (the
    same in every process) itself, cheaper than Python can. Tests replace this to give explicit times."""
    return MACHINE_CLOCK


# The key readers, one per kind of characteristic.


def key_reader(kind: str, argument: str | None) -> KeyReader:
    """The reader of one characteristic's text of a key. Raises ``ValueError`` for a kind it does not know (the API
    refuses such characteristics)."""
    simple = _SIMPLE.get(kind)
    if simple is not None:
        return simple
    if kind == "http.request.headers":
        return _header_reader(argument or "")
    if kind in _BY_NAME:
        attribute = _BY_NAME[kind]
        name = argument or ""
        return lambda request: ",".join(getattr(request, attribute).get(name, ()))
    if kind in ("lookup_json_string", "lookup_json_integer"):
        wanted: type = str if kind == "lookup_json_string" else int
        member = argument or ""
        return lambda request: _json_member(request, member, wanted)
    raise ValueError(f"unknown characteristic {kind!r}")


def _header_reader(name: str) -> KeyReader:
    """A header's values, joined: from the request's header index when something built it already, else from its
    header lines (one name compared per line: cheaper than building the index for one header)."""
    wanted = name.encode("latin-1")

    def read(request: RequestFields) -> str:
        indexed = request.__dict__.get("http_request_headers")
        if indexed is not None:
            return ",".join(indexed.get(name, ()))
        return ",".join(
            [value.decode("utf-8", "surrogateescape") for key, value in request.raw_headers if key == wanted]
        )

    return read


def _address(request: RequestFields) -> str:
    key = request.ip_src
    if key >= IPV6_OFFSET:
        return "%x/64" % ((key - IPV6_OFFSET) >> 64)
    return str(key)


def _address_key(request: RequestFields) -> KeyValues:
    key = request.ip_src
    return (str(key),) if key < IPV6_OFFSET else ("%x/64" % ((key - IPV6_OFFSET) >> 64),)


def _visitor(request: RequestFields) -> str:
    return f"{_address(request)} {request.http_user_agent}"


def _none(request: RequestFields) -> str:
    return ""


def _json_member(request: RequestFields, name: str, wanted: type) -> str:
    try:
        document: Any = request.body_document.document()
    except NotJson:
        return ""
    if not isinstance(document, dict):
        return ""
    value = document.get(name)
    if wanted is int:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else ""
    return value if isinstance(value, str) else ""


_SIMPLE: Final[Mapping[str, KeyReader]] = {
    "ip.src": _address,
    "ip.src.asnum": lambda request: str(request.ip_src_asnum),
    "ip.src.country": lambda request: request.ip_src_country,
    "http.host": lambda request: request.http_host,
    "http.request.uri.path": lambda request: request.http_request_uri_path,
    "cf.unique_visitor_id": _visitor,
    "cf.bot_management.ja3_hash": _none,
    "cf.bot_management.ja4": _none,
    "edgeplane.jsonrpc.network": lambda request: request.edgeplane_jsonrpc_network,
}
_BY_NAME: Final[Mapping[str, str]] = {
    "http.request.cookies": "http_request_cookies",
    "http.request.uri.args": "http_request_uri_args",
}
