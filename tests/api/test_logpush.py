"""Logpush jobs through the v4 API (seed 001): lifecycle, every field checked, errors that name what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import Api


def jobs_path(api: Api) -> str:
    return f"/zones/{api.credentials['zone_id']}/logpush/jobs"


def create(api: Api, tmp_path: Path, **members: Any) -> Any:
    body = {"destination_conf": f"file://{tmp_path}/logs/{{DATE}}", "dataset": "http_requests", **members}
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
        ({"destination_conf": "https://169.254.169.254/latest"}, "/destination_conf", ""),
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
    challenge = api.call("POST", f"{base}/ownership", json={"destination_conf": conf}).json()["result"]
    token = Path(challenge["filename"]).read_text().strip()
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
    job = api.call(
        "POST", account_jobs, json={"dataset": "firewall_events", "destination_conf": f"file://{tmp_path}/a"}
    ).json()["result"]
    assert api.call("GET", account_jobs).json()["result"][0]["id"] == job["id"]
    assert api.call("GET", jobs_path(api)).json()["result"] == []
    assert api.call("GET", f"{jobs_path(api)}/{job['id']}").status_code == 404
    assert api.call("GET", "/accounts/" + "0" * 32 + "/logpush/jobs").status_code == 404
    assert api.call("GET", f"{jobs_path(api)}/not-a-number").status_code == 404
