"""The API process: the control plane's ASGI application on the API listener, a child of ``edgeplane serve`` of its
own, so that a crash or an exhaustion of the API leaves the edge workers serving (they keep the configuration they
have, and check the database now and then). It announces each configuration change to the followers on the
configuration channel (``edgeplane.propagation``) and answers a write once the edge workers applied it."""

from __future__ import annotations

import asyncio
import signal
import socket

import structlog

from edgeplane.api.asgi import build_api_app
from edgeplane.api.endpoint import ControlPlane
from edgeplane.api.install_secret import ensure_install_secret
from edgeplane.api.sign_in import GatewayEndpoints
from edgeplane.config import Settings
from edgeplane.listeners import asgi_server
from edgeplane.logs.destinations import DestinationPolicy
from edgeplane.logs.log_store import SegmentedLogStore
from edgeplane.logs.partitions import partition_directory
from edgeplane.propagation.hub import PropagationHub
from edgeplane.store.database import Database

log = structlog.get_logger(__name__)


def build_control_plane(settings: Settings, database: Database) -> ControlPlane:
    """The control plane over ``database``, with this installation's secret and the operator's destination policy; a
    new Logpush job's cursors are placed at the current end of every edge worker's log partition."""

    def place_cursors(dataset: str, job_id: int) -> None:
        for worker in range(settings.edge_worker_count):
            SegmentedLogStore(partition_directory(settings.data_dir, worker), writable=False).open_cursor(
                dataset, job_id
            )

    return ControlPlane(
        database,
        secret=ensure_install_secret(settings.data_dir),
        on_job_created=place_cursors if settings.logs.enabled else None,
        max_body_bytes=settings.api.max_body_bytes,
        destinations=DestinationPolicy.from_settings(settings),
        data_dir=settings.data_dir,
    )


async def run_api(
    settings: Settings, listener: socket.socket, database_url: str, *, channel: socket.socket | None = None
) -> None:
    """The API process: serves ``listener`` (bound by ``edgeplane serve``) until SIGINT or SIGTERM; accepts
    configuration followers on ``channel`` (the configuration channel's listening socket)."""
    database = Database(database_url)
    hub = PropagationHub(database, channel, timeout_seconds=settings.api.propagation_timeout_seconds)
    await hub.start()
    gateway = GatewayEndpoints(port=settings.edge_port, networks=tuple(settings.networks))
    app = build_api_app(build_control_plane(settings, database), propagation=hub, gateway=gateway)
    server = asgi_server(app, limits=settings.api)

    def stop() -> None:
        server.should_exit = True

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop)
    log.info("API process serving", api=f"http://{settings.api_host}:{listener.getsockname()[1]}")
    try:
        await server.serve([listener])
    finally:
        await hub.close()
        database.close()
