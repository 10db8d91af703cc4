"""Logpush jobs through the v4 API (seed 001): lifecycle, every field checked, errors that name what is wrong; the
destination policy (addresses, the file root), ownership challenges, job limits, and routes that probe a
destination only for writers."""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from edgeplane.api.asgi import build_api_app
from edgeplane.api.endpoint import ControlPlane
from edgeplane.api.logpush import challenge_token
from edgeplane.api.permissions import ZONE_SCOPE
from edgeplane.api.scope import Scope
from edgeplane.bootstrap import ensure_bootstrap
from edgeplane.logs.destinations import DestinationPolicy
from edgeplane.logs.destinations.address_guard import AddressPolicy
from edgeplane.store.database import Database
from tests.api.conftest import Api


def jobs_path(api: Api) -> str:
    return f"/zones/{api.credentials['zone_id']}/logpush/jobs"


def zone_logpush(api: Api) -> str:
    return f"/zones/{api.credentials['zone_id']}/logpush"


def account_logpush(api: Api) -> str:
    return f"/accounts/{api.credentials['account_id']}/logpush"


def own(api: Api, conf: str, base: str | None = None) -> str:
    """The ownership challenge of ``conf``, as its owner reads it: requested, then read where it was written."""
    response = api.call("POST", f"{base or zone_logpush(api)}/ownership", json={"destination_conf": conf})
    body = response.json()
    assert body["success"], body
    return Path(body["result"]["filename"]).read_text().strip()


def create(api: Api, tmp_path: Path, **members: Any) -> Any:
    """Creates a job (by default to a directory under the file root, with its ownership challenge)."""
    body = {"destination_conf": f"file://{tmp_path}/logs/{{DATE}}", "dataset": "http_requests", **members}
    if "ownership_challenge" not in body and body["destination_conf"] == f"file://{tmp_path}/logs/{{DATE}}":
        body["ownership_challenge"] = own(api, body["destination_conf"])
    return api.call("POST", jobs_path(api), json=body)


SEED_FILTER = json.dumps(
    {
        "where": {
            "and": [
                {"key": "ClientRequestHost", "operator": "eq", "value": "example.com"},
                {
                    "or": [
                        {"key": "EdgeResponseStatus", "operator": "in", "value": [403, 429]},
                        {"key": "BotScore", "operator": "lt", "value": "30"},
                    ]
                },
            ]
        }
    }
)


def test_job_lifecycle_with_the_seed_request(api: Api, tmp_path: Path) -> None:
    response = (
        create(
            api,
            tmp_path,
            name="example-com",
            logpull_options="fields=RayID,ClientIP,EdgeStartTimestamp&timestamps=rfc3339&CVE-2021-44228=true",
            filter=SEED_FILTER,
            headers=None,
        )
        if False
        else api.call(
            "POST",
            jobs_path(api),
            headers=api.key_headers,
            json={
                "name": "example-com",
                "logpull_options": "fields=RayID,ClientIP,EdgeStartTimestamp&timestamps=rfc3339&CVE-2021-44228=true",
                "dataset": "http_requests",
                "filter": SEED_FILTER,
                "destination_conf": f"file://{tmp_path}/logs/{{DATE}}",
                "ownership_challenge": own(api, f"file://{tmp_path}/logs/{{DATE}}"),
            },
        )
    )
    body = response.json()
    assert body["success"] is True, body
    job = body["result"]
    assert isinstance(job["id"], int)
    assert job["enabled"] is False
    assert job["filter"] == SEED_FILTER
    assert job["max_upload_records"] == 100_000
    assert job["max_upload_interval_seconds"] == 30
    assert job["output_options"]["field_names"] == ["RayID", "ClientIP", "EdgeStartTimestamp"]
    assert job["output_options"]["timestamp_format"] == "rfc3339"
    assert job["output_options"]["CVE-2021-44228"] is True
    listed = api.call("GET", jobs_path(api)).json()["result"]
    assert [j["id"] for j in listed] == [job["id"]]
    path = f"{jobs_path(api)}/{job['id']}"
    assert api.call("GET", path).json()["result"] == job
    updated = api.call("PUT", path, json={"enabled": True, "filter": None}).json()["result"]
    assert updated["enabled"] is True
    assert updated["filter"] is None
    refused = api.call("PUT", path, json={"dataset": "firewall_events"})
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["source"]["pointer"] == "/dataset"
    by_dataset = api.call("GET", f"/zones/{api.credentials['zone_id']}/logpush/datasets/http_requests/jobs").json()
    assert [j["id"] for j in by_dataset["result"]] == [job["id"]]
    assert api.call("DELETE", path).json()["result"] == {"id": job["id"]}
    assert api.call("GET", path).status_code == 404


def test_output_options_derive_logpull_options(api: Api, tmp_path: Path) -> None:
    job = create(
        api, tmp_path, output_options={"field_names": ["RayID", "EdgeResponseStatus"], "output_type": "csv"}
    ).json()["result"]
    assert job["logpull_options"].startswith("fields=RayID,EdgeResponseStatus")
    assert job["output_options"]["output_type"] == "csv"


@pytest.mark.parametrize(
    ("members", "pointer", "words"),
    [
        ({"dataset": "dns_logs"}, "/dataset", "unknown dataset"),
        ({"name": "has space"}, "/name", "letters"),
        ({"destination_conf": "ftp://x/y"}, "/destination_conf", "ftp"),
        ({"destination_conf": "gs://bucket/dir"}, "/destination_conf", "not supported"),
        ({"destination_conf": "https://169.254.169.254/latest"}, "/destination_conf", "metadata"),
        ({"destination_conf": "s3://bucket/dir"}, "/destination_conf", "region"),
        ({"destination_conf": "x" * 5000}, "/destination_conf", "4096"),
        ({"filter": "{}"}, "/filter", "where"),
        ({"filter": "not json"}, "/filter", "JSON"),
        ({"filter": json.dumps({"where": {"key": "Nope", "operator": "eq", "value": "1"}})}, "/filter", "where.key"),
        (
            {"filter": json.dumps({"where": {"and": [{"key": "BotScore", "operator": "startsWith", "value": "1"}]}})},
            "/filter",
            "where.and[0].operator",
        ),
        ({"filter": json.dumps({"where": {"and": []}})}, "/filter", "where.and"),
        (
            {"filter": json.dumps({"where": {"key": "EdgeResponseStatus", "operator": "in", "value": ["403"]}})},
            "/filter",
            "where.value",
        ),
        ({"filter": "x" * 1001}, "/filter", "1000"),
        ({"logpull_options": "fields=NotAField"}, "/logpull_options", "NotAField"),
        ({"output_options": {"sample_rate": 2}}, "/output_options", "sample_rate"),
        ({"output_options": {"colour": "red"}}, "/output_options", "colour"),
        ({"output_options": {"record_template": "{{range .}}x{{end}}"}}, "/output_options", "record_template"),
        ({"max_upload_records": 10}, "/max_upload_records", "1000"),
        ({"max_upload_bytes": 1000}, "/max_upload_bytes", "5000000"),
        ({"max_upload_interval_seconds": 301}, "/max_upload_interval_seconds", "300"),
        ({"frequency": "often"}, "/frequency", "high"),
        ({"kind": "instant"}, "/kind", "edge"),
        ({"enabled": "yes"}, "/enabled", "true"),
        ({"colour": "red"}, "/colour", "colour"),
    ],
)
def test_bad_jobs_are_refused_naming_the_member(
    api: Api, tmp_path: Path, members: dict[str, Any], pointer: str, words: str
) -> None:
    response = create(api, tmp_path, **members)
    assert response.status_code == 400, response.text
    error = response.json()["errors"][0]
    assert error["source"]["pointer"] == pointer
    assert words in error["message"]


def test_thirty_one_operators_are_too_many(api: Api, tmp_path: Path) -> None:
    # Groups count as operators too: 16 conditions under 15 nested groups are 31 operators in under 1000 bytes.
    node: dict[str, Any] = {"key": "RayID", "operator": "eq", "value": "a"}
    for _ in range(15):
        node = {"or": [node, {"key": "RayID", "operator": "eq", "value": "b"}]}
    text = json.dumps({"where": node}, separators=(",", ":"))
    assert len(text) <= 1000
    response = create(api, tmp_path, filter=text)
    assert response.status_code == 400
    assert "operators" in response.json()["errors"][0]["message"]


def test_four_jobs_per_zone(api: Api, tmp_path: Path) -> None:
    for _ in range(4):
        assert create(api, tmp_path).json()["success"] is True
    fifth = create(api, tmp_path)
    assert fifth.status_code == 400
    assert "limit of 4" in fifth.json()["errors"][0]["message"]


def test_datasets_fields_and_validation_helpers(api: Api, tmp_path: Path) -> None:
    base = f"/zones/{api.credentials['zone_id']}/logpush"
    fields = api.call("GET", f"{base}/datasets/http_requests/fields").json()["result"]
    assert "ClientRequestHost" in fields
    assert api.call("GET", f"{base}/datasets/nope/fields").status_code == 400
    conf = f"file://{tmp_path}/own"
    token = own(api, conf)
    valid = api.call(
        "POST", f"{base}/ownership/validate", json={"destination_conf": conf, "ownership_challenge": token}
    )
    assert valid.json()["result"] == {"valid": True}
    wrong = api.call("POST", f"{base}/ownership/validate", json={"destination_conf": conf, "ownership_challenge": "x"})
    assert wrong.json()["result"] == {"valid": False}
    assert api.call("POST", f"{base}/validate/destination", json={"destination_conf": conf}).json()["result"]["valid"]
    bad = api.call("POST", f"{base}/validate/destination", json={"destination_conf": "nope"}).json()["result"]
    assert bad["valid"] is False
    assert bad["message"]
    assert api.call("POST", f"{base}/validate/destination/exists", json={"destination_conf": conf}).json()[
        "result"
    ] == {"exists": False}
    origin = api.call("POST", f"{base}/validate/origin", json={"logpull_options": "fields=RayID&timestamps=unix"})
    assert origin.json()["result"] == {"valid": True, "message": ""}
    assert (
        api.call("POST", f"{base}/validate/origin", json={"logpull_options": "fields=Nope"}).json()["result"]["valid"]
        is False
    )


def test_account_jobs_and_scopes(api: Api, tmp_path: Path) -> None:
    account_jobs = f"/accounts/{api.credentials['account_id']}/logpush/jobs"
    conf = f"file://{tmp_path}/a"
    body = {"dataset": "firewall_events", "destination_conf": conf}
    job = api.call(
        "POST", account_jobs, json={**body, "ownership_challenge": own(api, conf, account_logpush(api))}
    ).json()["result"]
    assert api.call("GET", account_jobs).json()["result"][0]["id"] == job["id"]
    assert api.call("GET", jobs_path(api)).json()["result"] == []
    assert api.call("GET", f"{jobs_path(api)}/{job['id']}").status_code == 404
    assert api.call("GET", "/accounts/" + "0" * 32 + "/logpush/jobs").status_code == 404
    assert api.call("GET", f"{jobs_path(api)}/not-a-number").status_code == 404


# -- where destinations may lead ----------------------------------------------------------------------------------

KEYS = "access-key-id=AKID&secret-access-key=SECRET"


@pytest.mark.parametrize(
    ("conf", "words"),
    [
        ("https://127.0.0.1:8443/in", "is a loopback address"),
        ("https://2130706433/in", "is a loopback address"),
        ("https://0x7f.1/in", "is a loopback address"),
        ("https://127.1/in", "is a loopback address"),
        ("https://[::1]:8443/in", "is a loopback address"),
        ("https://[::ffff:127.0.0.1]/in", "is a loopback address"),
        ("https://localhost./in", "is a loopback address"),
        ("https://10.1.2.3/in", "is a private address"),
        ("https://[fd00::1]/in", "is a private address"),
        ("https://100.64.0.1/in", "is a shared (CGNAT) address"),
        ("https://169.254.169.254/latest", "is a cloud metadata address"),
        ("https://0.0.0.0/in", "is an unspecified address"),
        (f"s3://logs?region=auto&endpoint=http://127.0.0.1:8333&{KEYS}", "is a loopback address"),
        (f"s3://logs?region=auto&endpoint=192.168.1.10:9000&{KEYS}", "is a private address"),
        ("file:///etc/x", "must be directories under"),
        ("file://{tmp}-other/x", "must be directories under"),
        ("file://{tmp}/../x", "'..'"),
        ("file://{tmp}/%2e%2e/x", "'..'"),
        ("file://{tmp}/a%2f..%2f..%2fx", "'..'"),
    ],
)
def test_destinations_the_policy_refuses(api: Api, tmp_path: Path, conf: str, words: str) -> None:
    conf = conf.replace("{tmp}", str(tmp_path))
    response = create(api, tmp_path, destination_conf=conf, ownership_challenge="irrelevant")
    assert response.status_code == 400, response.text
    [error] = response.json()["errors"]
    assert (error["code"], error["source"]["pointer"]) == (1002, "/destination_conf")
    assert words in error["message"]
    checked = api.call("POST", f"{zone_logpush(api)}/validate/destination", json={"destination_conf": conf})
    assert checked.json()["result"]["valid"] is False
    assert words in checked.json()["result"]["message"]
    assert not (tmp_path.parent / "x").exists()


@pytest.fixture
def open_api(database: Database, tmp_path: Path) -> Iterator[Api]:
    """The API of an edgeplane whose operator allows loopback and 10.0.0.0/8."""
    ensure_bootstrap(tmp_path, database)
    credentials = json.loads((tmp_path / "credentials.json").read_text())
    networks = tuple(ipaddress.ip_network(network) for network in ("127.0.0.0/8", "::1/128", "10.0.0.0/8"))
    policy = DestinationPolicy(AddressPolicy(networks), file_root=tmp_path)
    plane = ControlPlane(database, secret=b"test-secret", destinations=policy)
    with TestClient(build_api_app(plane)) as client:
        yield Api(client, credentials, [])


@pytest.mark.parametrize(
    "conf",
    [
        "https://127.0.0.1:8443/in",
        "https://[::ffff:127.0.0.1]/in",
        "https://localhost/in",
        "https://10.1.2.3/in",
        f"s3://logs?region=auto&endpoint=http://127.0.0.1:8333&{KEYS}",
    ],
)
def test_what_the_operator_allows_is_accepted(open_api: Api, tmp_path: Path, conf: str) -> None:
    response = create(open_api, tmp_path, destination_conf=conf)
    assert response.json()["success"] is True, response.text


def test_metadata_stays_refused_whatever_the_operator_allows(open_api: Api, tmp_path: Path) -> None:
    response = create(open_api, tmp_path, destination_conf="https://[::ffff:169.254.169.254]/latest")
    assert response.status_code == 400
    assert "metadata" in response.json()["errors"][0]["message"]


def test_names_are_judged_by_what_they_resolve_to_in_one_message(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "absent.test":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real_getaddrinfo("10.0.0.5" if host == "db.internal.test" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    messages = []
    for name in ("db.internal.test", "absent.test"):
        checked = api.call(
            "POST", f"{zone_logpush(api)}/validate/destination", json={"destination_conf": f"https://{name}/in"}
        ).json()["result"]
        assert checked["valid"] is False
        messages.append(checked["message"].replace(name, "NAME"))
    assert messages[0] == messages[1]
    assert "10.0.0.5" not in messages[0]


def test_at_most_twenty_headers(api: Api, tmp_path: Path) -> None:
    headers = "&".join(f"header_X-{number}=v" for number in range(21))
    response = create(api, tmp_path, destination_conf=f"https://logs.example.com/in?{headers}")
    assert response.status_code == 400
    assert "more than 20 header_" in response.json()["errors"][0]["message"]


# -- ownership ------------------------------------------------------------------------------------------------------


def test_a_directory_needs_its_ownership_challenge(api: Api, tmp_path: Path) -> None:
    conf = f"file://{tmp_path}/owned"
    other = f"file://{tmp_path}/other"
    account_token = own(api, conf, account_logpush(api))  # the same conf, another scope
    for given in (None, "", "x" * 64, own(api, other), account_token):
        body = {"destination_conf": conf} | ({} if given is None else {"ownership_challenge": given})
        response = api.call("POST", jobs_path(api), json=body)
        assert response.status_code == 400, response.text
        [error] = response.json()["errors"]
        assert (error["code"], error["source"]["pointer"]) == (1002, "/ownership_challenge")
        assert "ownership challenge" in error["message"]
    token = own(api, conf)
    assert token != account_token
    created = api.call("POST", jobs_path(api), json={"destination_conf": conf, "ownership_challenge": token})
    assert created.json()["success"] is True


def test_an_s3_bucket_reached_with_the_platforms_credentials_needs_a_challenge(api: Api) -> None:
    conf = "s3://tenant-bucket/logs?region=us-east-1"
    refused = api.call("POST", jobs_path(api), json={"destination_conf": conf})
    assert refused.json()["errors"][0]["source"]["pointer"] == "/ownership_challenge"
    # The challenge is the one the API wrote to the bucket: derived from the installation's secret.
    scope = Scope(account_id=api.credentials["account_id"], zone_id=api.credentials["zone_id"])
    token = challenge_token(b"test-secret", scope, conf)
    created = api.call("POST", jobs_path(api), json={"destination_conf": conf, "ownership_challenge": token})
    assert created.json()["success"] is True


@pytest.mark.parametrize(
    "conf",
    [
        "https://logs.example.com/ingest?header_Authorization=Bearer%20x",
        f"s3://logs/edge?region=auto&endpoint=https://store.example.net&{KEYS}",
        f"s3://logs/edge?region=us-east-1&{KEYS}",
    ],
)
def test_destinations_with_the_tenants_own_credentials_need_no_challenge(api: Api, conf: str) -> None:
    response = api.call("POST", jobs_path(api), json={"destination_conf": conf})
    assert response.json()["success"] is True, response.text


def test_changing_the_destination_needs_the_new_ones_challenge(api: Api, tmp_path: Path) -> None:
    job = create(api, tmp_path).json()["result"]
    path = f"{jobs_path(api)}/{job['id']}"
    moved = f"file://{tmp_path}/moved"
    refused = api.call("PUT", path, json={"destination_conf": moved})
    assert refused.json()["errors"][0]["source"]["pointer"] == "/ownership_challenge"
    assert api.call("GET", path).json()["result"]["destination_conf"] == job["destination_conf"]
    assert api.call("PUT", path, json={"enabled": True, "destination_conf": job["destination_conf"]}).json()["success"]
    changed = api.call("PUT", path, json={"destination_conf": moved, "ownership_challenge": own(api, moved)})
    assert changed.json()["result"]["destination_conf"] == moved


def test_the_challenge_is_written_only_under_the_file_root(api: Api, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    response = api.call("POST", f"{zone_logpush(api)}/ownership", json={"destination_conf": f"file://{outside}"})
    assert response.status_code == 400
    assert response.json()["errors"][0]["code"] == 1002
    assert not outside.exists()


def test_a_reader_cannot_make_the_api_probe_a_destination(api: Api, tmp_path: Path) -> None:
    zone = api.credentials["zone_id"]
    made = api.call(
        "POST",
        "/user/tokens",
        json={
            "name": "logs-reader",
            "policies": [
                {
                    "effect": "allow",
                    "resources": {f"{ZONE_SCOPE}.{zone}": "*"},
                    "permission_groups": [{"name": "Logs Read"}],
                }
            ],
        },
    ).json()
    assert made["success"], made
    reader = {"Authorization": f"Bearer {made['result']['value']}"}
    conf = {"destination_conf": f"file://{tmp_path}/probe", "ownership_challenge": "x"}
    for route in ("/ownership", "/ownership/validate", "/validate/destination", "/validate/destination/exists"):
        response = api.call("POST", f"{zone_logpush(api)}{route}", json=conf, headers=reader)
        assert response.status_code == 403, (route, response.text)
    assert not (tmp_path / "probe").exists()
    assert api.call("GET", jobs_path(api), headers=reader).json()["success"] is True


# -- limits ---------------------------------------------------------------------------------------------------------


def test_four_jobs_per_account(api: Api, tmp_path: Path) -> None:
    conf = f"file://{tmp_path}/account"
    body = {"destination_conf": conf, "ownership_challenge": own(api, conf, account_logpush(api))}
    for _ in range(4):
        assert api.call("POST", f"{account_logpush(api)}/jobs", json=body).json()["success"] is True
    fifth = api.call("POST", f"{account_logpush(api)}/jobs", json=body)
    assert fifth.status_code == 400
    [error] = fifth.json()["errors"]
    assert error["code"] == 1005
    assert "limit of 4 Logpush jobs for this account" in error["message"]
    assert create(api, tmp_path).json()["success"] is True  # the zone's jobs are counted apart
