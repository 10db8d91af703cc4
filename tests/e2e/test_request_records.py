"""Every request ``edgeplane serve`` answered is in its log store, those answered just before a graceful stop
included (the edge journals its rows every 50 ms and seals what waits as it stops; the delivery process takes the
journal into the store), and those journalled by an edge worker or taken by a delivery process that was killed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from edgeplane.logs.log_store import SegmentedLogStore
from tests.support.edgeplane import EdgeplaneProcess

BODY = {"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1}


def stored_records(data_dir: Path) -> list[dict[str, Any]]:
    found = []
    for partition in sorted((data_dir / "logs").iterdir()):
        store = SegmentedLogStore(partition, writable=False)
        position = 0
        while records := store.read("http_requests", position).records:
            found.extend(orjson.loads(record) for record in records)
            position += len(records)
    return found


def stored_ray_ids(data_dir: Path) -> list[str]:
    return [record["RayID"] for record in stored_records(data_dir)]


def test_requests_answered_just_before_a_stop_are_stored(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    service = EdgeplaneProcess(data_dir, extra_args=("--edge-workers", "1")).start()
    answered = []
    try:
        with httpx.Client(timeout=30) as client:
            for _ in range(40):
                response = client.post(service.rpc_url(), json=BODY)
                assert response.status_code == 200
                answered.append(response.headers["cf-ray"].split("-")[0])
    finally:
        assert service.stop() == 0  # at once: the last rows are still waiting for their interval
    assert sorted(stored_ray_ids(data_dir)) == sorted(answered)


def child_pids(parent: int, role: str) -> list[int]:
    listed = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(parent)], capture_output=True, text=True)
    return [int(line.split()[0]) for line in listed.stdout.splitlines() if f" {role} " in line]


def answer_some(service: EdgeplaneProcess, count: int) -> list[str]:
    """``count`` requests, each on a new connection (spread over the edge workers); their ray ids."""
    answered = []
    for _ in range(count):
        response = httpx.post(service.rpc_url(), json=BODY, timeout=30)
        assert response.status_code == 200
        answered.append(response.headers["cf-ray"].split("-")[0])
    return answered


def wait_until_stored(data_dir: Path, ray_ids: list[str], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not set(ray_ids) <= set(stored_ray_ids(data_dir)):
        assert time.monotonic() < deadline, "records missing from the store"
        time.sleep(0.2)


def test_what_a_killed_edge_worker_journalled_reaches_the_store(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with EdgeplaneProcess(data_dir, extra_args=("--edge-workers", "2")) as service:
        worker = child_pids(service.pid, "edge-worker")[0]  # of two: worker 0 is a child too
        answered = answer_some(service, 40)
        time.sleep(0.5)  # told (50 ms) and journalled (50 ms), not sealed (1 s)
        os.kill(worker, signal.SIGKILL)
        answered += answer_some(service, 10)  # the restarted worker seals what the dead one left
        wait_until_stored(data_dir, answered)
    assert sorted(stored_ray_ids(data_dir)) == sorted(answered)  # and nothing twice


def test_records_keep_reaching_the_store_when_the_delivery_process_is_killed(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with EdgeplaneProcess(data_dir, extra_args=("--edge-workers", "1")) as service:
        answered = answer_some(service, 20)
        wait_until_stored(data_dir, answered)
        (delivery,) = child_pids(service.pid, "delivery")
        answered += answer_some(service, 20)
        os.kill(delivery, signal.SIGKILL)
        answered += answer_some(service, 20)
        wait_until_stored(data_dir, answered)
    assert set(stored_ray_ids(data_dir)) == set(answered)


def test_records_tell_what_the_response_cache_did(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    service = EdgeplaneProcess(data_dir, extra_args=("--edge-workers", "1")).start()
    statuses: dict[str, str] = {}
    try:
        with httpx.Client(timeout=30) as client:
            for method in ("eth_chainId", "eth_chainId", "eth_syncing"):
                body = {"jsonrpc": "2.0", "method": method, "params": [], "id": 1}
                response = client.post(service.rpc_url(), json=body)
                assert response.status_code == 200
                statuses[response.headers["cf-ray"].split("-")[0]] = method
    finally:
        assert service.stop() == 0
    records = {record["RayID"]: record for record in stored_records(data_dir)}
    found = [
        (statuses[ray], records[ray]["CacheCacheStatus"], records[ray].get("OriginResponseStatus")) for ray in statuses
    ]
    assert found == [("eth_chainId", "miss", 200), ("eth_chainId", "hit", None), ("eth_syncing", "dynamic", 200)]


def exchange_raw(port: int, head: bytes, body: bytes = b"") -> bytes:
    """Sends one request on a new connection and reads the answer until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(head + body)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    return received


def test_records_count_the_bytes_sent_and_include_refusals_but_not_health_checks(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    service = EdgeplaneProcess(data_dir, extra_args=("--edge-workers", "1")).start()
    body = orjson.dumps(BODY)
    closing = b"Host: localhost\r\nConnection: close\r\n\r\n"
    post = b"POST /v1/mainnet HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nConnection: close\r\n"
    try:
        answered = exchange_raw(service.edge_port, post + b"Content-Length: %d\r\n\r\n" % len(body), body)
        wrong_method = exchange_raw(service.edge_port, b"GET /v1/mainnet HTTP/1.1\r\n" + closing)
        too_large = exchange_raw(service.edge_port, post + b"Content-Length: 900000000\r\n\r\n")
        health = exchange_raw(service.edge_port, b"GET /healthz HTTP/1.1\r\n" + closing)
        chunked = exchange_raw(service.edge_port, post + b"Transfer-Encoding: chunked\r\n\r\n")
    finally:
        assert service.stop() == 0
    answers = (answered, wrong_method, too_large, health, chunked)
    assert [answer.split(b" ", 2)[1] for answer in answers] == [b"200", b"405", b"413", b"200", b"411"]
    records = stored_records(data_dir)
    assert [(record["EdgeResponseStatus"], record["ClientRequestMethod"]) for record in records] == [
        (200, "POST"),
        (405, "GET"),
        (413, "POST"),
        (411, "POST"),
    ]
    assert [record["EdgeResponseBytes"] for record in records] == [
        len(answered),
        len(wrong_method),
        len(too_large),
        len(chunked),
    ]
    head = dict(line.split(b": ", 1) for line in answered.split(b"\r\n\r\n")[0].split(b"\r\n")[1:])
    assert records[0]["RayID"] == head[b"cf-ray"].decode()[:16]
    assert all(record["EdgeStartTimestamp"] <= record["EdgeEndTimestamp"] for record in records)
