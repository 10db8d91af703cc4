"""Logpush through the official ``cloudflare`` SDK over SQLite and PostgreSQL: the output options the SDK offers
(``rfc3339ms``/``rfc3339ns`` timestamps, ``merge_subrequests``) are kept and written into what delivery pushes, and
job ids only grow, even when the newest job is deleted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cloudflare
import pytest
from cloudflare import Cloudflare

from edgeplane.configuration.snapshot import read_delivery_snapshot
from edgeplane.logs.delivery import plan_job
from edgeplane.logs.record_columns import decode_block, encode_rows
from edgeplane.store.database import Database
from tests.api.conftest import Api
from tests.api.sdk_client import sdk_for
from tests.support.record_encoder import record_encoder

START = 1_795_219_200_123_456_789  # 2026-11-21T00:00:00.123456789Z
RECORD = {"RayID": "8f1e2d3c4b5a6978", "EdgeStartTimestamp": START, "ZoneName": "localhost"}


@pytest.fixture
def cf(api: Api) -> Cloudflare:
    return sdk_for(api)


def owned_destination(
    cf: Cloudflare, tmp_path: Path, *, zone_id: str | None = None, account_id: str | None = None
) -> dict[str, str]:
    """A directory destination under the file root and its ownership challenge, as its owner reads it."""
    conf = f"file://{tmp_path}/pushed/{{DATE}}"
    if zone_id is not None:
        challenge = cf.logpush.ownership.create(zone_id=zone_id, destination_conf=conf)
    else:
        challenge = cf.logpush.ownership.create(account_id=account_id, destination_conf=conf)
    assert challenge is not None
    return {"destination_conf": conf, "ownership_challenge": Path(challenge.filename).read_text().strip()}


def pushed_lines(database: Database, job_id: int) -> tuple[list[bytes], list[bytes]]:
    """What delivery writes for ``RECORD`` under the stored job: per record, and a block of columns at a time."""
    snapshot = read_delivery_snapshot(database)
    job = next(job for job in snapshot.logpush_jobs if job.id == job_id)
    plan = plan_job(job, snapshot)
    per_record = [record_encoder(plan.formatter).encode(RECORD)]
    assert plan.encode_columns is not None
    encoded = encode_rows(plan.dataset.name, [RECORD])
    assert encoded is not None
    block = decode_block(bytes(encoded))
    return per_record, plan.encode_columns(block)


@pytest.mark.parametrize(
    ("timestamp_format", "written"),
    [
        ("rfc3339ms", b'{"EdgeStartTimestamp":"2026-11-21T00:00:00.123Z","RayID":"8f1e2d3c4b5a6978"}\n'),
        ("rfc3339ns", b'{"EdgeStartTimestamp":"2026-11-21T00:00:00.123456789Z","RayID":"8f1e2d3c4b5a6978"}\n'),
        ("rfc3339", b'{"EdgeStartTimestamp":"2026-11-21T00:00:00Z","RayID":"8f1e2d3c4b5a6978"}\n'),
    ],
)
def test_timestamp_formats_reach_the_pushed_output(
    cf: Cloudflare, api: Api, database: Database, tmp_path: Path, timestamp_format: str, written: bytes
) -> None:
    zone_id = api.credentials["zone_id"]
    job = cf.logpush.jobs.create(
        zone_id=zone_id,
        dataset="http_requests",
        output_options={
            "field_names": ["EdgeStartTimestamp", "RayID"],
            "timestamp_format": timestamp_format,  # type: ignore[typeddict-item]
            "merge_subrequests": True,
        },
        **owned_destination(cf, tmp_path, zone_id=zone_id),
    )
    assert job is not None
    assert job.output_options is not None
    assert job.output_options.timestamp_format == timestamp_format
    assert job.output_options.merge_subrequests is True
    assert job.logpull_options == f"fields=EdgeStartTimestamp,RayID&timestamps={timestamp_format}"
    fetched = cf.logpush.jobs.get(job.id, zone_id=zone_id)  # type: ignore[arg-type]
    assert fetched is not None
    assert fetched.output_options is not None
    assert fetched.output_options.timestamp_format == timestamp_format
    assert pushed_lines(database, job.id) == ([written], [written])  # type: ignore[arg-type]


def test_legacy_logpull_options_take_the_new_formats(cf: Cloudflare, api: Api, tmp_path: Path) -> None:
    zone_id = api.credentials["zone_id"]
    job = cf.logpush.jobs.create(
        zone_id=zone_id,
        dataset="http_requests",
        logpull_options="fields=RayID,EdgeStartTimestamp&timestamps=rfc3339ns",
        **owned_destination(cf, tmp_path, zone_id=zone_id),
    )
    assert job is not None
    assert job.output_options is not None
    assert job.output_options.timestamp_format == "rfc3339ns"
    valid = cf.logpush.validate.origin(zone_id=zone_id, logpull_options="fields=RayID&timestamps=rfc3339ms")
    assert valid is not None
    assert valid.valid is True


@pytest.mark.parametrize(
    ("scope", "dataset", "options", "pointer"),
    [
        ("zone", "firewall_events", {"merge_subrequests": True}, "/output_options"),
        ("account", "http_requests", {"merge_subrequests": True}, "/output_options"),
        ("zone", "http_requests", {"merge_subrequests": "yes"}, "/output_options"),
        ("zone", "http_requests", {"timestamp_format": "rfc3339us"}, "/output_options"),
    ],
)
def test_output_options_the_sdk_offers_are_refused_where_they_do_not_apply(
    cf: Cloudflare, api: Api, tmp_path: Path, scope: str, dataset: str, options: dict[str, Any], pointer: str
) -> None:
    where = (
        {"zone_id": api.credentials["zone_id"]} if scope == "zone" else {"account_id": api.credentials["account_id"]}
    )
    with pytest.raises(cloudflare.BadRequestError) as refused:
        cf.logpush.jobs.create(
            dataset=dataset,
            output_options=options,  # type: ignore[arg-type]
            **owned_destination(cf, tmp_path, **where),
            **where,  # type: ignore[arg-type]
        )
    error = refused.value.body["errors"][0]  # type: ignore[index]
    assert (error["code"], error["source"]["pointer"]) == (1003, pointer)


def test_job_ids_only_grow(cf: Cloudflare, api: Api, tmp_path: Path) -> None:
    zone_id = api.credentials["zone_id"]
    destination = owned_destination(cf, tmp_path, zone_id=zone_id)
    ids = []
    for _ in range(3):
        job = cf.logpush.jobs.create(zone_id=zone_id, dataset="http_requests", **destination)
        assert job is not None
        assert job.id is not None
        ids.append(job.id)
        cf.logpush.jobs.delete(job.id, zone_id=zone_id)  # the newest job: the id a reused sequence would give again
    account_job = cf.logpush.jobs.create(
        account_id=api.credentials["account_id"],
        dataset="http_requests",
        **owned_destination(cf, tmp_path, account_id=api.credentials["account_id"]),
    )
    assert account_job is not None
    assert account_job.id is not None
    ids.append(account_job.id)
    assert ids == sorted(set(ids))
    assert [job.id for job in cf.logpush.jobs.list(zone_id=zone_id) if job is not None] == []
