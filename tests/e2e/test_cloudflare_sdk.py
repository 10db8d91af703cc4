"""The official `cloudflare` SDK, unmodified, against a running `edgeplane serve`: every Logpush job operation with
both auth schemes, zones and web3 hostnames, scoped tokens, and the errors it raises for bad input."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudflare
import httpx
import pytest
from cloudflare import Cloudflare

from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    data_dir = tmp_path_factory.mktemp("sdk") / "data"
    with EdgeplaneProcess(data_dir) as process:
        yield process


@pytest.fixture(scope="module")
def credentials(service: EdgeplaneProcess) -> dict[str, Any]:
    return service.credentials


def client(service: EdgeplaneProcess, **auth: str) -> Cloudflare:
    return Cloudflare(base_url=f"{service.api_url}/client/v4", max_retries=0, **auth)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def by_token(service: EdgeplaneProcess, credentials: dict[str, Any]) -> Cloudflare:
    return client(service, api_token=credentials["api_token"])


@pytest.fixture(scope="module")
def by_key(service: EdgeplaneProcess, credentials: dict[str, Any]) -> Cloudflare:
    return client(service, api_key=credentials["api_key"], api_email=credentials["email"])


FILTER = json.dumps(
    {
        "where": {
            "and": [
                {"key": "ClientRequestPath", "operator": "startsWith", "value": "/v1/"},
                {"key": "EdgeResponseStatus", "operator": "in", "value": [403, 429]},
            ]
        }
    }
)


@pytest.mark.parametrize("scheme", ["token", "key"])
def test_every_job_operation(
    scheme: str, by_token: Cloudflare, by_key: Cloudflare, credentials: dict[str, Any], service: EdgeplaneProcess
) -> None:
    cf = by_token if scheme == "token" else by_key
    zone_id = credentials["zone_id"]
    destination = f"file://{service.data_dir}/destinations/sdk-{scheme}/{{DATE}}"  # under the default file root
    challenge = cf.logpush.ownership.create(zone_id=zone_id, destination_conf=destination)
    assert challenge is not None
    token = Path(challenge.filename).read_text().strip()
    job = cf.logpush.jobs.create(
        zone_id=zone_id,
        destination_conf=destination,
        ownership_challenge=token,
        dataset="http_requests",
        name=f"sdk-{scheme}",
        filter=FILTER,
        logpull_options="fields=RayID,ClientIP,EdgeStartTimestamp&timestamps=rfc3339&CVE-2021-44228=true",
    )
    assert job is not None
    assert job.id is not None
    assert job.enabled is False
    assert job.filter == FILTER
    assert job.dataset == "http_requests"
    assert any(j.id == job.id for j in cf.logpush.jobs.list(zone_id=zone_id))
    fetched = cf.logpush.jobs.get(job.id, zone_id=zone_id)
    assert fetched is not None
    assert fetched.name == f"sdk-{scheme}"
    updated = cf.logpush.jobs.update(job.id, zone_id=zone_id, enabled=True, max_upload_records=5000)
    assert updated is not None
    assert updated.enabled is True
    assert updated.max_upload_records == 5000
    fields = cf.logpush.datasets.fields.get("http_requests", zone_id=zone_id)
    assert fields is not None
    by_dataset = cf.logpush.datasets.jobs.get("http_requests", zone_id=zone_id)
    assert any(j is not None and j.id == job.id for j in by_dataset)
    valid = cf.logpush.ownership.validate(zone_id=zone_id, destination_conf=destination, ownership_challenge=token)
    assert valid is not None
    assert valid.valid is True
    checked = cf.logpush.validate.destination(zone_id=zone_id, destination_conf=destination)
    assert checked is not None
    assert checked.valid is True
    exists = cf.logpush.validate.destination_exists(zone_id=zone_id, destination_conf=destination)
    assert exists is not None
    assert exists.exists is True
    origin = cf.logpush.validate.origin(zone_id=zone_id, logpull_options="fields=RayID&timestamps=unix")
    assert origin is not None
    assert origin.valid is True
    deleted = cf.logpush.jobs.delete(job.id, zone_id=zone_id)
    assert deleted is not None
    with pytest.raises(cloudflare.NotFoundError):
        cf.logpush.jobs.get(job.id, zone_id=zone_id)


def test_account_jobs(by_token: Cloudflare, credentials: dict[str, Any], service: EdgeplaneProcess) -> None:
    account_id = credentials["account_id"]
    destination = f"file://{service.data_dir}/destinations/account"
    challenge = by_token.logpush.ownership.create(account_id=account_id, destination_conf=destination)
    assert challenge is not None
    job = by_token.logpush.jobs.create(
        account_id=account_id,
        destination_conf=destination,
        ownership_challenge=Path(challenge.filename).read_text().strip(),
        dataset="firewall_events",
    )
    assert job is not None
    assert [j.id for j in by_token.logpush.jobs.list(account_id=account_id)] == [job.id]
    by_token.logpush.jobs.delete(job.id, account_id=account_id)


@pytest.mark.parametrize(
    ("members", "words"),
    [
        ({"filter": json.dumps({"where": {"key": "Nope", "operator": "eq", "value": "x"}})}, "where.key"),
        ({"filter": "x" * 1001}, "1000 bytes"),
        ({"destination_conf": "ftp://somewhere/x"}, "ftp"),
        ({"destination_conf": "https://127.0.0.1:8788/x"}, "loopback"),
        ({"destination_conf": "file:///etc/x"}, "under"),
        ({"max_upload_records": 5}, "max_upload_records"),
        ({"logpull_options": "fields=NoSuchField"}, "NoSuchField"),
    ],
)
def test_bad_jobs_raise_bad_request(
    by_token: Cloudflare, credentials: dict[str, Any], members: dict[str, Any], words: str
) -> None:
    arguments: dict[str, Any] = {
        "destination_conf": "https://logs.example.com/x",
        "dataset": "http_requests",
        **members,
    }
    with pytest.raises(cloudflare.BadRequestError) as caught:
        by_token.logpush.jobs.create(zone_id=credentials["zone_id"], **arguments)
    assert words in str(caught.value)


def test_zones_hostnames_and_scoped_tokens(
    by_token: Cloudflare, service: EdgeplaneProcess, credentials: dict[str, Any], tmp_path: Path
) -> None:
    zones = list(by_token.zones.list())
    assert [zone.name for zone in zones] == ["localhost"]
    other = by_token.zones.create(account={"id": credentials["account_id"]}, name="other.example")
    assert other is not None
    created = by_token.user.tokens.create(
        name="logs for localhost only",
        policies=[
            {
                "effect": "allow",
                "resources": {f"com.cloudflare.api.account.zone.{credentials['zone_id']}": "*"},
                "permission_groups": [{"id": "logs-write", "name": "Logs Write"}],
            }
        ],
    )
    assert created is not None
    assert created.value is not None
    scoped = client(service, api_token=created.value)
    job = scoped.logpush.jobs.create(
        zone_id=credentials["zone_id"], destination_conf="https://logs.example.com/s", dataset="http_requests"
    )
    assert job is not None
    with pytest.raises(cloudflare.NotFoundError):
        scoped.logpush.jobs.list(zone_id=other.id)
    with pytest.raises(cloudflare.NotFoundError):
        scoped.logpush.jobs.create(
            zone_id=other.id, destination_conf="https://logs.example.com/s", dataset="http_requests"
        )
    by_token.logpush.jobs.delete(job.id, zone_id=credentials["zone_id"])
    hostname = by_token.web3.hostnames.create(zone_id=credentials["zone_id"], name="rpc.localhost", target="ethereum")
    assert hostname is not None
    assert hostname.target == "ethereum"
    assert any(h.id == hostname.id for h in by_token.web3.hostnames.list(zone_id=credentials["zone_id"]))
    by_token.zones.delete(zone_id=other.id)


def test_new_web3_hostname_reaches_the_gateway(
    by_token: Cloudflare, service: EdgeplaneProcess, credentials: dict[str, Any]
) -> None:
    body = {"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1}
    unknown = httpx.post(service.rpc_url(), json=body, headers={"host": "gw.localhost"})
    assert unknown.status_code == 404
    hostname = by_token.web3.hostnames.create(zone_id=credentials["zone_id"], name="gw.localhost", target="ethereum")
    assert hostname is not None
    # the write answered once every edge worker applied it
    routed = httpx.post(service.rpc_url(), json=body, headers={"host": "gw.localhost"})
    assert routed.status_code == 200
    assert routed.json()["result"] == "0x539"
    by_token.web3.hostnames.delete(hostname.id, zone_id=credentials["zone_id"])
    assert httpx.post(service.rpc_url(), json=body, headers={"host": "gw.localhost"}).status_code == 404


def test_wrong_credentials(service: EdgeplaneProcess, credentials: dict[str, Any]) -> None:
    with pytest.raises(cloudflare.AuthenticationError):
        list(client(service, api_token="A" * 40).zones.list())
    with pytest.raises(cloudflare.PermissionDeniedError):
        list(client(service, api_key="0" * 37, api_email=credentials["email"]).zones.list())
