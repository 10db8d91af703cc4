"""The Managed Ruleset's signatures ported from the hand-written OWASP-style Core Ruleset (removed in 95c8f3a): each
blocks the attacks it exists for wherever they are placed, none matches benign traffic, and the default deployment
(Managed Ruleset) with CRS loses nothing the old Managed and Core Rulesets blocked together at any paranoia level
and threshold (``bench/signature_coverage.py``, docs/waf.md "What the Managed Ruleset adds to CRS")."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from bench.waf_requests import benign_requests

from edgeplane.rules import RequestFields, compile_expression
from edgeplane.waf.catalogue import MANAGED_RULESET_ID, ManagedRule, load_catalogue
from edgeplane.waf.core_ruleset import crs_installed
from edgeplane.waf.firewall import compile_firewall
from tests.support import crs_corpus
from tests.waf.corpus import BENIGN, PLACES, placed
from tests.waf.test_content import bench_fields

REPO_ROOT = Path(__file__).resolve().parents[2]
MANAGED = load_catalogue()[MANAGED_RULESET_ID]
DEFAULT = compile_firewall(
    {
        "http_request_firewall_managed": [
            {"action": "execute", "expression": "true", "action_parameters": {"id": MANAGED_RULESET_ID}}
        ]
    }
)

# Each ported signature (its description without the field it reads) and attacks it exists for: what the old Core
# Ruleset blocked by summing several facets, and CRS 3.3.4 does not.
PORTED: dict[str, tuple[str, ...]] = {
    "SQLi - numeric tautology": ("1 or 1=1", "' having 1=1--", "1 and 2>1"),
    "SQLi - boolean operator before a subquery or an extraction function": (
        "1' and ascii(substring((select database()),1,1))>64--",
        "1' and (select 1)=1--",
        "1' and length(database())>1--",
        "x' and 1=(select count(*) from tabname); --",
        "1 and case when 1=1 then 1 else 0 end",
        "1 rlike (select (case when (1=1) then 1 else 0x28 end))",
    ),
    "SQLi - statement stacked after a quote or a number": (
        "'; shutdown--",
        "1; declare @q varchar(99); exec master.dbo.xp_dirtree @q--",
        "1;select pg_sleep(5)",
    ),
    "SQLi - column enumeration (ORDER BY or GROUP BY a number)": ("1' order by 3--+", "1' group by 1,2,3,4--"),
    "SQLi - string closed before a comment that ends the value": ("admin'#", "admin')--", "admin' -- -"),
    "SQLi - quoted tautology with parentheses or empty strings": ("' or ''='", "') or ('1'='1"),
    "SQLi - string closed before a boolean literal and a comment": ("' or 1 --", "' or true--"),
    "SQLi - MySQL executable comment around SQL": ("1'/*!50000union*/ /*!50000select*/ 1,2--",),
    "PHP - code execution on request input": ("eval($_POST['x']);", "system($_GET['cmd'])"),
    "JavaScript - code execution (Function constructor, child_process)": (
        "{{constructor.constructor('alert(1)')()}}",
        "require('child_process').exec('id')",
        "process.mainModule.require('child_process').execSync('id')",
    ),
    "Command injection - interpreter one-liner or OS call": (
        "python -c 'import os;os.system(\"id\")'",
        "perl -e 'exec \"/bin/sh\";'",
    ),
    "XSS - script URI obfuscated with entities or whitespace": (
        '<a href="jav&#x09;ascript:alert(1)">x</a>',
        "<a href=j&#97;vascript&colon;alert(1)>x</a>",
    ),
    "File inclusion - server log or application secret file": (
        "/var/log/apache2/access.log",
        "../WEB-INF/web.xml",
        "../../../.env",
    ),
}
# Existing signatures widened for the same reason: (description without the field, attacks now caught).
WIDENED: dict[str, tuple[str, ...]] = {
    "SQLi - error-based extraction": (
        "1 and (select 1 from (select count(*),concat(version(),floor(rand(0)*2))x from users group by x)a)",
    ),
    "XSS - embedding tag": ("<style>@import 'http://evil.example/x.css';</style>", "';!--\"<xss>=&{()}"),
    "PHP - code or stream wrapper injection": ("<?= system('id'); ?>",),
    "SQLi - schema and system table probe": ("1 and @@version like '5%'", "exec master..xp_dirtree '//x/a'"),
}
# Where each field variant of a signature reads a placed payload.
FIELD_PLACES: dict[str, tuple[str, ...]] = {
    "URI": ("query",),
    "body": ("rpc-param",),
    "any header": ("user-agent", "referer", "cookie", "x-api-version"),
}
# Negative cases of CRS's regression suite that carry an attack the Managed Ruleset's original signatures block (each
# tests that one CRS rule stays quiet, not that the request is harmless): a complete XSS in the Referer, Java class
# names in XML.
CRS_NEGATIVES_WITH_ATTACKS = frozenset({"941100-5FN", "944100-11", "944100-12", "944100-15", "944100-16"})


def variants(description: str) -> list[tuple[ManagedRule, str]]:
    """The rules of a signature, one per field, with the field each reads."""
    found = []
    for rule in MANAGED.rules:
        name, _, field = rule.description.rpartition(" (")
        if name == description:
            found.append((rule, field.rstrip(")")))
    return found


def cases(table: dict[str, tuple[str, ...]]) -> list[tuple[str, str, str]]:
    return [
        (description, field, payload)
        for description, payloads in table.items()
        for field in FIELD_PLACES
        for payload in payloads
    ]


@pytest.mark.parametrize("description", [*PORTED, *WIDENED])
def test_each_signature_reads_the_uri_the_body_and_every_header(description: str) -> None:
    rules = variants(description)
    assert sorted(field for _, field in rules) == sorted(FIELD_PLACES), description
    assert all(rule.action == "block" and rule.categories for rule, _ in rules)


@pytest.mark.parametrize(("description", "field", "payload"), cases(PORTED) + cases(WIDENED))
def test_a_signature_matches_its_attacks_in_the_places_its_field_covers(
    description: str, field: str, payload: str
) -> None:
    rule = next(rule for rule, where in variants(description) if where == field)
    expression = compile_expression(rule.expression)
    for place in FIELD_PLACES[field]:
        assert expression(placed(payload, place).fields()), (rule.description, place)


ALL_PAYLOADS = [payload for table in (PORTED, WIDENED) for payloads in table.values() for payload in payloads]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("payload", ALL_PAYLOADS)
def test_the_default_deployment_blocks_them_anywhere(payload: str, place: str) -> None:
    verdict = DEFAULT.evaluate(placed(payload, place).fields())
    assert verdict.terminal is not None
    assert verdict.terminal.ruleset_id == MANAGED_RULESET_ID


def crs_negative_requests() -> list[tuple[str, RequestFields]]:
    """The negative (benign) cases of CRS's regression suite, as the firewall sees them (raw requests left out)."""
    requests = []
    for case in crs_corpus.load_cases():
        request = case["request"]
        if case["kind"] != "benign" or request.get("raw"):
            continue
        path, _, query = request["uri"].partition("?")
        headers = [(name.lower().encode("latin-1", "replace"), value.encode("latin-1", "replace"))
                   for name, value in request["headers"]]  # fmt: skip
        host = next((value.decode("latin-1") for name, value in headers if name == b"host"), "localhost")
        fields = RequestFields.from_http(
            method=request["method"],
            scheme="http",
            host=host,
            raw_path=path,
            query=query,
            headers=headers,
            body=crs_corpus.request_body(request),
            client_ip="127.0.0.1",
        )
        requests.append((case["id"], fields))
    return requests


def blocked(requests: Sequence[tuple[str, RequestFields]]) -> list[str]:
    return [name for name, fields in requests if DEFAULT.evaluate(fields).blocked]


def test_benign_json_rpc_passes_the_managed_ruleset() -> None:
    requests = [(request.label, bench_fields(request)) for request in benign_requests(1000)]
    requests += [(sample.name, sample.fields()) for sample in BENIGN]
    assert blocked(requests) == []


@pytest.mark.skipif(not crs_corpus.available(), reason="CRS's regression corpus is not beside the repository")
def test_crs_negative_cases_pass_the_managed_ruleset() -> None:
    requests = crs_negative_requests()
    assert len(requests) >= 150
    assert set(blocked(requests)) <= CRS_NEGATIVES_WITH_ATTACKS


def old_rulesets_in_history() -> bool:
    command = ["git", "cat-file", "-e", "95c8f3a^:src/edgeplane/waf/managed/owasp_core.toml"]
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not crs_installed(), reason="the OWASP Core Rule Set is not installed")
@pytest.mark.skipif(not old_rulesets_in_history(), reason="the hand-written Core Ruleset is not in git's history")
def test_nothing_the_old_rulesets_blocked_is_lost() -> None:
    from bench.signature_coverage import PARANOIA_LEVELS, THRESHOLDS, attack_requests, judge, report

    document = report(judge(attack_requests(), PARANOIA_LEVELS), PARANOIA_LEVELS, THRESHOLDS)
    gaps = {(row["threshold"], row["paranoia_level"]): row["gaps"] for row in document["rows"] if row["gaps"]}
    assert gaps == {}
