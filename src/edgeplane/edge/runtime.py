"""One edge worker's runtime: the upstream pools, the gateway, the router and the HTTP server, built from settings;
and the worker process, which follows configuration changes made by the control plane as they are announced
(``edgeplane.propagation``), off the request path.

A worker compiles the OWASP Core Rule Set before it serves (when it is installed), whatever its zones deploy: the
compilation takes seconds of CPU, longer than the bound within which a configuration change must be applied, so a
worker that compiled it only when a zone first deployed the OWASP Core Ruleset would still enforce the previous
deployment after the API answered."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import structlog

from edgeplane import batched_counts
from edgeplane.config import Settings
from edgeplane.configuration.snapshot import EdgeSnapshot, SnapshotHolder, read_edge_snapshot
from edgeplane.edge.client_location import ClientLocator
from edgeplane.edge.http_server import HttpServer
from edgeplane.edge.request_log import RequestLog
from edgeplane.edge.router import EdgeRouter
from edgeplane.edge.websocket import WebSocketLimits
from edgeplane.gateway.method_costs import MethodCosts
from edgeplane.gateway.policy import load_method_policy
from edgeplane.gateway.request_facts import JsonRpcReader, known_heads
from edgeplane.gateway.service import Gateway
from edgeplane.gateway.upstream import UpstreamNode
from edgeplane.gateway.upstream_pool import UpstreamPool
from edgeplane.logs.attack_score_jobs import logs_attack_scores
from edgeplane.logs.partitions import journal_directory
from edgeplane.logs.request_journal import RequestJournal
from edgeplane.metrics import RATELIMIT_COUNTERS, RATELIMIT_EVICTIONS
from edgeplane.propagation.channel import followed_channel
from edgeplane.propagation.follower import ConfigurationFollower
from edgeplane.rate_counters import RateCounters
from edgeplane.store.database import Database
from edgeplane.waf.core_ruleset import prepare_core_rule_set
from edgeplane.waf.rate_limits import now_ms

log = structlog.get_logger(__name__)


def build_pools(settings: Settings) -> dict[str, UpstreamPool]:
    """One upstream pool per configured network; each node keeps its own keep-alive connections."""
    timeout = settings.gateway.request_timeout_seconds
    return {
        name: UpstreamPool(
            name,
            [
                UpstreamNode(node, timeout_seconds=timeout, max_answer_bytes=settings.gateway.max_answer_bytes)
                for node in network.upstreams
            ],
            settings.gateway,
        )
        for name, network in settings.networks.items()
    }


def open_client_locator(settings: Settings, *, describe: bool = False) -> ClientLocator:
    """The locator of the client's country and ASN from the ``logs.client_*`` settings, its databases open; with
    ``describe``, logs what each database is (the supervisor does, once, when it checks them before starting the edge
    workers). Raises ``ClientDatabaseError`` when a database cannot be opened."""
    logs = settings.logs
    locator = ClientLocator.open(
        country_header=logs.client_country_header,
        asn_header=logs.client_asn_header,
        country_database=logs.client_country_database,
        asn_database=logs.client_asn_database,
    )
    if describe:
        for database in locator.databases:
            log.info(
                "client location database opened",
                path=database.path,
                serves=list(database.serves),
                database_type=database.database_type,
                built=datetime.fromtimestamp(database.build_epoch, UTC).isoformat(),
                ip_version=database.ip_version,
            )
    return locator


def read_worker_snapshot(database: Database) -> EdgeSnapshot:
    """An edge worker's snapshot of the current configuration: ``read_edge_snapshot``, its zones scored for the
    logs found by the logs package's test of each job (``logs_attack_scores``)."""
    return read_edge_snapshot(database, logs_attack_scores=logs_attack_scores)


@dataclass(slots=True)
class EdgeRuntime:
    """What an edge worker runs."""

    pools: dict[str, UpstreamPool]
    gateway: Gateway
    server: HttpServer
    request_log: RequestLog | None
    locator: ClientLocator

    @classmethod
    def build(
        cls,
        settings: Settings,
        snapshots: SnapshotHolder[EdgeSnapshot],
        *,
        worker: int,
        counters: RateCounters | None = None,
    ) -> EdgeRuntime:
        """Builds the runtime and starts the pools' health checks (call from a running loop). Raises
        ``ClientDatabaseError`` (before starting anything) when a client location database cannot be opened."""
        locator = open_client_locator(settings)
        pools = build_pools(settings)
        for pool in pools.values():
            pool.start()
        gateway = Gateway(load_method_policy(), pools, settings.gateway)
        request_log = None
        if settings.logs.enabled:
            journal = RequestJournal(
                journal_directory(settings.data_dir, worker), max_backlog_bytes=settings.logs.retention_bytes
            )
            request_log = RequestLog(journal)
        reader = JsonRpcReader(MethodCosts.from_settings(settings.gateway.costs), known_heads(pools))
        edge = settings.edge
        websocket = (
            WebSocketLimits(
                max_message_bytes=edge.websocket_max_message_bytes,
                max_send_queue_bytes=edge.websocket_send_queue_bytes,
                idle_seconds=edge.websocket_idle_timeout_seconds,
                max_subscriptions=edge.websocket_max_subscriptions,
            )
            if edge.websocket
            else None
        )
        router = EdgeRouter(
            gateway,
            snapshots,
            request_log,
            locator,
            counters=counters.table if counters else None,
            jsonrpc_reader=reader,
            websocket_limits=websocket,
            head_poll_seconds=edge.websocket_head_poll_seconds,
        )
        server = HttpServer(
            router,
            max_body_bytes=settings.gateway.max_body_bytes,
            max_head_bytes=edge.max_header_bytes,
            max_headers=edge.max_headers,
            max_connections=edge.max_connections,
            idle_seconds=edge.idle_timeout_seconds,
            read_seconds=edge.request_timeout_seconds,
        )
        return cls(pools=pools, gateway=gateway, server=server, request_log=request_log, locator=locator)

    async def close(self) -> None:
        """Stops health checks, closes upstream connections, and journals and seals every log record that waits (the
        delivery process takes them into the log store)."""
        for pool in self.pools.values():
            await pool.stop()
            for node in pool.nodes:
                node.close()
        if self.request_log is not None:
            self.request_log.close()
        batched_counts.publish()
        self.locator.close()


async def run_edge_worker(
    settings: Settings, listener: socket.socket, database_url: str, *, worker: int, rate_counters_fd: int | None = None
) -> None:
    """An edge worker process: serves ``listener`` until SIGINT or SIGTERM. ``rate_counters_fd``: the node's rate
    counters, shared with the other workers (without it, a table of this worker's own)."""
    database = Database(database_url)
    await asyncio.to_thread(prepare_core_rule_set)
    snapshots = SnapshotHolder(await asyncio.to_thread(read_worker_snapshot, database))
    counters = (
        RateCounters.attach(rate_counters_fd)
        if rate_counters_fd is not None
        else RateCounters.create(settings.ratelimit.counter_slots)
    )
    runtime = EdgeRuntime.build(settings, snapshots, worker=worker, counters=counters)
    reporting = asyncio.create_task(_report_counters(counters))
    following = ConfigurationFollower(
        database,
        snapshots,
        read=read_worker_snapshot,
        role="edge",
        worker=worker,
        channel=followed_channel(settings.data_dir, settings.role),
    )
    follower = asyncio.create_task(following.run())
    log.info("edge worker serving", worker=worker, edge=f"http://{settings.edge_host}:{listener.getsockname()[1]}")
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, runtime.server.shutdown)
    try:
        await runtime.server.serve(listener)
    finally:
        for task in (follower, reporting):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await runtime.close()
        database.close()


COUNTER_REPORT_SECONDS: Final = 10.0


async def _report_counters(counters: RateCounters) -> None:
    """Publishes the rate counter table's state every ``COUNTER_REPORT_SECONDS``: its evictions (each worker takes
    those made since the last report, so they add up across workers once) and how many counters are live."""
    table = counters.table
    RATELIMIT_COUNTERS.labels("slots").set(table.slots)
    while True:
        await asyncio.sleep(COUNTER_REPORT_SECONDS)
        evictions, _saturations = table.take_counts()
        if evictions:
            RATELIMIT_EVICTIONS.inc(evictions)
        RATELIMIT_COUNTERS.labels("live").set(table.occupied(now_ms()))
