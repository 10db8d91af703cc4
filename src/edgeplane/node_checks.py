"""A node's health, readiness and metrics, served by the supervisor on ``--ops-port`` (any role): what a load
balancer or an orchestrator asks of a machine of a cluster, whose role may not run the API (which serves ``/healthz``
and ``/metrics`` on its own port).

- ``GET /healthz``: 200 while the supervisor runs (liveness).
- ``GET /readyz``: 200 when every child of the node's role runs and each dependency of the role answers (the
  configuration database; the log bus for an edge or delivery node), else 503; the body names each check.
- ``GET /metrics``: the Prometheus metrics of every process of the node.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from sqlalchemy import text
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from edgeplane.child_process import ChildProcess
from edgeplane.metrics import EXPOSITION_TYPE, exposition
from edgeplane.store.database import Database

# How long one dependency may take to answer a readiness check.
CHECK_TIMEOUT_SECONDS = 2.0

Check = Callable[[], Awaitable[str | None]]  # None: passed; else what is wrong


@dataclass(frozen=True)
class NodeChecks:
    """The readiness checks of one node: its role's children and dependencies, by name."""

    role: str
    node_name: str
    checks: dict[str, Check]

    async def run(self) -> dict[str, str | None]:
        """Every check's outcome (None: passed), the checks run side by side, each bounded in time."""
        names = list(self.checks)
        outcomes = await asyncio.gather(*(_bounded(self.checks[name]) for name in names))
        return dict(zip(names, outcomes, strict=True))


async def _bounded(check: Check) -> str | None:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
            return await check()
    except TimeoutError:
        return f"no answer within {CHECK_TIMEOUT_SECONDS:g} s"
    except Exception as error:  # a check that fails is an answer, never a 500
        return f"{type(error).__name__}: {error}"


def children_check(children: Sequence[ChildProcess]) -> Check:
    """Passes while every child runs (not between a death and its restart)."""

    async def check() -> str | None:
        down = [child.name for child in children if not child.running]
        return f"not running: {', '.join(down)}" if down else None

    return check


def database_check(database: Database) -> Check:
    """Passes when the configuration database answers a query."""

    def ask() -> None:
        with database.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    async def check() -> str | None:
        await asyncio.to_thread(ask)
        return None

    return check


def bus_check(servers: Sequence[str]) -> Check:
    """Passes when one of the log bus's servers greets a connection (a NATS server's first line is ``INFO``). The
    supervisor keeps no bus client of its own (its children do): a greeting is all readiness needs."""

    async def check() -> str | None:
        failures = []
        for server in servers:
            split = urlsplit(server)
            try:
                reader, writer = await asyncio.open_connection(split.hostname, split.port or 4222)
            except OSError as error:
                failures.append(f"{split.hostname}:{split.port or 4222}: {error.strerror or error}")
                continue
            try:
                greeting = await reader.readline()
            finally:
                writer.close()
            if greeting.startswith(b"INFO "):
                return None
            failures.append(f"{split.hostname}:{split.port or 4222}: not a NATS server")
        return "; ".join(failures) or "no server configured"

    return check


def node_checks_app(node: NodeChecks) -> Starlette:
    """The ops listener's application."""
    started = time.time()

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "role": node.role, "node": node.node_name})

    async def readyz(request: Request) -> Response:
        outcomes = await node.run()
        ready = all(outcome is None for outcome in outcomes.values())
        body = {
            "ready": ready,
            "role": node.role,
            "node": node.node_name,
            "uptime_seconds": round(time.time() - started, 1),
            "checks": {name: {"ok": outcome is None, "error": outcome} for name, outcome in outcomes.items()},
        }
        return JSONResponse(body, status_code=200 if ready else 503)

    async def metrics(request: Request) -> Response:
        return Response(await asyncio.to_thread(exposition), media_type=EXPOSITION_TYPE)

    return Starlette(
        routes=[Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics)],
    )
