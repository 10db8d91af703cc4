"""Gateway requests become http_requests records, and a Logpush job pushes exactly the ones its filter selects to
its destination, in gzip batches, with the fields it asks for."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    data_dir = tmp_path_factory.mktemp("delivery") / "data"
    with EdgeplaneProcess(data_dir) as process:
        yield process


def lines_in(directory: Path) -> list[dict[str, Any]]:
    lines = []
    for path in sorted(directory.rglob("*.log.gz")):
        lines += [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines() if line]
    return lines


def test_filtered_requests_reach_the_destination(service: EdgeplaneProcess) -> None:
    out = service.data_dir / "destinations" / "out"
    filter_text = json.dumps(
        {
            "where": {
                "and": [
                    {"key": "EdgeResponseStatus", "operator": "eq", "value": "403"},
                    {"key": "ClientRequestPath", "operator": "startsWith", "value": "/v1/"},
                ]
            }
        }
    )
    job = service.v4(
        "POST",
        "/zones/{zone}/logpush/jobs",
        json={
            "name": "refused",
            "dataset": "http_requests",
            **service.file_destination("out/{DATE}"),
            "filter": filter_text,
            "output_options": {
                "field_names": ["RayID", "ClientRequestPath", "EdgeResponseStatus", "ClientRequestMethod"]
            },
            "max_upload_records": 1000,
            "enabled": True,
        },
    )
    refused = {"jsonrpc": "2.0", "method": "eth_accounts", "params": [], "id": 1}
    answered = {"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1}
    ray_ids = set()
    with httpx.Client(timeout=30) as client:
        for index in range(1084):  # every 13th answered: 1000 refused
            response = client.post(service.rpc_url(), json=refused if index % 13 else answered)
            if response.status_code == 403:
                ray_ids.add(response.headers["cf-ray"].split("-")[0])
    assert len(ray_ids) == 1000
    lines = wait_for_lines(out, 1000)
    # The 1000 records fill one batch, which goes at once (a batch that is not full waits for the job's interval,
    # 30 s at least: tests/logs/test_delivery_batches.py).
    assert len(lines) == 1000
    assert {line["RayID"] for line in lines} == ray_ids
    assert all(
        set(line) == {"RayID", "ClientRequestPath", "EdgeResponseStatus", "ClientRequestMethod"} for line in lines
    )
    assert all(line["EdgeResponseStatus"] == 403 and line["ClientRequestPath"] == "/v1/mainnet" for line in lines)
    status = service.v4("GET", f"/zones/{{zone}}/logpush/jobs/{job['id']}")
    assert status["last_complete"] is not None
    assert status["error_message"] is None


def test_the_json_rpc_fields_reach_the_destination_and_filter_it(service: EdgeplaneProcess) -> None:
    """The dataset's JSON-RPC extensions (network, method, requests, error code) are in the records a job pushes,
    and its filter selects by them."""
    out = service.data_dir / "destinations" / "rpc"
    fields = ["RayID", "Web3Network", "JSONRPCMethod", "JSONRPCRequests", "JSONRPCErrorCode", "Web3Upstream"]
    filter_text = json.dumps(
        {
            "where": {
                "and": [
                    {"key": "JSONRPCMethod", "operator": "eq", "value": "eth_getBalance"},
                    {"key": "JSONRPCRequests", "operator": "gt", "value": "1"},
                    {"key": "Web3Network", "operator": "eq", "value": "mainnet"},
                ]
            }
        }
    )
    service.v4(
        "POST",
        "/zones/{zone}/logpush/jobs",
        json={
            "name": "json-rpc",
            "dataset": "http_requests",
            **service.file_destination("rpc/{DATE}"),
            "filter": filter_text,
            "output_options": {"field_names": fields},
            "max_upload_records": 1000,
            "enabled": True,
        },
    )
    bad_balance = {"jsonrpc": "2.0", "method": "eth_getBalance", "params": ["not an address", "latest"], "id": 1}
    chain_id = {"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 2}
    ray_ids = set()
    codes = set()
    with httpx.Client(timeout=30) as client:
        for index in range(1100):  # every 11th a single request, which the filter leaves out: 1000 batches
            if index % 11 == 0:
                client.post(service.rpc_url(), json=bad_balance)
                continue
            response = client.post(service.rpc_url(), json=[bad_balance, chain_id])
            ray_ids.add(response.headers["cf-ray"].split("-")[0])
            codes.add(response.json()[0]["error"]["code"])
    assert len(ray_ids) == 1000
    (code,) = codes
    lines = wait_for_lines(out, 1000)
    assert len(lines) == 1000
    assert {line["RayID"] for line in lines} == ray_ids
    expected = {
        "Web3Network": "mainnet",
        "JSONRPCMethod": "eth_getBalance",
        "JSONRPCRequests": 2,
        "JSONRPCErrorCode": code,
        "Web3Upstream": "devchain",  # the embedded development chain, serve's upstream by default
    }
    assert all({key: value for key, value in line.items() if key != "RayID"} == expected for line in lines)


def test_logs_tail_shows_records_with_a_filter(service: EdgeplaneProcess) -> None:
    import subprocess
    import sys

    body = {"jsonrpc": "2.0", "method": "eth_blockNumber", "params": [], "id": 1}
    for _ in range(5):
        httpx.post(service.rpc_url("sepolia"), json=body, timeout=30)
    filter_text = json.dumps({"where": {"key": "ClientRequestPath", "operator": "eq", "value": "/v1/sepolia"}})
    tail = [
        sys.executable,
        "-m",
        "edgeplane",
        "logs",
        "tail",
        "--data-dir",
        str(service.data_dir),
        "--from-start",
        "--no-follow",
        "--filter",
        filter_text,
    ]
    # The edge hands its rows to the log store about once a second: ask until all five are there.
    deadline = time.monotonic() + 30
    records: list[dict[str, Any]] = []
    while len(records) < 5 and time.monotonic() < deadline:
        time.sleep(0.25)
        result = subprocess.run(tail, capture_output=True, text=True, timeout=60, check=True)
        records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 5
    assert all(record["ClientRequestPath"] == "/v1/sepolia" for record in records)
    bad = subprocess.run(
        [sys.executable, "-m", "edgeplane", "logs", "tail", "--data-dir", str(service.data_dir), "--filter", "{}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert "where" in bad.stderr


def wait_for_lines(directory: Path, count: int, seconds: float = 60) -> list[dict[str, Any]]:
    """The lines pushed to ``directory`` once there are ``count`` of them (or what is there after ``seconds``)."""
    deadline = time.monotonic() + seconds
    lines = lines_in(directory)
    while time.monotonic() < deadline and len(lines) < count:
        time.sleep(0.25)
        lines = lines_in(directory)
    return lines


def test_disabled_job_resumes_where_it_stopped(service: EdgeplaneProcess) -> None:
    out = service.data_dir / "destinations" / "resume"
    witness = service.data_dir / "destinations" / "resume-witness"
    filter_text = json.dumps({"where": {"key": "ClientRequestPath", "operator": "eq", "value": "/v1/holesky"}})

    def job_pushing_to(path: str, *, enabled: bool) -> dict[str, Any]:
        created: dict[str, Any] = service.v4(
            "POST",
            "/zones/{zone}/logpush/jobs",
            json={
                "dataset": "http_requests",
                **service.file_destination(path),
                "filter": filter_text,
                "output_options": {"field_names": ["RayID"]},
                "max_upload_records": 1000,
                "enabled": enabled,
            },
        )
        return created

    job = job_pushing_to("resume", enabled=False)
    job_pushing_to("resume-witness", enabled=True)  # the same records, enabled: shows when they would have gone
    body = {"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1}
    with httpx.Client(timeout=30) as client:
        rays = {client.post(service.rpc_url("holesky"), json=body).headers["cf-ray"][:16] for _ in range(1000)}
    # The enabled twin has pushed the 1000 records (a full batch goes at once): delivery has read them, and the
    # disabled job has not pushed them.
    assert {line["RayID"] for line in wait_for_lines(witness, 1000)} == rays
    assert lines_in(out) == []  # disabled: nothing pushed
    service.v4("PUT", f"/zones/{{zone}}/logpush/jobs/{job['id']}", json={"enabled": True})
    lines = wait_for_lines(out, 1000, seconds=30)
    assert {line["RayID"] for line in lines} == rays
    assert len(lines) == 1000
