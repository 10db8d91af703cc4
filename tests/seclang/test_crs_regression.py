"""CRS 3.3.4's own regression suite, in process, against the engine loaded with the CRS rule files as Debian installs
them: the acceptance test of the SecLang engine.

The corpus (``../shared/waf/crs-regression-3.3.4.json``, go-ftw cases one per test stage) is read in place, never
copied; the test skips when it is absent, and fails when ``/usr/share/modsecurity-crs`` is (``tests/conftest.py``). A
case passes when every id its ``log_contains`` names fired (matched and logged) and no id its ``no_log_contains`` names
did. Cases that expect only an HTTP status or a client error (the web server's answer to a malformed request, not a
rule's) have no id to check and pass as the corpus README defines it; they are counted apart in the report.

Configuration is CRS's own regression setup (``tests/regression/README.md`` of CRS 3.x: rule 900005): paranoia
level 4 for every case, rule engine ``DetectionOnly`` (nothing stops the evaluation, so every rule runs), rule 910000
removed, ``tx.crs_validate_utf8_encoding=1``, ``tx.arg_name_length=100``, ``tx.arg_length=400``; plus
``tx.crs_setup_version`` as crs-setup.conf sets it. Known failures live in ``crs_known_failures.toml`` with a reason
each; the test fails when the pass rate falls under the floor, a case fails that is not listed there, or a case
listed there passes.

Where libmodsecurity 3.0.9 is installed, the same requests also go through it with the same CRS files, and every case
must log the same ids, apart from the rules where the engine follows ModSecurity v2 on purpose (see
``_deliberate_differences``).
"""

from __future__ import annotations

import sys
import time
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import crs_corpus
from tests.support.modsecurity import RECOMMENDED_BODY_PROCESSORS, ModSecurity

CRS_RULES = Path("/usr/share/modsecurity-crs/rules")
KNOWN_FAILURES = Path(__file__).with_name("crs_known_failures.toml")
PASS_RATE_FLOOR = 0.999

# CRS's regression configuration (rule 900005 of its README) and crs-setup.conf's version marker.
SETUP = """
SecAction "id:900005,phase:1,nolog,pass,ctl:ruleEngine=DetectionOnly,ctl:ruleRemoveById=910000,\
setvar:tx.paranoia_level=4,setvar:tx.crs_validate_utf8_encoding=1,setvar:tx.arg_name_length=100,\
setvar:tx.arg_length=400"
SecAction "id:900990,phase:1,nolog,pass,setvar:tx.crs_setup_version=334"
"""

pytestmark = [
    pytest.mark.skipif(not crs_corpus.available(), reason="CRS's regression corpus is not beside the repository"),
    pytest.mark.skipif(not CRS_RULES.is_dir(), reason="modsecurity-crs is not installed"),
]


@dataclass(frozen=True)
class Outcome:
    case_id: str
    family: str
    passed: bool
    checked: bool
    missing: frozenset[int]
    unexpected: frozenset[int]
    fired: frozenset[int]


def _request(case: dict[str, Any]) -> Any:
    """The request as the engine would receive it from an HTTP server, or None when the server refuses it.

    Two things a server does before any rule runs (Apache did, under CRS's own runs): a header holding a bare CR or
    LF is refused with 400, and a chunked body is decoded and its Content-Length dropped (RFC 9112, 6.3: the
    Transfer-Encoding wins)."""
    from edgeplane.seclang.request import HttpRequest

    request = case["request"]
    body = crs_corpus.request_body(request)
    headers = [(name.encode("utf-8"), value.encode("utf-8")) for name, value in request["headers"]]
    if any(b"\r" in name + value or b"\n" in name + value for name, value in headers):
        return None
    if any(name.lower() == b"transfer-encoding" and b"chunked" in value.lower() for name, value in headers):
        headers = [(name, value) for name, value in headers if name.lower() != b"content-length"]
        body = _dechunk(body)
    return HttpRequest(
        method=request["method"].encode("utf-8"),
        target=request["uri"].encode("utf-8"),
        protocol=request["version"].encode("utf-8"),
        headers=tuple(headers),
        body=body,
    )


def _dechunk(body: bytes) -> bytes:
    out = []
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
        except ValueError:
            return b"".join(out)
        if size == 0:
            break
        out.append(rest[:size])
        body = rest[size + 2 :]
    return b"".join(out)


@pytest.fixture(scope="module")
def outcomes() -> tuple[list[Outcome], float]:
    from edgeplane.seclang.engine import compile_rules
    from edgeplane.seclang.rule_files import load_rule_files, parse_rules

    directives = parse_rules(SETUP, source="regression-setup") + load_rule_files(
        sorted(CRS_RULES.glob("REQUEST-9*.conf"))
    )
    engine = compile_rules(directives, data_dir=CRS_RULES)
    cases = crs_corpus.load_cases()
    results: list[Outcome] = []
    started = time.perf_counter()
    for case in cases:
        expected = crs_corpus.expected_ids(case)
        forbidden = crs_corpus.forbidden_ids(case)
        request = _request(case)
        fired = engine.evaluate(request).fired_ids if request is not None else frozenset()
        missing = expected - fired
        unexpected = forbidden & fired
        results.append(
            Outcome(
                case_id=case["id"],
                family=case["family"],
                passed=not missing and not unexpected,
                checked=bool(expected or forbidden),
                missing=frozenset(missing),
                unexpected=frozenset(unexpected),
                fired=fired,
            )
        )
    return results, time.perf_counter() - started


def _report(results: list[Outcome], elapsed: float) -> str:
    lines = []
    by_family: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in results:
        by_family[outcome.family].append(outcome)
    passed = sum(outcome.passed for outcome in results)
    unchecked = sum(not outcome.checked for outcome in results)
    lines.append(
        f"CRS 3.3.4 regression: {passed}/{len(results)} cases pass ({100 * passed / len(results):.2f} %), "
        f"{unchecked} of them without an id to check; {elapsed:.1f} s, {1e3 * elapsed / len(results):.2f} ms per case"
    )
    for family in sorted(by_family):
        group = by_family[family]
        ok = sum(outcome.passed for outcome in group)
        lines.append(f"  {family}: {ok}/{len(group)} ({100 * ok / len(group):.1f} %)")
    for outcome in results:
        if outcome.passed:
            continue
        detail = []
        if outcome.missing:
            detail.append("missing " + ",".join(map(str, sorted(outcome.missing))))
        if outcome.unexpected:
            detail.append("unexpected " + ",".join(map(str, sorted(outcome.unexpected))))
        lines.append(f"  FAIL {outcome.case_id}: {'; '.join(detail)}")
    return "\n".join(lines)


def test_crs_regression_suite(outcomes: tuple[list[Outcome], float]) -> None:
    results, elapsed = outcomes
    report = _report(results, elapsed)
    sys.stdout.write("\n" + report + "\n")
    known = set(tomllib.loads(KNOWN_FAILURES.read_text())["failures"]) if KNOWN_FAILURES.is_file() else set()
    failing = {outcome.case_id for outcome in results if not outcome.passed}
    rate = sum(outcome.passed for outcome in results) / len(results)
    assert rate >= PASS_RATE_FLOOR, report
    assert failing <= known, f"failing and not in crs_known_failures.toml: {sorted(failing - known)}"
    assert known <= failing, f"passing, yet listed in crs_known_failures.toml (remove them): {sorted(known - failing)}"


# --- differential: libmodsecurity 3.0.9 + the same CRS files on the same requests -------------------------------------

# modsecurity.conf-recommended's request body settings and processor choice, and crs-setup.conf's default actions.
MODSECURITY_BASE = (
    "SecRuleEngine DetectionOnly\n"
    "SecRequestBodyAccess On\n"
    "SecRequestBodyLimit 13107200\n"
    "SecRequestBodyNoFilesLimit 131072\n"
    + RECOMMENDED_BODY_PROCESSORS
    + 'SecDefaultAction "phase:1,log,auditlog,pass"\n'
    + 'SecDefaultAction "phase:2,log,auditlog,pass"\n'
)


def _deliberate_differences(rule_files: list[Path]) -> frozenset[int]:
    """Rules where the engine departs from libmodsecurity 3.0.9 on purpose, following ModSecurity v2 as CRS's
    suite does: those reading REQUEST_BODY (empty after the XML, JSON and multipart processors) and those whose
    pattern, as written, escapes a backslash or a quote (one level of escaping is removed when reading); and 949110,
    whose total they feed."""
    from msc_pyparser import MSCParser

    from edgeplane.seclang.rule_files import SecRule, load_rule_files

    escaped: set[str] = set()
    for path in rule_files:
        parser = MSCParser()
        parser.parser.parse(path.read_text())
        for line in parser.configlines:
            argument = str(line.get("operator_argument") or "")
            if line["type"] == "SecRule" and ("\\\\" in argument or '\\"' in argument):
                escaped.add(f"{path.name}:{line['lineno']}")
    ids = {949110}
    for directive in load_rule_files(rule_files):
        link = directive if isinstance(directive, SecRule) else None
        while link is not None:
            if link.source in escaped or any(target.collection == "REQUEST_BODY" for target in link.targets):
                ids.add(directive.rule_id or 0)  # type: ignore[union-attr]
            link = link.chained_rule
    return frozenset(ids)


def test_agrees_with_libmodsecurity(outcomes: tuple[list[Outcome], float], reference_modsecurity: ModSecurity) -> None:
    """On every case, the engine logs the same rule ids as libmodsecurity 3.0.9, leaving out the rules where it
    follows ModSecurity v2 on purpose, and requests the C API cannot express (a protocol other than HTTP/x)."""

    rule_files = sorted(CRS_RULES.glob("REQUEST-9*.conf"))
    reference = reference_modsecurity.rules(MODSECURITY_BASE + SETUP, *rule_files)
    ignored = _deliberate_differences(rule_files)
    cases = {case["id"]: case for case in crs_corpus.load_cases()}
    differences = []
    compared = 0
    for outcome in outcomes[0]:
        request = _request(cases[outcome.case_id])
        if request is None or not request.protocol.startswith(b"HTTP/"):
            continue
        compared += 1
        http_version = request.protocol.removeprefix(b"HTTP/")
        logged = reference.process_request(
            request.method, request.target, request.headers, request.body, http_version=http_version
        )
        theirs = frozenset(logged.rule_ids) - ignored
        ours = outcome.fired - ignored
        if theirs != ours:
            differences.append(
                f"{outcome.case_id}: only libmodsecurity {sorted(theirs - ours)}, only ours {sorted(ours - theirs)}"
            )
    sys.stdout.write(f"\nlibmodsecurity 3.0.9: {compared - len(differences)}/{compared} cases log the same ids\n")
    assert not differences, "\n".join(differences)
