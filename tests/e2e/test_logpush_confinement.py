"""Where the real service lets Logpush destinations lead: with its default settings, nowhere on loopback and no file
outside its file root; with the operator's allowance, to loopback receivers; and a job stored while something was
allowed is held to the settings the service runs with now, in error texts that tell nothing of the network."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.anvil import free_port
from tests.support.edgeplane import EdgeplaneProcess, allow_loopback_destinations
from tests.support.https_receiver import HttpsReceiver

pytestmark = pytest.mark.e2e

KEYS = "access-key-id=AKID&secret-access-key=SECRET"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    """The service with its default settings."""
    with EdgeplaneProcess(tmp_path_factory.mktemp("confinement") / "data") as process:
        yield process


def call(service: EdgeplaneProcess, method: str, path: str, **kwargs: Any) -> httpx.Response:
    credentials = service.credentials
    return httpx.request(
        method,
        f"{service.api_url}/client/v4{path.replace('{zone}', credentials['zone_id'])}",
        headers={"Authorization": f"Bearer {credentials['api_token']}"},
        timeout=30,
        **kwargs,
    )


def job_status(service: EdgeplaneProcess, job_id: int, *, until: str, seconds: float = 30) -> str:
    """The job's error_message once it holds ``until`` (or as it is when ``seconds`` have passed)."""
    deadline = time.monotonic() + seconds
    message = ""
    while time.monotonic() < deadline and until not in message:
        message = call(service, "GET", f"/zones/{{zone}}/logpush/jobs/{job_id}").json()["result"]["error_message"]
        message = message or ""
        time.sleep(0.3)
    return message


def traffic(service: EdgeplaneProcess, count: int = 20) -> None:
    body = {"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1}
    with httpx.Client(timeout=30) as client:
        for _ in range(count):
            client.post(service.rpc_url(), json=body)


@pytest.mark.parametrize(
    ("conf", "words"),
    [
        ("https://127.0.0.1:{port}/ingest", "is a loopback address"),
        ("https://2130706433:{port}/ingest", "is a loopback address"),
        ("https://[::ffff:127.0.0.1]:{port}/ingest", "is a loopback address"),
        ("https://localhost:{port}/ingest", "is a loopback address"),
        ("https://169.254.169.254/latest/meta-data", "is a cloud metadata address"),
        ("https://192.168.0.1/ingest", "is a private address"),
        (f"s3://logs?region=auto&endpoint=http://127.0.0.1:{{port}}&{KEYS}", "is a loopback address"),
        (f"s3://logs?region=auto&endpoint=http://0x7f.1:{{port}}&{KEYS}", "is a loopback address"),
        ("file:///etc/edgeplane-test", "must be directories under"),
        ("file:///tmp/../etc/x", "'..'"),
    ],
)
def test_default_settings_refuse_what_leads_inside(service: EdgeplaneProcess, conf: str, words: str) -> None:
    conf = conf.replace("{port}", str(service.api_port))
    created = call(service, "POST", "/zones/{zone}/logpush/jobs", json={"destination_conf": conf, "enabled": True})
    assert created.status_code == 400, created.text
    [error] = created.json()["errors"]
    assert (error["code"], error["source"]["pointer"]) == (1002, "/destination_conf")
    assert words in error["message"]
    owned = call(service, "POST", "/zones/{zone}/logpush/ownership", json={"destination_conf": conf})
    assert owned.status_code == 400
    checked = call(service, "POST", "/zones/{zone}/logpush/validate/destination", json={"destination_conf": conf})
    assert checked.json()["result"]["valid"] is False
    assert words in checked.json()["result"]["message"]
    assert not Path("/etc/edgeplane-test").exists()


def test_a_file_job_needs_its_challenge_and_stays_under_the_root(service: EdgeplaneProcess) -> None:
    conf = f"file://{service.data_dir}/destinations/mine"
    refused = call(service, "POST", "/zones/{zone}/logpush/jobs", json={"destination_conf": conf})
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["source"]["pointer"] == "/ownership_challenge"
    job = service.v4("POST", "/zones/{zone}/logpush/jobs", json={**service.file_destination("mine"), "enabled": True})
    assert job["destination_conf"] == conf


def test_the_operators_allowance_lets_jobs_reach_loopback_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "data"
    closed = free_port()
    with HttpsReceiver() as receiver:
        monkeypatch.setenv("SSL_CERT_FILE", str(receiver.ca_path))  # the service trusts the test CA
        allow_loopback_destinations(data_dir)
        with EdgeplaneProcess(data_dir) as service:
            jobs = "/zones/{zone}/logpush/jobs"
            batch = {"enabled": True, "max_upload_records": 1000}
            delivered = service.v4("POST", jobs, json={"destination_conf": f"{receiver.url}/ingest", **batch})
            down = service.v4("POST", jobs, json={"destination_conf": f"https://127.0.0.1:{closed}/in", **batch})
            metadata = call(service, "POST", jobs, json={"destination_conf": "https://169.254.169.254/"})
            assert "metadata" in metadata.json()["errors"][0]["message"]
            traffic(service, 1000)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not receiver.requests:
                time.sleep(0.5)
            assert receiver.requests  # allowed: batches arrive on loopback
            # Nothing listens on that port: one generic message, nothing about refused, reset or timed out.
            assert job_status(service, down["id"], until="could not") == (
                f"https://127.0.0.1:{closed}/in: the destination could not be reached, or did not answer in time"
            )
        received = len(receiver.requests)
        # The same jobs under the default settings: refused before any connection, and said plainly.
        (data_dir / "edgeplane.toml").unlink()
        with EdgeplaneProcess(data_dir) as service:
            traffic(service, 1000)
            assert "is a loopback address" in job_status(service, delivered["id"], until="loopback", seconds=60)
        assert len(receiver.requests) == received
