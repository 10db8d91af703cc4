"""``edgeplane status``: the state of a cluster as an operator asks for it, read from the cluster's database and log
bus (docs/scale.md): the nodes of the register and how long ago each beat; each Logpush job with the delivery process
holding its lease, its cursor and its lag; each dataset's stream with its records, bytes and replicas; and the upstream
nodes of this machine's gateway with their scores, states and why, as its edge workers last published them to the
metrics directory (``<data dir>/run/metrics``, read as ``/metrics`` reads it). On a single machine (SQLite, no bus) it
says so and shows the jobs."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, multiprocess
from sqlalchemy import select

from edgeplane.config import Settings, redacted_url
from edgeplane.logs.bus_connection import BusConnection, BusUnavailable
from edgeplane.logs.bus_source import BusSource, SharedCursors
from edgeplane.logs.bus_streams import stream_name
from edgeplane.logs.datasets import DATASETS
from edgeplane.store.cluster_nodes import HEARTBEAT_SECONDS, registered_nodes
from edgeplane.store.database import Database, default_database_url
from edgeplane.store.database_clock import database_seconds
from edgeplane.store.delivery_models import DeliveryMember, JobCursor, JobLease
from edgeplane.store.models import LogpushJob

# A node whose last beat is older than this many heartbeats is shown as gone.
_MISSED_BEATS = 3
_BUS_TIMEOUT_SECONDS = 3.0


@dataclass(frozen=True)
class NodeState:
    name: str
    role: str
    host: str
    addresses: str
    version: str
    seconds_since_heartbeat: float
    alive: bool


@dataclass(frozen=True)
class JobState:
    id: int
    dataset: str
    name: str
    enabled: bool
    lease_owner: str | None
    lease_seconds_left: float | None
    cursor: int | None
    lag_records: int | None
    last_complete: str | None
    error_message: str | None


@dataclass(frozen=True)
class StreamState:
    dataset: str
    stream: str
    records_messages: int | None = None
    bytes: int | None = None
    first_sequence: int | None = None
    last_sequence: int | None = None
    replicas: int | None = None
    leader: str | None = None
    replicas_current: list[str] = field(default_factory=list)
    replicas_behind: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class UpstreamState:
    """One upstream node as this machine's edge workers score it (docs/gateway.md, "Scored selection")."""

    network: str
    upstream: str
    score: float
    state: str
    factors: dict[str, float]

    @property
    def reason(self) -> str:
        if self.state == "open":
            return "circuit open: too many of its last exchanges failed"
        if self.state == "half_open":
            return "circuit half-open: the next read is its probe"
        if self.state == "failing":
            return "its last exchange or check failed"
        if self.state == "lagging":
            return "its head is further behind than max_lag_blocks"
        if not self.factors or min(self.factors.values()) >= 1.0:
            return "as good as the best"
        weakest = min(self.factors, key=lambda name: self.factors[name])
        return f"held back most by {weakest} ({self.factors[weakest]:.2f})"


@dataclass(frozen=True)
class ClusterState:
    database: str
    bus: list[str]
    single_machine: bool
    nodes: list[NodeState]
    delivery_members: list[str]
    jobs: list[JobState]
    streams: list[StreamState]
    bus_error: str | None
    upstreams: list[UpstreamState] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        document = asdict(self)
        document["upstreams"] = [{**asdict(upstream), "reason": upstream.reason} for upstream in self.upstreams]
        return document


class _NoCursors:
    """The status only reads: it never moves a cursor."""

    def load(self, dataset: str, job_id: int) -> int | None:
        return None

    def save(self, dataset: str, job_id: int, position: int) -> None:
        raise PermissionError("edgeplane status does not move cursors")

    def delete(self, dataset: str, job_id: int) -> None:
        raise PermissionError("edgeplane status does not move cursors")


def read_cluster_state(settings: Settings) -> ClusterState:
    """The cluster's state now. Raises ``sqlalchemy.exc.SQLAlchemyError`` when the database cannot be read; a bus
    that does not answer is reported in the state (``bus_error``), not raised."""
    url = settings.database_url or default_database_url(settings.data_dir)
    database = Database(url)
    try:
        return _read(settings, database)
    finally:
        database.close()


def _read(settings: Settings, database: Database) -> ClusterState:
    in_cluster = database.engine.dialect.name == "postgresql"
    nodes = []
    if in_cluster:
        for seen in registered_nodes(database):
            node = seen.description
            nodes.append(
                NodeState(
                    node.name,
                    node.role,
                    node.host,
                    node.addresses,
                    node.version,
                    round(seen.seconds_since_heartbeat, 1),
                    seen.seconds_since_heartbeat < _MISSED_BEATS * HEARTBEAT_SECONDS,
                )
            )
    with database.session() as session:
        now = float(session.scalar(select(database_seconds())) or 0.0)
        jobs = session.scalars(select(LogpushJob).order_by(LogpushJob.id)).all()
        leases = {lease.job_id: lease for lease in session.scalars(select(JobLease)).all()}
        cursors = {(cursor.dataset, cursor.job_id): cursor.position for cursor in session.scalars(select(JobCursor))}
        members = [
            member.owner
            for member in session.scalars(select(DeliveryMember).order_by(DeliveryMember.owner))
            if now - member.heartbeat < settings.bus.lease_seconds
        ]
        rows = [
            (
                job.id,
                job.dataset,
                job.name,
                job.enabled,
                leases.get(job.id),
                cursors.get((job.dataset, job.id)),
                job.last_complete.isoformat() if job.last_complete else None,
                job.error_message,
            )
            for job in jobs
        ]
    streams: list[StreamState] = []
    bus_error = None
    source = None
    connection = None
    if settings.bus.url is not None:
        connection = BusConnection(settings.bus.servers, name="edgeplane-status", timeout=_BUS_TIMEOUT_SECONDS)
        cursors_protocol: SharedCursors = _NoCursors()
        source = BusSource(connection, cursors_protocol)
        streams = [_stream_state(connection, dataset) for dataset in DATASETS]
        bus_error = next((stream.error for stream in streams if stream.error), None)
    try:
        job_states = []
        for job_id, dataset, name, enabled, lease, cursor, last_complete, error in rows:
            held = lease is not None and lease.owner is not None and lease.expires > now
            lag = None
            if source is not None and cursor is not None and bus_error is None:
                try:
                    lag = source.lag_records(dataset, cursor)
                except BusUnavailable:
                    lag = None
            job_states.append(
                JobState(
                    job_id,
                    dataset,
                    name,
                    enabled,
                    lease.owner if held and lease is not None else None,
                    round(lease.expires - now, 1) if held and lease is not None else None,
                    cursor,
                    lag,
                    last_complete,
                    error,
                )
            )
    finally:
        if connection is not None:
            connection.close()
    return ClusterState(
        database=redacted_url(database.url),
        bus=[redacted_url(server) for server in settings.bus.servers],
        single_machine=not in_cluster and settings.bus.url is None,
        nodes=nodes,
        delivery_members=members,
        jobs=job_states,
        streams=streams,
        bus_error=bus_error,
        upstreams=read_upstream_states(settings.data_dir / "run" / "metrics"),
    )


def read_upstream_states(directory: Path) -> list[UpstreamState]:
    """The upstream gauges the processes of ``edgeplane serve`` wrote to ``directory`` (none when it is not there)."""
    if not directory.is_dir():
        return []
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    scores: dict[tuple[str, str], float] = {}
    states: dict[tuple[str, str], str] = {}
    factors: dict[tuple[str, str], dict[str, float]] = {}
    for family in registry.collect():
        for sample in family.samples:
            labels = sample.labels
            key = (labels.get("network", ""), labels.get("upstream", ""))
            if sample.name == "edgeplane_upstream_score":
                scores[key] = sample.value
            elif sample.name == "edgeplane_upstream_state" and sample.value == 1:
                states[key] = labels.get("state", "")
            elif sample.name == "edgeplane_upstream_score_factor":
                factors.setdefault(key, {})[labels.get("factor", "")] = sample.value
    return [
        UpstreamState(
            network,
            upstream,
            round(score, 3),
            states.get((network, upstream), "unknown"),
            factors.get((network, upstream), {}),
        )
        for (network, upstream), score in sorted(scores.items())
    ]


def _stream_state(connection: BusConnection, dataset: str) -> StreamState:
    name = stream_name(dataset)

    async def info(jetstream: Any) -> Any:
        return await jetstream.stream_info(name)

    try:
        answer = connection.run(info)
    except BusUnavailable as error:
        return StreamState(dataset, name, error=str(error))
    state = answer.state
    cluster = answer.cluster
    replicas = list(cluster.replicas or []) if cluster is not None else []
    return StreamState(
        dataset,
        name,
        records_messages=state.messages,
        bytes=state.bytes,
        first_sequence=state.first_seq,
        last_sequence=state.last_seq,
        replicas=answer.config.num_replicas,
        leader=cluster.leader if cluster is not None else None,
        replicas_current=[replica.name for replica in replicas if replica.current],
        replicas_behind=[replica.name for replica in replicas if not replica.current],
    )


def render_cluster_state(state: ClusterState) -> str:
    """The state as text for a terminal."""
    lines = [f"database: {state.database}"]
    if state.single_machine:
        lines.append("single machine (no cluster database, no log bus): edgeplane serve runs every part here")
    else:
        lines.append(f"log bus: {', '.join(state.bus) or '(none)'}")
        lines.append("")
        lines.append("nodes:")
        if not state.nodes:
            lines.append("  (none registered)")
        for node in state.nodes:
            health = "alive" if node.alive else "gone"
            lines.append(
                f"  {node.name:<30} {node.role:<9} {health:<6} beat {node.seconds_since_heartbeat:>6.1f} s ago  "
                f"{node.addresses}"
            )
        lines.append(f"delivery processes holding leases: {len(state.delivery_members)}")
    lines.append("")
    lines.append("Logpush jobs:")
    if not state.jobs:
        lines.append("  (none)")
    for job in state.jobs:
        owner = f"leased to {job.lease_owner} ({job.lease_seconds_left} s left)" if job.lease_owner else "no owner"
        lag = "" if job.lag_records is None else f"  lag ≈{job.lag_records} records"
        error = f"  error: {job.error_message}" if job.error_message else ""
        enabled = "enabled" if job.enabled else "disabled"
        lines.append(f"  {job.id:>5} {job.dataset:<16} {enabled:<8} {owner}{lag}{error}")
    if state.streams:
        lines.append("")
        lines.append("streams:")
        for stream in state.streams:
            if stream.error:
                lines.append(f"  {stream.stream:<28} unavailable: {stream.error}")
                continue
            behind = f", behind: {', '.join(stream.replicas_behind)}" if stream.replicas_behind else ""
            lines.append(
                f"  {stream.stream:<28} {stream.records_messages} messages, {stream.bytes} bytes, "
                f"sequences {stream.first_sequence}..{stream.last_sequence}, replicas {stream.replicas} "
                f"(leader {stream.leader or '-'}{behind})"
            )
    lines.append("")
    lines.append("upstreams (of this machine's gateway):")
    if not state.upstreams:
        lines.append("  (none reported: edgeplane serve is not running here, or has not checked its nodes yet)")
    for upstream in state.upstreams:
        parts = ", ".join(f"{name} {value:.2f}" for name, value in sorted(upstream.factors.items()))
        lines.append(
            f"  {upstream.network:<12} {upstream.upstream:<28} score {upstream.score:.2f}  {upstream.state:<9} "
            f"{upstream.reason}  ({parts})"
        )
    lines.append("")
    lines.append(f"as of {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    return "\n".join(lines)
