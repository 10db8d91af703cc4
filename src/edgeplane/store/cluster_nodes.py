"""The cluster's register of nodes: each node's supervisor records itself (name, role, host, addresses, version) and
beats every few seconds, so that ``edgeplane status`` can say which nodes are alive. Kept only where a cluster's
nodes share a database (PostgreSQL); the times are the database's, so the nodes' clocks need not agree."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import DateTime, Integer, String, func, select
from sqlalchemy.orm import Mapped, mapped_column

from edgeplane.store.conflicting_insert import conflicting_insert
from edgeplane.store.database import Database
from edgeplane.store.models import Base

# How often a node records that it is alive; a node silent for a few of these is gone.
HEARTBEAT_SECONDS = 5.0


class ClusterNode(Base):
    """A node of the cluster, as it last described itself."""

    __tablename__ = "cluster_nodes"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    version: Mapped[str] = mapped_column(String(32))
    addresses: Mapped[str] = mapped_column(String(1000))  # "edge=http://…, api=…, ops=…"
    started_on: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    heartbeat_on: Mapped[datetime] = mapped_column(DateTime(timezone=True))


@dataclass(frozen=True)
class NodeDescription:
    """What a node says of itself."""

    name: str
    role: str
    host: str
    pid: int
    version: str
    addresses: str


@dataclass(frozen=True)
class NodeSeen:
    """A registered node and how long ago (by the database's clock) it last beat."""

    description: NodeDescription
    started_on: datetime
    seconds_since_heartbeat: float


def record_heartbeat(database: Database, node: NodeDescription, *, starting: bool = False) -> None:
    """Records that ``node`` is alive now (``starting``: and that it started now)."""
    values = {
        "name": node.name,
        "role": node.role,
        "host": node.host,
        "pid": node.pid,
        "version": node.version,
        "addresses": node.addresses[:1000],
        "started_on": func.now(),
        "heartbeat_on": func.now(),
    }
    with database.session() as session:
        statement = conflicting_insert(session, ClusterNode).values(**values)
        update = {key: statement.excluded[key] for key in values if key != "name" and (starting or key != "started_on")}
        session.execute(statement.on_conflict_do_update(index_elements=["name"], set_=update))


def forget_node(database: Database, name: str) -> None:
    """Removes a node that stopped cleanly from the register."""
    with database.session() as session:
        node = session.get(ClusterNode, name)
        if node is not None:
            session.delete(node)


def registered_nodes(database: Database) -> list[NodeSeen]:
    """Every registered node, by role and name."""
    age = func.extract("epoch", func.now() - ClusterNode.heartbeat_on)
    with database.session() as session:
        rows = session.execute(select(ClusterNode, age).order_by(ClusterNode.role, ClusterNode.name)).all()
    return [
        NodeSeen(
            NodeDescription(node.name, node.role, node.host, node.pid, node.version, node.addresses),
            node.started_on,
            float(seconds),
        )
        for node, seconds in rows
    ]
