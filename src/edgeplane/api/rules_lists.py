"""Account lists under ``/accounts/{account_id}/rules/lists``: the lists (list, create, get, update the description,
delete), their items (list with a cursor, get, append, replace all, delete some) and the bulk operations that report
on item changes.

On the real API the item writes are asynchronous: they answer an ``operation_id`` whose state
``GET .../rules/lists/bulk_operations/{operation_id}`` reports (``pending``, ``running``, ``completed``, ``failed``).
edgeplane applies the items inside the request, in its transaction, and records the operation already
``completed``: a client that polls sees it done at its first look, and a request that cannot be applied is refused
with its error at once (nothing of it is kept) rather than reported later as ``failed``. Operations are kept for a
day.

No Rules-language expression can name a list yet (``ip.src in $name`` is refused where expressions are checked), so
a list's ``num_referencing_filters`` is 0 and a list can always be deleted. Lists change nothing on the edge: their
writes do not bump the configuration version.
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.exc import IntegrityError

from edgeplane.api.accounts import visible_account
from edgeplane.api.credentials import new_object_id
from edgeplane.api.endpoint import ApiRequest, ApiResult, ApiRoute, reject_unknown, require_object
from edgeplane.api.errors import bad_request, conflict, not_found
from edgeplane.api.permissions import path_read, path_write
from edgeplane.api.rule_list_items import KINDS, ListItem, parse_item
from edgeplane.api.timestamps import rfc3339
from edgeplane.store.models import RuleList, RuleListItem, RuleListOperation, utc_now

MAX_LISTS_PER_ACCOUNT = 1000
MAX_ITEMS_PER_LIST = 10_000
MAX_DESCRIPTION_LENGTH = 500
DEFAULT_ITEMS_PER_PAGE = 25
MAX_ITEMS_PER_PAGE = 500
OPERATIONS_KEPT_FOR = timedelta(days=1)

# Error codes of lists (documented in docs/api.md; the items' own are in edgeplane.api.rule_list_items).
INVALID_LIST_NAME = 10301
LIST_NAME_TAKEN = 10302
TOO_MANY_ITEMS = 10305
TOO_MANY_LISTS = 10306
UNKNOWN_ITEM = 10307

_NAME = re.compile(r"[a-z0-9_]{1,50}")
_LIST_MEMBERS = frozenset({"name", "kind", "description"})
# What a list's answer holds that a client may send back unchanged in an update.
_READ_ONLY_MEMBERS = frozenset({"id", "num_items", "num_referencing_filters", "created_on", "modified_on"})


# ---- the lists ----


def list_json(found: RuleList, num_items: int) -> dict[str, Any]:
    """A list in the v4 shape (without its items)."""
    return {
        "id": found.id,
        "name": found.name,
        "description": found.description,
        "kind": found.kind,
        "num_items": num_items,
        "num_referencing_filters": 0,
        "created_on": rfc3339(found.created_on),
        "modified_on": rfc3339(found.modified_on),
    }


def _count_items(request: ApiRequest, list_id: str) -> int:
    return int(
        request.session.scalar(select(func.count()).select_from(RuleListItem).where(RuleListItem.list_id == list_id))
        or 0
    )


def _found_list(request: ApiRequest, *, write: bool = False, lock: bool = False) -> RuleList:
    """The path's list in the path's account, or 404. ``lock`` holds the list's row to the end of the transaction
    (PostgreSQL), so item writes to one list happen one after the other."""
    account = visible_account(request, request.path_params["account_id"], write=write)
    query = select(RuleList).where(RuleList.id == request.path_params["list_id"], RuleList.account_id == account.id)
    if lock:
        query = query.with_for_update()
    found = request.session.scalar(query)
    if found is None:
        raise not_found(request.path)
    return found


def list_lists(request: ApiRequest) -> ApiResult:
    """``GET /accounts/{account_id}/rules/lists``: every list of the account, by name (one page, as the real API)."""
    account = visible_account(request, request.path_params["account_id"])
    lists = request.session.scalars(select(RuleList).where(RuleList.account_id == account.id).order_by(RuleList.name))
    counts = dict(
        request.session.execute(
            select(RuleListItem.list_id, func.count())
            .join(RuleList, RuleList.id == RuleListItem.list_id)
            .where(RuleList.account_id == account.id)
            .group_by(RuleListItem.list_id)
        ).all()
    )
    return ApiResult([list_json(found, int(counts.get(found.id, 0))) for found in lists])


def create_list(request: ApiRequest) -> ApiResult:
    """``POST /accounts/{account_id}/rules/lists``: ``{name, kind, description?}``; an empty list."""
    account = visible_account(request, request.path_params["account_id"], write=True)
    body = require_object(request.body)
    reject_unknown(body, _LIST_MEMBERS)
    name = body.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise bad_request(
            "name must be 1 to 50 lowercase letters, digits and underscores", code=INVALID_LIST_NAME, pointer="/name"
        )
    kind = body.get("kind")
    if kind not in KINDS:
        raise bad_request(f"kind must be one of {', '.join(KINDS)}", pointer="/kind")
    description = _description(body)
    existing = request.session.scalars(select(RuleList.name).where(RuleList.account_id == account.id)).all()
    if name in existing:
        raise conflict(f"the account already has a list named {name!r}", code=LIST_NAME_TAKEN)
    if len(existing) >= MAX_LISTS_PER_ACCOUNT:
        raise bad_request(f"an account holds at most {MAX_LISTS_PER_ACCOUNT} lists", code=TOO_MANY_LISTS)
    when = utc_now()
    made = RuleList(
        id=new_object_id(),
        account_id=account.id,
        name=name,
        kind=kind,
        description=description,
        created_on=when,
        modified_on=when,
    )
    request.session.add(made)
    try:
        request.session.flush()
    except IntegrityError:  # a list of that name was created at the same moment
        raise conflict(f"the account already has a list named {name!r}", code=LIST_NAME_TAKEN) from None
    return ApiResult(list_json(made, 0))


def _description(body: dict[str, Any]) -> str:
    description = body.get("description") or ""
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_LENGTH:
        raise bad_request(
            f"description must be a string of at most {MAX_DESCRIPTION_LENGTH} characters", pointer="/description"
        )
    return description


def get_list(request: ApiRequest) -> ApiResult:
    """``GET /accounts/{account_id}/rules/lists/{list_id}``: the list, without its items."""
    found = _found_list(request)
    return ApiResult(list_json(found, _count_items(request, found.id)))


def update_list(request: ApiRequest) -> ApiResult:
    """``PUT /accounts/{account_id}/rules/lists/{list_id}``: sets the description; the name and kind cannot change
    (a body may repeat them, and the read-only members of the list, unchanged)."""
    found = _found_list(request, write=True)
    body = require_object(request.body)
    reject_unknown(body, _LIST_MEMBERS | _READ_ONLY_MEMBERS)
    for member in ("name", "kind"):
        if member in body and body[member] != getattr(found, member):
            raise bad_request(f"a list's {member} cannot be changed", pointer=f"/{member}")
    if "description" in body:
        found.description = _description(body)
        found.modified_on = utc_now()
    return ApiResult(list_json(found, _count_items(request, found.id)))


def delete_list(request: ApiRequest) -> ApiResult:
    """``DELETE /accounts/{account_id}/rules/lists/{list_id}``: the list and all its items; answers ``{id}``."""
    found = _found_list(request, write=True)
    request.session.execute(delete(RuleListItem).where(RuleListItem.list_id == found.id))
    request.session.delete(found)
    return ApiResult({"id": found.id})


# ---- the items ----


def item_json(item: RuleListItem) -> dict[str, Any]:
    """An item in the v4 shape: its id, its kind's member, the comment and the times."""
    document: dict[str, Any] = {"id": item.id, **item.content}
    if item.comment:
        document["comment"] = item.comment
    document["created_on"] = rfc3339(item.created_on)
    document["modified_on"] = rfc3339(item.modified_on)
    return document


def list_items(request: ApiRequest) -> ApiResult:
    """``GET .../rules/lists/{list_id}/items``: a page of items in key order; ``per_page`` (default 25, at most
    500), ``cursor`` (``result_info.cursors.after`` of the page before; absent on the last page) and ``search`` (an
    IP that starts with it; a hostname or redirect source that contains it; the ASN it names exactly)."""
    found = _found_list(request)
    per_page = _per_page(request.query.get("per_page"))
    query = select(RuleListItem).where(RuleListItem.list_id == found.id)
    cursor = request.query.get("cursor")
    if cursor:
        query = query.where(RuleListItem.key > _decode_cursor(cursor))
    search = request.query.get("search")
    if search:
        pattern = _escape_like(search.strip().lower())
        if found.kind == "ip":
            query = query.where(RuleListItem.key.like(pattern + "%", escape="\\"))
        elif found.kind == "asn":
            query = query.where(RuleListItem.key == search.strip())
        else:
            query = query.where(func.lower(RuleListItem.key).like("%" + pattern + "%", escape="\\"))
    chosen = list(request.session.scalars(query.order_by(RuleListItem.key).limit(per_page + 1)))
    more = len(chosen) > per_page
    chosen = chosen[:per_page]
    cursors = {"after": _encode_cursor(chosen[-1].key)} if more else {}
    return ApiResult([item_json(item) for item in chosen], result_info={"cursors": cursors})


def get_item(request: ApiRequest) -> ApiResult:
    """``GET .../rules/lists/{list_id}/items/{item_id}``."""
    found = _found_list(request)
    item = request.session.scalar(
        select(RuleListItem).where(RuleListItem.id == request.path_params["item_id"], RuleListItem.list_id == found.id)
    )
    if item is None:
        raise not_found(request.path)
    return ApiResult(item_json(item))


def create_items(request: ApiRequest) -> ApiResult:
    """``POST .../rules/lists/{list_id}/items``: appends the items of the body (an array). An item whose key the
    list holds replaces that item's value and comment (it keeps its id). Answers ``{operation_id}``."""
    found = _found_list(request, write=True, lock=True)
    items = _parse_items(request.body, found.kind)
    _store(request, found, items, replace=False)
    return _operation(request, found)


def replace_items(request: ApiRequest) -> ApiResult:
    """``PUT .../rules/lists/{list_id}/items``: the list holds exactly the items of the body afterwards (items whose
    key stays keep their ids). Answers ``{operation_id}``."""
    found = _found_list(request, write=True, lock=True)
    items = _parse_items(request.body, found.kind)
    _store(request, found, items, replace=True)
    return _operation(request, found)


def delete_items(request: ApiRequest) -> ApiResult:
    """``DELETE .../rules/lists/{list_id}/items``: ``{"items": [{"id"}...]}`` removes those items; an id the list
    does not hold refuses the whole request (400, code 10307). Answers ``{operation_id}``."""
    found = _found_list(request, write=True, lock=True)
    body = require_object(request.body)
    reject_unknown(body, {"items"})
    listed = body.get("items")
    if not isinstance(listed, list):
        raise bad_request("items must be an array of {id}", pointer="/items")
    ids: list[str] = []
    for index, entry in enumerate(listed):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or set(entry) != {"id"}:
            raise bad_request("each entry of items must be {id}", pointer=f"/items/{index}")
        ids.append(entry["id"])
    held = set(
        request.session.scalars(
            select(RuleListItem.id).where(RuleListItem.list_id == found.id, RuleListItem.id.in_(ids))
        )
    )
    for index, item_id in enumerate(ids):
        if item_id not in held:
            raise bad_request(
                f"the list holds no item with id {item_id!r}", code=UNKNOWN_ITEM, pointer=f"/items/{index}/id"
            )
    if ids:
        request.session.execute(delete(RuleListItem).where(RuleListItem.id.in_(held)))
    return _operation(request, found)


def _parse_items(body: Any, kind: str) -> dict[str, ListItem]:
    """The body's items by key (a later item with the same key wins), or a 400 pointing at the first bad one."""
    if not isinstance(body, list):
        raise bad_request("the request body must be an array of items", code=6007)
    if len(body) > MAX_ITEMS_PER_LIST:
        raise bad_request(f"a list holds at most {MAX_ITEMS_PER_LIST} items", code=TOO_MANY_ITEMS)
    items: dict[str, ListItem] = {}
    for index, value in enumerate(body):
        item = parse_item(value, kind, f"/{index}")
        items[item.key] = item
    return items


def _store(request: ApiRequest, found: RuleList, items: dict[str, ListItem], *, replace: bool) -> None:
    """Writes ``items`` into ``found``: existing keys are updated, new keys inserted, and with ``replace`` the keys
    not in ``items`` removed. Refuses (400, 10305) a list that would hold more than ``MAX_ITEMS_PER_LIST``."""
    existing = {
        item.key: item for item in request.session.scalars(select(RuleListItem).where(RuleListItem.list_id == found.id))
    }
    new_keys = [key for key in items if key not in existing]
    total = len(items) if replace else len(existing) + len(new_keys)
    if total > MAX_ITEMS_PER_LIST:
        raise bad_request(
            f"the list would hold {total} items; a list holds at most {MAX_ITEMS_PER_LIST}", code=TOO_MANY_ITEMS
        )
    when = utc_now()
    if replace:
        gone = [stored.id for key, stored in existing.items() if key not in items]
        for start in range(0, len(gone), 500):  # bounded statements: SQLite limits the parameters of one
            request.session.execute(delete(RuleListItem).where(RuleListItem.id.in_(gone[start : start + 500])))
    for key, item in items.items():
        stored = existing.get(key)
        if stored is not None and (stored.content != item.content or stored.comment != item.comment):
            stored.content, stored.comment, stored.modified_on = item.content, item.comment, when
    if new_keys:
        rows = [
            {
                "id": new_object_id(),
                "list_id": found.id,
                "key": key,
                "content": items[key].content,
                "comment": items[key].comment,
                "created_on": when,
                "modified_on": when,
            }
            for key in new_keys
        ]
        request.session.execute(insert(RuleListItem), rows)


def _operation(request: ApiRequest, found: RuleList) -> ApiResult:
    """Records a completed bulk operation on ``found`` (and forgets the account's operations older than a day);
    answers ``{operation_id}``."""
    when = utc_now()
    found.modified_on = when
    request.session.execute(
        delete(RuleListOperation).where(
            RuleListOperation.account_id == found.account_id,
            RuleListOperation.completed < when - OPERATIONS_KEPT_FOR,
        )
    )
    operation = RuleListOperation(
        id=new_object_id(), account_id=found.account_id, list_id=found.id, status="completed", completed=when
    )
    request.session.add(operation)
    return ApiResult({"operation_id": operation.id})


def get_operation(request: ApiRequest) -> ApiResult:
    """``GET /accounts/{account_id}/rules/lists/bulk_operations/{operation_id}``: ``{id, status, completed}`` (and
    ``error`` for a failed one)."""
    account = visible_account(request, request.path_params["account_id"])
    operation = request.session.scalar(
        select(RuleListOperation).where(
            RuleListOperation.id == request.path_params["operation_id"],
            RuleListOperation.account_id == account.id,
        )
    )
    if operation is None:
        raise not_found(request.path)
    document: dict[str, Any] = {"id": operation.id, "status": operation.status}
    if operation.completed is not None:
        document["completed"] = rfc3339(operation.completed)
    if operation.error is not None:
        document["error"] = operation.error
    return ApiResult(document)


# ---- paging ----


def _per_page(value: str | None) -> int:
    if value is None or value == "":
        return DEFAULT_ITEMS_PER_PAGE
    if not value.isdigit() or not 1 <= int(value) <= MAX_ITEMS_PER_PAGE:
        raise bad_request(f"per_page must be an integer from 1 to {MAX_ITEMS_PER_PAGE}", pointer="/per_page")
    return int(value)


def _encode_cursor(key: str) -> str:
    """An opaque cursor: the last key of a page."""
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> str:
    """The key a cursor names; a 400 for anything ``_encode_cursor`` cannot have made."""
    try:
        key = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        key = ""
    if not key or _encode_cursor(key) != cursor:  # the decoder skips characters outside its alphabet
        raise bad_request("cursor is not one this API gave", pointer="/cursor")
    return key


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# ---- routes ----


def _routes() -> list[ApiRoute]:
    read, write = path_read("account_rule_lists"), path_write("account_rule_lists")
    base = "/accounts/{account_id}/rules/lists"
    return [
        ApiRoute(base, "GET", list_lists, read),
        ApiRoute(base, "POST", create_list, write),
        ApiRoute(base + "/bulk_operations/{operation_id}", "GET", get_operation, read),
        ApiRoute(base + "/{list_id}", "GET", get_list, read),
        ApiRoute(base + "/{list_id}", "PUT", update_list, write),
        ApiRoute(base + "/{list_id}", "DELETE", delete_list, write),
        ApiRoute(base + "/{list_id}/items", "GET", list_items, read),
        ApiRoute(base + "/{list_id}/items", "POST", create_items, write),
        ApiRoute(base + "/{list_id}/items", "PUT", replace_items, write),
        ApiRoute(base + "/{list_id}/items", "DELETE", delete_items, write),
        ApiRoute(base + "/{list_id}/items/{item_id}", "GET", get_item, read),
    ]


# Every lists route (path under ``/client/v4``, method, handler, permission); the bulk operations path comes before
# the ``/{list_id}`` paths.
ROUTES: list[ApiRoute] = _routes()
