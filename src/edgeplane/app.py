"""Wiring only: builds the gateway, the edge and API listeners from settings, and runs them until a signal."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path

import structlog
from sqlalchemy.exc import SQLAlchemyError

from edgeplane import __version__
from edgeplane.api.asgi import build_api_app
from edgeplane.api.endpoint import ControlPlane
from edgeplane.bootstrap import ensure_bootstrap, ensure_install_secret
from edgeplane.chain.process import ChainProcess
from edgeplane.child_process import ChildProcess
from edgeplane.config import NetworkSettings, Settings, UpstreamSettings
from edgeplane.edge.runtime import EdgeRuntime
from edgeplane.listeners import asgi_server, bind_listener, join_listener
from edgeplane.logs.delivery_process import take_journals
from edgeplane.logs.destinations import DestinationPolicy
from edgeplane.logs.log_store import SegmentedLogStore
from edgeplane.logs.partitions import partition_directory
from edgeplane.store.database import Database, default_database_url
from edgeplane.store.snapshot import SnapshotHolder, read_snapshot

log = structlog.get_logger(__name__)


class DatabaseUnavailable(OSError):
    """The configuration database could not be opened or migrated."""


def _with_dev_chain(settings: Settings, chain: ChainProcess | None) -> Settings:
    """The settings with the development chain as the upstream of every network that has none."""
    if chain is None:
        return settings
    networks = dict(settings.networks)
    for name in chain.networks:
        node = UpstreamSettings(url=chain.url(name), name="devchain", trace_filter="native")
        networks[name] = NetworkSettings(upstreams=[node])
    return settings.model_copy(update={"networks": networks})


def _settings_file(settings: Settings, edge_settings: Settings) -> Path:
    run_dir = settings.data_dir / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "resolved-settings.json"
    path.write_text(edge_settings.model_dump_json(), encoding="utf-8")
    return path


def _delivery(settings: Settings, edge_settings: Settings, database_url: str) -> ChildProcess:
    """The Logpush delivery process."""
    command = [
        sys.executable,
        "-m",
        "edgeplane",
        "delivery",
        "--settings-file",
        str(_settings_file(settings, edge_settings)),
        "--database-url",
        database_url,
        "--workers",
        str(settings.edge_worker_count),
    ]
    return ChildProcess("delivery", lambda _first: command)


def _edge_workers(
    settings: Settings, edge_settings: Settings, worker_sockets: list[socket.socket], database_url: str
) -> list[ChildProcess]:
    """Child processes that serve the edge port beside this process, each with its own gateway and its own
    listening socket on the port (``join_listener``). This process keeps every worker's socket open,
    so that connections made while a worker restarts wait for it rather than being refused."""
    settings_file = _settings_file(settings, edge_settings)
    command = [sys.executable, "-m", "edgeplane", "edge-worker", "--settings-file", str(settings_file)]
    command += ["--database-url", database_url]

    def worker(index: int, sock: socket.socket) -> ChildProcess:
        sock.set_inheritable(True)
        arguments = [*command, "--fd", str(sock.fileno()), "--worker", str(index)]
        return ChildProcess(f"edge-worker-{index}", lambda _first: arguments, pass_fds=(sock.fileno(),))

    return [worker(index, sock) for index, sock in enumerate(worker_sockets, start=1)]


async def serve(settings: Settings) -> None:
    """Runs the edge and API listeners until SIGINT or SIGTERM. Raises ``ListenError`` when a port is taken and
    ``DatabaseUnavailable`` when the configuration database cannot be used."""
    edge_socket = bind_listener(settings.edge_host, settings.edge_port, share_port=settings.edge_worker_count > 1)
    api_socket = bind_listener(settings.api_host, settings.api_port)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    database = Database(settings.database_url or default_database_url(settings.data_dir))
    try:
        database.migrate()
    except SQLAlchemyError as exc:
        raise DatabaseUnavailable(
            f"cannot open the configuration database: {exc.__class__.__name__}: {exc.args[0]}"
        ) from None
    if ensure_bootstrap(settings.data_dir, database):
        log.info(
            "created the bootstrap account, user, API token and zone",
            credentials_file=str(settings.data_dir / "credentials.json"),
        )
    snapshots = SnapshotHolder(read_snapshot(database))

    def reload_snapshot() -> None:
        snapshots.replace(read_snapshot(database))

    def place_cursors(dataset: str, job_id: int) -> None:
        for worker in range(settings.edge_worker_count):
            SegmentedLogStore(partition_directory(settings.data_dir, worker), writable=False).open_cursor(
                dataset, job_id
            )

    plane = ControlPlane(
        database,
        secret=ensure_install_secret(settings.data_dir),
        on_change=reload_snapshot,
        on_job_created=place_cursors if settings.logs.enabled else None,
        max_body_bytes=settings.api.max_body_bytes,
        destinations=DestinationPolicy.from_settings(settings),
    )
    chain_networks = [name for name, network in settings.networks.items() if not network.upstreams]
    chain: ChainProcess | None = None
    if chain_networks:
        dev_chain = settings.dev_chain
        chain = ChainProcess(
            networks=chain_networks,
            data_dir=settings.data_dir / "chain" if dev_chain.persist else None,
            chain_id=dev_chain.chain_id,
            block_time=dev_chain.block_time_seconds,
            fresh=dev_chain.fresh,
            log_level=settings.log_level,
        )
        await chain.start()
        if not await chain.wait_ready():
            log.error("the development chain did not become ready; its networks answer -32002 until it does")
        log.info(
            "networks without an upstream node are served by the embedded development chain",
            networks=chain_networks,
            chain_id=dev_chain.chain_id,
        )
    edge_settings = _with_dev_chain(settings, chain)
    for name, network in edge_settings.networks.items():
        if name not in chain_networks:
            log.info("network ready", network=name, upstreams=[node.label for node in network.upstreams])
    runtime = EdgeRuntime.build(edge_settings, snapshots, worker=0)
    worker_sockets = [join_listener(edge_socket) for _ in range(settings.edge_worker_count - 1)]
    workers = _edge_workers(settings, edge_settings, worker_sockets, database.url)
    delivery = _delivery(settings, edge_settings, database.url) if settings.logs.enabled else None
    for worker in workers:
        await worker.start()
    if delivery is not None:
        await delivery.start()
    api = asgi_server(build_api_app(plane), limits=settings.api)

    def stop() -> None:
        runtime.server.shutdown()
        api.should_exit = True

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop)
    log.info(
        "edgeplane started",
        version=__version__,
        edge=f"http://{settings.edge_host}:{edge_socket.getsockname()[1]}",
        edge_workers=settings.edge_worker_count,
        api=f"http://{settings.api_host}:{api_socket.getsockname()[1]}",
        data_dir=str(settings.data_dir),
    )
    try:
        await asyncio.gather(runtime.server.serve(edge_socket), api.serve([api_socket]))
    finally:
        for sock in worker_sockets:
            sock.close()  # each worker's own copy keeps it listening until it stops
        for worker in workers:
            await worker.stop()
        await runtime.close()
        if delivery is not None:
            await delivery.stop()  # last: it takes what the edge workers journalled until they stopped
            # What it did not take (stopped before it was ready to): no other writer is left.
            try:
                taken = await asyncio.to_thread(take_journals, settings, settings.edge_worker_count)
            except Exception:  # the journals stay for the next start
                log.exception("request journals not taken into the log store at shutdown")
            else:
                if taken:
                    log.info("request journals taken into the log store at shutdown", records=taken)
        if chain is not None:
            await chain.stop()
        database.close()
