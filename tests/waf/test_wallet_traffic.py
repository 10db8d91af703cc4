"""No false positive on wallet traffic: what web3.py, ethers and viem send, and a dapp's page running ethers in
chromium (recorded on the wire at test time, against anvil: ``tests/support/wallet_traffic.py``), is never blocked
by the zone deployment of the Managed Ruleset and the OWASP Core Ruleset at any paranoia level, even at the most
sensitive threshold, and the Core Ruleset scores none of it; while the JSON-RPC exclusion package, on the attacks of
CRS's regression suite rewritten as JSON-RPC parameters, removes exactly the rules it says it removes and nothing
else."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from edgeplane.seclang import Evaluation
from edgeplane.waf.core_ruleset import CoreRuleSet, compile_core_rule_set, core_rule_set
from edgeplane.waf.firewall import compile_firewall, deploy_managed_rulesets
from tests.support import crs_corpus
from tests.support.anvil import AnvilNode
from tests.support.wallet_traffic import ClientRequest, record_wallet_traffic
from tests.waf.corpus import ADDRESS, Sample, rpc

LEVELS = (1, 2, 3, 4)
HIGH_SENSITIVITY = 25  # the lowest threshold the Rulesets API's sensitivity levels give


@pytest.fixture(scope="module")
def wallet_traffic() -> Iterator[list[ClientRequest]]:
    with AnvilNode() as node:
        yield record_wallet_traffic(node.url, node.private_keys)


def _calls(request: ClientRequest) -> list[dict[str, Any]]:
    if not request.body:
        return []
    document = json.loads(request.body)
    return document if isinstance(document, list) else [document]


def test_the_corpus_is_ordinary_traffic_of_each_client(wallet_traffic: list[ClientRequest]) -> None:
    clients = {request.scenario.split()[0] for request in wallet_traffic}
    assert clients - {"browser"} == {"web3.py", "ethers", "viem"}  # and a dapp in chromium where it is installed
    if "browser" in clients:
        assert any(request.method == "OPTIONS" for request in wallet_traffic)  # its CORS preflight
    for client in clients - {"browser"}:
        sizes = [request.calls for request in wallet_traffic if request.scenario.split()[0] == client]
        assert any(size >= 8 for size in sizes), f"{client} sent no batch of 8 or more"
    methods = {call["method"] for request in wallet_traffic for call in _calls(request)}
    assert {"eth_call", "eth_sendRawTransaction", "eth_signTypedData_v4", "eth_getLogs", "eth_estimateGas"} <= methods
    calldata = [
        call["params"][0].get("data") or call["params"][0].get("input") or ""
        for request in wallet_traffic
        for call in _calls(request)
        if call["method"] == "eth_call"
    ]
    assert max(len(data) for data in calldata) > 1000  # multicalls of encoded calls, not only 4-byte selectors


@pytest.mark.parametrize("level", LEVELS)
def test_the_zone_deployment_blocks_no_wallet_request(wallet_traffic: list[ClientRequest], level: int) -> None:
    firewall = compile_firewall(
        {
            "http_request_firewall_managed": deploy_managed_rulesets(
                paranoia_level=level, score_threshold=HIGH_SENSITIVITY
            )
        }
    )
    blocked = [
        (request.scenario, request.body[:200], [(match.ref, dict(match.metadata)) for match in verdict.matches])
        for request in wallet_traffic
        if (verdict := firewall.evaluate(request.fields())).blocked
    ]
    assert blocked == []


@pytest.mark.parametrize("level", LEVELS)
def test_the_core_ruleset_scores_no_wallet_request(wallet_traffic: list[ClientRequest], level: int) -> None:
    crs = core_rule_set()
    scored = [
        (request.scenario, request.body[:200], _fired(evaluation))
        for request in wallet_traffic
        if _fired(evaluation := crs.evaluate(request.fields(), paranoia_level=level, disabled=frozenset()))
    ]
    assert scored == []


# -- detection kept: CRS's attacks as JSON-RPC parameters ---------------------------------------------------------

# What the package removes on the arguments of any JSON-RPC request (an eth_call's, here): CRS ids.
REMOVED_ON_ARGUMENTS = frozenset({942450, 920273, 942432})


def _fired(evaluation: Evaluation) -> frozenset[int]:
    """The scoring CRS rules that fired (911 to 944)."""
    return frozenset(match.rule_id for match in evaluation.matches if 911000 <= match.rule_id < 945000)


def _attack_payloads() -> list[tuple[str, str]]:
    """Each argument value of the attack cases of CRS's regression suite (files 930 to 944), with its case's id."""
    found: dict[tuple[str, str], None] = {}
    for case in crs_corpus.load_cases():
        if case["kind"] != "attack" or not "930" <= case["family"] <= "944":
            continue
        request = case["request"]
        values = [value for _, value in parse_qsl(urlsplit(request["uri"]).query, keep_blank_values=True)]
        content_type = next((value for name, value in request["headers"] if name.lower() == "content-type"), "")
        if "urlencoded" in content_type:
            body = crs_corpus.request_body(request).decode("utf-8", "replace")
            values += [value for _, value in parse_qsl(body, keep_blank_values=True)]
        found.update(((case["id"], value), None) for value in values if len(value) >= 3)
    return list(found)


@pytest.fixture(scope="module")
def crs_without_the_package() -> CoreRuleSet:
    return compile_core_rule_set(())


@pytest.mark.skipif(not crs_corpus.available(), reason="CRS's regression corpus is not beside the repository")
def test_on_crs_attacks_as_json_rpc_parameters_the_package_removes_only_what_it_says(
    crs_without_the_package: CoreRuleSet,
) -> None:
    payloads = _attack_payloads()
    assert len(payloads) > 800
    crs = core_rule_set()
    differences = []
    detected = 0
    for case_id, payload in payloads:
        fields = Sample(case_id, rpc("eth_call", [{"to": ADDRESS, "data": payload}, "latest"])).fields()
        kept = _fired(crs.evaluate(fields, paranoia_level=4, disabled=frozenset()))
        plain = _fired(crs_without_the_package.evaluate(fields, paranoia_level=4, disabled=frozenset()))
        if kept != plain - REMOVED_ON_ARGUMENTS:
            differences.append((case_id, payload, sorted(plain - kept), sorted(kept - plain)))
        detected += bool(kept)
    assert differences == []
    assert detected > len(payloads) // 2  # most of them still fire an attack rule as a JSON-RPC parameter
