"""The API listener's application: ``/healthz``, ``/metrics``, the ``/client/v4`` control plane, and the dashboard
(its sign in at ``/session``, its pages at ``/``: ``edgeplane.dashboard``).

A ``/client/v4`` path that no resource serves answers a v4 envelope with error 7003 and HTTP 404, as the real API
does for a path it cannot route; a path a resource serves, with a method it does not take, answers 405 with code
10405 (and ``Allow`` naming the methods it takes).
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.types import Scope

from edgeplane.api import (
    accounts,
    logpush,
    previous_waf,
    rules_lists,
    rulesets,
    tokens,
    waf_migration,
    web3_hostnames,
    zone_settings,
    zones,
)
from edgeplane.api.analytics import Analytics
from edgeplane.api.endpoint import ApiRoute, ControlPlane, envelope_response
from edgeplane.api.errors import not_found
from edgeplane.api.filter_language import filter_language_routes
from edgeplane.api.permissions import (
    ANY_CALLER,
    On,
    body_write,
    path_read,
    path_write,
    permission_catalogue,
    user_read,
    user_write,
)
from edgeplane.api.security_events import SecurityEvents
from edgeplane.api.sign_in import GatewayEndpoints, SignIn
from edgeplane.api.write_propagation import WritePropagation
from edgeplane.dashboard import dashboard_assets
from edgeplane.metrics import EXPOSITION_TYPE, exposition
from edgeplane.propagation.hub import PropagationHub

V4 = "/client/v4"


async def healthz(request: Request) -> Response:
    """Liveness of the control plane."""
    return JSONResponse({"status": "ok"})


async def prometheus_metrics(request: Request) -> Response:
    """All metrics in the Prometheus text format: of every process (shared through the multiprocess directory under
    ``edgeplane serve``; this process's own otherwise)."""
    return Response(exposition(), media_type=EXPOSITION_TYPE)


async def unrouted(request: Request) -> Response:
    """A v4 envelope for a request no route took: 405 (code 10405, ``Allow`` naming the methods) when a route serves
    the path with other methods, else 404 (code 7003)."""
    allowed = sorted(_methods_of_path(request.app.router.routes, request.scope))
    if allowed:
        response = envelope_response(
            405,
            success=False,
            errors=[{"code": 10405, "message": f"method {request.method} not allowed; use {', '.join(allowed)}"}],
            result=None,
        )
        response.headers["allow"] = ", ".join(allowed)
        return response
    error = not_found(request.url.path)
    return envelope_response(error.status, success=False, errors=error.errors, result=None)


def _methods_of_path(routes: Iterable[BaseRoute], scope: Scope) -> set[str]:
    """The methods of the routes whose path matches the request's (Starlette's partial match: path, not method),
    the catch-all routes left out."""
    methods: set[str] = set()
    for route in routes:
        if not isinstance(route, Route) or route.endpoint is unrouted or not route.methods:
            continue
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            methods |= route.methods - {"HEAD"}
    return methods


def v4_table(plane: ControlPlane) -> list[ApiRoute]:
    """Every ``/client/v4`` route with the permission it needs: the whole permission model in one table."""
    zone_read, zone_write = path_read("zone"), path_write("zone")
    web3_read, web3_write = path_read("web3_hostnames"), path_write("web3_hostnames")
    tokens_read, tokens_write = user_read("api_tokens"), user_write("api_tokens")
    table = [
        ApiRoute("/user/tokens/verify", "GET", tokens.verify_token, ANY_CALLER),
        ApiRoute("/user/tokens/permission_groups", "GET", tokens.list_permission_groups, tokens_read),
        ApiRoute("/user/tokens", "GET", tokens.list_tokens, tokens_read),
        ApiRoute("/user/tokens", "POST", tokens.create_token, tokens_write),
        ApiRoute("/user/tokens/{token_id}", "GET", tokens.get_token, tokens_read),
        ApiRoute("/user/tokens/{token_id}", "DELETE", tokens.delete_token, tokens_write),
        ApiRoute("/accounts", "GET", accounts.list_accounts, ANY_CALLER),
        ApiRoute("/accounts/{account_id}", "GET", accounts.get_account, path_read("account_settings")),
        ApiRoute("/zones", "GET", zones.list_zones, ANY_CALLER),
        ApiRoute("/zones", "POST", zones.create_zone, body_write("zone")),
        ApiRoute("/zones/{zone_id}", "GET", zones.get_zone, zone_read),
        ApiRoute("/zones/{zone_id}", "PATCH", zones.edit_zone, zone_write),
        ApiRoute("/zones/{zone_id}", "DELETE", zones.delete_zone, zone_write),
        ApiRoute("/zones/{zone_id}/web3/hostnames", "GET", web3_hostnames.list_hostnames, web3_read),
        ApiRoute("/zones/{zone_id}/web3/hostnames", "POST", web3_hostnames.create_hostname, web3_write),
        ApiRoute("/zones/{zone_id}/web3/hostnames/{identifier}", "GET", web3_hostnames.get_hostname, web3_read),
        ApiRoute("/zones/{zone_id}/web3/hostnames/{identifier}", "PATCH", web3_hostnames.edit_hostname, web3_write),
        ApiRoute("/zones/{zone_id}/web3/hostnames/{identifier}", "DELETE", web3_hostnames.delete_hostname, web3_write),
    ]
    destinations = logpush.Logpush(plane.secret, plane.destinations)
    logs_read, logs_write = path_read("logs"), path_write("logs")
    for scope in ("/zones/{zone_id}", "/accounts/{account_id}"):
        base = scope + "/logpush"
        table += [
            ApiRoute(base + "/jobs", "GET", logpush.list_jobs, logs_read),
            ApiRoute(base + "/jobs", "POST", destinations.create_job, logs_write),
            ApiRoute(base + "/jobs/{job_id}", "GET", logpush.get_job, logs_read),
            ApiRoute(base + "/jobs/{job_id}", "PUT", destinations.update_job, logs_write),
            ApiRoute(base + "/jobs/{job_id}", "DELETE", logpush.delete_job, logs_write),
            ApiRoute(base + "/datasets/{dataset}/fields", "GET", logpush.dataset_fields, logs_read),
            ApiRoute(base + "/datasets/{dataset}/jobs", "GET", logpush.dataset_jobs, logs_read),
            ApiRoute(base + "/ownership", "POST", destinations.request_challenge, logs_write),
            ApiRoute(base + "/ownership/validate", "POST", destinations.validate_challenge, logs_write),
            # Checking a destination reaches out to it (and tells whether it exists): a writer's act, not a reader's.
            ApiRoute(base + "/validate/destination", "POST", destinations.validate_destination, logs_write),
            ApiRoute(base + "/validate/destination/exists", "POST", logpush.destination_exists, logs_write),
            ApiRoute(base + "/validate/origin", "POST", logpush.validate_origin, logs_read),
        ]
    analytics, events = Analytics(plane.data_dir), SecurityEvents(plane.data_dir)
    analytics_read = path_read("analytics")
    table += [
        ApiRoute("/zones/{zone_id}/analytics/requests", "GET", analytics.requests, analytics_read),
        ApiRoute("/zones/{zone_id}/security/events", "GET", events.list_events, analytics_read),
        ApiRoute("/zones/{zone_id}/security/events/histogram", "GET", events.histogram, analytics_read),
    ]
    # The waf setting's own routes (previous_waf) come before the other zone settings' {setting_id} routes.
    table += [
        ApiRoute("/zones/{zone_id}/logpush/edge/jobs", "GET", logpush.list_edge_jobs, logs_read),
        ApiRoute("/zones/{zone_id}/logpush/edge/jobs", "POST", logpush.create_edge_job, logs_write),
    ]
    return (
        table + rulesets.ROUTES + rules_lists.ROUTES + previous_waf.ROUTES + waf_migration.ROUTES + zone_settings.ROUTES
    )


def v4_routes(plane: ControlPlane) -> list[BaseRoute]:
    """Every ``/client/v4`` resource. Raises ``ValueError`` for a route whose permission cannot be checked (a path
    permission on a path naming no zone or account, or a family no permission group opens)."""
    families = permission_catalogue().families
    routes: list[BaseRoute] = []
    for route in v4_table(plane):
        permission = route.access.permission
        if permission is not None and permission.family not in families:
            raise ValueError(f"{route.method} {route.path}: no permission group opens {permission.family!r}")
        if route.access.on is On.PATH and "{zone_id}" not in route.path and "{account_id}" not in route.path:
            raise ValueError(f"{route.method} {route.path}: a path permission needs a zone or account in the path")
        # Starlette keeps looking past a route whose path matches but whose method does not.
        routes.append(Route(V4 + route.path, plane.endpoint(route.handler, route.access), methods=[route.method]))
    return routes


def build_api_app(
    plane: ControlPlane | None = None,
    *,
    propagation: PropagationHub | None = None,
    gateway: GatewayEndpoints | None = None,
) -> Starlette:
    """The control plane application; without a ``ControlPlane`` only health and metrics are served. With
    ``propagation``, a successful write is answered once the edge workers applied it (``WritePropagation``).
    ``gateway`` tells the dashboard where the edge serves the web3 gateways (their endpoint URLs)."""
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    routes: list[BaseRoute] = [Route("/healthz", healthz), Route("/metrics", prometheus_metrics)]
    if plane is not None:
        routes += v4_routes(plane)
    routes += [Route(V4 + "/{path:path}", unrouted, methods=methods), Route(V4, unrouted, methods=methods)]
    if plane is not None:
        routes += [
            *SignIn(plane, gateway=gateway).routes(),
            *filter_language_routes(),
            Mount("/", app=dashboard_assets()),
        ]
    app = Starlette(routes=routes)

    async def method_not_allowed(request: Request, exc: Exception) -> Response:
        return envelope_response(
            405, success=False, errors=[{"code": 10405, "message": f"method {request.method} not allowed"}], result=None
        )

    app.add_exception_handler(405, method_not_allowed)
    if propagation is not None:
        app.add_middleware(WritePropagation, hub=propagation)
    return app
