"""Filters (``/zones/{zone_id}/filters``) through the official ``cloudflare`` SDK over SQLite and PostgreSQL: the
full lifecycle, firewall rules that reference a filter by id and follow its changes, and a filter in use that cannot
be deleted."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import cloudflare
import pytest
from cloudflare import Cloudflare

from tests.api.conftest import Api
from tests.api.sdk_client import sdk_for


@pytest.fixture
def cf(api: Api) -> Iterator[Cloudflare]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the SDK marks filters and firewall rules deprecated
        yield sdk_for(api)


def test_filter_lifecycle(cf: Cloudflare, api: Api) -> None:
    zone_id = api.credentials["zone_id"]
    created = cf.filters.create(
        zone_id=zone_id, body=[{"expression": 'http.host eq "a.localhost"', "description": "a", "ref": "A1"}]
    ).result
    assert len(created) == 1
    made = created[0]
    assert (made.expression, made.description, made.ref, made.paused) == (
        'http.host eq "a.localhost"',
        "a",
        "A1",
        False,
    )
    assert [item.id for item in cf.filters.list(zone_id=zone_id)] == [made.id]
    assert [item.id for item in cf.filters.list(zone_id=zone_id, description="A")] == [made.id]
    assert list(cf.filters.list(zone_id=zone_id, paused=True)) == []
    got = cf.filters.get(made.id, zone_id=zone_id)  # type: ignore[arg-type]
    assert got is not None
    assert got.expression == 'http.host eq "a.localhost"'
    updated = cf.filters.update(made.id, zone_id=zone_id, expression='http.host eq "b.localhost"', paused=True)  # type: ignore[arg-type]
    assert updated is not None
    assert (updated.expression, updated.paused) == ('http.host eq "b.localhost"', True)
    deleted = cf.filters.delete(made.id, zone_id=zone_id)  # type: ignore[arg-type]
    assert deleted is not None
    with pytest.raises(cloudflare.NotFoundError):
        cf.filters.get(made.id, zone_id=zone_id)  # type: ignore[arg-type]


def test_bad_filters_are_refused_with_a_pointer(cf: Cloudflare, api: Api) -> None:
    zone_id = api.credentials["zone_id"]
    with pytest.raises(cloudflare.BadRequestError) as refused:
        cf.filters.create(zone_id=zone_id, body=[{"expression": 'http.host eq "a"'}, {"expression": "http.host eq"}])
    error = refused.value.body["errors"][0]  # type: ignore[index]
    assert (error["code"], error["source"]["pointer"]) == (10014, "/1/expression")
    assert list(cf.filters.list(zone_id=zone_id)) == []  # nothing of the request was kept


def test_firewall_rules_reference_filters_and_follow_them(cf: Cloudflare, api: Api) -> None:
    zone_id = api.credentials["zone_id"]
    made = cf.filters.create(zone_id=zone_id, body=[{"expression": 'http.request.uri.path eq "/x"'}]).result[0]
    assert made.id is not None
    rule = cf.firewall.rules.create(zone_id=zone_id, action="block", filter={"id": made.id}).result[0]
    assert rule.filter is not None
    assert rule.filter.expression == 'http.request.uri.path eq "/x"'  # type: ignore[union-attr]
    cf.filters.update(made.id, zone_id=zone_id, expression='http.request.uri.path eq "/y"')  # type: ignore[arg-type]
    followed = cf.firewall.rules.get(rule.id, zone_id=zone_id)  # type: ignore[arg-type]
    assert followed.filter is not None
    assert followed.filter.expression == 'http.request.uri.path eq "/y"'  # type: ignore[union-attr]
    with pytest.raises(cloudflare.BadRequestError) as in_use:
        cf.filters.delete(made.id, zone_id=zone_id)  # type: ignore[arg-type]
    assert in_use.value.body["errors"][0]["code"] == 10016  # type: ignore[index]
    with pytest.raises(cloudflare.BadRequestError) as unknown:
        cf.firewall.rules.create(zone_id=zone_id, action="block", filter={"id": "0" * 32})
    assert unknown.value.body["errors"][0]["source"]["pointer"] == "/filter/id"  # type: ignore[index]
    inline = cf.firewall.rules.create(zone_id=zone_id, action="log", filter={"expression": 'http.host eq "z"'}).result
    assert inline[0].filter is not None
    inline_filter = inline[0].filter.id  # type: ignore[union-attr]
    assert cf.filters.get(inline_filter, zone_id=zone_id) is not None  # type: ignore[arg-type]
    cf.firewall.rules.delete(rule.id, zone_id=zone_id)  # type: ignore[arg-type]
    assert cf.filters.delete(made.id, zone_id=zone_id) is not None  # type: ignore[arg-type]


def test_bulk_update_and_delete(cf: Cloudflare, api: Api) -> None:
    zone_id = api.credentials["zone_id"]
    made = cf.filters.create(
        zone_id=zone_id, body=[{"expression": 'http.host eq "a"'}, {"expression": 'http.host eq "b"'}]
    ).result
    ids = [item.id for item in made]
    path = f"/zones/{zone_id}/filters"
    answer = api.call("PUT", path, json=[{"id": ids[0], "expression": 'http.host eq "c"'}]).json()
    assert answer["result"][0]["expression"] == 'http.host eq "c"'
    cf.filters.bulk_delete(zone_id=zone_id, id=ids)  # type: ignore[arg-type]
    assert list(cf.filters.list(zone_id=zone_id)) == []
