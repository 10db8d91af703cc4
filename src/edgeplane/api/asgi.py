"""The API listener's application: ``/healthz``, ``/metrics`` and the ``/client/v4`` control plane.

A ``/client/v4`` path that no resource serves answers a v4 envelope with error 7003 and HTTP 404, as the real API
does for a path it cannot route.
"""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from edgeplane.api import accounts, logpush, previous_waf, rulesets, tokens, waf_migration, web3_hostnames, zones
from edgeplane.api.endpoint import ControlPlane, Handler, envelope_response
from edgeplane.api.errors import not_found

V4 = "/client/v4"


async def healthz(request: Request) -> Response:
    """Liveness of the control plane."""
    return JSONResponse({"status": "ok"})


async def prometheus_metrics(request: Request) -> Response:
    """All metrics in the Prometheus text format: of every edge worker process when there are several."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


async def unrouted(request: Request) -> Response:
    """A v4 envelope for a path the control plane does not serve."""
    error = not_found(request.url.path)
    return envelope_response(error.status, success=False, errors=error.errors, result=None)


def v4_routes(plane: ControlPlane) -> list[BaseRoute]:
    """Every ``/client/v4`` resource."""
    endpoint = plane.endpoint
    table: list[tuple[str, str, Handler]] = [
        ("/user/tokens/verify", "GET", tokens.verify_token),
        ("/user/tokens", "GET", tokens.list_tokens),
        ("/user/tokens", "POST", tokens.create_token),
        ("/user/tokens/{token_id}", "GET", tokens.get_token),
        ("/user/tokens/{token_id}", "DELETE", tokens.delete_token),
        ("/accounts", "GET", accounts.list_accounts),
        ("/accounts/{account_id}", "GET", accounts.get_account),
        ("/zones", "GET", zones.list_zones),
        ("/zones", "POST", zones.create_zone),
        ("/zones/{zone_id}", "GET", zones.get_zone),
        ("/zones/{zone_id}", "PATCH", zones.edit_zone),
        ("/zones/{zone_id}", "DELETE", zones.delete_zone),
        ("/zones/{zone_id}/web3/hostnames", "GET", web3_hostnames.list_hostnames),
        ("/zones/{zone_id}/web3/hostnames", "POST", web3_hostnames.create_hostname),
        ("/zones/{zone_id}/web3/hostnames/{identifier}", "GET", web3_hostnames.get_hostname),
        ("/zones/{zone_id}/web3/hostnames/{identifier}", "PATCH", web3_hostnames.edit_hostname),
        ("/zones/{zone_id}/web3/hostnames/{identifier}", "DELETE", web3_hostnames.delete_hostname),
    ]
    ownership = logpush.Ownership(plane.secret)
    for scope in ("/zones/{zone_id}", "/accounts/{account_id}"):
        base = scope + "/logpush"
        table += [
            (base + "/jobs", "GET", logpush.list_jobs),
            (base + "/jobs", "POST", logpush.create_job),
            (base + "/jobs/{job_id}", "GET", logpush.get_job),
            (base + "/jobs/{job_id}", "PUT", logpush.update_job),
            (base + "/jobs/{job_id}", "DELETE", logpush.delete_job),
            (base + "/datasets/{dataset}/fields", "GET", logpush.dataset_fields),
            (base + "/datasets/{dataset}/jobs", "GET", logpush.dataset_jobs),
            (base + "/ownership", "POST", ownership.request_challenge),
            (base + "/ownership/validate", "POST", ownership.validate),
            (base + "/validate/destination", "POST", logpush.validate_destination),
            (base + "/validate/destination/exists", "POST", logpush.destination_exists),
            (base + "/validate/origin", "POST", logpush.validate_origin),
        ]
    table += rulesets.ROUTES + previous_waf.ROUTES + waf_migration.ROUTES
    # Starlette keeps looking past a route whose path matches but whose method does not.
    return [Route(V4 + path, endpoint(handler), methods=[method]) for path, method, handler in table]


def build_api_app(plane: ControlPlane | None = None) -> Starlette:
    """The control plane application; without a ``ControlPlane`` only health and metrics are served."""
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    routes: list[BaseRoute] = [Route("/healthz", healthz), Route("/metrics", prometheus_metrics)]
    if plane is not None:
        routes += v4_routes(plane)
    routes += [Route(V4 + "/{path:path}", unrouted, methods=methods), Route(V4, unrouted, methods=methods)]
    app = Starlette(routes=routes)

    async def method_not_allowed(request: Request, exc: Exception) -> Response:
        return envelope_response(
            405, success=False, errors=[{"code": 10405, "message": f"method {request.method} not allowed"}], result=None
        )

    app.add_exception_handler(405, method_not_allowed)
    return app
