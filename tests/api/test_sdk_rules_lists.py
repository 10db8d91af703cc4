"""Account lists (``/accounts/{account_id}/rules/lists``) through the official ``cloudflare`` SDK over SQLite and
PostgreSQL: the lists' lifecycle, items of every kind written through bulk operations that are complete when the
SDK first asks, cursor pages, the coded refusals, what a token needs, and expressions that name a list."""

from __future__ import annotations

from typing import Any

import cloudflare
import pytest
from cloudflare import Cloudflare

from tests.api.conftest import Api
from tests.api.sdk_client import sdk_for

LISTS_READ = "4f1071168de8466e9808de86febfc516"
LISTS_WRITE = "2edbf20661fd4661b0fe10e9e12f485c"


@pytest.fixture
def cf(api: Api) -> Cloudflare:
    return sdk_for(api)


def _error(refused: pytest.ExceptionInfo[cloudflare.APIStatusError]) -> dict[str, Any]:
    body = refused.value.body
    assert isinstance(body, dict)
    error: dict[str, Any] = body["errors"][0]
    return error


def _completed(cf: Cloudflare, account_id: str, operation_id: str) -> None:
    operation = cf.rules.lists.bulk_operations.get(operation_id, account_id=account_id)
    assert operation.status == "completed"
    assert operation.completed


def test_list_lifecycle(cf: Cloudflare, api: Api) -> None:
    account_id = api.credentials["account_id"]
    made = cf.rules.lists.create(account_id=account_id, kind="ip", name="blocked_peers", description="bad peers")
    assert made is not None
    assert (made.name, made.kind, made.description, made.num_items, made.num_referencing_filters) == (
        "blocked_peers",
        "ip",
        "bad peers",
        0,
        0,
    )
    assert len(made.id) == 32
    other = cf.rules.lists.create(account_id=account_id, kind="asn", name="allowed_asns")
    assert other is not None
    assert [found.name for found in cf.rules.lists.list(account_id=account_id)] == ["allowed_asns", "blocked_peers"]
    got = cf.rules.lists.get(made.id, account_id=account_id)
    assert got is not None
    assert got.created_on == made.created_on
    updated = cf.rules.lists.update(made.id, account_id=account_id, description="peers that misbehaved")
    assert updated is not None
    assert (updated.name, updated.description) == ("blocked_peers", "peers that misbehaved")
    deleted = cf.rules.lists.delete(made.id, account_id=account_id)
    assert deleted is not None
    assert deleted.id == made.id
    with pytest.raises(cloudflare.NotFoundError):
        cf.rules.lists.get(made.id, account_id=account_id)
    assert [found.name for found in cf.rules.lists.list(account_id=account_id)] == ["allowed_asns"]


def test_ip_items_through_bulk_operations(cf: Cloudflare, api: Api) -> None:
    account_id = api.credentials["account_id"]
    made = cf.rules.lists.create(account_id=account_id, kind="ip", name="peers")
    assert made is not None
    added = cf.rules.lists.items.create(
        made.id,
        account_id=account_id,
        body=[
            {"ip": "192.0.2.7", "comment": "scanner"},
            {"ip": "198.51.100.0/24"},
            {"ip": "2001:DB8::1"},
            {"ip": "10.0.0.1/32"},
        ],
    )
    _completed(cf, account_id, added.operation_id)
    items = list(cf.rules.lists.items.list(made.id, account_id=account_id))
    shown = {item.ip: item for item in items}  # type: ignore[union-attr]
    assert sorted(shown) == ["10.0.0.1", "192.0.2.7", "198.51.100.0/24", "2001:db8::1"]  # canonical forms
    assert shown["192.0.2.7"].comment == "scanner"
    got = cf.rules.lists.items.get(shown["192.0.2.7"].id, account_id=account_id, list_id=made.id)
    assert got.ip == "192.0.2.7"  # type: ignore[union-attr]
    listed = cf.rules.lists.get(made.id, account_id=account_id)
    assert listed is not None
    assert listed.num_items == 4

    # Adding an address the list holds changes its comment; it stays one item with the same id.
    again = cf.rules.lists.items.create(
        made.id, account_id=account_id, body=[{"ip": "192.0.2.7", "comment": "known scanner"}]
    )
    _completed(cf, account_id, again.operation_id)
    same = cf.rules.lists.items.get(shown["192.0.2.7"].id, account_id=account_id, list_id=made.id)
    assert same.comment == "known scanner"

    replaced = cf.rules.lists.items.update(
        made.id, account_id=account_id, body=[{"ip": "192.0.2.7"}, {"ip": "203.0.113.0/24"}]
    )
    _completed(cf, account_id, replaced.operation_id)
    after = {item.ip: item.id for item in cf.rules.lists.items.list(made.id, account_id=account_id)}  # type: ignore[union-attr]
    assert sorted(after) == ["192.0.2.7", "203.0.113.0/24"]
    assert after["192.0.2.7"] == shown["192.0.2.7"].id  # an item the replacement keeps keeps its id

    removed = cf.rules.lists.items.delete(made.id, account_id=account_id, items=[{"id": after["192.0.2.7"]}])
    _completed(cf, account_id, removed.operation_id)
    assert [item.ip for item in cf.rules.lists.items.list(made.id, account_id=account_id)] == ["203.0.113.0/24"]  # type: ignore[union-attr]
    with pytest.raises(cloudflare.NotFoundError):
        cf.rules.lists.items.get(after["192.0.2.7"], account_id=account_id, list_id=made.id)


@pytest.mark.parametrize(
    ("kind", "item", "shown"),
    [
        ("asn", {"asn": 64496, "comment": "docs"}, {"asn": 64496, "comment": "docs"}),
        (
            "hostname",
            {"hostname": {"url_hostname": "*.RPC.example.com", "exclude_exact_hostname": True}},
            {"hostname": {"url_hostname": "*.rpc.example.com", "exclude_exact_hostname": True}},
        ),
        (
            "redirect",
            {"redirect": {"source_url": "old.example.com/rpc", "target_url": "https://new.example.com/rpc"}},
            {
                "redirect": {
                    "source_url": "old.example.com/rpc",
                    "target_url": "https://new.example.com/rpc",
                    "status_code": 301,
                    "include_subdomains": False,
                    "preserve_path_suffix": False,
                    "preserve_query_string": False,
                    "subpath_matching": False,
                }
            },
        ),
    ],
)
def test_items_of_each_kind(cf: Cloudflare, api: Api, kind: str, item: dict[str, Any], shown: dict[str, Any]) -> None:
    account_id = api.credentials["account_id"]
    made = cf.rules.lists.create(account_id=account_id, kind=kind, name=f"{kind}_list")  # type: ignore[arg-type]
    assert made is not None
    operation = cf.rules.lists.items.create(made.id, account_id=account_id, body=[item])  # type: ignore[list-item]
    _completed(cf, account_id, operation.operation_id)
    listed = list(cf.rules.lists.items.list(made.id, account_id=account_id))
    assert len(listed) == 1
    document = listed[0].model_dump(exclude_none=True)
    assert {key: value for key, value in document.items() if key in shown} == shown


def test_items_come_in_cursor_pages_and_can_be_searched(cf: Cloudflare, api: Api) -> None:
    account_id = api.credentials["account_id"]
    made = cf.rules.lists.create(account_id=account_id, kind="ip", name="many")
    assert made is not None
    addresses = [f"10.0.{third}.{fourth}" for third in range(3) for fourth in range(1, 21)]
    cf.rules.lists.items.create(made.id, account_id=account_id, body=[{"ip": ip} for ip in addresses])
    first = cf.rules.lists.items.list(made.id, account_id=account_id, per_page=25)
    assert len(first.result) == 25
    seen = [item.ip for item in cf.rules.lists.items.list(made.id, account_id=account_id, per_page=25)]  # type: ignore[union-attr]
    assert sorted(seen) == sorted(addresses)  # the SDK followed the cursors to the last page
    assert len(set(seen)) == 60
    found = [item.ip for item in cf.rules.lists.items.list(made.id, account_id=account_id, search="10.0.2.1")]  # type: ignore[union-attr]
    assert sorted(found) == sorted(["10.0.2.1", *[f"10.0.2.{n}" for n in range(10, 20)]])
    refused = api.call("GET", f"/accounts/{account_id}/rules/lists/{made.id}/items?cursor=%25%25").json()
    assert (refused["errors"][0]["code"], refused["errors"][0]["source"]["pointer"]) == (1001, "/cursor")


@pytest.mark.parametrize("name", ["Blocked", "blocked-peers", "x" * 51, "", "peers!"])
def test_list_names_are_checked(cf: Cloudflare, api: Api, name: str) -> None:
    with pytest.raises(cloudflare.BadRequestError) as refused:
        cf.rules.lists.create(account_id=api.credentials["account_id"], kind="ip", name=name)
    assert (_error(refused)["code"], _error(refused)["source"]["pointer"]) == (10301, "/name")


def test_a_list_name_is_taken_once_per_account(cf: Cloudflare, api: Api) -> None:
    account_id = api.credentials["account_id"]
    cf.rules.lists.create(account_id=account_id, kind="ip", name="peers")
    with pytest.raises(cloudflare.ConflictError) as refused:
        cf.rules.lists.create(account_id=account_id, kind="asn", name="peers")
    assert _error(refused)["code"] == 10302
    with pytest.raises(cloudflare.BadRequestError) as bad_kind:
        cf.rules.lists.create(account_id=account_id, kind="country", name="countries")  # type: ignore[arg-type]
    assert _error(bad_kind)["source"]["pointer"] == "/kind"


@pytest.mark.parametrize(
    ("kind", "items", "code", "pointer"),
    [
        ("ip", [{"ip": "192.0.2.1"}, {"asn": 13335}], 10304, "/1/asn"),
        ("asn", [{"hostname": {"url_hostname": "a.example"}}], 10304, "/0/hostname"),
        ("ip", [{"ip": "192.0.2.300"}], 10303, "/0/ip"),
        ("ip", [{"ip": "192.0.2.1/24"}], 10303, "/0/ip"),  # host bits set
        ("ip", [{"ip": "10.0.0.0/4"}], 10303, "/0/ip"),  # a prefix wider than /8
        ("asn", [{"asn": -1}], 10303, "/0/asn"),
        ("asn", [{"asn": 2**32}], 10303, "/0/asn"),
        ("hostname", [{"hostname": {"url_hostname": "bad host"}}], 10303, "/0/hostname/url_hostname"),
        (
            "redirect",
            [{"redirect": {"source_url": "a.example/x", "target_url": "/relative"}}],
            10303,
            "/0/redirect/target_url",
        ),
        (
            "redirect",
            [{"redirect": {"source_url": "a.example/x", "target_url": "https://b.example", "status_code": 303}}],
            10303,
            "/0/redirect/status_code",
        ),
        ("ip", [{"ip": "192.0.2.1", "note": "x"}], 1001, "/0/note"),
        ("ip", [{"ip": "192.0.2.1", "comment": 5}], 1001, "/0/comment"),
        ("ip", ["192.0.2.1"], 1001, "/0"),
        ("ip", [{"comment": "no address"}], 1001, "/0/ip"),
        (
            "hostname",
            [{"hostname": {"url_hostname": "a.example", "exclude_exact_hostname": "yes"}}],
            1001,
            "/0/hostname/exclude_exact_hostname",
        ),
    ],
)
def test_items_are_checked_against_the_list(
    cf: Cloudflare, api: Api, kind: str, items: list[dict[str, Any]], code: int, pointer: str
) -> None:
    account_id = api.credentials["account_id"]
    made = cf.rules.lists.create(account_id=account_id, kind=kind, name="checked")  # type: ignore[arg-type]
    assert made is not None
    with pytest.raises(cloudflare.BadRequestError) as refused:
        cf.rules.lists.items.create(made.id, account_id=account_id, body=items)  # type: ignore[arg-type]
    assert (_error(refused)["code"], _error(refused)["source"]["pointer"]) == (code, pointer)
    assert list(cf.rules.lists.items.list(made.id, account_id=account_id)) == []  # nothing of the request was kept


def test_a_list_holds_at_most_ten_thousand_items(cf: Cloudflare, api: Api) -> None:
    account_id = api.credentials["account_id"]
    made = cf.rules.lists.create(account_id=account_id, kind="asn", name="big")
    assert made is not None
    with pytest.raises(cloudflare.BadRequestError) as at_once:
        cf.rules.lists.items.update(made.id, account_id=account_id, body=[{"asn": n} for n in range(10_001)])
    assert _error(at_once)["code"] == 10305
    full = cf.rules.lists.items.update(made.id, account_id=account_id, body=[{"asn": n} for n in range(10_000)])
    _completed(cf, account_id, full.operation_id)
    with pytest.raises(cloudflare.BadRequestError) as one_more:
        cf.rules.lists.items.create(made.id, account_id=account_id, body=[{"asn": 10_000}])
    assert _error(one_more)["code"] == 10305
    # An item the list holds already is not one more.
    kept = cf.rules.lists.items.create(made.id, account_id=account_id, body=[{"asn": 7, "comment": "seven"}])
    _completed(cf, account_id, kept.operation_id)
    listed = cf.rules.lists.get(made.id, account_id=account_id)
    assert listed is not None
    assert listed.num_items == 10_000


def test_unknown_objects_are_not_found(cf: Cloudflare, api: Api) -> None:
    account_id = api.credentials["account_id"]
    with pytest.raises(cloudflare.NotFoundError):
        cf.rules.lists.bulk_operations.get("0" * 32, account_id=account_id)
    with pytest.raises(cloudflare.NotFoundError):
        list(cf.rules.lists.items.list("0" * 32, account_id=account_id))
    made = cf.rules.lists.create(account_id=account_id, kind="ip", name="peers")
    assert made is not None
    with pytest.raises(cloudflare.BadRequestError) as unknown_item:
        cf.rules.lists.items.delete(made.id, account_id=account_id, items=[{"id": "0" * 32}])
    assert (_error(unknown_item)["code"], _error(unknown_item)["source"]["pointer"]) == (10307, "/items/0/id")
    with pytest.raises(cloudflare.BadRequestError) as renamed:
        cf.rules.lists.update(made.id, account_id=account_id, extra_body={"name": "other"})
    assert _error(renamed)["source"]["pointer"] == "/name"


def _token(api: Api, groups: list[str]) -> Cloudflare:
    account = f"com.cloudflare.api.account.{api.credentials['account_id']}"
    created = api.call(
        "POST",
        "/user/tokens",
        json={
            "name": "lists",
            "policies": [
                {"effect": "allow", "resources": {account: "*"}, "permission_groups": [{"id": g} for g in groups]}
            ],
        },
    ).json()
    assert created["success"], created
    return sdk_for(api, token=created["result"]["value"])


def test_lists_need_the_rule_lists_permissions(cf: Cloudflare, api: Api) -> None:
    account_id = api.credentials["account_id"]
    made = cf.rules.lists.create(account_id=account_id, kind="ip", name="peers")
    assert made is not None
    operation = cf.rules.lists.items.create(made.id, account_id=account_id, body=[{"ip": "192.0.2.1"}])

    without = _token(api, ["c1fde68c7bcc44588cbb6ddbc16d6480"])  # Account Settings Read: sees the account only
    with pytest.raises(cloudflare.PermissionDeniedError) as refused:
        list(without.rules.lists.list(account_id=account_id))
    assert _error(refused)["code"] == 10000
    with pytest.raises(cloudflare.PermissionDeniedError):
        without.rules.lists.bulk_operations.get(operation.operation_id, account_id=account_id)

    reader = _token(api, [LISTS_READ])
    assert [found.name for found in reader.rules.lists.list(account_id=account_id)] == ["peers"]
    assert [item.ip for item in reader.rules.lists.items.list(made.id, account_id=account_id)] == ["192.0.2.1"]  # type: ignore[union-attr]
    _completed(reader, account_id, operation.operation_id)
    with pytest.raises(cloudflare.PermissionDeniedError):
        reader.rules.lists.create(account_id=account_id, kind="ip", name="more")
    with pytest.raises(cloudflare.PermissionDeniedError):
        reader.rules.lists.items.create(made.id, account_id=account_id, body=[{"ip": "192.0.2.2"}])

    writer = _token(api, [LISTS_WRITE])
    written = writer.rules.lists.items.create(made.id, account_id=account_id, body=[{"ip": "192.0.2.2"}])
    _completed(writer, account_id, written.operation_id)
    assert writer.rules.lists.delete(made.id, account_id=account_id) is not None


def test_the_groups_are_listed_by_their_real_names(cf: Cloudflare) -> None:
    for name, group_id in (("Account Rule Lists Read", LISTS_READ), ("Account Rule Lists Write", LISTS_WRITE)):
        groups = list(cf.user.tokens.permission_groups.list(name=name))
        assert [(group.id, group.name, group.scopes) for group in groups] == [
            (group_id, name, ["com.cloudflare.api.account"])
        ]


def test_an_expression_naming_a_list_is_refused_with_a_code(cf: Cloudflare, api: Api) -> None:
    account_id = api.credentials["account_id"]
    cf.rules.lists.create(account_id=account_id, kind="ip", name="blocked_peers")
    with pytest.raises(cloudflare.BadRequestError) as refused:
        cf.rulesets.phases.update(
            "http_request_firewall_custom",
            zone_id=api.credentials["zone_id"],
            rules=[{"action": "block", "expression": "ip.src in $blocked_peers"}],
        )
    error = _error(refused)
    assert (error["code"], error["source"]["pointer"]) == (20002, "/rules/0/expression")
    assert "lists are not supported ($blocked_peers)" in error["message"]
