"""Delivery to a real S3-compatible store (SeaweedFS), through faults: the store stopped for several batches while
traffic flows, and edgeplane killed with SIGKILL mid-batch. Every record accepted before the fault arrives, none is
corrupted, and duplicates stay within the batch in flight."""

from __future__ import annotations

import gzip
import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from edgeplane.logs.tail import tail_records
from tests.support.edgeplane import EdgeplaneProcess, allow_loopback_destinations
from tests.support.seaweedfs import SeaweedS3

pytestmark = pytest.mark.e2e
BUCKET = "edgeplane-logs"
BATCH = 1000
# A failed upload is tried again at least every second: the end of an outage is seen at once, not after a pause that
# has doubled to a minute meanwhile (the default; tests/logs/test_delivery_batches.py checks the backoff itself).
RETRY_MAX_SECONDS = 1.0


@pytest.fixture(scope="module")
def seaweed() -> Iterator[SeaweedS3]:
    server = SeaweedS3().start()
    server.client().create_bucket(Bucket=BUCKET)
    yield server
    server.close()


def credentials(service: EdgeplaneProcess) -> dict[str, Any]:
    return service.credentials


def configure(data_dir: Path) -> None:
    """The settings of the service on ``data_dir``: destinations on loopback allowed (the store listens there), and
    failed uploads tried again within ``RETRY_MAX_SECONDS``."""
    allow_loopback_destinations(data_dir)
    with (data_dir / "edgeplane.toml").open("a", encoding="utf-8") as settings:
        settings.write(f"[logs]\nupload_retry_max_seconds = {RETRY_MAX_SECONDS}\n")


def job_error(service: EdgeplaneProcess, job_id: int) -> str | None:
    """The job's ``error_message``: why its last upload failed, if one failed."""
    message: str | None = service.v4("GET", f"/zones/{{zone}}/logpush/jobs/{job_id}")["error_message"]
    return message


def create_job(service: EdgeplaneProcess, seaweed: SeaweedS3, prefix: str) -> int:
    creds = credentials(service)
    conf = (
        f"s3://{BUCKET}/{prefix}/{{DATE}}?region={seaweed.region}&endpoint={seaweed.endpoint}"
        f"&access-key-id={seaweed.access_key}&secret-access-key={seaweed.secret_key}"
    )
    body = {
        "dataset": "http_requests",
        "destination_conf": conf,
        "filter": json.dumps({"where": {"key": "ClientRequestPath", "operator": "eq", "value": "/v1/mainnet"}}),
        "output_options": {"field_names": ["RayID", "EdgeResponseStatus", "ClientRequestPath"]},
        "max_upload_records": BATCH,
        "enabled": True,
    }
    response = httpx.post(
        f"{service.api_url}/client/v4/zones/{creds['zone_id']}/logpush/jobs",
        json=body,
        headers={"Authorization": f"Bearer {creds['api_token']}"},
        timeout=30,
    ).json()
    assert response["success"], response
    job_id: int = response["result"]["id"]
    return job_id


def send(service: EdgeplaneProcess, count: int) -> set[str]:
    """Sends ``count`` requests; the RayIDs of those the edge answered (accepted)."""
    body = {"jsonrpc": "2.0", "method": "eth_accounts", "params": [], "id": 1}
    accepted = set()
    with httpx.Client(timeout=30) as client:
        for _ in range(count):
            response = client.post(service.rpc_url(), json=body)
            accepted.add(response.headers["cf-ray"].split("-")[0])
    return accepted


def delivered(seaweed: SeaweedS3, prefix: str) -> Counter[str]:
    client = seaweed.client()
    seen: Counter[str] = Counter()
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=BUCKET, Prefix=prefix + "/"):
        for item in page.get("Contents", []):
            assert item["Key"].endswith(".log.gz")
            data = gzip.decompress(client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read())
            for line in data.splitlines():
                record = json.loads(line)  # a corrupted line would fail here
                assert set(record) == {"RayID", "EdgeResponseStatus", "ClientRequestPath"}
                seen[record["RayID"]] += 1
    return seen


def stored_rays(service: EdgeplaneProcess) -> set[str]:
    """The RayIDs of the ``http_requests`` records in the service's log store (read as ``edgeplane logs tail``
    reads them)."""
    records = tail_records(service.data_dir, "http_requests", from_start=True, follow=False)
    return {record["RayID"] for record in records}


def wait_for(seaweed: SeaweedS3, prefix: str, expected: set[str], timeout: float = 90) -> Counter[str]:
    deadline = time.monotonic() + timeout
    seen: Counter[str] = Counter()
    while time.monotonic() < deadline:
        seen = delivered(seaweed, prefix)
        if expected <= set(seen):
            return seen
        time.sleep(1)
    return seen


def test_records_reach_s3(seaweed: SeaweedS3, tmp_path: Path) -> None:
    configure(tmp_path / "data")
    with EdgeplaneProcess(tmp_path / "data") as service:
        create_job(service, seaweed, "plain")
        accepted = send(service, 2 * BATCH)
        seen = wait_for(seaweed, "plain", accepted)
        assert set(seen) == accepted
        assert max(seen.values()) == 1


def test_store_outage(seaweed: SeaweedS3, tmp_path: Path) -> None:
    configure(tmp_path / "data")
    with EdgeplaneProcess(tmp_path / "data") as service:
        job_id = create_job(service, seaweed, "outage")
        accepted = send(service, BATCH)
        wait_for(seaweed, "outage", accepted)
        assert job_error(service, job_id) is None
        seaweed.stop()
        try:
            during = send(service, 3 * BATCH)  # three batches' worth while the store is down
            accepted |= during
            deadline = time.monotonic() + 60
            while job_error(service, job_id) is None:  # uploads are tried, and fail
                assert time.monotonic() < deadline, "no upload failed while the store was down"
                time.sleep(0.2)
            while not during <= stored_rays(service):  # and the records wait in the log store
                assert time.monotonic() < deadline, "the records of the outage were not stored"
                time.sleep(0.2)
        finally:
            seaweed.start()
        accepted |= send(service, BATCH)
        seen = wait_for(seaweed, "outage", accepted, timeout=150)
        assert set(seen) == accepted
        duplicates = sum(count - 1 for count in seen.values())
        assert duplicates <= BATCH


def test_kill_mid_batch(seaweed: SeaweedS3, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    configure(data_dir)
    service = EdgeplaneProcess(data_dir).start()
    try:
        create_job(service, seaweed, "kill")
        accepted = send(service, BATCH)  # one full batch, delivered ...
        wait_for(seaweed, "kill", accepted)
        in_flight = send(service, BATCH // 2)  # ... and half of the next, stored but not delivered
        deadline = time.monotonic() + 30
        while not in_flight <= stored_rays(service):
            assert time.monotonic() < deadline, "the records were not stored"
            time.sleep(0.1)
        assert not in_flight & set(delivered(seaweed, "kill"))  # the batch is in flight
        accepted |= in_flight
    finally:
        service.stop(kill=True)
    restarted = EdgeplaneProcess(data_dir)
    restarted.edge_port, restarted.api_port = service.edge_port, service.api_port
    with restarted:
        # The rest of the batch in flight: whole batches, which go at once, not at the end of the job's interval.
        accepted |= send(restarted, BATCH // 2)
        seen = wait_for(seaweed, "kill", accepted, timeout=120)
    assert set(seen) == accepted
    duplicates = sum(count - 1 for count in seen.values())
    assert duplicates <= BATCH
