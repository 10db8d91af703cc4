"""A rule changed through the Rulesets API is live on every edge worker when the API answers: 100 changes in a row,
alternating block and allow, each followed at once by a request on connections held to every worker, all answered
under the new rule (over SQLite and over PostgreSQL). An edge worker that is stopped (SIGSTOP) makes a write wait at
most the bound and is reported; once it runs again (SIGCONT) it catches up."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.anvil import AnvilNode
from tests.support.edgeplane import EdgeplaneProcess
from tests.support.raw_http import connect, read_response

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


def _worker_of(sock: socket.socket, workers: list[int], edge_port: int) -> int | None:
    """The edge worker holding the server side of ``sock``: the pid that has the socket whose local port is the edge
    port and remote port is ``sock``'s (``/proc/net/tcp``, then each worker's descriptors)."""
    client_port = sock.getsockname()[1]
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.split(":")[1], 16) == edge_port and int(remote.split(":")[1], 16) == client_port:
            inode = fields[9]
    if inode is None:
        return None
    for pid in workers:
        for descriptor in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{descriptor}") == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None


class WorkerConnection:
    """A keep-alive connection to the edge, and the worker that holds it."""

    def __init__(self, service: EdgeplaneProcess, workers: list[int]) -> None:
        self.service = service
        self.sock = connect(service.edge_port)
        self.sock.sendall(REQUEST)  # one exchange first: the worker has accepted it
        read_response(self.sock)
        self.worker = _worker_of(self.sock, workers, service.edge_port)

    def ask(self) -> int:
        """The status of one JSON-RPC request: 200 allowed, 403 blocked."""
        self.sock.sendall(REQUEST)
        status, headers, body = read_response(self.sock)
        if status == 403:
            assert json.loads(body)["error"]["code"] == -32003
        if headers.get("connection", "").lower() == "close":
            self.sock.close()
            self.sock = connect(self.service.edge_port)
        return status


def connections_to_every_worker(service: EdgeplaneProcess) -> list[WorkerConnection]:
    """Two connections held to each edge worker (the kernel spreads connections by their source port)."""
    workers = service.child_pids("edge-worker")
    assert len(workers) == WORKERS
    held: dict[int, list[WorkerConnection]] = {pid: [] for pid in workers}
    for _ in range(64):
        connection = WorkerConnection(service, workers)
        if connection.worker is not None and len(held[connection.worker]) < 2:
            held[connection.worker].append(connection)
        else:
            connection.sock.close()
        if all(len(each) == 2 for each in held.values()):
            return [connection for each in held.values() for connection in each]
    raise AssertionError(f"64 connections did not reach every worker: {held}")


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
    connections = connections_to_every_worker(service)
    try:
        for change in range(100):
            block = change % 2 == 0
            put_custom_rules(service, BLOCK if block else [])
            statuses = [connection.ask() for connection in connections]
            assert statuses == [403 if block else 200] * len(connections), f"change {change}: {statuses}"
            # and a new connection, wherever the kernel puts it
            fresh = WorkerConnection.__new__(WorkerConnection)
            fresh.service, fresh.sock = service, connect(service.edge_port)
            try:
                assert fresh.ask() == (403 if block else 200), f"change {change}, new connection"
            finally:
                fresh.sock.close()
    finally:
        for connection in connections:
            connection.sock.close()


def test_a_stopped_worker_bounds_the_wait_is_reported_and_catches_up(service: EdgeplaneProcess) -> None:
    put_custom_rules(service, [])
    connections = connections_to_every_worker(service)
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
