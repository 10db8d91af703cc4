"""A rate limiting rule's ``ratelimit`` object (phase ``http_ratelimit``), checked and made typed.

The Rulesets API stores the object exactly as the client wrote it and calls ``parse_rate_limit`` only to refuse
what cannot run; the edge calls it again on the stored object to build its counters, and ``characteristic_field``
to read each characteristic from a request. Keeping both sides on one parser means nothing the API accepted is
something the edge cannot count. Pure: no I/O, no state.

Every refusal is a ``RateLimitError`` carrying a v4 error code (edgeplane's choice; the product does not publish
its codes) and the pointer of the member relative to the ``ratelimit`` object:

- 20010 ``INVALID_RATELIMIT``: not an object, an unknown member, a member of the wrong type, or a required member
  (``characteristics``) missing;
- 20011 ``INVALID_PERIOD``: ``period`` missing or not one of ``PERIODS``;
- 20012 ``INVALID_MITIGATION_TIMEOUT``: not one of ``MITIGATION_TIMEOUTS``, or not 0 with a challenge action (as
  the product answers outside Enterprise plans);
- 20013 ``MISSING_COLO``: the characteristics do not include ``cf.colo.id``;
- 20014 ``UNKNOWN_CHARACTERISTIC``: a characteristic edgeplane cannot count by (a header name must be lower case);
- 20015 ``CONFLICTING_CHARACTERISTICS``: a characteristic repeated, or ``ip.src`` with ``cf.unique_visitor_id``;
- 20016 ``MISSING_COUNT``: neither or both of ``requests_per_period`` and ``score_per_period``, a count out of
  range, or ``score_per_period`` without ``score_response_header_name`` (or the header without the score);
- 20017 ``INVALID_COUNTING_EXPRESSION``: ``counting_expression`` is not a valid Rules language expression.

Members that are absent or null take their defaults: ``mitigation_timeout`` 0 (throttle), ``counting_expression``
``""`` (count what the rule's expression matches), ``requests_to_origin`` false.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from edgeplane.rules import RulesError
from edgeplane.rules.expression import check_expression
from edgeplane.waf.errors import RateLimitError

__all__ = [
    "CHARACTERISTIC_FIELDS",
    "COLO",
    "CONFLICTING_CHARACTERISTICS",
    "INVALID_COUNTING_EXPRESSION",
    "INVALID_MITIGATION_TIMEOUT",
    "INVALID_PERIOD",
    "INVALID_RATELIMIT",
    "MISSING_COLO",
    "MISSING_COUNT",
    "MITIGATION_TIMEOUTS",
    "PERIODS",
    "UNKNOWN_CHARACTERISTIC",
    "RateLimitError",
    "RateLimitSpec",
    "characteristic_field",
    "parse_rate_limit",
]

INVALID_RATELIMIT: Final = 20010
INVALID_PERIOD: Final = 20011
INVALID_MITIGATION_TIMEOUT: Final = 20012
MISSING_COLO: Final = 20013
UNKNOWN_CHARACTERISTIC: Final = 20014
CONFLICTING_CHARACTERISTICS: Final = 20015
MISSING_COUNT: Final = 20016
INVALID_COUNTING_EXPRESSION: Final = 20017

PERIODS: Final = (10, 60, 120, 300, 600, 3600, 86400)
MITIGATION_TIMEOUTS: Final = (0, 10, 60, 120, 300, 600, 3600, 86400)
CHALLENGE_ACTIONS: Final = frozenset({"challenge", "js_challenge", "managed_challenge"})
# edgeplane's bound (the range rules-as-code linters check); a counter never needs more.
MAX_REQUESTS_PER_PERIOD: Final = 10_000_000
MAX_SCORE_PER_PERIOD: Final = 1_000_000
MAX_COUNTING_EXPRESSION: Final = 4096

COLO: Final = "cf.colo.id"
# Characteristics that are a field alone; the edgeplane.* ones are edgeplane's JSON-RPC extension.
CHARACTERISTIC_FIELDS: Final = frozenset(
    {
        COLO,
        "ip.src",
        "ip.src.asnum",
        "ip.src.country",
        "http.host",
        "http.request.uri.path",
        "cf.unique_visitor_id",
        "cf.bot_management.ja3_hash",
        "cf.bot_management.ja4",
        "edgeplane.jsonrpc.methods",
        "edgeplane.jsonrpc.network",
    }
)
# Characteristics with an argument: a map field indexed by a name, or a JSON lookup in the body by a key.
_MAPS: Final = ("http.request.headers", "http.request.cookies", "http.request.uri.args")
_LOOKUPS: Final = ("lookup_json_string", "lookup_json_integer")
_CONFLICTS: Final = (("ip.src", "cf.unique_visitor_id"),)

_STRING = r'"((?:[^"\\]|\\["\\])*)"'
_INDEXED = re.compile(r"([a-z.]+)\[" + _STRING + r"\]")
_LOOKUP = re.compile(r"([a-z_]+)\(\s*http\.request\.body\.raw\s*,\s*" + _STRING + r"\s*\)")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")

_MEMBERS: Final = frozenset(
    {
        "characteristics",
        "period",
        "requests_per_period",
        "mitigation_timeout",
        "counting_expression",
        "requests_to_origin",
        "score_per_period",
        "score_response_header_name",
    }
)


@dataclass(frozen=True, slots=True)
class RateLimitSpec:
    """What a rate limiting rule counts and how: one counter per distinct combination of the ``characteristics``'
    values (as written; ``characteristic_field`` reads each), over ``period`` seconds, acting past
    ``requests_per_period`` requests or, for a complexity-based rule, past ``score_per_period`` points read from the
    response header ``score_response_header_name`` (exactly one of the two counts is set). ``mitigation_timeout``
    seconds of action once over (0: only the requests over the rate). ``counting_expression`` selects what is
    counted (``""``: what the rule's expression matches); ``requests_to_origin`` counts only requests that reached
    the origin."""

    characteristics: tuple[str, ...]
    period: int
    requests_per_period: int | None
    mitigation_timeout: int
    counting_expression: str
    requests_to_origin: bool
    score_per_period: int | None
    score_response_header_name: str | None


def characteristic_field(text: str) -> tuple[str, str | None]:
    """The field a characteristic reads, as ``(kind, argument)``: ``("ip.src", None)`` for a field alone (one of
    ``CHARACTERISTIC_FIELDS``); ``("http.request.headers", "x-api-key")`` for a header (the name must be lower
    case), a cookie (``http.request.cookies``) or a query argument (``http.request.uri.args``); and
    ``("lookup_json_string", "method")`` for ``lookup_json_string(http.request.body.raw, "method")`` (likewise
    ``lookup_json_integer``). In a quoted name only ``\\"`` and ``\\\\`` are escapes. Raises ``RateLimitError``
    (``UNKNOWN_CHARACTERISTIC``, pointer ``""``) for anything else."""
    if text in CHARACTERISTIC_FIELDS:
        return text, None
    indexed = _INDEXED.fullmatch(text)
    if indexed is not None and indexed.group(1) in _MAPS:
        kind, name = indexed.group(1), _unescape(indexed.group(2))
        if kind == "http.request.headers":
            if not _TOKEN.fullmatch(name):
                raise _unknown(text, "a header name is a non-empty HTTP token")
            if name != name.lower():
                raise _unknown(text, f'header names are written in lower case: http.request.headers["{name.lower()}"]')
        elif not name:
            raise _unknown(text, "the name must not be empty")
        return kind, name
    lookup = _LOOKUP.fullmatch(text)
    if lookup is not None and lookup.group(1) in _LOOKUPS:
        key = _unescape(lookup.group(2))
        if not key:
            raise _unknown(text, "the JSON key must not be empty")
        return lookup.group(1), key
    raise _unknown(text)


def parse_rate_limit(document: object, action: str) -> RateLimitSpec:
    """The ``RateLimitSpec`` of a rule's ``ratelimit`` object (any JSON value is accepted as input), for a rule
    whose action is ``action``. Raises ``RateLimitError`` with the code and the member's pointer (see the module
    docstring) for the first problem found, in this order: the object and its members' types, the
    characteristics, the period, the counts, the mitigation timeout, the counting expression."""
    if not isinstance(document, Mapping):
        raise RateLimitError(INVALID_RATELIMIT, "ratelimit must be an object", "")
    unknown = sorted(str(member) for member in document if member not in _MEMBERS)
    if unknown:
        raise RateLimitError(
            INVALID_RATELIMIT,
            f"unknown ratelimit member {unknown[0]!r}; known: {', '.join(sorted(_MEMBERS))}",
            f"/{unknown[0]}",
        )
    characteristics = _characteristics(document.get("characteristics"))
    period = _integer(document, "period")
    if period is None or period not in PERIODS:
        raise RateLimitError(
            INVALID_PERIOD, f"period must be one of {', '.join(map(str, PERIODS))} (seconds)", "/period"
        )
    requests, score, header = _counts(document)
    timeout = _integer(document, "mitigation_timeout")
    timeout = 0 if timeout is None else timeout
    if timeout not in MITIGATION_TIMEOUTS:
        raise RateLimitError(
            INVALID_MITIGATION_TIMEOUT,
            f"mitigation_timeout must be one of {', '.join(map(str, MITIGATION_TIMEOUTS))} (seconds)",
            "/mitigation_timeout",
        )
    if action in CHALLENGE_ACTIONS and timeout != 0:
        raise RateLimitError(
            INVALID_MITIGATION_TIMEOUT,
            f"mitigation_timeout must be 0 with the {action} action",
            "/mitigation_timeout",
        )
    counting = _string(document, "counting_expression")
    if counting:
        _counting_expression(counting)
    to_origin = document.get("requests_to_origin")
    if to_origin is not None and not isinstance(to_origin, bool):
        raise RateLimitError(INVALID_RATELIMIT, "requests_to_origin must be true or false", "/requests_to_origin")
    return RateLimitSpec(
        characteristics=characteristics,
        period=period,
        requests_per_period=requests,
        mitigation_timeout=timeout,
        counting_expression=counting or "",
        requests_to_origin=bool(to_origin),
        score_per_period=score,
        score_response_header_name=header,
    )


def _check_counting_expression(text: str) -> None:
    """Raises ``RulesError`` unless ``text`` is a valid counting expression: the one place that says which fields a
    counting expression may read: the request's and the answer's (``http.response.*``)."""
    check_expression(text, response=True)


def _counting_expression(text: str) -> None:
    if len(text) > MAX_COUNTING_EXPRESSION:
        raise RateLimitError(
            INVALID_COUNTING_EXPRESSION,
            f"counting_expression must be at most {MAX_COUNTING_EXPRESSION} characters",
            "/counting_expression",
        )
    try:
        _check_counting_expression(text)
    except RulesError as error:
        raise RateLimitError(
            INVALID_COUNTING_EXPRESSION,
            f"invalid counting_expression: {error.message} at position {error.position}",
            "/counting_expression",
        ) from None


def _characteristics(value: Any) -> tuple[str, ...]:
    if value is None:
        raise RateLimitError(
            INVALID_RATELIMIT, f"characteristics is required (an array that includes {COLO})", "/characteristics"
        )
    if not isinstance(value, list):
        raise RateLimitError(INVALID_RATELIMIT, "characteristics must be an array of strings", "/characteristics")
    seen: dict[tuple[str, str | None], int] = {}
    for index, text in enumerate(value):
        pointer = f"/characteristics/{index}"
        if not isinstance(text, str):
            raise RateLimitError(INVALID_RATELIMIT, "a characteristic must be a string", pointer)
        try:
            parsed = characteristic_field(text)
        except RateLimitError as error:
            raise RateLimitError(error.code, error.message, pointer) from None
        if parsed in seen:
            raise RateLimitError(
                CONFLICTING_CHARACTERISTICS,
                f"characteristic {text!r} repeats characteristic {seen[parsed]}",
                pointer,
            )
        seen[parsed] = index
    kinds = {kind for kind, _ in seen}
    for first, second in _CONFLICTS:
        if first in kinds and second in kinds:
            raise RateLimitError(
                CONFLICTING_CHARACTERISTICS,
                f"characteristics {first} and {second} cannot be used together",
                "/characteristics",
            )
    if COLO not in kinds:
        raise RateLimitError(
            MISSING_COLO, f"characteristics must include {COLO} (counters are per data centre)", "/characteristics"
        )
    return tuple(value)


def _counts(document: Mapping[str, Any]) -> tuple[int | None, int | None, str | None]:
    """``requests_per_period``, ``score_per_period`` and ``score_response_header_name``, checked together."""
    requests = _integer(document, "requests_per_period")
    score = _integer(document, "score_per_period")
    header = _string(document, "score_response_header_name")
    header_pointer = "/score_response_header_name"
    if requests is None and score is None:
        raise RateLimitError(
            MISSING_COUNT, "a rate limiting rule needs requests_per_period or score_per_period", "/requests_per_period"
        )
    if requests is not None and score is not None:
        raise RateLimitError(
            MISSING_COUNT, "requests_per_period and score_per_period cannot be used together", "/score_per_period"
        )
    if requests is not None and not 1 <= requests <= MAX_REQUESTS_PER_PERIOD:
        raise RateLimitError(
            MISSING_COUNT,
            f"requests_per_period must be from 1 to {MAX_REQUESTS_PER_PERIOD:,}",
            "/requests_per_period",
        )
    if score is not None:
        if not 1 <= score <= MAX_SCORE_PER_PERIOD:
            raise RateLimitError(
                MISSING_COUNT, f"score_per_period must be from 1 to {MAX_SCORE_PER_PERIOD:,}", "/score_per_period"
            )
        if not header:
            raise RateLimitError(
                MISSING_COUNT,
                "score_per_period needs score_response_header_name (the response header that carries the score)",
                header_pointer,
            )
        if not _TOKEN.fullmatch(header):
            raise RateLimitError(
                INVALID_RATELIMIT, "score_response_header_name must be an HTTP header name", header_pointer
            )
    elif header:
        raise RateLimitError(
            MISSING_COUNT, "score_response_header_name is only used with score_per_period", header_pointer
        )
    return requests, score, header or None


def _integer(document: Mapping[str, Any], member: str) -> int | None:
    value = document.get(member)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise RateLimitError(INVALID_RATELIMIT, f"{member} must be an integer", f"/{member}")
    return value


def _string(document: Mapping[str, Any], member: str) -> str | None:
    value = document.get(member)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RateLimitError(INVALID_RATELIMIT, f"{member} must be a string", f"/{member}")
    return value


def _unescape(quoted: str) -> str:
    return re.sub(r"\\([\"\\])", r"\1", quoted)


def _unknown(text: str, why: str | None = None) -> RateLimitError:
    known = ", ".join(
        [
            *sorted(CHARACTERISTIC_FIELDS),
            *(f'{name}["<name>"]' for name in _MAPS),
            *(f'{name}(http.request.body.raw, "<key>")' for name in _LOOKUPS),
        ]
    )
    reason = f": {why}" if why else f"; known: {known}"
    return RateLimitError(UNKNOWN_CHARACTERISTIC, f"unknown characteristic {text!r}{reason}", "")
