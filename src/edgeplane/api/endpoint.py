"""The one path every control-plane request takes, in this order: refuse a declared body over the limit, authenticate
and check the route's permission (headers only), read the body (stopping at the limit), parse it, run the handler in
a worker thread inside one database transaction, and answer with a v4 envelope.

Nothing of the body is read for a caller that is not allowed, and never more than ``max_body_bytes``: a refused
request whose body was not read is answered with ``Connection: close``, so its remaining bytes are not read either.

Handlers are plain synchronous functions of an ``ApiRequest``; they raise ``ApiError`` for anything the caller did
wrong. The database work runs off the event loop, which the edge listener shares.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import structlog
from sqlalchemy import update
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from edgeplane.api.auth import Principal, authenticate, authorize, forbidden
from edgeplane.api.errors import ApiError, bad_request
from edgeplane.api.permissions import Access, Permission, RouteAccess, Target
from edgeplane.logs.destinations import DestinationPolicy
from edgeplane.store.database import Database
from edgeplane.store.models import ConfigVersion

log = structlog.get_logger(__name__)

MAX_BODY_BYTES = 1024 * 1024


@dataclass(slots=True)
class ApiRequest:
    """What a handler sees of a request."""

    principal: Principal
    session: Session
    path: str
    path_params: Mapping[str, str]
    query: Mapping[str, str]
    body: Any
    access: RouteAccess

    def require(self, target: Target, *, write: bool = False) -> None:
        """403 unless the caller holds the route's permission at ``target`` (its write form when ``write``)."""
        permission = self.access.permission
        if permission is None:
            raise forbidden()
        if write:
            permission = Permission(permission.family, Access.WRITE)
        if not self.principal.allows(permission, target):
            raise forbidden()


@dataclass(slots=True)
class ApiResult:
    """What a handler answers: the result, list pagination, and whether configuration changed."""

    result: Any
    result_info: dict[str, Any] | None = None
    status: int = 200
    changed: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)
    after_commit: Callable[[ControlPlane], None] | None = None
    # Work that reads no database (a scan of the log store, say), run once the handler's session is closed, so that
    # a long read holds no database connection; its result is the answer.
    later: Callable[[], ApiResult] | None = None


Handler = Callable[[ApiRequest], ApiResult]


class ApiRoute(NamedTuple):
    """One control-plane route: its path under ``/client/v4``, method, handler, and the permission it needs."""

    path: str
    method: str
    handler: Handler
    access: RouteAccess


class ControlPlane:
    """The shared state of the API: the database, and who to tell when configuration changes."""

    def __init__(
        self,
        database: Database,
        *,
        secret: bytes,
        on_change: Callable[[], None] | None = None,
        on_job_created: Callable[[str, int], None] | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        destinations: DestinationPolicy | None = None,
        data_dir: Path | None = None,
    ) -> None:
        self.database = database
        # Where the edge workers' log partitions are, read by the analytics and security events routes; None: none.
        self.data_dir = data_dir
        self.max_body_bytes = max_body_bytes
        self.secret = secret  # keys what the API derives rather than stores (ownership challenges)
        # Where Logpush destinations may lead; by default no private address and no file:// destination.
        self.destinations = destinations or DestinationPolicy()
        self.on_change = on_change or (lambda: None)
        # A new Logpush job starts at the current end of the logs: its cursors are placed when it is created.
        self.on_job_created = on_job_created or (lambda dataset, job_id: None)

    def endpoint(self, handler: Handler, access: RouteAccess) -> Callable[[Request], Any]:
        """A Starlette endpoint running ``handler`` for callers that hold ``access``."""

        async def run(request: Request) -> Response:
            body_read = False
            try:
                refuse_declared_length(request.headers.get("content-length"), self.max_body_bytes)
                principal = await run_in_threadpool(self._authorize, request, access)
                raw = await read_body(request, self.max_body_bytes)
                body_read = True
                result = await run_in_threadpool(self._run, handler, access, request, principal, _parse_body(raw))
            except ApiError as error:
                response = envelope_response(error.status, success=False, errors=error.errors, result=None)
                if not body_read and _may_have_body(request):
                    response.headers["connection"] = "close"  # the body's bytes are left unread
                return response
            except ClientDisconnect:
                return Response(status_code=400)  # nobody is left to read it
            except Exception:  # a bug must still answer a coded envelope
                log.exception("control plane handler failed", path=request.url.path)
                return envelope_response(
                    500, success=False, errors=[{"code": 10001, "message": "internal error"}], result=None
                )
            return envelope_response(
                result.status,
                success=True,
                errors=[],
                result=result.result,
                result_info=result.result_info,
                messages=result.messages,
            )

        return run

    def _authorize(self, request: Request, access: RouteAccess) -> Principal:
        headers = {name.lower(): value for name, value in request.headers.items()}
        with self.database.session() as session:
            principal = authenticate(headers, session, method=request.method)
            authorize(principal, access, request.path_params, request.url.path, session)
        return principal

    def _run(
        self, handler: Handler, access: RouteAccess, request: Request, principal: Principal, body: Any
    ) -> ApiResult:
        with self.database.session() as session:
            result = handler(
                ApiRequest(
                    principal=principal,
                    session=session,
                    path=request.url.path,
                    path_params=request.path_params,
                    query=request.query_params,
                    body=body,
                    access=access,
                )
            )
            if result.changed:
                bump_config_version(session)
        if result.after_commit is not None:
            result.after_commit(self)
        if result.changed:
            self.on_change()
        if result.later is not None:
            return result.later()
        return result


def body_too_large(limit: int) -> ApiError:
    """HTTP 413, code 1003: the request body is over the limit."""
    return ApiError(413, 1003, f"request body larger than {limit} bytes")


def refuse_declared_length(declared: str | None, limit: int) -> None:
    """Raises 413 when ``Content-Length`` declares more than ``limit`` bytes (400 when it is not a number)."""
    if declared is None:
        return
    if not declared.isdigit():
        raise bad_request("Content-Length must be a number of bytes", code=6003)
    if int(declared) > limit:
        raise body_too_large(limit)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, read as it arrives; raises 413 as soon as more than ``limit`` bytes came (a chunked body
    declares no length)."""
    body = bytearray()
    async for chunk in request.stream():
        if len(body) + len(chunk) > limit:
            raise body_too_large(limit)
        body += chunk
    return bytes(body)


def _may_have_body(request: Request) -> bool:
    declared = request.headers.get("content-length")
    return "transfer-encoding" in request.headers or (declared is not None and declared != "0")


def bump_config_version(session: Session) -> None:
    """Marks configuration as changed, in the caller's transaction."""
    updated = session.execute(update(ConfigVersion).values(version=ConfigVersion.version + 1))
    if getattr(updated, "rowcount", 0) == 0:
        session.add(ConfigVersion(id=1, version=1))


def _parse_body(raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"Malformed JSON in request body: {exc.msg}", code=6007) from None


def envelope_response(
    status: int,
    *,
    success: bool,
    errors: list[dict[str, Any]],
    result: Any,
    result_info: dict[str, Any] | None = None,
    messages: list[dict[str, Any]] | None = None,
) -> Response:
    """A v4 envelope."""
    document: dict[str, Any] = {"success": success, "errors": errors, "messages": messages or [], "result": result}
    if result_info is not None:
        document["result_info"] = result_info
    return Response(orjson.dumps(document), status_code=status, media_type="application/json")


def paginate(
    items: list[Any], query: Mapping[str, str], *, default_per_page: int = 20, max_per_page: int = 1000
) -> ApiResult:
    """One page of ``items``; a page past the end is an empty list (clients stop on an empty page)."""
    page = _positive_int(query.get("page"), "page", default=1)
    per_page = _positive_int(query.get("per_page"), "per_page", default=default_per_page)
    if per_page > max_per_page:
        raise bad_request(f"per_page must be at most {max_per_page}", pointer="/per_page")
    start = (page - 1) * per_page
    chosen = items[start : start + per_page]
    total = len(items)
    return ApiResult(
        result=chosen,
        result_info={
            "page": page,
            "per_page": per_page,
            "count": len(chosen),
            "total_count": total,
            "total_pages": (total + per_page - 1) // per_page if total else 0,
        },
    )


def _positive_int(value: str | None, name: str, *, default: int) -> int:
    if value is None or value == "":
        return default
    try:
        number = int(float(value))
    except ValueError:
        raise bad_request(f"{name} must be a positive integer", pointer=f"/{name}") from None
    if number < 1:
        raise bad_request(f"{name} must be a positive integer", pointer=f"/{name}")
    return number


def require_object(body: Any) -> dict[str, Any]:
    """The JSON body as an object, or a 400."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object", code=6007)
    return body


def reject_unknown(body: Mapping[str, Any], allowed: set[str] | frozenset[str]) -> None:
    """A 400 naming the first member the endpoint does not know."""
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise bad_request(f"unknown field {unknown[0]!r}", pointer=f"/{unknown[0]}")
