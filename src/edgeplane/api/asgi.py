"""The API listener's application: ``/healthz``, ``/metrics`` and the ``/client/v4`` control plane.

Until the control plane's resources exist, every ``/client/v4`` path answers a v4 envelope with error 7003 and
HTTP 404, as the real API does for a path it cannot route.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


async def healthz(request: Request) -> Response:
    """Liveness of the control plane."""
    return JSONResponse({"status": "ok"})


async def prometheus_metrics(request: Request) -> Response:
    """All metrics of the process in the Prometheus text format."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


async def unrouted(request: Request) -> Response:
    """A v4 envelope for a path the control plane does not serve."""
    return JSONResponse(
        {
            "success": False,
            "errors": [
                {
                    "code": 7003,
                    "message": f"Could not route to {request.url.path}, perhaps your object identifier is invalid?",
                }
            ],
            "messages": [],
            "result": None,
        },
        status_code=404,
    )


def build_api_app() -> Starlette:
    """The control plane application."""
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/metrics", prometheus_metrics),
            Route("/client/v4/{path:path}", unrouted, methods=methods),
            Route("/client/v4", unrouted, methods=methods),
        ]
    )
