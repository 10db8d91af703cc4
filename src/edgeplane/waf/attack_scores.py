"""The WAF attack scores of a request: ``cf.waf.score``, ``cf.waf.score.sqli``, ``.xss`` and ``.rce``.

Each score is an integer from 1 (an attack, certainly) to 99 (clean); 100 means the request was not scored. A score
is computed from **evidence**, anomaly points by attack family, gathered by cheap detectors that take no action:

- libinjection (the library CRS's ``@detectSQLi`` and ``@detectXSS`` call) on each value a client controls: the
  query's argument values, the body's values (every string and key of a JSON body, from the request's one parse of
  it, ``RequestFields.body_document``; the argument values of a form body; otherwise the body as one value), the
  User-Agent and Referer headers and the cookie values; URL-decoded once. A value found to be SQL adds 5 SQLi
  points, one found to be HTML with script adds 5 XSS points.
- the Managed Ruleset's signatures, evaluated for their categories only (whatever a zone deploys or overrides): each
  signature that matches adds 5 points to its family (``sqli``; ``xss``; ``rce`` and ``command-injection``; and, for
  the overall score only, ``lfi``, ``directory-traversal``, ``ssrf``, ``prototype-pollution``).
- the OWASP Core Rule Set's family anomaly scores when the zone executes the OWASP Core Ruleset:
  ``tx.sql_injection_score`` (SQLi), ``tx.xss_score`` (XSS), ``tx.rce_score`` and ``tx.php_injection_score`` (RCE),
  and ``tx.lfi_score``, ``tx.rfi_score``, ``tx.session_fixation_score`` (overall only), as CRS counts them
  (critical 5, error 4...).

5 points are one critical finding. A family's score is ``1 + floor(98 * 0.4 ** (points / 5))``: 99 without evidence,
40 for one critical finding, 16 for two, 7 for three, and never below 1. The overall score is the same function of
the points of all families together, so it is never above a family's score. More evidence never raises a score.

Why these detectors: the hosted product scores with a trained model that edgeplane does not have; these are the
detections edgeplane already trusts (the Managed Ruleset blocks on them, CRS scores with them), and a value that two
independent detectors call an attack (libinjection and a signature) falls below 20, the threshold the product's own
examples use (``cf.waf.score lt 20``). Benign JSON-RPC (hex values, method names, block tags) meets none of them.

Scoring is not cheap next to the rest of a request, so it is done only for a request whose scores something reads (see
``edgeplane.waf.firewall``); the detectors' results for values seen before are remembered.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote_to_bytes

from edgeplane.body_document import NotJson
from edgeplane.bounded_memo import BoundedMemo
from edgeplane.rules import Expression, RequestFields, RulesError, compile_expression
from edgeplane.seclang import Evaluation
from edgeplane.seclang.operators import compile_operator
from edgeplane.waf.catalogue import MANAGED_RULESET_ID, ManagedRule, load_catalogue
from edgeplane.waf.multipattern import PatternIndex

NOT_SCORED: Final = 100  # the value of every score of a request that was not scored
CLEAN: Final = 99
CRITICAL_POINTS: Final = 5  # the evidence of one critical finding, as CRS's critical severity
_DECAY: Final = 0.4  # the score kept (above 1) by each critical finding

SQLI: Final = "sqli"
XSS: Final = "xss"
RCE: Final = "rce"
OTHER: Final = "other"  # attacks of no scored family: counted in the overall score only
FAMILIES: Final = (SQLI, XSS, RCE, OTHER)

# The family of a Managed Ruleset signature, by its categories (the first category found here decides).
SIGNATURE_FAMILIES: Final[Mapping[str, str]] = {
    "sqli": SQLI,
    "xss": XSS,
    "rce": RCE,
    "command-injection": RCE,
    "lfi": OTHER,
    "directory-traversal": OTHER,
    "ssrf": OTHER,
    "prototype-pollution": OTHER,
}
# The family of each CRS anomaly score (TX collection, lower case).
CRS_FAMILY_SCORES: Final[Mapping[str, str]] = {
    "sql_injection_score": SQLI,
    "xss_score": XSS,
    "rce_score": RCE,
    "php_injection_score": RCE,
    "lfi_score": OTHER,
    "rfi_score": OTHER,
    "session_fixation_score": OTHER,
}

# Bounds on what libinjection reads of one request: how many values, and how much of each.
MAX_VALUES: Final = 512
MAX_VALUE_BYTES: Final = 8192
_HEX: Final = re.compile(rb"(?:0[xX])?[0-9a-fA-F]*")  # hex data and quantities: neither SQL nor HTML
_REMEMBERED_VALUE_BYTES: Final = 256


@dataclass(frozen=True, slots=True)
class AttackScores:
    """A request's four scores (1..99, or 100 when not scored)."""

    overall: int
    sqli: int
    xss: int
    rce: int

    @property
    def computed(self) -> bool:
        """Whether the request was scored."""
        return self.overall != NOT_SCORED

    def as_tuple(self) -> tuple[int, int, int, int]:
        """``(overall, sqli, xss, rce)``: the order of ``RequestFields.attack_scorer``'s answer."""
        return self.overall, self.sqli, self.xss, self.rce


NOT_COMPUTED: Final = AttackScores(NOT_SCORED, NOT_SCORED, NOT_SCORED, NOT_SCORED)


@dataclass(frozen=True, slots=True)
class Evidence:
    """Anomaly points by family (5 for a critical finding)."""

    sqli: int = 0
    xss: int = 0
    rce: int = 0
    other: int = 0

    @property
    def total(self) -> int:
        """The points of every family together."""
        return self.sqli + self.xss + self.rce + self.other


def score_of(points: int) -> int:
    """The score of ``points`` of evidence (see the module docstring): 99 for none, falling towards 1, never
    below. Negative points count as none."""
    if points <= 0:
        return CLEAN
    remaining: float = _DECAY ** (points / CRITICAL_POINTS)
    return 1 + math.floor((CLEAN - 1) * remaining)


def scores_of(evidence: Evidence) -> AttackScores:
    """The four scores of ``evidence``."""
    return AttackScores(
        overall=score_of(evidence.total),
        sqli=score_of(evidence.sqli),
        xss=score_of(evidence.xss),
        rce=score_of(evidence.rce),
    )


def crs_points(evaluation: Evaluation) -> dict[str, int]:
    """The CRS's family anomaly scores of an evaluation, as points by family."""
    points = dict.fromkeys(FAMILIES, 0)
    for name, family in CRS_FAMILY_SCORES.items():
        points[family] += max(0, evaluation.tx_integer(name))
    return points


class AttackScorer:
    """Scores requests from libinjection and a managed ruleset's signatures (``score``); immutable and shared by
    every request of a process."""

    def __init__(self, signatures: Sequence[ManagedRule]) -> None:
        """``signatures``: the rules whose categories name a family (``SIGNATURE_FAMILIES``) are scored; a rule
        whose expression does not compile is left out (the firewall reports such rules)."""
        self._families: list[str] = []
        self._expressions: list[Expression] = []
        prefilters: list[tuple[int, Any]] = []
        for rule in signatures:
            family = next((SIGNATURE_FAMILIES[c] for c in rule.categories if c in SIGNATURE_FAMILIES), None)
            if family is None:
                continue
            try:
                expression = compile_expression(rule.expression)
            except RulesError:
                continue
            serial = len(self._expressions)
            self._families.append(family)
            self._expressions.append(expression)
            if expression.prefilter is not None:
                prefilters.append((serial, expression.prefilter))
        self._index = PatternIndex(prefilters)
        self._unindexed = tuple(serial for serial in range(len(self._expressions)) if serial not in self._index.indexed)

    @property
    def signature_count(self) -> int:
        """How many signatures are scored."""
        return len(self._expressions)

    def score(self, request: RequestFields, crs: Evaluation | None = None) -> AttackScores:
        """The scores of ``request``; ``crs`` is the CRS's evaluation of it, when the zone runs the OWASP Core
        Ruleset. Never raises for a request's content."""
        return scores_of(self.evidence(request, crs))

    def evidence(self, request: RequestFields, crs: Evaluation | None = None) -> Evidence:
        """The points by family that ``request`` earns from each detector (see the module docstring)."""
        points = dict.fromkeys(FAMILIES, 0)
        for value in _inspected_values(request):
            is_sql, is_xss = _detections(value)
            points[SQLI] += CRITICAL_POINTS if is_sql else 0
            points[XSS] += CRITICAL_POINTS if is_xss else 0
        for family in self._signature_matches(request):
            points[family] += CRITICAL_POINTS
        if crs is not None:
            for family, found in crs_points(crs).items():
                points[family] += found
        return Evidence(sqli=points[SQLI], xss=points[XSS], rce=points[RCE], other=points[OTHER])

    def _signature_matches(self, request: RequestFields) -> Iterator[str]:
        """The family of each signature that matches ``request``."""
        try:
            candidates: Sequence[int] = sorted({*self._index.candidates(request), *self._unindexed})
        except Exception:  # the index could not read the request: every signature is evaluated
            candidates = range(len(self._expressions))
        for serial in candidates:
            if self._expressions[serial](request):  # an expression never raises
                yield self._families[serial]


@functools.cache
def attack_scorer() -> AttackScorer:
    """The process's scorer, with the Managed Ruleset's signatures (built on first use)."""
    managed = load_catalogue().get(MANAGED_RULESET_ID)
    return AttackScorer(managed.rules if managed is not None else ())


def _inspected_values(request: RequestFields) -> Iterator[bytes]:
    """The values libinjection reads (see the module docstring), URL-decoded once, at most ``MAX_VALUES`` of at most
    ``MAX_VALUE_BYTES`` each; hex values are left out."""
    count = 0
    for value in _client_values(request):
        if not value or _HEX.fullmatch(value) is not None:
            continue
        yield value[:MAX_VALUE_BYTES]
        count += 1
        if count >= MAX_VALUES:
            return


def _client_values(request: RequestFields) -> Iterator[bytes]:
    yield from _arguments(request.http_request_uri_query)
    yield from _body_values(request)
    headers = request.http_request_headers
    for name in ("user-agent", "referer"):
        for value in headers.get(name, ()):
            yield _url_decoded(value)
    for values in request.http_request_cookies.values():
        for value in values:
            yield _url_decoded(value)


def _body_values(request: RequestFields) -> Iterator[bytes]:
    body = request.raw_body
    if not body:
        return
    if body.lstrip()[:1] in (b"{", b"["):
        try:
            document = request.body_document.document()
        except NotJson:
            pass
        else:
            yield from _json_strings(document)
            return
    if request.http_request_body_mime == "application/x-www-form-urlencoded":
        yield from _arguments(body.decode("latin-1"))
        return
    yield body


def _json_strings(document: object) -> Iterator[bytes]:
    """Every string of a JSON document, keys included, in document order (iteratively: depth is the client's)."""
    pending: list[object] = [document]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            yield item.encode("utf-8", "surrogatepass")
        elif isinstance(item, dict):
            for key, value in reversed(item.items()):
                pending.append(value)
                pending.append(key)
        elif isinstance(item, list):
            pending.extend(reversed(item))


def _arguments(query: str) -> Iterator[bytes]:
    """The values of a query string or form body, URL-decoded (``+`` is a space)."""
    if not query:
        return
    for part in query.split("&"):
        value = part.partition("=")[2]
        if value:
            yield _url_decoded(value)


def _url_decoded(value: str) -> bytes:
    return unquote_to_bytes(value.replace("+", " ").encode("utf-8", "surrogateescape"))


_SQLI = compile_operator("detectSQLi", "", data_dir=Path("."))
_XSS = compile_operator("detectXSS", "", data_dir=Path("."))


def _detect(value: bytes) -> tuple[bool, bool]:
    """Whether libinjection finds SQL, and HTML with script, in ``value``."""
    return _SQLI(value) is not None, _XSS(value) is not None


# Values recur (method names, addresses, user agents): each is examined once while remembered.
_detections: BoundedMemo[bytes, tuple[bool, bool]] = BoundedMemo(
    _detect, max_entries=4096, max_length=_REMEMBERED_VALUE_BYTES
)
