"""Delivery to a real HTTPS endpoint (TLS with a test CA): gzip batches POSTed with the job's headers, retried through
an outage (HTTP 503) until the endpoint confirms."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import httpx
import pytest

from tests.support.edgeplane import EdgeplaneProcess, allow_loopback_destinations
from tests.support.https_receiver import HttpsReceiver

pytestmark = pytest.mark.e2e


def test_batches_are_posted_with_headers_and_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with HttpsReceiver() as receiver:
        monkeypatch.setenv("SSL_CERT_FILE", str(receiver.ca_path))  # edgeplane trusts the test CA
        receiver.answer(503)
        allow_loopback_destinations(tmp_path / "data")  # the receiver listens on loopback
        with EdgeplaneProcess(tmp_path / "data") as service:
            creds = json.loads((service.data_dir / "credentials.json").read_text())
            body = {
                "dataset": "http_requests",
                "destination_conf": f"{receiver.url}/ingest?header_Authorization=Splunk%20abc&header_X-Team=edge",
                "output_options": {"field_names": ["RayID", "EdgeResponseStatus"]},
                "max_upload_records": 1000,
                "enabled": True,
            }
            created = httpx.post(
                f"{service.api_url}/client/v4/zones/{creds['zone_id']}/logpush/jobs",
                json=body,
                headers={"Authorization": f"Bearer {creds['api_token']}"},
                timeout=30,
            ).json()
            assert created["success"], created
            request = {"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1}
            with httpx.Client(timeout=30) as client:
                rays = {client.post(service.rpc_url(), json=request).headers["cf-ray"][:16] for _ in range(1000)}
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not receiver.requests:
                time.sleep(0.2)
            assert receiver.requests  # the first attempt was refused with 503
            message = ""
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "503" not in message:
                job = httpx.get(
                    f"{service.api_url}/client/v4/zones/{creds['zone_id']}/logpush/jobs/{created['result']['id']}",
                    headers={"Authorization": f"Bearer {creds['api_token']}"},
                    timeout=30,
                ).json()["result"]
                message = job["error_message"] or ""
                time.sleep(0.2)
            assert "503" in message
            receiver.answer(200)
            refused = len(receiver.requests)  # answered 503 (a request in progress may still get 503: harmless)
            seen: set[str] = set()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not rays <= seen:
                time.sleep(0.5)
                accepted = [r for r in receiver.requests[refused:] if r.decompressed is not None]
                seen = {json.loads(line)["RayID"] for r in accepted for line in r.decompressed.splitlines()}  # type: ignore[union-attr]
            assert rays <= seen
            last = receiver.requests[-1]
            assert last.path == "/ingest"
            assert last.headers["Authorization"] == "Splunk abc"
            assert last.headers["X-Team"] == "edge"
            assert last.headers["Content-Encoding"] == "gzip"
            assert gzip.decompress(last.body) == last.decompressed
