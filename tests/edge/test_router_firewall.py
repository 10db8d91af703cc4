"""The zone's firewall in the edge router: a blocked request never reaches the gateway, gets a JSON-RPC error with
its id, and leaves an ``http_requests`` record with the Security fields and a ``firewall_events`` record per match."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from edgeplane.body_document import BodyDocument
from edgeplane.configuration.snapshot import EdgeSnapshot, SnapshotHolder, ZoneRoute
from edgeplane.edge.http_server import EdgeRequest, Upgrade
from edgeplane.edge.router import EdgeRouter
from edgeplane.edge.websocket import WebSocketLimits
from edgeplane.gateway.service import GatewayResponse
from edgeplane.waf.firewall import compile_firewall, deploy_managed_rulesets
from tests.support.journalled_store import JournalledStore
from tests.support.routing import answer_request, answer_through

ZONE = ZoneRoute(zone_id="z" * 32, zone_name="example.com", account_id="a" * 32, plan="enterprise")
HOST = "rpc.example.com"


class FakeGateway:
    def __init__(self) -> None:
        self.pools = {"mainnet": object()}
        self.seen: list[bytes] = []

    def respond(self, network: str, body: BodyDocument) -> GatewayResponse:
        self.seen.append(body.raw)
        return GatewayResponse(200, b'{"jsonrpc":"2.0","id":1,"result":"0x10"}')


def edge_request(body: bytes, query: bytes = b"", user_agent: bytes = b"web3.py/7") -> EdgeRequest:
    return EdgeRequest(
        method="POST",
        path="/v1/mainnet",
        raw_path="/v1/mainnet",
        query_string=query,
        headers=[(b"host", HOST.encode()), (b"content-type", b"application/json"), (b"user-agent", user_agent)],
        http_version="1.1",
        client=("198.51.100.4", 40000),
        server=("127.0.0.1", 8080),
        content_length=len(body),
        body=body,
    )


def router(rules: list[dict[str, Any]], *, logged: bool = True) -> tuple[EdgeRouter, FakeGateway, JournalledStore]:
    firewall = compile_firewall({"http_request_firewall_managed": rules})
    snapshot = EdgeSnapshot(web3_hostnames={HOST: ZONE}, firewalls={ZONE.zone_id: firewall})
    gateway = FakeGateway()
    store = JournalledStore()
    request_log = store.log() if logged else None
    return EdgeRouter(gateway, SnapshotHolder(snapshot), request_log), gateway, store  # type: ignore[arg-type]


ATTACK = b'{"jsonrpc":"2.0","id":"q-9","method":"eth_call","params":["1\' UNION SELECT password FROM users--"]}'
BENIGN = b'{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0xd8da6bf26964af9d7eed9e03e53415d37aa96045"]}'


@pytest.mark.parametrize("logged", [True, False])
async def test_a_blocked_request_gets_a_json_rpc_error_and_never_reaches_the_gateway(logged: bool) -> None:
    edge, gateway, _ = router(deploy_managed_rulesets(), logged=logged)
    response = await answer_through(edge, edge_request(ATTACK))
    assert response.status == 403
    body = orjson.loads(response.body)
    assert body["id"] == "q-9"
    assert body["error"]["code"] == -32003
    assert body["error"]["data"]["ray_id"] == dict(response.headers)[b"cf-ray"].decode()[:16]
    assert gateway.seen == []


@pytest.mark.parametrize(
    ("body", "expected_id"),
    [
        (b'[{"jsonrpc":"2.0","id":1,"method":"eth_call","params":["<script>"]}]', None),
        (b"<script>alert(1)</script>", None),
        (b'{"jsonrpc":"2.0","id":5,"method":"eth_call","params":["<script>"]}', 5),
    ],
)
async def test_the_error_carries_the_request_id_only_for_a_single_request(body: bytes, expected_id: Any) -> None:
    edge, _, _ = router(deploy_managed_rulesets())
    response = await answer_through(edge, edge_request(body))
    assert response.status == 403
    assert orjson.loads(response.body)["id"] == expected_id


async def test_benign_traffic_reaches_the_gateway_without_records_of_the_firewall() -> None:
    edge, gateway, store = router(deploy_managed_rulesets(paranoia_level=2))
    response = await answer_through(edge, edge_request(BENIGN))
    assert response.status == 200
    assert gateway.seen == [BENIGN]
    edge.request_log.flush()  # type: ignore[union-attr]
    (record,) = store.records["http_requests"]
    assert "SecurityAction" not in record
    assert "firewall_events" not in store.records


async def test_a_block_is_recorded_in_both_datasets() -> None:
    edge, _, store = router([{"action": "log", "expression": "true", "id": "l" * 32}, *deploy_managed_rulesets()])
    response = await answer_through(edge, edge_request(ATTACK, query=b"x=1", user_agent=b"ethers/6"))
    edge.request_log.flush()  # type: ignore[union-attr]
    (record,) = store.records["http_requests"]
    events = store.records["firewall_events"]
    assert record["EdgeResponseStatus"] == 403
    assert record["SecurityAction"] == "block"
    assert record["SecurityActions"] == ["log", "block"]
    assert record["SecuritySources"] == ["firewallManaged"]
    assert record["SecurityRuleID"] == events[-1]["RuleID"]
    assert [event["MatchIndex"] for event in events] == [1, 0]
    for event in events:
        assert event["RayID"] == record["RayID"]
        assert event["ClientIP"] == "198.51.100.4"
        assert event["ClientRequestHost"] == HOST
        assert event["ClientRequestQuery"] == "x=1"
        assert event["ClientRequestUserAgent"] == "ethers/6"
        assert event["Kind"] == "firewall"
        assert event["EdgeResponseStatus"] == 403
    assert response.status == 403
    # The gateway never read the body: the record says what it asked all the same.
    assert (record["JSONRPCMethod"], record["JSONRPCRequests"], record["JSONRPCErrorCode"]) == ("eth_call", 1, -32003)


@pytest.mark.parametrize(
    ("body", "asked"),
    [
        (
            b'[{"jsonrpc":"2.0","id":1,"method":"eth_call","params":["<script>"]},{"method":"eth_chainId"}]',
            ("eth_call", 2),
        ),
        (b'[5, {"method":"eth_call","params":["<script>alert(1)</script>"]}]', ("", 2)),
        (b'{"jsonrpc":"2.0","id":5,"method":7,"params":["<script>"]}', ("", 1)),
        (b"<script>alert(1)</script>", ("", 0)),
        (b'"<script>"', ("", 0)),
    ],
)
async def test_a_blocked_request_records_what_it_asked(body: bytes, asked: tuple[str, int]) -> None:
    edge, _, store = router(deploy_managed_rulesets())
    response = await answer_through(edge, edge_request(body))
    assert response.status == 403
    edge.request_log.flush()  # type: ignore[union-attr]
    (record,) = store.records["http_requests"]
    assert (record.get("JSONRPCMethod", ""), record.get("JSONRPCRequests", 0)) == asked  # empty fields are left out


async def test_a_logged_match_lets_the_request_through() -> None:
    rules = deploy_managed_rulesets()
    rules[0]["action_parameters"]["overrides"] = {"action": "log"}
    edge, gateway, store = router(rules)
    response = await answer_through(edge, edge_request(ATTACK))
    edge.request_log.flush()  # type: ignore[union-attr]
    assert response.status == 200
    assert gateway.seen == [ATTACK]
    assert {event["Action"] for event in store.records["firewall_events"]} == {"log"}
    assert store.records["http_requests"][0]["SecurityAction"] == "log"


async def test_a_custom_response() -> None:
    response_parameters = {"status_code": 418, "content": "no", "content_type": "text/plain"}
    rule = {"action": "block", "expression": "true", "action_parameters": {"response": response_parameters}}
    edge, _, _ = router([rule])
    response = await answer_through(edge, edge_request(BENIGN))
    assert (response.status, response.body, response.content_type) == (418, b"no", b"text/plain")


def any_request(method: str, path: str, *, host: str = HOST, query: bytes = b"", body: bytes = b"") -> EdgeRequest:
    return EdgeRequest(
        method=method,
        path=path,
        raw_path=path,
        query_string=query,
        headers=[(b"host", host.encode()), (b"user-agent", b"Mozilla/5.0")],
        http_version="1.1",
        client=("198.51.100.4", 40000),
        server=("127.0.0.1", 8080),
        content_length=len(body),
        body=body,
    )


PROBE_RULE = {"action": "log", "expression": 'starts_with(http.request.uri.path, "/wp-")', "id": "p" * 32}


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/wp-admin/", 404), ("POST", "/wp-login.php", 404), ("GET", "/wp-json", 404)],
)
async def test_the_firewall_sees_requests_the_router_refuses(method: str, path: str, status: int) -> None:
    edge, gateway, store = router([PROBE_RULE])
    response = await answer_request(edge, any_request(method, path))
    assert response.status == status
    assert gateway.seen == []
    edge.request_log.flush()  # type: ignore[union-attr]
    (event,) = store.records["firewall_events"]
    assert event["RuleID"] == "p" * 32
    assert event["ClientRequestPath"] == path
    (record,) = store.records["http_requests"]
    assert record["EdgeResponseStatus"] == status
    assert record["SecurityActions"] == ["log"]


async def test_a_refused_request_that_the_firewall_blocks_gets_the_block() -> None:
    edge, gateway, _ = router(deploy_managed_rulesets())
    attack = any_request("GET", "/v1/mainnet", query=b"q=1'%20UNION%20SELECT%20password%20FROM%20users--")
    response = await answer_request(edge, attack)
    assert response.status == 403
    assert orjson.loads(response.body)["error"]["code"] == -32003
    assert gateway.seen == []


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/v1/mainnet", 405), ("GET", "/", 404), ("PUT", "/v1/mainnet", 405)],
)
async def test_a_benign_refused_request_keeps_its_refusal_and_ray_id(method: str, path: str, status: int) -> None:
    edge, gateway, store = router(deploy_managed_rulesets())
    response = await answer_request(edge, any_request(method, path))
    assert response.status == status
    assert gateway.seen == []
    edge.request_log.flush()  # type: ignore[union-attr]
    (record,) = store.records["http_requests"]
    assert dict(response.headers)[b"cf-ray"].decode()[:16] == record["RayID"]
    assert "firewall_events" not in store.records


async def test_a_host_without_a_zone_is_refused_from_the_head() -> None:
    edge, _, store = router([PROBE_RULE])
    request = any_request("GET", "/wp-admin/", host="unknown.example")
    assert edge.answer_head(request) is not None
    response = await answer_request(edge, any_request("GET", "/wp-admin/", host="unknown.example"))
    assert response.status == 404
    edge.request_log.flush()  # type: ignore[union-attr]
    assert "firewall_events" not in store.records


def handshake(query: bytes = b"") -> EdgeRequest:
    request = EdgeRequest(
        method="GET",
        path="/v1/mainnet",
        raw_path="/v1/mainnet",
        query_string=query,
        headers=[
            (b"host", HOST.encode()),
            (b"upgrade", b"websocket"),
            (b"connection", b"Upgrade"),
            (b"sec-websocket-key", b"dGhlIHNhbXBsZSBub25jZQ=="),
            (b"sec-websocket-version", b"13"),
        ],
        http_version="1.1",
        client=("198.51.100.4", 40000),
        server=("127.0.0.1", 8080),
    )
    request.upgrade = True  # as the server marks a WebSocket handshake
    return request


def websocket_router() -> EdgeRouter:
    edge, _, _ = router(deploy_managed_rulesets())
    edge.websocket_limits = WebSocketLimits(max_message_bytes=4096, max_send_queue_bytes=65536, idle_seconds=30)
    return edge


async def test_a_websocket_handshake_goes_through_the_firewall() -> None:
    blocked = await answer_through(
        websocket_router(), handshake(b"q=1%27%20UNION%20SELECT%20password%20FROM%20users--")
    )
    assert not isinstance(blocked, Upgrade)
    assert blocked.status == 403
    assert orjson.loads(blocked.body)["error"]["code"] == -32003
    accepted = await answer_through(websocket_router(), handshake())
    assert isinstance(accepted, Upgrade)
    assert accepted.status == 101
    # RFC 6455, 1.3: the accept token of the sample nonce.
    assert b"sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n" in accepted.head
    assert b"cf-ray" in dict(accepted.headers)
