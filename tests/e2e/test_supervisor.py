"""`edgeplane serve` supervises and serves nothing itself: the edge workers and the API are child processes; one that
dies is started again while the others keep serving, and connections made meanwhile wait in the listening socket's
backlog, which the supervisor keeps open."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.anvil import AnvilNode
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e

CHAIN_ID = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
RESTART_SECONDS = 60.0  # a child starts again after a short pause, then imports and opens what it serves


@pytest.fixture
def service(anvil: AnvilNode, tmp_path: Path) -> Iterator[EdgeplaneProcess]:
    with EdgeplaneProcess(
        tmp_path / "data", upstreams=(f"mainnet={anvil.url}",), extra_args=("--edge-workers", "2")
    ) as process:
        yield process


def chain_id_from_edge(process: EdgeplaneProcess, timeout: float = 10.0) -> str | None:
    """The result of eth_chainId through the edge, on a new connection."""
    answer = httpx.post(process.rpc_url(), json=CHAIN_ID, timeout=timeout)
    assert answer.status_code == 200, answer.text
    result: str | None = answer.json().get("result")
    return result


def api_is_healthy(process: EdgeplaneProcess) -> bool:
    try:
        return httpx.get(f"{process.api_url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def wait_for(condition: object, what: str, seconds: float = RESTART_SECONDS) -> None:
    assert callable(condition)
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {seconds}s"
        time.sleep(0.1)


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def test_the_edge_keeps_answering_while_the_api_is_killed_and_restarted(
    service: EdgeplaneProcess, anvil: AnvilNode
) -> None:
    (api,) = service.child_pids("api")
    answers: list[str | None] = []
    failures: list[BaseException] = []
    done = threading.Event()

    def keep_asking() -> None:
        while not done.is_set():
            try:
                answers.append(chain_id_from_edge(service))
            except BaseException as exc:  # reported by the test below
                failures.append(exc)
            time.sleep(0.02)

    asker = threading.Thread(target=keep_asking)
    asker.start()
    try:
        time.sleep(0.3)
        os.kill(api, signal.SIGKILL)
        wait_for(lambda: not alive(api), "the API process died")
        wait_for(lambda: api_is_healthy(service), "the API answered again")
        time.sleep(0.3)
    finally:
        done.set()
        asker.join(30)
    assert not failures, failures[:3]
    assert len(answers) >= 10
    assert set(answers) == {hex(anvil.chain_id)}
    (restarted,) = service.child_pids("api")
    assert restarted != api
    assert service.v4("GET", "/zones/{zone}")["id"] == service.credentials["zone_id"]


def test_the_api_keeps_answering_while_an_edge_worker_is_killed_and_restarted(
    service: EdgeplaneProcess, anvil: AnvilNode
) -> None:
    workers = service.child_pids("edge-worker")
    assert len(workers) == 2
    os.kill(workers[0], signal.SIGKILL)
    while alive(workers[0]):
        assert api_is_healthy(service)
        time.sleep(0.05)
    deadline = time.monotonic() + RESTART_SECONDS
    while len([pid for pid in service.child_pids("edge-worker") if pid not in workers]) < 1:
        assert api_is_healthy(service)
        assert time.monotonic() < deadline, "the edge worker was not started again"
        time.sleep(0.1)
    assert api_is_healthy(service)
    # Connections are spread over both workers' sockets: every one is answered.
    assert [chain_id_from_edge(service, timeout=RESTART_SECONDS) for _ in range(20)] == [hex(anvil.chain_id)] * 20


def test_connections_made_while_every_edge_worker_is_down_wait_for_their_restart(
    service: EdgeplaneProcess, anvil: AnvilNode
) -> None:
    workers = service.child_pids("edge-worker")
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not any(alive(pid) for pid in workers), "the edge workers died")
    # No process accepts on the edge port now; the supervisor holds its sockets, so the connection is not refused:
    # it waits in the backlog and is answered once a worker is back.
    started = time.monotonic()
    assert chain_id_from_edge(service, timeout=RESTART_SECONDS) == hex(anvil.chain_id)
    assert time.monotonic() - started < RESTART_SECONDS
    assert not set(service.child_pids("edge-worker")) & set(workers)
    assert api_is_healthy(service)


def test_sigterm_stops_every_child_and_closes_the_ports(anvil: AnvilNode, tmp_path: Path) -> None:
    process = EdgeplaneProcess(
        tmp_path / "data", upstreams=(f"mainnet={anvil.url}",), extra_args=("--edge-workers", "2")
    )
    with process:
        children = [pid for role in ("edge-worker", "api", "delivery") for pid in process.child_pids(role)]
        assert len(children) == 4
        serve = process.pid
        assert process.stop() == 0
    assert not [pid for pid in children if alive(pid)]
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and _parent(int(pid)) == serve]
    for port in (process.edge_port, process.api_port):
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=2):
            pass


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def test_metrics_of_a_single_edge_worker_reach_the_api_process(anvil: AnvilNode, tmp_path: Path) -> None:
    process = EdgeplaneProcess(
        tmp_path / "data", upstreams=(f"mainnet={anvil.url}",), extra_args=("--edge-workers", "1")
    )
    with process:
        assert chain_id_from_edge(process) == hex(anvil.chain_id)
        answered = 'edgeplane_gateway_requests_total{method="eth_chainId",network="mainnet",outcome="answered"} 1.0'
        deadline = time.monotonic() + 10  # counts are published every 0.25 s
        while answered not in (metrics := httpx.get(f"{process.api_url}/metrics").text):
            assert time.monotonic() < deadline, metrics[-2000:]
            time.sleep(0.1)
        assert 'edgeplane_upstream_healthy{network="mainnet"' in metrics


def test_no_child_shows_the_database_url_or_settings_to_other_users(service: EdgeplaneProcess) -> None:
    """The database URL may hold a password: children get it in their environment (readable by the service's user
    only), never on their command lines (readable by every local user), and the settings file is the user's alone."""
    children = [pid for role in ("api", "edge-worker", "delivery") for pid in service.child_pids(role)]
    assert len(children) >= 3
    database_file = str(service.data_dir / "edgeplane.db")
    for pid in children:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        assert "--database-url" not in command_line
        assert database_file not in command_line
        assert database_file.encode() in Path(f"/proc/{pid}/environ").read_bytes()
    settings_file = service.data_dir / "run" / "resolved-settings.json"
    assert settings_file.stat().st_mode & 0o777 == 0o600
