"""Delivery selects and writes the records its oracles would: the per-record predicate
(``tests.support.filter_compiler``) and encoder (``tests.support.record_encoder``) applied to each record, with zones,
filters, sampling and every output type, whatever form the records were given in (dictionaries, bytes, records that
do not fit the schema)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from edgeplane.configuration.logpush_jobs import LogpushJobDefinition
from edgeplane.configuration.snapshot import DeliverySnapshot, ZoneRoute
from edgeplane.logs.delivery import Batch, JobDelivery, plan_job
from edgeplane.logs.log_store import SegmentedLogStore
from tests.support.delivery_oracle import delivered_lines

HTTP = "http_requests"
ZONES = {"z1": ZoneRoute("z1", "example.com", "acct", "free"), "z2": ZoneRoute("z2", "example.org", "other", "free")}


def records(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    found = []
    for index in range(count):
        record: dict[str, Any] = {
            "RayID": f"{rng.getrandbits(64):016x}",
            "ZoneName": rng.choice(["example.com", "example.org", "example.net"]),
            "ClientRequestMethod": rng.choice(["POST", "GET"]),
            "ClientRequestPath": rng.choice(["/v1/mainnet", "/", '/q"uote\\']),
            "EdgeResponseStatus": rng.choice([200, 404, 502]),
            "EdgeStartTimestamp": 1_795_219_200_000_000_000 + index * 1_000_003,
        }
        if rng.random() < 0.7:
            record["ClientCountry"] = rng.choice(["us", "de", "jp"])
        found.append(record)
    return found


def job(**members: Any) -> LogpushJobDefinition:
    return LogpushJobDefinition(
        **{
            "id": 7,
            "dataset": HTTP,
            "account_id": "acct",
            "zone_id": None,
            "filter": None,
            "output_options": None,
            "destination_conf": "file:///tmp/unused",
            "max_upload_records": 1_000_000,
            **members,
        }
    )


def delivered(directory: Path, job_members: dict[str, Any]) -> list[bytes]:
    plan = plan_job(job(**job_members), DeliverySnapshot(version=1, zones=ZONES))
    with SegmentedLogStore(directory, writable=False) as store:
        delivery = JobDelivery(plan, [store], destination=None, status=None)  # type: ignore[arg-type]
        batch = Batch(positions={0: 0})
        while delivery._read_into(batch):
            pass
    assert batch.positions[0] == 400
    return batch.encoded


def expected(source: list[dict[str, Any]], job_members: dict[str, Any]) -> list[bytes]:
    definition = job(**job_members)
    plan = plan_job(definition, DeliverySnapshot(version=1, zones=ZONES))
    return delivered_lines(definition, plan, [orjson.loads(orjson.dumps(record)) for record in source])


FILTER = orjson.dumps(  # as jobs hold it: the filter's JSON text
    {
        "where": {
            "or": [
                {"key": "ClientCountry", "operator": "!in", "value": ["us"]},
                {"key": "ClientRequestPath", "operator": "startsWith", "value": "/v1/"},
            ]
        }
    }
).decode()


@pytest.mark.parametrize(
    "job_members",
    [
        {},
        {"zone_id": "z1"},
        {"filter": FILTER},
        {"filter": FILTER, "output_options": {"sample_rate": 0.5, "field_names": ["RayID", "ClientCountry"]}},
        {"output_options": {"timestamp_format": "rfc3339", "field_names": ["EdgeStartTimestamp", "ClientRequestPath"]}},
        {"filter": FILTER, "output_options": {"output_type": "csv", "field_names": ["RayID", "ClientRequestPath"]}},
        {"output_options": {"record_template": "{{.RayID}} {{.ClientCountry}}", "field_names": ["RayID"]}},
    ],
    ids=["all", "zone", "filter", "sampled", "rfc3339", "csv", "template"],
)
def test_columns_and_lines_deliver_the_same_bytes(tmp_path: Path, job_members: dict[str, Any]) -> None:
    source = records(400, seed=5)
    with SegmentedLogStore(tmp_path) as store:
        store.append_rows(HTTP, source[:150])
        store.flush()
        store.append(HTTP, [orjson.dumps(record) for record in source[150:200]])  # lines between blocks
        store.append_rows(HTTP, source[200:])
    got = delivered(tmp_path, job_members)
    assert got == expected(source, job_members)
    assert got  # every case keeps something


def odd(record: dict[str, Any], index: int) -> dict[str, Any]:
    """``record`` with a value its field's type does not hold, or a key the dataset does not have."""
    changed = dict(record)
    match index % 4:
        case 0:
            changed["EdgeResponseStatus"] = "oops"
        case 1:
            changed["ClientRequestPath"] = 404
        case 2:
            changed["NotAField"] = {"nested": [1, 2]}
        case _:
            changed["ClientCountry"] = ["us"]
    return changed


@pytest.mark.parametrize(
    "job_members",
    [
        {},
        {"filter": FILTER},
        {"filter": orjson.dumps({"where": {"key": "EdgeResponseStatus", "operator": "geq", "value": 300}}).decode()},
        {"output_options": {"output_type": "csv", "field_names": ["RayID", "ClientRequestPath", "ClientCountry"]}},
    ],
    ids=["all", "filter", "numbers", "csv"],
)
def test_records_that_do_not_fit_the_schema_are_delivered_as_the_oracles_would(
    tmp_path: Path, job_members: dict[str, Any]
) -> None:
    source = [odd(record, index) if index % 3 == 0 else record for index, record in enumerate(records(400, seed=9))]
    with SegmentedLogStore(tmp_path) as store:
        store.append_rows(HTTP, source[:100])
        store.append(HTTP, [orjson.dumps(record) for record in source[100:250]])
        store.append_rows(HTTP, source[250:])
    got = delivered(tmp_path, job_members)
    assert got == expected(source, job_members)
    assert got
