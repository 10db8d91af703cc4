"""A rule changed through the Rulesets API is live on every edge worker when the API answers: 100 changes in a row,
alternating block and allow, each followed at once by a request on connections held to every worker, all answered
under the new rule (over SQLite and over PostgreSQL). An edge worker that is stopped (SIGSTOP) makes a write wait at
most the bound and is reported; once it runs again (SIGCONT) it catches up."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.anvil import AnvilNode
from tests.support.edge_workers import WorkerConnection, connections_to_every_worker
from tests.support.edgeplane import EdgeplaneProcess
from tests.support.raw_http import connect

pytestmark = pytest.mark.e2e

CUSTOM = "http_request_firewall_custom"
BLOCK = [{"action": "block", "expression": 'http.request.uri.path eq "/v1/mainnet"', "description": "toggled"}]
BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}).encode()
REQUEST = (
    b"POST /v1/mainnet HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY
)
WORKERS = 2
BOUND_SECONDS = 2.0  # api.propagation_timeout_seconds, the default


def _start(data_dir: Path, anvil: AnvilNode, database_url: str | None) -> EdgeplaneProcess:
    data_dir.mkdir(parents=True)
    config = data_dir / "edgeplane.toml"
    if database_url is not None:
        config.write_text(f'database_url = "{database_url}"\n', encoding="utf-8")
    return EdgeplaneProcess(
        data_dir, upstreams=(f"mainnet={anvil.url}",), extra_args=("--edge-workers", str(WORKERS))
    ).start()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def service(
    request: pytest.FixtureRequest, anvil: AnvilNode, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EdgeplaneProcess]:
    url = None
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres").fresh_database("propagation_e2e")
    process = _start(tmp_path_factory.mktemp("propagation") / "data", anvil, url)
    try:
        yield process
    finally:
        process.stop()


def put_custom_rules(service: EdgeplaneProcess, rules: list[dict[str, Any]]) -> float:
    """Replaces the zone's custom firewall rules; how long the API took to answer."""
    started = time.monotonic()
    service.v4("PUT", f"/zones/{{zone}}/rulesets/phases/{CUSTOM}/entrypoint", json={"rules": rules})
    return time.monotonic() - started


def log_events(service: EdgeplaneProcess, event: str) -> list[dict[str, Any]]:
    found = []
    for line in service.log_path.read_text(errors="replace").splitlines():
        if event in line:
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def late_count(service: EdgeplaneProcess) -> float:
    metrics = httpx.get(f"{service.api_url}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith('edgeplane_config_propagation_late_total{role="edge"}')
    )


def test_every_answer_follows_the_rule_the_api_just_answered_for(service: EdgeplaneProcess) -> None:
    connections = connections_to_every_worker(service, WORKERS, REQUEST)
    try:
        for change in range(100):
            block = change % 2 == 0
            put_custom_rules(service, BLOCK if block else [])
            statuses = [connection.ask() for connection in connections]
            assert statuses == [403 if block else 200] * len(connections), f"change {change}: {statuses}"
            # and a new connection, wherever the kernel puts it
            fresh = WorkerConnection.__new__(WorkerConnection)
            fresh.service, fresh.request, fresh.sock = service, REQUEST, connect(service.edge_port)
            try:
                assert fresh.ask() == (403 if block else 200), f"change {change}, new connection"
            finally:
                fresh.sock.close()
    finally:
        for connection in connections:
            connection.sock.close()


def test_a_stopped_worker_bounds_the_wait_is_reported_and_catches_up(service: EdgeplaneProcess) -> None:
    put_custom_rules(service, [])
    connections = connections_to_every_worker(service, WORKERS, REQUEST)
    stopped = connections[0].worker
    assert stopped is not None
    running = [connection for connection in connections if connection.worker != stopped]
    late_before = late_count(service)
    os.kill(stopped, signal.SIGSTOP)
    try:
        took = put_custom_rules(service, BLOCK)
        assert BOUND_SECONDS <= took < BOUND_SECONDS + 2.0
        assert all(connection.ask() == 403 for connection in running)  # the others follow the rule at once
        took = put_custom_rules(service, [])  # the late worker is not waited for again
        assert took < BOUND_SECONDS
        assert all(connection.ask() == 200 for connection in running)
        took = put_custom_rules(service, BLOCK)
        assert took < BOUND_SECONDS
        reports = [
            event
            for event in log_events(service, "did not apply a configuration change in time")
            if event.get("pid") == stopped
        ]
        assert reports, "the stopped worker was not reported"
        assert reports[-1]["applied_version"] < reports[-1]["version"]
        assert late_count(service) >= late_before + 1
    finally:
        os.kill(stopped, signal.SIGCONT)
    deadline = time.monotonic() + 10
    while not any(event.get("pid") == stopped for event in log_events(service, "caught up with the configuration")):
        assert time.monotonic() < deadline, "the worker did not catch up"
        time.sleep(0.05)
    assert all(connection.ask() == 403 for connection in connections)  # every worker, the resumed one too
    took = put_custom_rules(service, [])  # waited for again, and quick
    assert took < BOUND_SECONDS
    assert all(connection.ask() == 200 for connection in connections)
    for connection in connections:
        connection.sock.close()
