"""Wiring only: builds the gateway, the edge and API listeners from settings, and runs them until a signal."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator

import aiohttp
import structlog
import uvicorn

from edgeplane import __version__
from edgeplane.api.asgi import build_api_app
from edgeplane.bootstrap import BOOTSTRAP_WEB3_HOSTNAMES, ensure_credentials
from edgeplane.config import Settings
from edgeplane.edge.asgi import EdgeApp, EdgeRoutes
from edgeplane.gateway.policy import load_method_policy
from edgeplane.gateway.service import Gateway
from edgeplane.gateway.upstream import UpstreamNode
from edgeplane.gateway.upstream_pool import UpstreamPool

log = structlog.get_logger(__name__)


class _Listener(uvicorn.Server):
    """A uvicorn server that leaves signal handling to ``serve`` (two listeners share one loop)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    @property
    def bound_port(self) -> int | None:
        """The port actually bound (useful with port 0)."""
        for server in getattr(self, "servers", []):
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return None


def _listener(app: object, host: str, port: int) -> _Listener:
    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        loop="none",
        http="httptools",
        ws="none",
        lifespan="off",
        access_log=False,
        log_config=None,
        server_header=False,
        date_header=False,
        timeout_keep_alive=30,
    )
    return _Listener(config)


def build_pools(settings: Settings, session: aiohttp.ClientSession) -> dict[str, UpstreamPool]:
    """One upstream pool per configured network."""
    timeout = settings.gateway.request_timeout_seconds
    return {
        name: UpstreamPool(
            name,
            [UpstreamNode(node, session, timeout_seconds=timeout) for node in network.upstreams],
            settings.gateway,
        )
        for name, network in settings.networks.items()
    }


async def serve(settings: Settings) -> None:
    """Runs the edge and API listeners until SIGINT or SIGTERM."""
    credentials, created = ensure_credentials(settings.data_dir)
    if created:
        log.info(
            "created the bootstrap account, user and zone",
            credentials_file=str(settings.data_dir / "credentials.json"),
            zone=credentials.zone_name,
        )
    connector = aiohttp.TCPConnector(limit=512, limit_per_host=128, ttl_dns_cache=300)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=True) as session:
        pools = build_pools(settings, session)
        for name, pool in pools.items():
            if pool.nodes:
                log.info("network ready", network=name, upstreams=[node.label for node in pool.nodes])
            else:
                log.warning(
                    "network has no upstream node; its requests are answered with error -32002",
                    network=name,
                )
            pool.start()
        gateway = Gateway(load_method_policy(), pools, settings.gateway)
        edge = EdgeApp(
            gateway,
            EdgeRoutes(web3_hostnames=frozenset(BOOTSTRAP_WEB3_HOSTNAMES)),
            max_body_bytes=settings.gateway.max_body_bytes,
        )
        listeners = [
            _listener(edge, settings.edge_host, settings.edge_port),
            _listener(build_api_app(), settings.api_host, settings.api_port),
        ]

        def stop() -> None:
            for listener in listeners:
                listener.should_exit = True

        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop)
        tasks = [asyncio.create_task(listener.serve()) for listener in listeners]
        while not all(listener.started for listener in listeners):
            if any(task.done() for task in tasks):
                break
            await asyncio.sleep(0.01)
        if all(listener.started for listener in listeners):
            log.info(
                "edgeplane started",
                version=__version__,
                edge=f"http://{settings.edge_host}:{listeners[0].bound_port}",
                api=f"http://{settings.api_host}:{listeners[1].bound_port}",
                data_dir=str(settings.data_dir),
            )
        else:
            stop()
        try:
            await asyncio.gather(*tasks)
        finally:
            for pool in pools.values():
                await pool.stop()
        failed = [task for task in tasks if task.exception() is not None]
        if failed or not all(listener.started for listener in listeners):
            raise SystemExit("edgeplane could not start its listeners (is the port in use?)")
